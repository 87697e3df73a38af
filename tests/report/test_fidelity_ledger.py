"""The manual's fidelity table (docs/fidelity.md, "The ledger") is the ledger of what the harness runs by default.

Every row whose key is a config key must hold: each paper-table suite (configs/ablation/)
resolves its ReMe runs to the row's authors' value, and the same suite with
``experiment=paper_text`` to the row's paper-text value, unless the variant itself sets that
key (Table 3 switches reflection, the top-k suite sweeps top_k, ...). So neither the
configs nor the manual can drift from the other without this failing."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import yaml

from reme_cli.commands.ablate import plan

ROOT = Path(__file__).resolve().parents[2]
SUITES = sorted(p.stem for p in (ROOT / "configs" / "ablation").glob("*.yaml"))
BASE = ["model=qwen3-8b", "embedding=minilm"]
TICKED = re.compile(r"`([^`]*)`")
LEDGER = ROOT / "docs" / "fidelity.md"


def ledger_table() -> str:
    """The ledger section of the fidelity page: its heading to the next one."""
    return LEDGER.read_text().split("\n## The ledger\n", 1)[1].split("\n#", 1)[0]


def ledger() -> list[tuple[str, object, object]]:
    """(key, authors' value, paper-text value) for each config key of the table."""
    section = ledger_table()
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`") or cells[0].endswith("=`"):
            continue
        keys = TICKED.findall(cells[0])
        authors = [yaml.safe_load(v.split(":")[0]) for v in TICKED.findall(cells[1])][:len(keys)]
        paper = authors if cells[2].startswith("same") else \
            [yaml.safe_load(v) for v in TICKED.findall(cells[2])][:len(keys)]
        assert len(authors) == len(paper) == len(keys), f"fidelity ledger row unreadable: {line}"
        rows += list(zip(keys, authors, paper))
    return rows


def on_appworld() -> dict[str, object]:
    """Rows whose authors' value names AppWorld's own: "`5` on BFCL (`1` on AppWorld ...)"."""
    out = {}
    for line in ledger_table().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        found = re.search(r"`([^`]+)` on AppWorld", cells[1]) if len(cells) == 4 else None
        if found and cells[0].startswith("`"):
            out[TICKED.findall(cells[0])[0]] = yaml.safe_load(found.group(1))
    return out


ON_APPWORLD = on_appworld()


def has(cfg, dotted: str) -> bool:
    try:
        value(cfg, dotted)
    except AttributeError:
        return False
    return True


def value(cfg, dotted: str):
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def test_the_ledger_reads_every_config_row():
    keys = [k for k, _, _ in ledger()]
    # Rows the table must hold; an edit of the page that made them unreadable fails here.
    for must in ("memory.reflection.max_retries", "memory.u_credit", "memory.deletion.every", "eval.dynamic_workers",
                 "memory.rerank", "memory.dedup_threshold", "summarizer.temperature", "benchmark.release",
                 "memory.build_dedup", "memory.dedup_at_commit", "eval.dynamic_batches"):
        assert must in keys
    for must in ("benchmark.tool_note", "benchmark.tool_response", "benchmark.max_steps_per_turn",
                 "benchmark.empty_turns", "benchmark.history_reasoning", "eval.task_order", "model.sampling.max_tokens"):
        assert must in keys  # BFCL as the authors' agent ran it, and what its requests sent
    for must in ("model.tool_choice", "summarizer.seed", "benchmark.context"):
        assert must in keys  # what the requests send, and the context they had (issue 57)
    assert len(keys) == len(set(keys))


BENCHMARKS = {"bfcl_v3": [], "appworld": ["benchmark=appworld"]}


@pytest.fixture(scope="module")
def planned():
    """Each suite's plan, once per benchmark and reading. Planning counts the split's tasks
    (the suites' BFCL release would re-execute the process with another bfcl-eval first;
    AppWorld's needs its data): the ledger is about the configs, so the count is stubbed."""
    import reme_cli.commands.ablate as ablate

    cache: dict[tuple[str, str, str], object] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ablate, "_units", lambda cfg, samples=None, notes=None: (1, cfg.benchmark.max_interactions))

        def get(suite: str, bench: str, which: str):
            if (suite, bench, which) not in cache:
                extra = ["experiment=paper_text"] if which == "paper_text" else []
                cache[suite, bench, which] = plan(suite, [*BASE, *BENCHMARKS[bench], *extra])
            return cache[suite, bench, which]

        yield get


# AppWorld in the authors' reading: experiment=paper_text sets the same keys on both benchmarks.
READINGS = [("bfcl_v3", "authors"), ("bfcl_v3", "paper_text"), ("appworld", "authors")]


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("bench, which", READINGS)
def test_every_paper_table_suite_resolves_to_the_ledger(suite, which, bench, planned):
    checked = 0
    for job in planned(suite, bench, which).runs:
        if job.cfg.memory.name != "reme":
            continue
        own = " ".join(o for o in job.overrides if not o.startswith(("memory.pool=", "out_dir=")))
        for key, authors, paper in ledger():
            if key in own.split("=")[0] or f"{key}=" in own:
                continue  # the variant sets it: that is what the table varies
            if not has(job.cfg, key):
                continue  # another benchmark's key (benchmark.release is BFCL's)
            want = authors if which == "authors" else paper
            if which == "authors" and bench == "appworld" and key in ON_APPWORLD:
                want = ON_APPWORLD[key]  # the row's "(`V` on AppWorld)"
            assert value(job.cfg, key) == want, f"{suite}/{job.label}: {key}={value(job.cfg, key)!r}, ledger {want!r}"
            checked += 1
    assert checked > 0, f"{suite} has no ReMe run to check"


# Pools of the paper's tables that the authors never released: built here, with their summarizer.
NEVER_RELEASED = {("table2", "trajectory"), ("table4", "s14b"), ("table4", "s32b")}
PAPER_SUITES = [s for s in SUITES if s != "methods"]


@pytest.mark.parametrize("suite", PAPER_SUITES)
@pytest.mark.parametrize("bench", BENCHMARKS)
def test_every_table_starts_from_the_released_pool(suite, bench, planned):
    """The ledger's "pools the tables start from" row: every ReMe run of a paper table runs
    on the authors' released pool, but for the pools they never released."""
    p = planned(suite, bench, "authors")
    pools = {j.name: j for j in p.pools}
    for job in p.runs:
        if job.cfg.memory.name != "reme" or job.pool is None:
            continue
        pool = pools[job.pool]
        if (suite, job.pool) in NEVER_RELEASED:
            assert pool.source is None and pool.cfg.memory.prompts == "authors", job.label
        else:
            assert pool.source == f"official:{'bfcl' if bench == 'bfcl_v3' else bench}/qwen3-8b", job.label
    assert "pools the tables start from | the authors' released pool of the model and benchmark, in every suite" \
        in ledger_table()



# ------------------------------------------------------------- the rows that are no key
# Each row of the ledger without a config key, and of "Named, not changed", has a check here that
# reads what the row says from the code or the config: a row added without one fails.

def rows_without_a_key() -> list[str]:
    """The first cell of every ledger row that names no config key (the ledger's section and
    the "Named, not changed" table)."""
    text = LEDGER.read_text()
    named = text.split("\n## Named, not changed\n", 1)[1].split("\n#", 1)[0]
    found = []
    for line in (ledger_table() + "\n" + named).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or set(cells[0]) <= set("- ") or cells[0] in ("key", "what", "knob"):
            continue
        if not cells[0].startswith("`") or cells[0].endswith("=`"):
            found.append(cells[0])
    return found


def check_pools(planned) -> None:
    p = planned("table1", "bfcl_v3", "authors")
    sources = {j.name: j.source for j in p.pools}
    assert {sources[j.pool] for j in p.runs if j.cfg.memory.name == "reme"} == {"official:bfcl/qwen3-8b"}


def check_embedding(planned) -> None:
    from reme_cli.core.config import compose
    from reme_cli.report.fidelity import AUTHORS_EMBEDDING

    stand_in, theirs = compose(["model=qwen3-8b"]).embedding, compose(["embedding=text-embedding-v4"]).embedding
    assert (stand_in.model, stand_in.dim) == ("Qwen/Qwen3-Embedding-0.6B", 1024)
    assert (theirs.model, theirs.dim, theirs.dimensions, theirs.batch_size) == (AUTHORS_EMBEDDING, 1024, 1024, 10)


def check_summary_failure(planned) -> None:
    import asyncio

    from reme_cli.core.errors import RunAborted
    from reme_cli.llm.answer_health import answer_tally, summary_failures
    from reme_cli.methods.reme.summarize import summary_or_nothing

    async def raises(exc):
        raise exc

    with answer_tally() as tally:
        assert asyncio.run(summary_or_nothing(raises(RuntimeError("context")))) == ([], "RuntimeError: context")
    assert summary_failures(tally.to_dict()) == {"summaries": 1, "failed": 1}
    with pytest.raises(RunAborted):  # a broken server still stops the run
        asyncio.run(summary_or_nothing(raises(RunAborted("server gone"))))


def check_unknown_calls(planned) -> None:
    from reme_cli.bench.bfcl.benchmark import BFCLBenchmark

    bench = BFCLBenchmark(split="all")
    env = bench.episode(bench.load("multi_turn_base_0"), "ledger")
    assert env.execute("get_weather", '{"city": "x"}').output == "Error during execution: name 'get_weather' is not defined"
    assert "missing 1 required positional argument" in env.execute("cd", "{not json").output
    env.end_turn()
    assert env.decoded_calls() == [[["get_weather(city='x')", "cd()"]]]


def check_truncated_turn(planned) -> None:
    from reme_cli.agent.trajectory import STOP_REASONS, TURN_GOES_ON

    assert "truncated" in TURN_GOES_ON and "truncated" in STOP_REASONS


def check_whole_build_trajectories(planned) -> None:
    import inspect

    from reme_cli.commands import build_pool
    from reme_cli.core.trials import TRAJECTORY_FIELDS, UnitRecord

    assert "whole_trajectories=True" in inspect.getsource(build_pool._sample_and_learn)
    record = UnitRecord("u", "t", 0, 0, trajectory={"reply": "x" * 5000}, guidance="g" * 5000)
    record.cap_stored(1000, whole=TRAJECTORY_FIELDS)
    assert len(record.trajectory["reply"]) == 5000 and len(record.guidance) <= 1000


def check_exact_search(planned) -> None:
    import faiss
    import numpy as np

    from reme_cli.methods.vector_store import VectorIndex

    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(200, 16)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = VectorIndex(16, vecs)
    query = vecs[:3] + 0.1
    got = [[row for row, _ in hits] for hits in index.search(query, 5)]
    assert got == [list(np.argsort(-(vecs @ q), kind="stable")[:5]) for q in query]  # exact, every time
    assert isinstance(index._flat(), faiss.IndexFlatIP)


def check_exact_counts(planned) -> None:
    from reme_cli.methods.reme.experience import Experience
    from reme_cli.methods.reme.pool import Pool

    class Flat:
        dim, name = 2, "flat"

        def embed(self, texts):
            import numpy as np

            return np.ones((len(texts), 2), dtype="float32") / 2 ** 0.5

    pool = Pool(None, Flat(), "usage_scenario", {}, "", [Experience(id="e", when_to_use="w", content="c", source="success")],
                Flat().embed(["w"]))
    # two workers that retrieved e at the same time: both counts stay (the service kept one)
    pool.update_counts(["e"], success=True)
    pool.update_counts(["e"], success=False)
    assert (pool.get("e").f, pool.get("e").u) == (2, 1)


def check_seed(planned) -> None:
    import inspect

    from reme_cli.run import runner
    from reme_cli.run.plan import Unit

    seeds = {Unit(0, run, "t").sampling_seed(0) for run in range(4)}
    assert len(seeds) == 4  # the k runs of a task sample apart
    assert "unit.sampling_seed(s.seed_base) + attempt" in inspect.getsource(runner.Runner._episode)


def check_training_wording(planned) -> None:
    from reme_cli.bench.bfcl.benchmark import WORDING
    from reme_cli.bench.bfcl.release import RELEASES
    from reme_cli.core.config import compose, to_dict
    from reme_cli.report.fidelity import departures, flatten

    build = compose(["model=qwen3-8b", "memory=reme", "benchmark.split=train"])
    assert build.benchmark.release == "paper" and RELEASES["paper"] == "2025.7.17"
    run = flatten(to_dict(compose(["model=qwen3-8b", "memory=reme", "eval.mode=fixed"])))
    assert WORDING.format(release="2025.7.17") in departures(run, pool="built", pool_params=flatten(to_dict(build)))


def check_table5_keys(planned) -> None:
    from reme_cli.methods.reme.experience import RETRIEVAL_KEYS

    assert {"task_query", "generalized_query", "keywords"} <= set(RETRIEVAL_KEYS)
    p = planned("table5", "bfcl_v3", "authors")
    assert {j.cfg.memory.retrieval_key for j in p.runs} >= {"task_query", "generalized_query", "keywords"}


def check_trajectory_pool(planned) -> None:
    from reme_cli.methods.reme import authors_flow

    assert authors_flow.PROMPTS["trajectory"] == ("simple_summary_prompt.yaml", "summary_prompt")
    p = planned("table2", "bfcl_v3", "authors")
    pools = {j.name: j for j in p.pools}
    assert pools["trajectory"].source is None and pools["trajectory"].cfg.memory.granularity == "trajectory"


def check_full_addition(planned) -> None:
    from reme_cli.methods.reme.config import ReMeConfig

    assert ReMeConfig().addition == "selective"
    p = planned("table3", "bfcl_v3", "authors")
    assert "full" in {j.cfg.memory.addition for j in p.runs}


@functools.cache
def _vllm_and_hosted():
    from reme_cli.core.config import compose

    return compose(["model=qwen3-8b"]), compose(["model=qwen3-8b-dashscope"])


def check_hosted_seed(planned) -> None:
    vllm, hosted = _vllm_and_hosted()
    assert (vllm.model.sampling.seed, hosted.model.sampling.seed) == (None, 0)


def check_thinking_switch(planned) -> None:
    vllm, hosted = _vllm_and_hosted()
    assert (vllm.model.thinking_switch, hosted.model.thinking_switch) == ("chat_template_kwargs", "enable_thinking")


def check_stream(planned) -> None:
    """The hosted agent streams where it thinks (BFCL) and not on AppWorld; its summarizer
    streams every call, as the FAQ's service; vLLM never."""
    from reme_cli.core.config import compose
    from reme_cli.llm.client import thinking_on
    from reme_cli.llm.endpoint import request_extra_body

    vllm, hosted = _vllm_and_hosted()
    assert (vllm.llm.stream, vllm.summarizer.stream) == ("never", None)
    assert (hosted.llm.stream, hosted.summarizer.stream) == ("auto", "always")
    appworld = compose(["model=qwen3-8b-dashscope", "benchmark=appworld"])
    assert thinking_on({"extra_body": request_extra_body(hosted)})  # BFCL thinks: streamed
    assert not thinking_on({"extra_body": request_extra_body(appworld)})  # AppWorld does not: not streamed
    for size in ("8b", "14b", "32b"):
        assert compose([f"summarizer=qwen3-{size}-dashscope"]).summarizer.stream == "always"


def check_hosted_context(planned) -> None:
    """The provider applies its own limit: no context departure on the hosted path; n_ctx is
    reme's budget only."""
    from reme_cli.core.config import compose, to_dict
    from reme_cli.report.fidelity import departures, flatten

    _, hosted = _vllm_and_hosted()
    assert hosted.model.n_ctx == 32768 and hosted.model.kind == "openai"
    for bench in ("bfcl_v3", "appworld"):
        run = flatten(to_dict(compose(["model=qwen3-8b-dashscope", f"benchmark={bench}"])))
        assert not [d for d in departures(run) if d.startswith("context:")]


def check_table4_summarizers(planned) -> None:
    """Table 4's 14B and 32B pools are summarized at the agent's provider."""
    import reme_cli.commands.ablate as ablate

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ablate, "_units", lambda cfg, samples=None, notes=None: (1, 1))
        for model, suffix in (("qwen3-8b", ""), ("qwen3-8b-dashscope", "-dashscope")):
            p = ablate.plan("table4", [f"model={model}"], count_units=False)
            pools = {j.name: j.cfg.summarizer for j in p.pools}
            assert (pools["s14b"].name, pools["s32b"].name) == (f"qwen3-14b{suffix}", f"qwen3-32b{suffix}")
            assert {j.label: j.cfg.summarizer.name for j in p.runs}["s14b"] == f"qwen3-14b{suffix}"


def check_parallel_tool_calls(planned) -> None:
    vllm, hosted = _vllm_and_hosted()
    assert (vllm.model.parallel_tool_calls, hosted.model.parallel_tool_calls) == (None, True)




def check_max_retries(planned) -> None:
    vllm, hosted = _vllm_and_hosted()
    assert (vllm.llm.max_retries, hosted.llm.max_retries) == (6, 20)


CHECKS = {
    "pools the tables start from": check_pools,
    "`embedding=`": check_embedding,
    "a summary that fails": check_summary_failure,
    "a call the task has no function for, or whose arguments do not decode": check_unknown_calls,
    "a reply cut off by `max_tokens` with no call": check_truncated_turn,
    "what build-pool summarizes": check_whole_build_trajectories,
    "retrieval": check_exact_search,
    "f and u": check_exact_counts,
    "the request seed (vLLM)": check_seed,
    "`model.sampling.seed=`": check_hosted_seed,
    "`model.thinking_switch=`": check_thinking_switch,
    "`llm.stream=`, `summarizer.stream=`": check_stream,
    "`model.parallel_tool_calls=`": check_parallel_tool_calls,
    "context on the hosted configs (`model.n_ctx=`)": check_hosted_context,
    "Table 4's summarizers": check_table4_summarizers,
    "`llm.max_retries=`": check_max_retries,
    "training-task wording": check_training_wording,
    "Table 5's other retrieval keys": check_table5_keys,
    "Table 2's trajectory-level pool": check_trajectory_pool,
    '"full addition" (Table 3)': check_full_addition,
}


def test_every_row_without_a_key_has_a_check():
    assert sorted(rows_without_a_key()) == sorted(CHECKS)


@pytest.mark.parametrize("row", sorted(CHECKS))
def test_each_row_without_a_key_holds(row, planned):
    CHECKS[row](planned)

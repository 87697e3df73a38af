"""ReasoningBank (memory=reasoningbank) through the real CLI: build-pool -> fixed -> dynamic,
the exact injected text of a planted item, a failure item after a failed task, resume after
kill -9, and a rerun from the response cache.

The LLM is a test double (scripted server): BFCL ground-truth replay for the agent, with one
training and one eval task corrupted so that they fail the checker; ReasoningBank's judge and
extraction prompts are answered by reme_cli/methods/reasoningbank/scripted.py (the judge says
failure when it sees a corrupted argument). Embeddings (all-MiniLM-L6-v2) and faiss are real.
"""

import json
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest

from reme_cli.bench.bfcl.benchmark import BFCLBenchmark
from reme_cli.llm.embed import make_embedder
from reme_cli.core.errors import UserError
from reme_cli.methods.reasoningbank.items import ItemStore, Record
from reme_cli.methods.reasoningbank.method import BUILD_LINES, ReasoningBankConfig
from tests.conftest import reme_env, reme_popen, run_reme, run_reme_together, scripted_server_process, without_timing
from tests.methods.reme.test_memory_flow import _kill_when, _trials

FAILS, FAILS_TRAINING = "multi_turn_base_2", "multi_turn_base_5"  # an eval and a training task that fail
PLANTED_FOR = "multi_turn_base_0"
SCRIPTED = ["memory=reasoningbank", "model=qwen3-8b", "embedding=minilm", "llm.model=replay",
            "benchmark.release=current", "eval.dynamic_workers=1"]
DYNAMIC = ["eval", "--mode", "dynamic", "memory.pool=built", "benchmark.limit=3", "eval.runs=1", "eval.seeds=1"]
# Written out by hand, not by the method's own code: the authors' sentence (agent.py), a blank
# line, then the item in the extraction prompt's Markdown format.
PLANTED_TEXT = (
    "Below are some memory items that I accumulated from past interaction from the environment that may be "
    "helpful to solve the task. You can use it when you feel it's relevant. In each step, please first explicitly "
    "discuss if you want to use each memory item or not, and then take action.\n\n"
    "# Memory Item 1\n## Title Planted title\n## Description Planted description.\n## Content Planted content.")


def _records(store: Path) -> list[dict]:
    return [json.loads(l) for l in (store / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("reasoningbank")


@pytest.fixture(scope="module")
def server():
    """A separate process with a small delay, so that a run can be killed mid-way."""
    with scripted_server_process("--policy", "bfcl-replay+summarizer", "--corrupt", FAILS, FAILS_TRAINING, "--delay", "0.05") as url:
        yield url


def _args(server: str, *args: str) -> list[str]:
    return [*args, *SCRIPTED, f"llm.base_url={server}"]


@pytest.fixture(scope="module")
def built(workdir, server):
    run_reme(_args(server, "build-pool", "benchmark.limit=3", "build.samples=1", "out_dir=built"), workdir, check=True)
    return workdir / "built"


@pytest.fixture(scope="module")
def planted(workdir, built):
    """The built pool plus one record whose query is an eval task's own query."""
    embedder = make_embedder({"kind": "sentence_transformers", "model": "all-MiniLM-L6-v2",
                              "cache_dir": str(workdir / ".reme_cache" / "embeddings")})
    store = ItemStore.load(built / "pool", embedder)
    query = BFCLBenchmark(split="all").load(PLANTED_FOR).query
    record = Record("planted", query, "test", "success",
                    [{"title": "Planted title", "description": "Planted description.", "content": "Planted content."}])
    store.apply([{"unit": "test", "op": "add", "record": asdict(record)}])
    store.save(workdir / "planted")
    return workdir / "planted"


@pytest.fixture(scope="module")
def first_runs(workdir, server, built, planted):
    """A fixed run on the planted pool and a dynamic run on the built one, side by side."""
    run_reme_together(
        (_args(server, "eval", "--mode", "fixed", "memory.pool=planted", "benchmark.limit=3", "eval.runs=1",
               "eval.seeds=1", "out_dir=fixed"), workdir),
        (_args(server, *DYNAMIC, "llm.cache=true", "out_dir=dyn"), workdir))
    for out in ("fixed", "dyn"):
        assert len(_trials(workdir / out)) == 3, out
    return workdir


@pytest.mark.slow
def test_build_pool_judges_each_training_trajectory_and_extracts_with_the_matching_prompt(built):
    report = json.loads((built / "build" / "report.json").read_text())
    assert report["method"] == "reasoningbank" and report["trajectories"] == 3 and report["unit_errors"] == 0
    stats = report["reasoningbank"]
    assert stats["judged"] == 3 and stats["judge_agrees"] == 3 and stats["llm_calls"] == 6
    assert (stats["success_prompts"], stats["failure_prompts"]) == (2, 1)
    records = _records(built / "pool")
    assert report["pool_size"] == stats["items"] == len(records) == 3
    by_source = {r["source"]: r for r in records}
    failed = by_source[f"build/{FAILS_TRAINING}#0"]
    assert failed["verdict"] == "failure" and failed["items"][0]["title"].startswith("Scripted failure item")
    # In split order (the training split's ids ascend), whatever order the tasks finished in.
    trials = [json.loads(l) for l in (built / "build" / "trials.jsonl").read_text().splitlines()]
    assert [r["source"].split("/")[1].split("#")[0] for r in records] == \
        sorted((t["task_id"] for t in trials), key=lambda t: int(t.rsplit("_", 1)[1]))
    assert report["summarizer_answers"]["reasoningbank_judge"]["calls"] == 3


@pytest.mark.slow
def test_fixed_mode_injects_the_planted_item_exactly(first_runs, planted):
    trials = {t["task_id"]: t for t in _trials(first_runs / "fixed")}
    hit = trials[PLANTED_FOR]
    assert hit["guidance"] == PLANTED_TEXT
    assert hit["retrieved_ids"] == ["planted.0"] and hit["retrieval_scores"][0] > 0.99
    assert hit["method"] == {"retrieved_records": ["planted"], "record_scores": hit["retrieval_scores"],
                             "items_injected": 1}
    others = [t for k, t in trials.items() if k != PLANTED_FOR]
    assert all(len(t["retrieved_ids"]) == 1 and t["guidance"].startswith(PLANTED_TEXT[:60]) for t in others)
    assert not (first_runs / "fixed" / "streams").exists()
    assert len(_records(planted)) == 4  # fixed mode never writes the pool


@pytest.mark.slow
def test_dynamic_mode_extracts_a_failure_item_after_a_failed_task(first_runs, built):
    trials = sorted(_trials(first_runs / "dyn"), key=lambda t: t["position"])
    store = {r["id"]: r for r in _records(first_runs / "dyn" / "streams" / "s0_r0" / "store")}
    assert len(store) == 3 + 3
    for t in trials:
        m = t["method"]
        verdict = "success" if t["success"] else "failure"
        assert m["judge"]["mode"] == "llm" and m["judge"]["valid"] and m["checker"] == verdict
        assert m["judge"]["verdict"] == verdict and m["judge_agrees"] and m["extracted"]["prompt"] == verdict
        assert m["extracted"]["count"] == 1 and m["retrieved_records"] == [i.split(".")[0] for i in t["retrieved_ids"]]
        (item_id,) = m["extracted"]["ids"]
        assert store[item_id.split(".")[0]]["items"][0]["title"] == m["extracted"]["titles"][0]
    assert [t["method"]["bank_items"] for t in trials] == [4, 5, 6]  # after each commit
    (failed,) = [t for t in trials if t["task_id"] == FAILS]
    assert not failed["success"] and failed["method"]["judge"]["verdict"] == "failure"
    assert failed["method"]["extracted"]["titles"][0].startswith("Scripted failure item")
    record = store[failed["method"]["extracted"]["ids"][0].split(".")[0]]
    assert record["verdict"] == "failure" and record["source"] == failed["unit"]
    # A later task can find what an earlier one added: every record is searchable by its query.
    assert {r["query"] for r in store.values()} >= {r["query"] for r in _records(built / "pool")}


@pytest.mark.slow
def test_resume_after_kill_and_a_cached_rerun_equal_the_uninterrupted_run(first_runs, server):
    workdir = first_runs
    env = reme_env(workdir / ".reme_cache")
    killed = reme_popen([*_args(server, *DYNAMIC, "llm.cache=false",
                                "out_dir=dyn_killed")],
                        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _kill_when(killed, workdir / "dyn_killed" / "trials.jsonl", 1)
    assert 1 <= len(_trials(workdir / "dyn_killed")) < 3
    run_reme_together((_args(server, *DYNAMIC, "llm.cache=true", "out_dir=dyn_cached"), workdir),
                      (_args(server, *DYNAMIC, "llm.cache=false", "out_dir=dyn_killed"), workdir), check=True)
    def units(out: str) -> list[dict]:
        return [without_timing(t) for t in sorted(_trials(workdir / out), key=lambda t: t["unit"])]

    assert units("dyn_cached") == units("dyn")
    assert [t["unit"] for t in units("dyn_killed")] == [t["unit"] for t in units("dyn")]
    assert [t["method"] for t in units("dyn_killed")] == [t["method"] for t in units("dyn")]
    for out in ("dyn_cached", "dyn_killed"):
        assert _records(workdir / out / "streams" / "s0_r0" / "store") == \
            _records(workdir / "dyn" / "streams" / "s0_r0" / "store"), out


@pytest.mark.slow
def test_dynamic_mode_without_a_pool_starts_from_an_empty_bank(workdir, server):
    """The authors' test-time setting (the methods suite's reasoningbank_online row): the
    first task finds nothing, its items join the bank, and the next task retrieves them.
    Fixed mode without a pool is refused in one line."""
    online = ["eval", "--mode", "dynamic", "benchmark.limit=2", "eval.runs=1", "eval.seeds=1", "out_dir=online"]
    run_reme(_args(server, *online), workdir, check=True)
    first, second = sorted(_trials(workdir / "online"), key=lambda t: t["position"])
    assert first["retrieved_ids"] == [] and first["guidance"] in ("", None)
    (added,) = first["method"]["extracted"]["ids"]
    assert [t["method"]["bank_items"] for t in (first, second)] == [1, 2]
    assert second["retrieved_ids"] == [added] and second["guidance"].startswith(PLANTED_TEXT[:60])
    assert len(_records(workdir / "online" / "streams" / "s0_r0" / "store")) == 2
    proc = run_reme(_args(server, "eval", "--mode", "fixed", "benchmark.limit=1", "out_dir=nopool"), workdir)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: --mode fixed memory=reasoningbank needs memory.pool=DIR (build one with `reme build-pool "
        "memory=reasoningbank`); --mode dynamic may start from an empty bank"]


def test_a_bad_judge_setting_is_refused_in_one_line():
    with pytest.raises(UserError, match=r"^memory.judge='oracle' is not allowed; choose one of \['checker', 'llm'\]$"):
        ReasoningBankConfig(judge="oracle").check()


@pytest.mark.slow
def test_an_interrupted_build_resumes_after_its_last_finished_task(workdir, server, built):
    """A build killed before its last task's line: the rerun mines that task only (a finished
    task's line is kept as written, here marked by hand) and assembles the same pool."""
    shutil.copytree(built, workdir / "built_cut")
    lines = (workdir / "built_cut" / "build" / BUILD_LINES).read_text().splitlines()
    first = json.loads(lines[0])
    first["events"][0]["record"]["items"][0]["title"] = "Kept as written"
    (workdir / "built_cut" / "build" / BUILD_LINES).write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    run_reme(_args(server, "build-pool", "benchmark.limit=3", "build.samples=1", "out_dir=built_cut"), workdir,
             check=True)
    resumed = {r["source"]: r for r in _records(workdir / "built_cut" / "pool")}
    whole = {r["source"]: r for r in _records(built / "pool")}
    assert resumed.keys() == whole.keys()
    marked = first["events"][0]["record"]["source"]
    assert resumed.pop(marked)["items"][0]["title"] == "Kept as written"
    whole.pop(marked)
    assert resumed == whole


def test_judge_checker_takes_the_benchmarks_verdict_and_an_unreadable_answer_is_counted():
    """memory.judge=checker: no judge call, the checker's verdict picks the prompt. With the
    LLM judge, an answer without a Status line reads as a failure (the authors' parser) and
    is counted invalid, as is an extraction without an item."""
    import asyncio

    from reme_cli.agent.trajectory import Step, Trajectory
    from reme_cli.bench.base import Outcome, Task
    from reme_cli.llm.client import ChatResult
    from reme_cli.methods.reasoningbank.induce import InduceStats, induce
    from reme_cli.methods.summarizer import SummarizerSettings
    from reme_cli.methods.reasoningbank.scripted import answer

    class Scripted:
        def __init__(self, judge_text: str | None = None, extract_text: str | None = None):
            self.systems: list[str] = []
            self.judge_text, self.extract_text = judge_text, extract_text

        async def chat(self, messages, **_):
            system, user = messages[0]["content"], messages[-1]["content"]
            self.systems.append(system)
            text = answer(system, user)["content"]
            if self.judge_text is not None and "Status:" in text:
                text = self.judge_text
            elif self.extract_text is not None and "Memory Item" in text:
                text = self.extract_text
            return ChatResult(text, [], None, 1, 1, 0.0, False)

    task = Task("t1", [[{"role": "user", "content": "Move the report into the archive folder."}]],
                "Move the report into the archive folder.")
    trajectory = Trajectory(turns=[[Step("Done.", [{"name": "mv", "arguments": "{}", "call": "mv(a='corrupted')",
                                                   "output": "ok"}], 1, 1, 0.0, False)]])

    def run(judge: str, llm: Scripted, success: bool) -> tuple[dict, InduceStats]:
        stats = InduceStats()
        summ = SummarizerSettings(llm, "scripted", 0.0, 256)
        cfg = ReasoningBankConfig(judge=judge)
        return asyncio.run(induce(summ, cfg, task, trajectory, Outcome(success, float(success)), "u", stats)).report, stats

    llm = Scripted()
    report, stats = run("checker", llm, success=True)  # the scripted judge would say failure (corrupted)
    assert len(llm.systems) == 1 and "successfully accomplished" in llm.systems[0] and stats.judged == 0
    assert report["judge"] == {"mode": "checker", "verdict": "success", "valid": True, "thoughts": None}
    assert report["extracted"]["titles"][0].startswith("Scripted success item")

    report, stats = run("llm", Scripted(judge_text="The agent did fine."), success=True)
    assert report["judge"]["verdict"] == "failure" and not report["judge"]["valid"] and stats.judge_invalid == 1
    assert report["checker"] == "success" and not report["judge_agrees"]
    assert report["extracted"]["prompt"] == "failure"

    report, stats = run("llm", Scripted(extract_text="## Title only, no item heading"), success=True)
    assert report["extracted"] == {"prompt": "failure", "count": 0, "titles": [], "ids": []}
    assert stats.extract_invalid == 1 and stats.items == 0

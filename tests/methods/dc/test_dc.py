"""Dynamic Cheatsheet (memory=dc) through the real CLI: build-pool -> fixed -> dynamic for
DC-Cu and DC-RS, the exact injected text of a planted (oversized) cheatsheet, a rewrite
after each task, resume after kill -9, and a replay from the response cache.

The LLM is a test double (scripted server): BFCL ground-truth replay for the agent; DC's
curator prompts are answered by reme_cli/methods/dc/scripted.py (DC-Cu keeps the previous
items and appends one naming the task; DC-RS writes one item per retrieved pair).
Embeddings (all-MiniLM-L6-v2) and faiss are real.
"""

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reme_cli.methods.dc.cheatsheet import EMPTY, Cheatsheet, digest, extract_cheatsheet, prompt, split_items
from reme_cli.methods.dc.pool import DCPool
from tests.conftest import reme_env, reme_popen, run_reme, run_reme_together, scripted_server_process, without_timing
from tests.methods.reme.test_memory_flow import _kill_when, _trials

SCRIPTED = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "benchmark.release=current",
            "eval.dynamic_workers=1"]
RS = "memory.variant=retrieval_synthesis"
ONE = ["eval.runs=1", "eval.seeds=1"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("dc")


@pytest.fixture(scope="module")
def server():
    """A separate process with a small delay, so that a run can be killed mid-way."""
    with scripted_server_process("--policy", "bfcl-replay+summarizer", "--delay", "0.05") as url:
        yield url


def _args(server: str, *args: str) -> list[str]:
    return [*args, *SCRIPTED, f"llm.base_url={server}"]


def _together(workdir: Path, server: str, *runs: list[str]) -> None:
    for proc in run_reme_together(*((_args(server, *r), workdir) for r in runs)):
        assert proc.returncode == 0, proc.stderr[-3000:]


def _commits(stream: Path) -> list[dict]:
    return [json.loads(l) for l in (stream / "commits.jsonl").read_text().splitlines()]


def _by_position(run: Path) -> list[dict]:
    return sorted(_trials(run), key=lambda t: (t["run"], t["position"]))


def _frame() -> tuple[str, str]:
    before, after = prompt("generator_guidance").split("[[CHEATSHEET]]")
    assert before.startswith("# GENERATOR (PROBLEM SOLVER)") and before.endswith("CHEATSHEET:\n'''\n")
    assert after == "\n'''"
    return before, after


@pytest.fixture(scope="module")
def built(workdir, server):
    _together(workdir, server, ["build-pool", "memory=dc", "benchmark.limit=3", "build.samples=1", "out_dir=cu"],
              ["build-pool", "memory=dc", RS, "benchmark.limit=3", "build.samples=1", "out_dir=rs"])
    return workdir


@pytest.mark.slow
def test_build_pool_folds_the_training_tasks_into_one_cheatsheet_in_split_order(built):
    report = json.loads((built / "cu" / "build" / "report.json").read_text())
    assert report["unit_errors"] == 0 and report["dc"]["curator_calls"] == 3
    assert report["summarizer_answers"]["dc_curator"]["calls"] == 3
    sheet = (built / "cu" / "pool" / "cheatsheet.txt").read_text()
    pairs = [json.loads(l) for l in (built / "cu" / "pool" / "pairs.jsonl").read_text().splitlines()]
    assert len(pairs) == 3 and report["dc"]["cheatsheet"] == {"rewrites": 3, "sha256": digest(sheet)}
    # One item per training task, in split order: each rewrite kept the items before it.
    named = [sheet.index(" ".join(p["input"].split()[:8])) for p in pairs]
    assert named == sorted(named) and sheet.count("<memory_item>") == 3
    # The curator saw the trajectory but not the checker's verdict (DC learns without labels).
    assert all("## Outcome" not in p["output"] and "[call]" in p["output"] for p in pairs)
    # DC-RS's build calls no LLM: the pool is the same pairs, without a cheatsheet.
    rs = json.loads((built / "rs" / "build" / "report.json").read_text())
    assert rs["dc"]["curator_calls"] == 0 and not (built / "rs" / "pool" / "cheatsheet.txt").exists()
    assert (built / "rs" / "pool" / "pairs.jsonl").read_text() == (built / "cu" / "pool" / "pairs.jsonl").read_text()


def _planted(workdir: Path) -> str:
    items = [f"<memory_item>\n<description>\nPlanted strategy {i}: {'check the folder first. ' * 20}\n"
             f"</description>\n<example>\ncd(folder='x{i}')\n</example>\n</memory_item>\n** Count: {i}\n\n"
             for i in range(12)]
    text = "Version: 7\n\nPLANTED SECTION\n" + "".join(items).rstrip()
    DCPool(Cheatsheet(text, 7), None).save(workdir / "planted", "cumulative")
    return text


@pytest.mark.slow
def test_fixed_mode_shows_the_cheatsheet_whole_or_cut_at_items_and_rs_synthesizes_per_task(built, server):
    planted = _planted(built)
    _together(built, server,
              ["eval", "--mode", "fixed", "memory=dc", "memory.pool=cu", "benchmark.limit=2", *ONE, "out_dir=f_cu"],
              ["eval", "--mode", "fixed", "memory=dc", "memory.pool=planted", "memory.max_context_share=0.05",
               "benchmark.limit=1", *ONE, "out_dir=f_planted"],
              ["eval", "--mode", "fixed", "memory=dc", RS, "memory.pool=rs", "benchmark.limit=2", *ONE, "out_dir=f_rs"])
    before, after = _frame()
    sheet = (built / "cu" / "pool" / "cheatsheet.txt").read_text()
    for t in _trials(built / "f_cu"):
        assert t["success"] and t["guidance"] == before + sheet + after
        m = t["method"]
        assert m["cheatsheet_version"] == {"rewrites": 3, "sha256": digest(sheet)}
        assert m["context"]["truncated"] is False and m["cheatsheet_injected"]["sha256"] == digest(sheet)
    assert not (built / "f_cu" / "streams").exists()

    # The planted cheatsheet does not fit 5% of the context: whole items are cut from the end.
    (t,) = _trials(built / "f_planted")
    ctx = t["method"]["context"]
    items = split_items(planted)
    kept = len(items) - ctx["dropped_items"]
    assert ctx["truncated"] and 1 < kept < len(items) and ctx["memory_tokens"] <= ctx["budget"]
    assert t["guidance"] == before + "".join(items[:kept]).rstrip() + after
    assert t["method"]["cheatsheet_version"] == {"rewrites": 7, "sha256": digest(planted)}

    training = {json.loads(l)["id"] for l in (built / "rs" / "pool" / "pairs.jsonl").read_text().splitlines()}
    for t in _trials(built / "f_rs"):
        m = t["method"]
        assert len(t["retrieved_ids"]) == 3 and set(t["retrieved_ids"]) == training
        assert t["retrieval_scores"] == sorted(t["retrieval_scores"], reverse=True)
        # The curator synthesized from the pairs (one item each) for this task, from (empty):
        # fixed mode chains nothing from task to task.
        assert t["guidance"].count("Scripted lesson from pair #") == 3 and m["curator"]["usable"]
        assert m["previous_cheatsheet"] == digest(EMPTY)
        assert t["summarizer_answers"]["dc_synthesis"]["calls"] == 1


def _dynamic(variant: list[str], limit: int, runs: int, cache: bool, out: str) -> list[str]:
    return ["eval", "--mode", "dynamic", "memory=dc", *variant, f"benchmark.limit={limit}", f"eval.runs={runs}",
            "eval.seeds=1", f"llm.cache={str(cache).lower()}", out]


@pytest.mark.slow
def test_dynamic_mode_rewrites_after_each_task_resumes_after_kill_and_replays_from_cache(built, server):
    cu = ["memory.pool=cu"]
    rs = [RS, "memory.pool=rs", "memory.top_k=4"]
    _together(built, server, _dynamic(cu, 2, 2, True, "out_dir=d_cu"), _dynamic(rs, 2, 1, False, "out_dir=d_rs"))

    # DC-Cu: every task's curator answer rewrote the stream's cheatsheet; the next task saw it.
    for run in (0, 1):
        stream = built / "d_cu" / "streams" / f"s0_r{run}"
        trials = [t for t in _by_position(built / "d_cu") if t["run"] == run]
        commits = _commits(stream)
        assert [c["unit"] for c in commits] == [t["unit"] for t in trials]
        rewrites = [c["events"][0]["text"] for c in commits]
        for i, t in enumerate(trials):
            m = t["method"]
            assert m["rewrite"]["usable"] and m["cheatsheet_version"]["rewrites"] == 3 + i
            assert m["cheatsheet_after"] == {"rewrites": 4 + i, "sha256": digest(rewrites[i])}
            assert "Scripted strategy for: " + " ".join(_query(t["task_id"]).split()[:8]) in rewrites[i]
        assert digest(rewrites[0]) == trials[1]["method"]["cheatsheet_version"]["sha256"]
        assert rewrites[0] in trials[1]["guidance"]
        assert (stream / "state" / "cheatsheet.txt").read_text() == rewrites[-1]

    # DC-RS: the finished task's pair joins the stream's pool and the next task retrieves it;
    # the curator's previous cheatsheet is the one it synthesized for the task before.
    first, second = _by_position(built / "d_rs")
    assert first["method"]["pairs_after"] == 4 and second["method"]["pairs_after"] == 5
    assert first["unit"] in second["retrieved_ids"]
    assert second["method"]["previous_cheatsheet"] == first["method"]["cheatsheet_version"]["sha256"]
    ops = [[e["op"] for e in c["events"]] for c in _commits(built / "d_rs" / "streams" / "s0_r0")]
    assert ops == [["pair", "synthesized"]] * 2

    # Kill -9 mid-stream, resume: the same cheatsheets as the uninterrupted run. And a rerun
    # from the response cache records the same units.
    env = reme_env(built / ".reme_cache")
    killed = _args(server, *_dynamic(cu, 2, 2, False, "out_dir=d_killed"))
    with ThreadPoolExecutor(max_workers=1) as pool:  # the cached rerun beside the run to kill
        rerun = pool.submit(run_reme, _args(server, *_dynamic(cu, 2, 2, True, "out_dir=d_cached")), built)
        proc = reme_popen(killed, cwd=built, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _kill_when(proc, built / "d_killed" / "trials.jsonl", 2)
        assert rerun.result().returncode == 0, rerun.result().stderr[-3000:]
    assert 1 <= len(_trials(built / "d_killed")) < 4
    run_reme(killed, built, check=True)
    assert len({t["unit"] for t in _trials(built / "d_killed")}) == len(_trials(built / "d_killed")) == 4
    for run in ("s0_r0", "s0_r1"):
        whole, resumed = (built / d / "streams" / run for d in ("d_cu", "d_killed"))
        assert [c["events"] for c in _commits(resumed)] == [c["events"] for c in _commits(whole)]
        assert (resumed / "state" / "cheatsheet.txt").read_text() == (whole / "state" / "cheatsheet.txt").read_text()
    a, b = ([without_timing(t) for t in _by_position(built / d)] for d in ("d_cu", "d_cached"))
    assert a == b
    assert all(step["cached"] for t in _trials(built / "d_cached") for turn in t["trajectory"]["turns"] for step in turn)



def _query(task_id: str) -> str:
    """A BFCL task's query: its first user message, as the curator sees it."""
    from reme_cli.bench.bfcl.benchmark import BFCLBenchmark

    return BFCLBenchmark(split="all").load(task_id).query


def test_the_curators_answer_is_read_as_the_authors_read_it():
    assert extract_cheatsheet("NEW CHEATSHEET:\n```\n<cheatsheet>\nA\n</cheatsheet>\n```", "old").text == "A"
    # No block: the previous cheatsheet stays and the answer is counted unusable.
    kept = extract_cheatsheet("I updated the cheatsheet.", "old")
    assert kept.text == "old" and not kept.usable
    # Cut by max_tokens inside the block: the authors keep what came (recorded as not closed).
    cut = extract_cheatsheet("<think>plan</think><cheatsheet>\nVersion: 2\n<memory_item>", "old")
    assert cut.usable and not cut.closed and cut.text == "Version: 2\n<memory_item>"
    # An empty block would wipe the cheatsheet: kept instead (a deviation, counted unusable).
    assert not extract_cheatsheet("<cheatsheet>\n</cheatsheet>", "old").usable


@pytest.mark.slow
def test_a_pool_without_what_the_variant_reads_is_refused_in_one_line(built, server, tmp_path):
    proc = run_reme(_args(server, "eval", "--mode", "fixed", "memory=dc", "memory.pool=rs", "benchmark.limit=1", *ONE,
                          f"out_dir={tmp_path / 'x'}"), built)
    assert proc.returncode == 2 and "holds no cheatsheet" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x").exists()

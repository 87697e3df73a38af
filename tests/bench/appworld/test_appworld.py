"""AppWorld end to end on a toy world built at test time (never committed, not the
benchmark): `tests/fixtures/appworld_toyworld.py` writes 3 tasks with their own solutions and
evaluation code from the installed package's apps, in AppWorld's own virtualenv
(`reme appworld setup`). Episodes run in AppWorld worker processes; the scripted server (a
TEST DOUBLE) answers with each task's gold solution code."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import (descendants, reme_popen, reme_process, run_reme_together, run_watched,
                            scripted_server_process, still_running)

TASKS = "benchmark.task_ids=[toy0001_1,toy0002_1,toy0003_1]"


@pytest.fixture(scope="module")
def gold(toy_world) -> str:
    """The URL of one scripted server answering each task with its gold solution (and
    summarizer calls with the scripted summarizer), for the runs that need nothing else."""
    with scripted_server_process("--policy", "appworld-gold+summarizer", "--appworld-root", str(toy_world)) as url:
        yield url


def common(root: Path, url: str) -> list[str]:
    # One episode at a time: each concurrent episode has a supervisor of its own, which imports
    # AppWorld and builds its apps (seconds of CPU), and a scripted episode takes well under
    # that. The gold test runs its three side by side.
    return ["benchmark=appworld", f"benchmark.data_dir={root}", "benchmark.split=train", TASKS, "model=qwen3-8b",
            "embedding=minilm", f"llm.base_url={url}", "llm.model=gold",
            "llm.cache=false", "eval.runs=1", "eval.seeds=1", "llm.concurrency=1"]


def trials(run: Path) -> dict[str, dict]:
    return {r["task_id"]: r for r in map(json.loads, (run / "trials.jsonl").read_text().splitlines())}


def supervisors(run_pid: int) -> list[int]:
    """The AppWorld episode supervisors in a run's own process tree (never another run's)."""
    tree = descendants(run_pid)
    python = "appworld-venv/bin/python"
    mine = {p for p, (_, cmd) in tree.items() if python in cmd.split(" ")[0] and "worker.py" in cmd}
    parents = {p: int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) for p in mine}
    return sorted(p for p in mine if parents[p] not in mine)  # not an episode's process (a child of one)


@pytest.mark.slow
def test_gold_solutions_score_100_and_a_wrong_one_fails_exactly_its_task(reme, toy_world, gold):
    # Three episodes side by side, each with a supervisor of its own: every process stopped at exit.
    proc, seen = run_watched(["eval", *common(toy_world, gold), "llm.concurrency=3", "out_dir=gold"], reme.cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with scripted_server_process("--policy", "appworld-gold", "--appworld-root", str(toy_world),
                                 "--corrupt", "toy0002_1") as url:
        reme("eval", *common(toy_world, url), "out_dir=wrong", check=True)
    gold = trials(reme.cwd / "gold")
    assert {t: r["success"] for t, r in gold.items()} == {"toy0001_1": True, "toy0002_1": True, "toy0003_1": True}
    step = gold["toy0002_1"]["trajectory"]["turns"][0][0]
    assert "apis.supervisor.complete_task" in step["code"] and step["code_output"] is not None  # code + output per step
    metrics = json.loads((reme.cwd / "gold" / "metrics.json").read_text())
    assert metrics["avg@1"]["mean"] == 1.0 and metrics["sgc"]["mean"] == 1.0
    assert "SGC % 100.00" in proc.stderr
    wrong = trials(reme.cwd / "wrong")
    assert {t: r["success"] for t, r in wrong.items()} == {"toy0001_1": True, "toy0002_1": False, "toy0003_1": True}
    assert "'42' == '3'" in json.dumps(wrong["toy0002_1"]["checker"]["failures"])
    assert any("worker.py" in cmd for _, cmd in seen.values())  # the run's own AppWorld processes...
    assert still_running(seen) == []  # ... every one stopped at exit


def test_the_appworld_venv_holds_bytecode_for_every_app():
    # `appworld install` unpacks the apps' sources with no bytecode, and the sandbox mounts the
    # venv read-only: without what `reme appworld setup` compiles, every supervisor and
    # evaluator would compile 1.1 MB of apps again when it starts.
    from reme_cli.bench.appworld.venv import default_venv

    sources = list(default_venv().glob("lib/python3*/site-packages/appworld/apps/**/*.py"))
    assert len(sources) > 50
    missing = [str(p) for p in sources if not list(p.parent.glob(f"__pycache__/{p.stem}.*.pyc"))]
    assert missing == []


def test_missing_data_is_one_line_with_the_download_command(reme, tmp_path):
    proc = reme("eval", "benchmark=appworld", f"benchmark.data_dir={tmp_path / 'nowhere'}", "out_dir=run")
    assert proc.returncode == 2
    (line,) = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert "AppWorld data not found" in line and "download data --root" in line
    assert not (reme.cwd / "run").exists()


@pytest.mark.slow
def test_a_worker_killed_mid_episode_is_recorded_and_the_rerun_completes(toy_world, tmp_path):
    with scripted_server_process("--policy", "appworld-gold", "--appworld-root", str(toy_world),
                                 "--delay", "3") as url:
        args = ["eval", *common(toy_world, url), "llm.concurrency=1", "out_dir=run"]
        env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")}
        proc = reme_popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed, deadline = False, time.time() + 240
        while not killed and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
            for pid in supervisors(proc.pid):  # the supervisor is up; its episode waits on the model
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed = True
                except ProcessLookupError:
                    continue
        assert killed, "no AppWorld worker to kill"
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 3, err[-2000:]  # a unit error, recorded, not lost
        recs = trials(tmp_path / "run")
        assert len(recs) == 3
        failed = [r for r in recs.values() if r["error"]]
        # Killed while starting or mid-episode: either way the unit names the worker and is kept.
        assert len(failed) == 1 and "AppWorld worker" in failed[0]["error"]
        assert sum(r["success"] for r in recs.values()) == 2  # the other episodes got a fresh worker
        again = reme_process(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert all(r["success"] and r["error"] is None for r in trials(tmp_path / "run").values())


@pytest.mark.slow
def test_the_released_appworld_pool_in_fixed_mode_and_a_dynamic_run(reme, toy_world, gold):
    reme("pool", "import", "official:appworld/qwen3-8b", "--out", "pool", check=True)
    reme("eval", "--mode", "fixed", *common(toy_world, gold), "memory.pool=pool", "out_dir=fixed", check=True)
    reme("eval", "--mode", "dynamic", *common(toy_world, gold), "memory.pool=pool", "out_dir=dynamic", check=True)
    fixed = trials(reme.cwd / "fixed")
    assert all(r["success"] and len(r["retrieved_ids"]) == 5 for r in fixed.values())
    dynamic = json.loads((reme.cwd / "dynamic" / "metrics.json").read_text())
    assert dynamic["avg@1"]["mean"] == 1.0 and dynamic["errors"] == 0
    assert (reme.cwd / "dynamic" / "streams" / "s0_r0" / "commits.jsonl").exists()


@pytest.mark.slow
def test_the_embedded_model_runs_an_episode_to_the_end(reme, toy_world):
    proc = reme("eval", "benchmark=appworld", f"benchmark.data_dir={toy_world}", "benchmark.split=train",
                "benchmark.task_ids=[toy0002_1]", "benchmark.max_interactions=2",
                "eval.runs=1", "eval.seeds=1", "out_dir=local", check=True)
    (rec,) = trials(reme.cwd / "local").values()
    assert rec["error"] is None and rec["interactions"] >= 1 and isinstance(rec["success"], bool)
    assert "smoke-level" in proc.stderr


def test_appworld_asks_for_code_actions_and_no_thinking_over_the_models_settings():
    from reme_cli.bench.base import Benchmark
    from reme_cli.run.settings import episode_settings
    from reme_cli.core.config import compose
    from reme_cli.llm.endpoint import request_extra_body

    aw, bfcl = compose(["benchmark=appworld", "model=qwen3-8b"]), compose(["model=qwen3-8b"])
    assert request_extra_body(aw) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert request_extra_body(bfcl) == {"chat_template_kwargs": {"enable_thinking": True}}

    class Bench(Benchmark):
        max_steps_per_turn = None
    assert episode_settings(aw, Bench()).protocol.name == "code"
    assert episode_settings(bfcl, Bench()).protocol.name == "openai"
    assert episode_settings(compose(["benchmark=appworld"]), Bench()).protocol.name == "code"  # the CPU model too


@pytest.mark.slow
def test_build_pool_on_appworld_then_its_pool_in_fixed_mode_scores_100_and_the_report_has_sgc(reme, toy_world, gold):
    reme("build-pool", *common(toy_world, gold), "build.samples=2", "out_dir=built", check=True)
    build = json.loads((reme.cwd / "built" / "build" / "report.json").read_text())
    assert build["trajectories"] == 6 and build["tasks_distilled"] == 3 and build["unit_errors"] == 0
    assert build["trajectory_success_rate"] == 1.0
    pool = [json.loads(l) for l in (reme.cwd / "built" / "pool" / "experiences.jsonl").read_text().splitlines()]
    assert len(pool) == build["pool_size"] > 0
    assert {e["source"] for e in pool} == {"success"}  # every sample solved its task
    assert {e["origin_task"] for e in pool} <= {"toy0001_1", "toy0002_1", "toy0003_1"}
    reme("eval", "--mode", "fixed", *common(toy_world, gold), "memory.pool=built", "out_dir=fixed", check=True)
    fixed = trials(reme.cwd / "fixed")
    assert len(fixed) == 3 and all(r["success"] and r["retrieved_ids"] for r in fixed.values())
    metrics = json.loads((reme.cwd / "fixed" / "metrics.json").read_text())
    assert metrics["avg@1"]["mean"] == 1.0 and metrics["sgc"]["mean"] == 1.0
    reme("report", "fixed", "--out", "report", check=True)
    md = (reme.cwd / "report" / "report.md").read_text()
    assert "AppWorld SGC Avg@1 ours" in md and "## AppWorld: scenario goal completion and difficulty" in md
    levels = sorted(metrics["by_difficulty"])
    assert levels and all(f"difficulty {d}" in md for d in levels)


@pytest.mark.slow
def test_ace_dc_and_reasoningbank_learn_online_from_code_trajectories(reme, toy_world, gold):
    """The three methods on AppWorld's code actions, each dynamic from its empty start on one
    task: ACE injects the authors' AppWorld playbook verbatim and merges the Curator's ADD; DC's
    curator rewrites the cheatsheet; ReasoningBank judges the code trajectory and banks an item."""
    from reme_cli.methods.ace.texts import initial_playbook

    one = "benchmark.task_ids=[toy0002_1]"  # after common()'s three: the last task_ids wins
    runs = {m: reme.cwd / f"{m}_online" for m in ("ace", "dc", "reasoningbank")}
    procs = run_reme_together(*((["eval", "--mode", "dynamic", f"memory={m}", *common(toy_world, gold), one,
                                  f"out_dir={out}"], reme.cwd) for m, out in runs.items()))
    assert [p.returncode for p in procs] == [0, 0, 0], [p.stderr[-2000:] for p in procs]
    units = {m: next(iter(trials(out).values())) for m, out in runs.items()}
    assert all(u["success"] for u in units.values())
    assert units["dc"]["retrieved_ids"] == units["reasoningbank"]["retrieved_ids"] == []  # nothing yet
    ace, playbook = units["ace"], initial_playbook(code_actions=True)
    assert ace["retrieved_ids"] == re.findall(r"^\[([^\]]+)\]", playbook, re.MULTILINE)  # its 8 bullets, shown
    assert len(ace["retrieved_ids"]) == 8 and all(l in ace["guidance"] for l in playbook.splitlines() if l.strip())
    assert ace["method"]["applied"] == ["cms-00009"]  # ids go on after the initial playbook's
    assert units["dc"]["method"]["rewrite"]["usable"] and units["dc"]["method"]["cheatsheet_after"]["rewrites"] == 1
    rb = units["reasoningbank"]["method"]
    assert rb["judge"]["verdict"] == "success" == rb["checker"] and rb["bank_items"] == 1


@pytest.mark.slow
def test_the_baselines_run_on_appworld_and_table1_plans_there(reme, toy_world, gold):
    """A-Mem builds notes from code trajectories and serves them in fixed mode; table1's
    plan on AppWorld has all five settings."""
    one = "benchmark.task_ids=[toy0002_1]"  # after common()'s three: the last task_ids wins
    reme("build-pool", "memory=amem", *common(toy_world, gold), one, "build.samples=1", "out_dir=amem", check=True)
    reme("eval", "--mode", "fixed", "memory=amem", *common(toy_world, gold), one, "memory.pool=amem",
         "out_dir=amem_fixed", check=True)
    plan = reme("ablate", "table1", *common(toy_world, gold), "build.samples=1", "--dry-run", check=True,
                env={"COLUMNS": "200"})  # the released pool's name on one line
    notes = [json.loads(l) for l in (reme.cwd / "amem" / "pool" / "notes.jsonl").read_text().splitlines()]
    assert len(notes) == 1 and "[code]" in notes[0]["content"] and "apis." in notes[0]["content"]
    (fixed,) = trials(reme.cwd / "amem_fixed").values()
    assert fixed["success"] and fixed["retrieved_ids"] == [notes[0]["id"]] and notes[0]["content"] in fixed["guidance"]
    # the record holds the guidance as the model saw it: relabelled as the authors' agent does
    assert "Experience 1:" in fixed["guidance"] and "Experience 1 :" not in fixed["guidance"]
    text = " ".join(plan.stderr.split())
    # ReMe's pool is AppWorld's released one (imported, no units); A-Mem's and LangMem's are built:
    # 2 x 3 training + 5 x 3 test units
    assert "3 pool(s) to build or import, 5 run(s), 21 units" in text and "official:appworld/qwen3-8b" in text
    # every memory method plans on AppWorld too: 6 pools built (3 training units each) + ReMe's imported,
    # 13 runs of 3 test tasks
    methods = reme("ablate", "methods", *common(toy_world, gold), "build.samples=1", "--dry-run", check=True,
                   env={"COLUMNS": "200"})
    assert "7 pool(s) to build or import, 13 run(s), 57 units" in " ".join(methods.stderr.split())

"""`reme eval` end to end through the real CLI, against the scripted BFCL-replay server.

The scripted server is a test double: it replays the BFCL ground truth as tool calls, so a
correct pipeline (dispatch, per-episode backends, official checker, metrics) scores 100%.
"""

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import ScriptedServer
from tests.conftest import reme_env, reme_popen, reme_process, scripted_server_process

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

# The replay servers here replay the ground truth of the release this process imports, the
# pinned one; a plain eval runs the paper release (tests/bench/bfcl/test_authors_agent.py runs that one).
REPLAY = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "llm.cache=false", "benchmark.release=current"]


def _trials(run: Path) -> list[dict]:
    return [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines() if l.strip()]


@pytest.fixture(scope="module")
def replay_server():
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        yield srv


@pytest.fixture(scope="module")
def slow_replay_url():
    """A replay server in its own process, answering after a delay, so a run can be
    interrupted with units in flight."""
    with scripted_server_process("--policy", "bfcl-replay", "--delay", "0.15") as url:
        yield url


@pytest.fixture(scope="module")
def corrupt_server():
    with ScriptedServer(BFCLReplayPolicy(corrupt={"multi_turn_base_2"})) as srv:
        yield srv


def test_replay_scores_100_percent_through_the_cli(reme, replay_server):
    proc = reme("eval", "--mode", "none", *REPLAY, f"llm.base_url={replay_server.base_url}",
                "benchmark.limit=10", "eval.runs=2", "eval.seeds=2", check=True)
    run = Path(proc.stdout.strip().splitlines()[-1])
    run = run if run.is_absolute() else reme.cwd / run
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["avg@2"]["mean"] == 1.0 and metrics["pass@2"]["mean"] == 1.0
    assert (metrics["units"], metrics["tasks"], metrics["errors"]) == (40, 10, 0)
    trials = _trials(run)
    assert len({t["unit"] for t in trials}) == 40
    for t in trials:
        # Every episode went through the official checker with the calls the model made.
        assert t["success"] is True and t["checker"]["error_type"] is None
        assert any(step for turn in t["checker"]["decoded_calls"] for step in turn)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["packages"]["bfcl-eval"] == "2026.3.23"
    assert "Avg@2" in proc.stderr


def test_a_corrupted_call_fails_exactly_that_task(reme, corrupt_server):
    proc = reme("eval", *REPLAY, f"llm.base_url={corrupt_server.base_url}", "benchmark.split=test",
                "benchmark.task_ids=[multi_turn_base_0,multi_turn_base_2,multi_turn_base_4]",
                "eval.runs=1", "eval.seeds=1", "out_dir=run", check=True)
    trials = {t["task_id"]: t for t in _trials(reme.cwd / "run")}
    assert {k: v["success"] for k, v in trials.items()} == {
        "multi_turn_base_0": True, "multi_turn_base_2": False, "multi_turn_base_4": True}
    assert trials["multi_turn_base_2"]["checker"]["error_type"].startswith("multi_turn:")
    assert proc.stdout.strip().splitlines()[-1] == "run"


def test_resume_after_kill_9_skips_finished_units_and_never_duplicates(tmp_path, slow_replay_url):
    """kill -9 of a run, then of its resume, and a second command on the run directory while
    that resume holds it (stopped, so it cannot finish first): the second is refused in one
    line, nothing finished is lost or run again, and the last resume completes every unit."""
    args = ["eval", *REPLAY, f"llm.base_url={slow_replay_url}",
            "benchmark.limit=6", "eval.runs=2", "eval.seeds=2", "llm.concurrency=4", "out_dir=run"]
    env = reme_env(tmp_path / "cache")

    def killed_after(at_least: int, proc: subprocess.Popen, second: list[str] | None = None) -> dict[str, str]:
        trials_file = tmp_path / "run" / "trials.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline:
            if trials_file.exists() and len(trials_file.read_text().splitlines()) >= at_least:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGSTOP)  # it holds the run directory, and stays mid-run
        if second is not None:
            refused = reme_process(second, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            errors = [l for l in refused.stderr.splitlines() if l.strip()]
            assert refused.returncode == 2 and len(errors) == 1, refused.stderr[-2000:]
            assert f"pid {proc.pid}" in errors[0] and "in use by another reme" in errors[0], errors
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished = {t["unit"]: t["finished_at"] for t in _trials(tmp_path / "run")}
        assert at_least <= len(finished) < 24, "the kill must land mid-run"
        return finished

    first_units = killed_after(5, reme_popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE))
    resumed = killed_after(len(first_units) + 3, reme_popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                                            stderr=subprocess.PIPE), second=args)
    assert {u: resumed[u] for u in first_units} == first_units  # the resume ran none of them again

    done = reme_process(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    trials = _trials(tmp_path / "run")
    units = [t["unit"] for t in trials]
    assert len(units) == len(set(units)) == 24  # nothing duplicated, nothing missing
    for t in trials:  # finished units were not run again
        if t["unit"] in resumed:
            assert t["finished_at"] == resumed[t["unit"]]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["avg@2"]["mean"] == 1.0 and metrics["units"] == 24


def test_out_dir_with_another_config_is_refused(reme, replay_server):
    common = [*REPLAY, f"llm.base_url={replay_server.base_url}", "benchmark.limit=1", "eval.seeds=1",
              "out_dir=run"]
    reme("eval", *common, "eval.runs=1", check=True)
    before = (reme.cwd / "run" / "trials.jsonl").read_text()
    proc = reme("eval", *common, "eval.runs=2")
    assert proc.returncode != 0 and "different config" in proc.stderr
    assert (reme.cwd / "run" / "trials.jsonl").read_text() == before


def test_multirun_sweep_runs_every_point(reme, replay_server):
    proc = reme("eval", "-m", *REPLAY, f"llm.base_url={replay_server.base_url}", "benchmark.limit=1",
                "eval.seeds=1", "eval.runs=1,2", check=True)
    paths = proc.stdout.strip().splitlines()
    assert len(paths) == 2 and len(set(paths)) == 2
    ks = sorted(json.loads((reme.cwd / p / "metrics.json").read_text())["k"] for p in paths)
    assert ks == [1, 2]


def test_ctrl_c_stops_cleanly_and_keeps_finished_units(tmp_path, slow_replay_url):
    args = ["eval", *REPLAY, f"llm.base_url={slow_replay_url}",
            "benchmark.limit=6", "eval.runs=2", "eval.seeds=1", "llm.concurrency=2", "out_dir=run"]
    env = reme_env(tmp_path / "cache")
    proc = reme_popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True)
    trials_file = tmp_path / "run" / "trials.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (trials_file.exists() and trials_file.read_text().strip()):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "rerun the same command to resume" in err
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "interrupted"
    kept = _trials(tmp_path / "run")
    assert kept and len(kept) < 12
    done = reme_process(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and len(_trials(tmp_path / "run")) == 12

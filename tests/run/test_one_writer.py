"""One writer per run, pool and build directory; SIGTERM stops a run like Ctrl-C.

Through the real CLI against the scripted BFCL-replay server (a TEST DOUBLE), in its own
process and answering after a delay so that runs can be caught with units in flight.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_cli.core.errors import UserError
from reme_cli.run import lock as lock_mod
from reme_cli.run.lock import DirLock, lock_path
from tests.conftest import reme_env, reme_popen, run_reme, scripted_server_process

REPLAY = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "llm.cache=false",
          "benchmark.release=current"]  # the replay server replays the pinned release's ground truth


@pytest.fixture(scope="module")
def slow_url():
    with scripted_server_process("--policy", "bfcl-replay+summarizer", "--delay", "0.2") as url:
        yield url


def units(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(l)["unit"] for l in path.read_text().splitlines() if l.strip()]


def start(tmp_path: Path, *args: str) -> subprocess.Popen:
    env = reme_env(tmp_path / "cache")
    return reme_popen([*args], cwd=tmp_path, env=env,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


# ------------------------------------------------------------------ the lock itself


def test_a_second_holder_is_refused_with_the_holders_pid(tmp_path):
    with DirLock(tmp_path / "run"):
        with pytest.raises(UserError, match=rf"pid {os.getpid()} on {socket.gethostname()}"):
            DirLock(tmp_path / "run").acquire()
    assert not lock_path(tmp_path / "run").exists()  # released
    with DirLock(tmp_path / "run"):  # and free again
        pass


@pytest.mark.slow
def test_a_lock_whose_process_died_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock_path(tmp_path / "run").write_text(json.dumps(
        {"host": socket.gethostname(), "machine": lock_mod._machine(), "pid": dead.pid, "started_at": "earlier",
         "token": "old"}))
    with DirLock(tmp_path / "run") as held:
        assert json.loads(held.path.read_text())["token"] == held.token


@pytest.mark.parametrize("machine", ["another-node/pid:[4026531836]", None], ids=["other machine", "unknown"])
@pytest.mark.slow
def test_a_lock_from_a_node_sharing_this_host_name_is_respected_while_its_heartbeat_is_fresh(tmp_path, machine):
    # Cluster nodes can share a host name: a pid that is dead here may be alive there.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = lock_path(tmp_path / "run")
    path.write_text(json.dumps({"host": socket.gethostname(), "machine": machine, "pid": dead.pid,
                                "started_at": "earlier", "token": "twin"}))
    with pytest.raises(UserError, match=rf"pid {dead.pid} on {socket.gethostname()}"):
        DirLock(tmp_path / "run").acquire()
    assert json.loads(path.read_text())["token"] == "twin"
    old = time.time() - lock_mod.STALE_AFTER_S - 5
    os.utime(path, (old, old))
    with DirLock(tmp_path / "run") as held:  # its heartbeat stopped: now it is stale
        assert json.loads(held.path.read_text())["token"] == held.token


def test_another_hosts_lock_is_stale_only_once_its_heartbeat_stops(tmp_path):
    path = lock_path(tmp_path / "run")
    path.write_text(json.dumps({"host": "node-7", "pid": 1, "started_at": "earlier", "token": "remote"}))
    with pytest.raises(UserError, match="pid 1 on node-7"):
        DirLock(tmp_path / "run").acquire()
    old = time.time() - lock_mod.STALE_AFTER_S - 5
    os.utime(path, (old, old))
    with DirLock(tmp_path / "run") as held:
        assert json.loads(held.path.read_text())["token"] == held.token


def test_the_heartbeat_keeps_a_held_lock_fresh(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_mod, "HEARTBEAT_S", 0.05)
    with DirLock(tmp_path / "run") as held:
        old = time.time() - 1000
        os.utime(held.path, (old, old))
        wait_for(lambda: time.time() - held.path.stat().st_mtime < 5, timeout=5)


# ------------------------------------------------------------------ through the CLI


@pytest.fixture
def slower_url():
    """Slow enough that the first run still holds its lock when the second has started (its
    imports take seconds of CPU on a busy machine)."""
    with scripted_server_process("--policy", "bfcl-replay+summarizer", "--delay", "0.6") as url:
        yield url


@pytest.mark.slow
def test_two_evals_on_one_run_directory_leave_every_unit_once(tmp_path, slower_url):
    args = ("eval", *REPLAY, f"llm.base_url={slower_url}", "benchmark.limit=4", "eval.runs=2", "eval.seeds=1",
            "llm.concurrency=2", "out_dir=run")
    first = start(tmp_path, *args)
    wait_for(lambda: lock_path(tmp_path / "run").exists())
    second = start(tmp_path, *args)
    _, err2 = second.communicate(timeout=120)
    _, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1[-2000:]
    assert second.returncode == 2
    (line,) = [l for l in err2.splitlines() if l.startswith("error:")]
    assert f"pid {first.pid}" in line and "in use by another reme" in line
    got = units(tmp_path / "run" / "trials.jsonl")
    assert len(got) == len(set(got)) == 8


@pytest.mark.slow
def test_wait_queues_behind_the_holder_instead_of_refusing(tmp_path, slow_url):
    args = ("eval", *REPLAY, f"llm.base_url={slow_url}", "benchmark.limit=2", "eval.runs=2", "eval.seeds=1",
            "out_dir=run")
    first = start(tmp_path, *args)
    wait_for(lambda: lock_path(tmp_path / "run").exists())
    second = start(tmp_path, "eval", "--wait", *args[1:])
    assert second.wait(timeout=300) == 0 and first.wait(timeout=300) == 0
    got = units(tmp_path / "run" / "trials.jsonl")
    assert len(got) == len(set(got)) == 4


def _sigterm_then_resume(tmp_path: Path, args: tuple[str, ...], run: Path, trials: Path, total: int) -> None:
    proc = start(tmp_path, *args)
    wait_for(lambda: len(units(trials)) >= 1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err and "rerun the same command to resume" in err
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    assert not lock_path(args_out(args, tmp_path)).exists()
    kept = units(trials)
    assert 1 <= len(kept) < total
    done = start(tmp_path, *args)
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err[-2000:]
    got = units(trials)
    assert len(got) == len(set(got)) == total


def args_out(args: tuple[str, ...], tmp_path: Path) -> Path:
    return tmp_path / next(a.split("=", 1)[1] for a in args if a.startswith("out_dir="))


@pytest.mark.slow
def test_sigterm_against_an_external_server_leaves_interrupted_and_the_rerun_completes(tmp_path, slow_url):
    args = ("eval", *REPLAY, f"llm.base_url={slow_url}", "benchmark.limit=6", "eval.runs=2", "eval.seeds=1",
            "llm.concurrency=2", "out_dir=run")
    _sigterm_then_resume(tmp_path, args, tmp_path / "run", tmp_path / "run" / "trials.jsonl", 12)


@pytest.mark.slow
def test_sigterm_during_build_pool_then_resume(tmp_path, slow_url):
    args = ("build-pool", *REPLAY, f"llm.base_url={slow_url}", "benchmark.limit=3", "build.samples=2",
            "llm.concurrency=2", "out_dir=pool")
    _sigterm_then_resume(tmp_path, args, tmp_path / "pool" / "build", tmp_path / "pool" / "build" / "trials.jsonl", 6)
    assert (tmp_path / "pool" / "pool" / "manifest.json").exists()


@pytest.mark.slow
def test_sigterm_during_a_dynamic_run_then_resume(tmp_path, slow_url):
    run_reme(["pool", "import", "official:bfcl/qwen3-8b", "--out", "pool"], tmp_path,
             env={"REME_CACHE_DIR": str(tmp_path / "cache")}, check=True)
    args = ("eval", "--mode", "dynamic", *REPLAY, f"llm.base_url={slow_url}", "memory.pool=pool",
            "benchmark.limit=4", "eval.runs=2", "eval.seeds=1", "llm.concurrency=2", "out_dir=run")
    _sigterm_then_resume(tmp_path, args, tmp_path / "run", tmp_path / "run" / "trials.jsonl", 8)


@pytest.mark.slow
def test_sigterm_sent_again_while_the_run_stops_still_leaves_interrupted(tmp_path, slow_url):
    """A joblib suite killed with -9 sends each job its parent-death SIGTERM once per thread
    of the suite that exits (measured: 1 to 3, as the threads die): a repeat that arrives
    while the job records its stop must not cut that short (test_stopping_a_joblib_suite_
    stops_its_jobs[9] found "running" left behind). Here the repeats come every 2 ms until
    the run is gone."""
    args = ("eval", *REPLAY, f"llm.base_url={slow_url}", "benchmark.limit=6", "eval.runs=2", "eval.seeds=1",
            "out_dir=run")
    proc = start(tmp_path, *args)
    wait_for(lambda: len(units(tmp_path / "run" / "trials.jsonl")) >= 1)
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:  # again and again until it is gone
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.002)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (proc.returncode, err[-2000:])
    assert "Traceback" not in err and "rerun the same command to resume" in err
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "interrupted"

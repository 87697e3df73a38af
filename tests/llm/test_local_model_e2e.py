"""The embedded CPU model for real, through the CLI: reme starts llama.cpp with the SmolLM2
GGUF, runs an episode, records it, and stops the server. Kept to a few model calls: on 2
cores each costs seconds."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_cli.llm.local_engine import choose
from tests.conftest import processes, reme_popen, reme_process

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

ENGINE = choose()  # the llama.cpp engine reme starts here
SMALL = ["eval.runs=1", "eval.seeds=1", "benchmark.max_interactions=2", "llm.concurrency=1"]


def _llama_servers(tmp_path: Path) -> list[str]:
    """The embedded servers of this test's runs (they inherit its REME_CACHE_DIR)."""
    return processes(ENGINE.module, f"REME_CACHE_DIR={tmp_path / 'cache'}")


def test_embedded_model_builds_a_pool(reme):
    # A training task of one small API (TradingBot): the summarizer's prompt carries the task's
    # tool schemas (the authors' pool building appends them), and on 2 cores its length is the
    # test's time (multi_turn_base_5, the split's first, has two APIs: about twice the text).
    proc = reme("build-pool", "benchmark.task_ids=[multi_turn_base_107]", "build.samples=2",
                "benchmark.max_interactions=2", "llm.concurrency=1", "out_dir=pool", check=True)
    out = Path(reme.cwd) / "pool"
    report = json.loads((out / "build" / "report.json").read_text())
    assert report["trajectories"] == 2 and report["unit_errors"] == 0 and report["tasks_distilled"] == 1
    assert (out / "pool" / "manifest.json").exists()
    assert report["summarizer_llm_calls"] >= 1
    assert "pool size" in proc.stderr


def _server_child(parent: int) -> int | None:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    for line in out.splitlines()[1:]:
        pid, ppid, args = line.split(None, 2)
        if int(ppid) == parent and ENGINE.module in args:
            return int(pid)
    return None


def test_embedded_server_crash_stops_the_run_in_one_line_and_the_rerun_records_the_episode(tmp_path):
    """One run, twice: its server killed on the first request, then the rerun (the whole
    episode, since no unit had finished) checked as any embedded-model run."""
    args = ["eval", "--mode", "none", "benchmark.task_ids=[multi_turn_base_1]",
            *SMALL, "out_dir=run"]
    env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")}
    proc = reme_popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    manifest = tmp_path / "run" / "manifest.json"
    # Waited for, not timed: the run is going, its server has started, and the first request (a
    # ~3k-token prompt: seconds on a CPU) is in flight: llama.cpp's own server logs the task it
    # took; llama-cpp-python's logs nothing then, so a second after its start stands for it.
    log = tmp_path / "cache" / "local_server.log"
    deadline = time.time() + 300
    server, seen = None, None
    while time.time() < deadline and proc.poll() is None:
        if manifest.exists() and '"running"' in manifest.read_text():
            server = server or _server_child(proc.pid)
            seen = seen or (time.monotonic() if server else None)
            if server and ("launch_slot_" in (log.read_text(errors="replace") if log.exists() else "")
                           or ENGINE.name != "xllamacpp" and time.monotonic() - seen > 1.0):
                break
        time.sleep(0.1)
    assert server is not None, "the embedded server must be running under reme"
    assert [l.split()[0] for l in _llama_servers(tmp_path)] == [str(server)]  # the needle finds it
    os.kill(server, signal.SIGSEGV)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 4, err[-2000:]
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    assert len(lines) == 1 and "signal 11 (SIGSEGV)" in lines[0] and "local_server.log" in lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "run" / "trials.jsonl").exists() or not (tmp_path / "run" / "trials.jsonl").read_text()
    assert json.loads(manifest.read_text())["status"] == "interrupted"

    again = reme_process(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    run = tmp_path / "run"
    assert again.stdout.strip().splitlines()[-1] == "run"
    assert "smoke-level" in again.stderr  # the table says these are not model results
    (trial,) = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    assert trial["error"] is None, trial.get("traceback")
    assert 1 <= trial["interactions"] <= 2
    assert trial["tokens"]["prompt"] > 0 and trial["tokens"]["completion"] > 0
    # The official checker gave a verdict on whatever the model did.
    assert "decoded_calls" in trial["checker"] and isinstance(trial["success"], bool)
    # Constrained decoding: every step's reply parsed, so every call names an offered tool.
    steps = [s for turn in trial["trajectory"]["turns"] for s in turn]
    assert steps and all(c["name"] for s in steps for c in s["calls"])
    record = json.loads(manifest.read_text())
    assert record["server"]["kind"] == "embedded-llama.cpp" and record["status"] == "complete"
    # Which engine served the run, and its version (the two engines' outputs differ).
    assert (record["server"]["engine"], record["server"]["engine_version"]) == (ENGINE.name, ENGINE.version())
    assert record["packages"][ENGINE.distribution] == ENGINE.version()
    assert _llama_servers(tmp_path) == []  # the embedded servers were stopped


def test_install_smoke_check_passes_on_the_bundled_model_and_fails_on_a_truncated_gguf(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "reme_cli.llm.smoke"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "Paris" in ok.stdout and f"({ENGINE.name} {ENGINE.version()})" in ok.stdout

    from reme_cli.llm.local_server import default_model_path

    broken = tmp_path / "truncated.gguf"
    with open(default_model_path(), "rb") as f:
        broken.write_bytes(f.read(4 * 1024 * 1024))  # the header survives, the tensors do not
    bad = subprocess.run([sys.executable, "-m", "reme_cli.llm.smoke", "--model", str(broken)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: smoke check failed:"), bad.stderr[-2000:]

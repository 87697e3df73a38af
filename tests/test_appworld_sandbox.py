"""The model's code on AppWorld stays in its sandbox, and nothing reme starts outlives it.

The scripted server (a TEST DOUBLE) answers with the hostile code that got past AppWorld's
own checks (issue 24), on the toy world (tests/conftest.py's toy_world)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from reme_cli.bench.appworld import AppWorldBenchmark, AppWorldConfig
from tests.conftest import processes, run_reme, scripted_server_process
from tests.test_appworld import common, trials

ONE = "benchmark.task_ids=[toy0001_1]"  # after common()'s three: the last task_ids wins
MARKERS = ["CTYPES", "SPAWN", "NEW", "LINK"]


def hostile(outside: Path, secret: Path, port: int) -> list[str]:
    """One step each: a control that shows code runs, then what ran on the host before, then
    a connection to a port the test listens on."""
    return [
        "print('alive', 6 * 7)",
        f'exec("import ctypes\\nprint(ctypes.CDLL(None).system(b\'touch {outside}/CTYPES\'))")',
        f"import os; print(os.posix_spawn('/usr/bin/touch', ['touch', '{outside}/SPAWN'], dict(os.environ)))",
        f"import os; os.makedirs('{outside}/NEW')",
        f"import os; os.symlink('{secret}', '{outside}/LINK')",
        f"import pathlib; print(pathlib.Path('{secret}').read_text())",
        # AppWorld refuses `import socket` but not in exec's string, as with ctypes above.
        f'exec("import socket\\nsocket.create_connection((\'127.0.0.1\', {port}), timeout=5)\\n'
        "print('reached', 'host')\")",
    ]


FINISH = "apis.supervisor.complete_task()"


def run_hostile(toy_world: Path, cwd: Path, *extra: str, env: dict | None = None):
    """``reme eval`` of one toy task whose model answers with ``hostile()``, one step each."""
    outside = cwd / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret_text = f"reme-secret-{uuid.uuid4().hex}"
    secret.write_text(secret_text)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        steps = hostile(outside, secret, listener.getsockname()[1])
        # The last step ends the task: the authors' agent runs a reply without code as code
        # and goes on, so plain text would not stop the episode.
        replies = [a for s in [*steps, FINISH] for a in ("--step", f"I will run it.\n```python\n{s}\n```")]
        with scripted_server_process("--policy", "steps", *replies) as url:
            proc = run_reme(["eval", *common(toy_world, url), ONE, *extra, "out_dir=run"], cwd, env=env)
    (rec,) = trials(cwd / "run").values()
    ran = [(step["code"], step["code_output"]) for step in rec["trajectory"]["turns"][0] if step.get("code")]
    assert ran[-1][0] == FINISH
    return proc, outside, secret_text, steps, ran[:-1]


def text_under(path: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in path.rglob("*") if p.is_file())


def test_hostile_code_leaves_no_trace_outside_and_reads_no_host_file(toy_world, tmp_path):
    proc, outside, secret, steps, ran = run_hostile(toy_world, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [code for code, _ in ran] == steps  # every attempt is recorded, code and output
    assert "alive 42" in ran[0][1]  # the code did run, in the sandbox
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]  # no marker, no link, no directory
    assert secret not in text_under(tmp_path / "run") and secret not in proc.stderr
    assert "reached host" not in ran[-1][1]  # no network: not even the host's loopback
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["sandbox"] == "bwrap"
    assert "sandbox: none" not in " ".join(proc.stderr.split())


def test_without_a_sandbox_the_run_stops_unless_none_is_asked_for(toy_world, tmp_path):
    no_bwrap = {"REME_BWRAP": str(tmp_path / "no-bwrap")}  # a machine without bubblewrap
    refused = run_reme(["eval", *common(toy_world, "http://127.0.0.1:9/v1"), ONE, "out_dir=refused"], tmp_path,
                       env=no_bwrap)
    assert refused.returncode == 2
    (line,) = [l for l in refused.stderr.splitlines() if l.strip()]
    assert line.startswith("error:") and "apt-get install bubblewrap" in line and "benchmark.sandbox=none" in line
    assert not (tmp_path / "refused").exists()

    # Asked for: the same payloads run on the host (so the test above tests the sandbox, not
    # AppWorld's own checks), and the run says so.
    proc, outside, secret, steps, ran = run_hostile(toy_world, tmp_path, "benchmark.sandbox=none", env=no_bwrap)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in outside.iterdir()) == sorted([*MARKERS, "secret.txt"])
    assert secret in ran[5][1] and "reached host" in ran[-1][1]
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["sandbox"] == "none"
    assert "sandbox: none (benchmark.sandbox=none" in " ".join(proc.stderr.split())  # the final table says it


def wait_for(check, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    return check()


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_kill_9_of_reme_mid_episode_leaves_no_worker(toy_world, tmp_path, sandbox):
    workers = lambda: processes("appworld.serve.environment", f"APPWORLD_ROOT={toy_world}")  # noqa: E731
    with scripted_server_process("--policy", "appworld-gold", "--appworld-root", str(toy_world),
                                 "--delay", "60") as url:
        env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")}
        proc = subprocess.Popen([sys.executable, "-m", "reme_cli.cli", "eval", *common(toy_world, url),
                                 f"benchmark.sandbox={sandbox}", "out_dir=run"],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Three episodes wait on the model, each with a worker started from its own thread.
            assert wait_for(lambda: len([w for w in workers() if "uvicorn" in w and "bwrap" not in w]) == 3, 180)
            time.sleep(1)
            # The private directory of their sockets and logs: a kill -9 leaves it behind.
            private = {Path(w.split("--uds ")[1].split()[0]).parents[1] for w in workers()}
            proc.kill()
            proc.wait()
            left = wait_for(lambda: not workers(), 15) or workers()
        finally:
            proc.kill()
    assert left is True, left
    (private,) = private
    assert private.name.startswith("reme-appworld-") and stat.S_IMODE(private.stat().st_mode) == 0o700
    shutil.rmtree(private)


def test_a_worker_forked_from_a_passing_thread_outlives_the_thread_but_not_reme(tmp_path):
    """The parent-death signal (ours, and bwrap's --die-with-parent) belongs to the thread
    that forks: a worker started from a thread that then ends must keep running."""
    tag = f"300.{uuid.uuid4().int % 10**12:012d}"  # a sleep no other process has
    program = f"""
import sys, threading, time
from reme_cli.bench.sandbox import Bwrap
from reme_cli.llm.local_server import LocalServer

class Sleeper(LocalServer):
    def _prepare(self): return ""
    def command(self, model_path, port): return Bwrap((), ()).wrap(["sleep", {tag!r}])
    def _ready(self): return True

server = Sleeper(log_path={str(tmp_path / "sleeper.log")!r})
t = threading.Thread(target=lambda: (server.start(), time.sleep(1)))  # then the thread ends
t.start()
t.join()
time.sleep(1)
print("running" if server.running else "dead", flush=True)
time.sleep(120)
"""
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "running"
        assert processes("sleep", tag)
        proc.kill()
        proc.wait()
        assert wait_for(lambda: not processes("sleep", tag), 10)
    finally:
        proc.kill()


def test_worker_logs_and_sockets_are_in_a_fresh_private_directory(toy_world, tmp_path, monkeypatch):
    # What another user could plant at the old fixed name in a shared $TMPDIR.
    shared = Path(tempfile.mkdtemp())
    try:
        (shared / "reme-appworld-workers").mkdir()
        victim = tmp_path / "victim"
        victim.write_text("untouched")
        (shared / "reme-appworld-workers" / "appworld-worker-1.log").symlink_to(victim)
        monkeypatch.setattr(tempfile, "tempdir", str(shared))
        bench = AppWorldBenchmark(AppWorldConfig(data_dir=str(toy_world), split="train"))

        async def one_episode() -> Path:
            env = await bench.open(bench.load("toy0001_1"), "k")
            try:
                assert (await env.execute("execute", {"code": "print(1 + 1)"})).output.strip() == "2"
                return env.server.log_path
            finally:
                await env.close()

        log = asyncio.run(one_episode())
        private = bench._workers.dir
        assert log.parent == private and private.parent == shared and log.is_file()
        info = private.stat()
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
        bench._workers.close()
        assert not private.exists()  # removed at exit when no worker failed
        assert victim.read_text() == "untouched"
        assert sorted(p.name for p in shared.iterdir()) == ["reme-appworld-workers"]
    finally:
        shutil.rmtree(shared)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_a_joblib_suite_stops_its_jobs(tmp_path, sig):
    with scripted_server_process("--policy", "bfcl-replay", "--delay", "60") as url:
        args = [sys.executable, "-m", "reme_cli.cli", "ablate", "table1", "model=qwen3-8b", "embedding=minilm",
                "benchmark.release=current", f"llm.base_url={url}", "llm.model=replay", "benchmark.limit=1",
                "eval.runs=1", "eval.seeds=1", "--launcher", "joblib", "--jobs", "2", "--only", "no_memory"]
        env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")}
        proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        jobs = lambda: processes("reme_cli.cli eval", str(tmp_path))  # noqa: E731
        try:
            assert wait_for(jobs, 120), "the suite started no job"
            run = next((tmp_path / "runs" / "ablate").iterdir()) / "runs" / "no_memory"
            assert wait_for(lambda: (run / "manifest.json").exists(), 60)  # the job waits on the model
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=120)
            if sig == signal.SIGTERM:
                assert proc.returncode == 143, err[-2000:]
                assert not jobs()  # stopped before the suite exits
            assert wait_for(lambda: not jobs(), 15), jobs()
        finally:
            proc.kill()
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"

"""The model's code on AppWorld: what it can reach, change and use, and nothing reme starts
outlives it.

Every payload of issues 24 and 33 runs against the real sandbox (the bwrap reme finds: the
bundled one here) on the toy world (tests/conftest.py's toy_world). One scripted server (a
TEST DOUBLE) per module answers each unit (task, run) with the steps a test gives it; reme is
started as root is here, with an API key in its environment."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, Mapping

import pytest

from reme_cli.bench.appworld.benchmark import AppWorldBenchmark
from reme_cli.bench.appworld.config import AppWorldConfig
from reme_cli.bench.appworld.processes import PRIVATE_PREFIX
from reme_cli.core.staging import clean_stale_tempdirs, private_tempdir
from reme_cli.testing.scripted_server import Reply, ScriptedServer
from tests.conftest import descendants, reme_popen, run_reme, run_watched, scripted_server_process, still_running
from tests.bench.appworld.test_appworld import common, trials

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

FINISH = "apis.supervisor.complete_task()"
WRONG = "apis.supervisor.complete_task(answer='wrong')"
SECRET = f"sk-test-SECRET-{uuid.uuid4().hex}"
VENV_SITE = Path(sys.prefix) / "share" / "reme" / "appworld-venv"


def sneak(*parts: str) -> str:
    """The source ``parts`` run through ``exec``: AppWorld's own syntax checks never see it."""
    return f"exec({chr(10).join(textwrap.dedent(p).strip() for p in parts)!r})"


# Every path under a folder (AppWorld's checks turn os.listdir, os.walk and so glob into
# no-ops for the model's code; posix's own functions are left).
WALK = """
import posix, stat
def walk(top, depth=12):
    found = []
    try:
        names = posix.listdir(top)
    except OSError:
        return found
    for name in names:
        path = top.rstrip('/') + '/' + name
        found.append(path)
        try:
            info = posix.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and depth:
            found += walk(path, depth - 1)
    return found
"""


class Payloads:
    """Each unit's steps, by (task, run) from the episode header; a unit without steps, or
    past them, completes its task. The i-th reply of an episode is its i-th step."""

    name = "payloads"

    def __init__(self) -> None:
        self.by_unit: dict[tuple[str, int], list[str]] = {}
        self.largest_message = 0

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        m = re.fullmatch(r"s\d+_r(\d+)_(.+)_[0-9a-f]{8}", headers.get("X-Reme-Episode", ""))
        steps = self.by_unit.get((m.group(2), int(m.group(1))), []) if m else []
        messages = body.get("messages") or []
        self.largest_message = max([self.largest_message, *(len(str(x.get("content") or "")) for x in messages)])
        done = sum(1 for x in messages if x.get("role") == "assistant")
        code = steps[done] if done < len(steps) else FINISH
        return Reply(content=f"I will run it.\n```python\n{code}\n```")


@pytest.fixture(scope="module")
def payloads():
    policy = Payloads()
    with ScriptedServer(policy) as server:
        policy.url = server.base_url
        yield policy


def outputs(rec: dict) -> list[str]:
    return [s["code_output"] or "" for s in rec["trajectory"]["turns"][0] if s.get("code")]


def by_unit(run: Path) -> dict[tuple[str, int], dict]:
    return {(r["task_id"], r["run"]): r for r in map(json.loads, (run / "trials.jsonl").read_text().splitlines())}


def aw_eval(toy_world: Path, url: str, *extra: str) -> list[str]:
    return ["eval", *common(toy_world, url), "eval.runs=2", "llm.concurrency=1", *extra]


# ------------------------------------------------------------------ secrets, privileges, answers, independence


def test_secrets_privileges_answers_and_other_episodes_stay_out_of_reach(toy_world, tmp_path, payloads):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret_file = outside / "secret.txt"
    secret_file.write_text(SECRET)
    site = next(VENV_SITE.glob("lib/python3*/site-packages"))
    inside_site = f"/reme/appworld-venv/lib/{site.parent.name}/site-packages"  # the venv, bound at a fixed path
    listener = socket.create_server(("127.0.0.1", 0))
    payloads.by_unit = {
        ("toy0001_1", 0): [
            "print('alive', 6 * 7)",
            sneak("""
                import _io, posix
                seen = []
                for p in posix.listdir('/proc'):
                    if p.isdigit():
                        try:
                            seen.append(_io.FileIO('/proc/%s/environ' % p).read().decode(errors='replace'))
                        except OSError as e:
                            seen.append('unreadable %s' % p)
                print('ENVIRON', seen)
                print([l for l in _io.FileIO('/proc/self/status').read().decode().splitlines() if l.startswith('CapEff')])
                for p in posix.listdir('/proc'):  # every other process here: its open files and memory
                    if p.isdigit() and int(p) != posix.getpid():
                        for what in ('fd', 'mem'):
                            try:
                                if what == 'fd':  # the supervisor's descriptors, opened through /proc
                                    for n in posix.listdir('/proc/%s/fd' % p) or ['0']:
                                        _io.FileIO('/proc/%s/fd/%s' % (p, n)).close()
                                else:
                                    _io.FileIO('/proc/%s/mem' % p)
                                print('OPENED', p, what)
                            except OSError as e:
                                print('REFUSED', p, what, e.errno)
            """),
            sneak(f"""
                import ctypes, _io
                libc = ctypes.CDLL(None, use_errno=True)
                for target in [{inside_site!r}, '/appworld/data/base_dbs', '/reme/python', '/']:
                    rc = libc.mount(None, target.encode(), None, 32 | 4096, None)  # MS_REMOUNT | MS_BIND, read-write
                    print('MOUNT', target, rc, ctypes.get_errno())
                try:
                    f = _io.FileIO({inside_site + '/reme_test_evil.pth'!r}, 'w')
                    f.write(b'import os')
                    f.close()
                    print('PTH written')
                except OSError as e:
                    print('PTH refused', e.errno)
            """),
            f"import os; os.makedirs('{outside}/NEW')",
            f"import os; os.symlink('{secret_file}', '{outside}/LINK')",
            f"import pathlib; print(pathlib.Path('{secret_file}').read_text())",
            sneak(f"""
                import socket
                socket.create_connection(('127.0.0.1', {listener.getsockname()[1]}), timeout=5)
                print('reached', 'host')
            """),
        ],
        ("toy0002_1", 0): [  # find the answers, run the solution
            sneak(WALK, f"""
                import _io
                everything = walk('/appworld') + walk({str(toy_world / 'data')!r}) + walk('/tmp')
                hits = sorted(p for p in everything if '/ground_truth/' in p)
                print('GROUND_TRUTH', hits)
                print('TASKS', sorted(walk('/appworld/data/tasks', 0)))
                for h in hits:
                    if h.endswith('toy0002_1/ground_truth/solution.py'):
                        exec(_io.FileIO(h).read().decode())
            """),
            "apis.supervisor.complete_task(answer=42)",
        ],
        ("toy0003_1", 0): [  # the first of two runs of a task: patch the evaluator, leave a note
            sneak("""
                import appworld.evaluator as ev, _io, os
                ev.TestTracker.to_dict = lambda self, stats_only=False: {
                    'success': True, 'difficulty': 1, 'num_tests': 1,
                    'passes': [{'requirement': 'patched', 'label': None}], 'failures': []}
                ev.TestTracker.success = property(lambda self: True)
                root = os.environ.get('APPWORLD_ROOT', '/tmp')
                for path in ['/tmp/reme-leak.txt', root + '/experiments/outputs/reme-leak.txt']:
                    _io.FileIO(path, 'w').write(b'from the first run')
                print('PLANTED')
            """),
            WRONG,
        ],
        ("toy0003_1", 1): [  # the second: what is left of the first
            sneak(WALK, """
                import os
                everything = walk(os.environ.get('APPWORLD_ROOT', '/tmp')) + walk('/tmp')
                print('SEEN', sorted(p for p in everything if p.endswith('environment_io.md')),
                      [p for p in everything if 'reme-leak' in p])
            """),
            WRONG,
        ],
        ("toy0002_1", 1): [sneak(f"import ctypes\nprint(ctypes.CDLL(None).system(b'touch {outside}/CTYPES'))")],
        ("toy0001_1", 1): [f"import os; print(os.posix_spawn('/usr/bin/touch', ['touch', '{outside}/SPAWN'], "
                           "dict(os.environ)))"],
    }
    try:
        proc = run_reme(aw_eval(toy_world, payloads.url, "out_dir=run"), tmp_path, env={"OPENAI_API_KEY": SECRET})
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    units = by_unit(tmp_path / "run")
    # Secrets: no process in the sandbox (bwrap's PID 1 included) has reme's environment.
    first = outputs(units["toy0001_1", 0])
    assert "alive 42" in first[0] and "ENVIRON" in first[1]
    assert SECRET not in json.dumps(list(units.values())) and "OPENAI_API_KEY" not in first[1]
    # Privileges: no capability, no remount, the venv stays read-only; nothing lands outside.
    assert "CapEff:\\t0000000000000000" in first[1]
    assert "REFUSED" in first[1] and "OPENED" not in first[1]  # the supervisor beside it is out of reach
    assert first[2].count("MOUNT") == 4 and all(" -1 1" in line for line in first[2].splitlines() if "MOUNT" in line)
    assert "PTH refused 30" in first[2] and not (site / "reme_test_evil.pth").exists()
    assert "reached host" not in first[6]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]  # no marker, no link, no directory
    # Answers: no ground truth anywhere, no other task's data; the unit fails.
    answers = outputs(units["toy0002_1", 0])[0]
    assert "GROUND_TRUTH []" in answers and "TASKS ['/appworld/data/tasks/toy0002_1']" in answers
    assert not units["toy0002_1", 0]["success"]
    # Independence: the patch and the notes of the first run reach neither its own score nor the second run.
    assert not units["toy0003_1", 0]["success"] and not units["toy0003_1", 1]["success"]
    seen = outputs(units["toy0003_1", 1])[0]
    assert seen.count("environment_io.md") <= 1 and "reme-leak" not in seen, seen
    # Starting a process ends the episode; nothing it meant to run did.
    assert units["toy0002_1", 1]["stop_reason"] == units["toy0001_1", 1]["stop_reason"] == "process_limit"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["sandbox"] == "bwrap" and manifest["sandbox_detail"]["version"].startswith("bubblewrap ")
    assert manifest["sandbox_detail"]["source"] in ("bundled", "system", "REME_BWRAP")


# ------------------------------------------------------------------ bounds


def test_each_bound_is_cut_recorded_and_the_run_goes_on(toy_world, tmp_path, payloads):
    gold = (toy_world / "data" / "tasks" / "toy0003_1" / "ground_truth" / "solution.py").read_text()
    payloads.by_unit = {
        ("toy0001_1", 0): [sneak("b = bytearray(2 * 1024 ** 3)\nprint('allocated', len(b))")],
        # A fork bomb, bounded: 200 children that sleep 3 s, if nothing stops them.
        ("toy0002_1", 0): [sneak("""
            import ctypes, time
            libc = ctypes.CDLL(None)
            n = 0
            for i in range(200):
                pid = libc.fork()
                if pid == 0:
                    time.sleep(3)
                    libc._exit(0)
                n += 1
            print('forked', n)
        """)],
        ("toy0003_1", 0): [sneak("""
            import _io, os
            f = _io.FileIO(os.environ.get('APPWORLD_ROOT', '/tmp') + '/experiments/outputs/big.bin', 'w')
            for i in range(256):
                f.write(b'x' * 2 ** 20)
            print('wrote 256 MiB')
        """)],
        ("toy0001_1", 1): ["print('x' * 10 ** 8)", FINISH],
        ("toy0002_1", 1): [sneak("import signal\nsignal.alarm(0)\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                 "while True:\n    pass")],
        ("toy0003_1", 1): [gold],
    }
    payloads.largest_message = 0
    proc = run_reme(aw_eval(toy_world, payloads.url, "benchmark.timeout=3", "benchmark.episode_timeout=6",
                            "out_dir=run"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    units = by_unit(tmp_path / "run")
    stops = {k: r["stop_reason"] for k, r in units.items()}
    assert stops == {("toy0001_1", 0): "memory_limit", ("toy0002_1", 0): "process_limit",
                     ("toy0003_1", 0): "disk_limit", ("toy0001_1", 1): "answered",
                     ("toy0002_1", 1): "time_limit", ("toy0003_1", 1): "answered"}, stops
    assert all(r["error"] is None for r in units.values())
    assert [lim["limit"] for r in units.values() for lim in r["trajectory"]["limits"]] == \
        ["memory", "processes", "disk", "output", "time"]
    assert outputs(units["toy0001_1", 0])[0].endswith("MemoryError")
    printed = outputs(units["toy0001_1", 1])[0]
    assert printed.startswith("xxx") and re.search(r"\[truncated 999000\d\d chars\]$", printed)
    assert payloads.largest_message < 200_000  # what went back to the model was cut
    assert units["toy0002_1", 1]["wall_s"] < 30  # 6 s of code at most, not AppWorld's 100 s per step
    assert units["toy0003_1", 1]["success"]  # and the run went on


# ------------------------------------------------------------------ stopping


LOOP = sneak("import signal\nsignal.alarm(0)\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass")


def wait_for(check, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    return check()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_end_a_looping_step_at_once(toy_world, tmp_path, payloads, sig):
    payloads.by_unit = {("toy0001_1", 0): [LOOP]}
    env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")}
    proc = reme_popen(aw_eval(toy_world, payloads.url, "eval.runs=1", "benchmark.task_ids=[toy0001_1]", "out_dir=run"),
                      cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # The episode's process: the supervisor's child, spinning in the model's loop.
        spinning = lambda: [p for p, (_, cmd) in descendants(proc.pid).items()  # noqa: E731
                            if "worker.py" in cmd and _cpu_s(p) > 1.0]
        assert wait_for(spinning, 240), "the step never started"
        seen = descendants(proc.pid)
        if sig == signal.SIGINT:
            # Another run on this machine comes and goes meanwhile: ours stays untouched.
            other = run_reme(["eval", *common(toy_world, payloads.url), "benchmark.task_ids=[toy0003_1]",
                              "out_dir=other"], tmp_path)
            assert other.returncode == 0, other.stderr[-2000:]
            assert sorted(still_running(seen)) == sorted(f"{p} {c}" for p, (_, c) in seen.items())
        started = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err[-2000:]
    assert took < 15, took  # not the step's 100 s
    assert wait_for(lambda: not still_running(seen), 10), still_running(seen)
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "interrupted"


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_kill_9_of_reme_leaves_no_process_and_the_next_run_clears_its_folder(toy_world, tmp_path, sandbox):
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    with scripted_server_process("--policy", "appworld-gold", "--appworld-root", str(toy_world),
                                 "--delay", "60") as url:
        env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(own_tmp)}
        proc = reme_popen(["eval", *common(toy_world, url),
                           "llm.concurrency=3", f"benchmark.sandbox={sandbox}", "out_dir=run"],
                          cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Three episodes wait on the model, each in its process under its supervisor (the
            # venv's python at its host path, or inside the sandbox at its fixed one).
            episodes = lambda: [p for p, (_, cmd) in descendants(proc.pid).items()  # noqa: E731
                                if cmd.split(" ")[0].endswith("appworld-venv/bin/python") and "worker.py" in cmd]
            assert wait_for(lambda: len(episodes()) == 6, 240), descendants(proc.pid)
            time.sleep(1)
            seen = descendants(proc.pid)
            proc.kill()
            proc.wait()
            left = wait_for(lambda: not still_running(seen), 15) or still_running(seen)
        finally:
            proc.kill()
    assert left is True, left
    (private,) = own_tmp.glob(f"{PRIVATE_PREFIX}*")  # left by the kill, marked with its owner
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    live = private_tempdir(PRIVATE_PREFIX, str(own_tmp))  # a live run's (this one's)
    assert clean_stale_tempdirs(PRIVATE_PREFIX, str(own_tmp)) == [private]
    assert not private.exists() and live.exists()
    shutil.rmtree(live)


def test_worker_logs_are_in_a_fresh_private_directory(toy_world, tmp_path, monkeypatch):
    # What another user could plant at a fixed name in a shared $TMPDIR.
    shared = Path(tempfile.mkdtemp())
    try:
        (shared / "reme-appworld-workers").mkdir()
        victim = tmp_path / "victim"
        victim.write_text("untouched")
        (shared / "reme-appworld-workers" / "worker-1.log").symlink_to(victim)
        monkeypatch.setattr(tempfile, "tempdir", str(shared))
        bench = AppWorldBenchmark(AppWorldConfig(data_dir=str(toy_world), split="train"))

        async def one_episode() -> tuple[Path, Path]:
            env = await bench.open(bench.load("toy0001_1"), "k")
            private = bench._processes.dir
            try:
                assert (await env.execute("execute", {"code": "print(1 + 1)"})).output.strip() == "2"
                log = Path(env.worker.stderr_path)
            finally:
                await env.close()
            info = private.stat()
            assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
            await bench.aclose()
            return log, private

        log, private = asyncio.run(one_episode())
        assert log.parent == private and private.parent == shared
        assert not private.exists()  # removed at exit when no process failed
        assert victim.read_text() == "untouched"
        assert sorted(p.name for p in shared.iterdir()) == ["reme-appworld-workers"]
    finally:
        shutil.rmtree(shared)


# ------------------------------------------------------------------ without a sandbox


def test_without_a_sandbox_the_run_stops_unless_none_is_asked_for(toy_world, tmp_path):
    no_bwrap = {"REME_BWRAP": str(tmp_path / "no-bwrap")}  # a machine without bubblewrap
    refused = run_reme(["eval", *common(toy_world, "http://127.0.0.1:9/v1"), "benchmark.task_ids=[toy0001_1]",
                        "out_dir=refused"], tmp_path, env=no_bwrap)
    assert refused.returncode == 2
    (line,) = [l for l in refused.stderr.splitlines() if l.strip()]
    assert line.startswith("error:") and "bubblewrap" in line and "benchmark.sandbox=none" in line
    assert not (tmp_path / "refused").exists()

    # Asked for: hostile code runs on the host (so the tests above test the sandbox, not
    # AppWorld's own checks), and the run says so.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    steps = [sneak(f"import ctypes\nprint(ctypes.CDLL(None).system(b'touch {outside}/CTYPES'))"),
             f"import os; os.makedirs('{outside}/NEW')",
             f"import pathlib; print(pathlib.Path('{outside}/secret.txt').read_text())", FINISH]
    replies = [a for s in steps for a in ("--step", f"I will run it.\n```python\n{s}\n```")]
    with scripted_server_process("--policy", "steps", *replies) as url:
        proc, seen = run_watched(["eval", *common(toy_world, url), "benchmark.task_ids=[toy0001_1]",
                                  "benchmark.sandbox=none", "out_dir=run"], tmp_path, env=no_bwrap)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in outside.iterdir()) == ["CTYPES", "NEW", "secret.txt"]
    (rec,) = trials(tmp_path / "run").values()
    assert SECRET in outputs(rec)[2]
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["sandbox"] == "none"
    assert "sandbox: none (benchmark.sandbox=none" in " ".join(proc.stderr.split())  # the final table says it
    assert still_running(seen) == []  # every process it started ended with it


def test_a_worker_forked_from_a_passing_thread_outlives_the_thread_but_not_reme(tmp_path):
    """The parent-death signal (ours, and bwrap's --die-with-parent) belongs to the thread
    that forks: a server started from a thread that then ends must keep running."""
    tag = f"300.{uuid.uuid4().int % 10**12:012d}"  # a sleep no other process has
    program = f"""
import sys, threading, time
from reme_cli.bench.sandbox import Bwrap, find_binary
from reme_cli.llm.local_server import LocalServer

class Sleeper(LocalServer):
    def _prepare(self): return ""
    def command(self, model_path, port):
        return [find_binary(Bwrap()).path, "--ro-bind", "/", "/", "--die-with-parent", "--", "sleep", {tag!r}]
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
        seen = {p: v for p, v in descendants(proc.pid).items() if tag in v[1]}
        assert seen
        proc.kill()
        proc.wait()
        assert wait_for(lambda: not still_running(seen), 10)
    finally:
        proc.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_a_joblib_suite_stops_its_jobs(tmp_path, sig):
    with scripted_server_process("--policy", "bfcl-replay", "--delay", "60") as url:
        args = ["ablate", "table1", "model=qwen3-8b", "embedding=minilm",
                "benchmark.release=current", f"llm.base_url={url}", "llm.model=replay", "benchmark.limit=1",
                "eval.runs=1", "eval.seeds=1", "--launcher", "joblib", "--jobs", "2", "--only", "no_memory"]
        env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")}
        proc = reme_popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        jobs = lambda: {p: v for p, v in descendants(proc.pid).items() if "reme_cli.cli eval" in v[1]}  # noqa: E731
        try:
            assert wait_for(jobs, 120), "the suite started no job"
            run = next((tmp_path / "runs" / "ablate").iterdir()) / "runs" / "no_memory"
            assert wait_for(lambda: (run / "manifest.json").exists(), 60)  # the job waits on the model
            seen = jobs()
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=120)
            if sig == signal.SIGTERM:
                assert proc.returncode == 143, err[-2000:]
                assert not still_running(seen)  # stopped before the suite exits
            assert wait_for(lambda: not still_running(seen), 15), still_running(seen)
        finally:
            proc.kill()
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"

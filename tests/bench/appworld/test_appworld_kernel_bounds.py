"""The sandbox's boundary, round four (issue 55): what the kernel holds for an episode, the CPU
its threads use, the counts the kernel keeps per user and the channel to its supervisor are
the episode's to exhaust or break, never the host's or reme's.

One run on the toy world carries every payload, each in a unit of its own, answered step by
step by a scripted server (a TEST DOUBLE, ``Payloads`` of tests/bench/appworld/test_appworld_sandbox.py)
that, before some steps, "thinks" until something holds on this machine (``Model``); each
test reads that run. AppWorld's import denylist is bypassed as an adversary would (``sneak``).
As root each sandbox runs as a host uid of its own; as a user, as that user: every payload
here is what the issue's review ran, in both."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping

import pytest

from reme_cli.bench import sandbox
from reme_cli.bench.appworld.config import AppWorldConfig
from reme_cli.testing.scripted_server import Reply, ScriptedServer
from tests.conftest import descendants, reme_popen
from tests.bench.appworld.test_appworld_sandbox import Payloads, aw_eval, by_unit, outputs, sneak

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

BOUNDS = ["benchmark.memory_mb=256", "benchmark.disk_mb=64", "benchmark.timeout=5", "benchmark.episode_timeout=6"]

# 1,200,000 empty files with 190-character names (the review's: 1.46 GB of slab, 256 MB asked),
# then a few thousand in /dev/shm: each pins kernel memory that tmpfs's size= does not count.
INODES = sneak("""
    import posix, stat
    def fill(folder, n):
        made = 0
        try:
            for i in range(n):
                posix.mknod(folder + '/%0190d' % i, stat.S_IFREG | 0o600)
                made += 1
        except OSError as e:
            return made, errno.errorcode[e.errno]
        return made, 'all'
    import errno
    for folder, n in [('/appworld/tmp', 1200000), ('/dev/shm', 20000)]:
        made, why = fill(folder, n)
        print('FILES', folder, made, why, posix.statvfs(folder).f_files)
""")
# What the kernel counts per user: a user's 128 inotify instances (held, not closed), a
# fanotify group, POSIX timers (each holds a queued signal), a pipe's buffer made 1 MB,
# keyrings, a user namespace, a message queue.
PER_USER = sneak("""
    import ctypes, errno, fcntl, os
    libc = ctypes.CDLL(None, use_errno=True)
    held, got = [], {}
    def count(name, call, n):
        made = 0
        for i in range(n):
            r = call()
            if r < 0:
                got[name + '_refused'] = errno.errorcode[ctypes.get_errno()]
                break
            held.append(r)
            made += 1
        got[name] = made
    timer = ctypes.c_void_p()
    count('inotify', lambda: libc.inotify_init1(0), 200)
    count('fanotify', lambda: libc.fanotify_init(0, 0), 1)
    count('timers', lambda: libc.timer_create(1, None, ctypes.byref(timer)), 5000)
    count('keyring', lambda: libc.syscall(250, 0, -3, 1), 1)  # keyctl(GET_KEYRING_ID, session, create)
    count('userns', lambda: libc.unshare(0x10000000), 1)
    count('mqueue', lambda: libc.syscall(240, b'/reme', os.O_CREAT | os.O_RDWR, 0o600, None), 1)
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
        got['pipe_1mb'] = 'done'
    except OSError as e:
        got['pipe_1mb'] = errno.errorcode[e.errno]
    print('PER_USER', sorted(got.items()))
""")
# The channel to the supervisor, found as the review found it, and written to mid-step.
CHANNEL = sneak("""
    import posix, stat
    for fd in range(3, 300):
        try:
            if stat.S_ISSOCK(posix.fstat(fd).st_mode):
                posix.write(fd, b'{}\\n')
                print('WROTE', fd)
        except OSError:
            pass
""")
# Eight threads hashing (hashlib lets go of the GIL), left running while the model thinks.
THREADS = sneak("""
    import hashlib, threading
    threading.stack_size(256 * 1024)  # eight threads in a 256 MB bound
    def spin():
        h, block = hashlib.sha256(), b'x' * (1 << 20)
        while True:
            h.update(block)
    for i in range(8):
        threading.Thread(target=spin, daemon=True).start()
    print('SPINNING')
""")
CPU_UNIT = ("toy0001_1", 1)
OVER = 24.0  # CPU seconds of the episode's process that mean nothing stopped it (its bound: 6)


class Model(Payloads):
    """``Payloads``; before step ``think[unit]`` of a unit, it thinks until the episode's
    process (a worker.py forked by a worker.py, in reme's tree) is gone or has used ``OVER``
    seconds of CPU, and before the second step of the per-user unit it asks the kernel for an
    inotify instance of its own (as the user running reme does)."""

    def __init__(self) -> None:
        super().__init__()
        self.reme_pid: int | None = None
        self.thought: dict[tuple[str, int], str] = {}
        self.inotify: int | None = None

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        m = re.fullmatch(r"s\d+_r(\d+)_(.+)_[0-9a-f]{8}", headers.get("X-Reme-Episode", ""))
        unit = (m.group(2), int(m.group(1))) if m else None
        step = sum(1 for x in body.get("messages") or [] if x.get("role") == "assistant")
        if unit == CPU_UNIT and step == 1:
            self.thought[unit] = self._think()
        if unit == ("toy0002_1", 0) and step == 1:
            self.inotify = _inotify_errno()
        return super().reply(body, headers)

    def _think(self, patience: float = 300) -> str:
        deadline = time.monotonic() + patience
        pid = None
        while pid is None and time.monotonic() < deadline:
            pid = _episode(self.reme_pid)
            time.sleep(0.2)
        while pid is not None and time.monotonic() < deadline:
            cpu = _cpu(pid)
            if cpu is None:
                return "gone"
            if cpu > OVER:
                return f"over: {cpu:.1f} s of CPU"
            time.sleep(0.2)
        return "still running" if pid else "never seen"


def _inotify_errno() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd < 0:
        return ctypes.get_errno()
    os.close(fd)
    return 0


def _episode(root: int) -> int | None:
    """The episode's process in ``root``'s tree: AppWorld's interpreter forked by AppWorld's
    interpreter (the supervisor; not bwrap, whose command line names worker.py too)."""
    tree = descendants(root)
    workers = {pid for pid, (_, cmd) in tree.items()
               if cmd.split(" ")[0].endswith("appworld-venv/bin/python") and "worker.py" in cmd}
    return next((pid for pid in workers if (_stat(pid) or [None, -1])[1] in workers), None)


def _stat(pid: int) -> list | None:
    """(state, parent pid, CPU seconds of all its threads) of a process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return [fields[0], int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")]


def _cpu(pid: int) -> float | None:
    """The CPU seconds ``pid`` used, None once it has exited (a zombie until its parent reaps it)."""
    stat = _stat(pid)
    return None if stat is None or stat[0] == "Z" else stat[2]


@pytest.fixture(scope="module")
def round_four(toy_world, tmp_path_factory):
    """The run (3 tasks x 2 runs, one episode at a time), and the same command again."""
    model = Model()
    model.by_unit = {("toy0001_1", 0): [INODES], ("toy0002_1", 0): [PER_USER, "print('after')"],
                     ("toy0003_1", 0): [CHANNEL, "print('after')"], CPU_UNIT: [THREADS, "print('after')"]}
    cwd = tmp_path_factory.mktemp("round-four")
    with ScriptedServer(model) as server:
        args = aw_eval(toy_world, server.base_url, *BOUNDS, "out_dir=run")
        env = {**os.environ, "REME_CACHE_DIR": str(cwd / "cache")}
        proc = reme_popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        model.reme_pid = proc.pid
        _, err = proc.communicate(timeout=1200)
        first = (cwd / "run" / "trials.jsonl").read_text()
        again = reme_popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, again_err = again.communicate(timeout=600)
    return {"code": proc.returncode, "stderr": err, "units": by_unit(cwd / "run"), "model": model, "first": first,
            "again": (again.returncode, again_err, (cwd / "run" / "trials.jsonl").read_text()),
            "manifest": json.loads((cwd / "run" / "manifest.json").read_text())}


def test_the_run_finishes_every_unit_and_the_bounds_it_used_are_recorded(round_four):
    assert round_four["code"] == 0, round_four["stderr"][-3000:]
    assert all(r["error"] is None for r in round_four["units"].values()), round_four["units"]
    detail = round_four["manifest"]["sandbox_detail"]
    scratch = AppWorldConfig(memory_mb=256, disk_mb=64).limits().scratch()
    assert detail["mechanisms"] == {"kernel_memory": "tmpfs nr_inodes", "cpu": "RLIMIT_CPU"}, detail
    assert detail["inodes"] == {"/appworld": scratch.inodes, "/dev/shm": sandbox.SHM_INODES}, detail


def test_files_an_episode_makes_count_against_its_memory(round_four):
    """1.2 million empty files: the scratch space holds as many inodes as memory_mb allows
    (6,144 at 256 MB: 12 MB of kernel memory), /dev/shm 64; the episode ends with disk_limit."""
    rec = round_four["units"]["toy0001_1", 0]
    text = outputs(rec)[0]
    made = {folder: (int(n), why, int(total)) for folder, n, why, total in
            re.findall(r"FILES (\S+) (\d+) (\S+) (\d+)", text)}
    scratch = AppWorldConfig(memory_mb=256, disk_mb=64).limits().scratch()
    assert made["/appworld/tmp"][1:] == ("ENOSPC", scratch.inodes), text
    assert scratch.inodes - 100 < made["/appworld/tmp"][0] < scratch.inodes, text  # the layout holds a few
    assert made["/dev/shm"][1:] == ("ENOSPC", sandbox.SHM_INODES) and made["/dev/shm"][0] < sandbox.SHM_INODES, text
    assert scratch.kernel_bytes() < (64 + 16) << 20
    assert rec["stop_reason"] == "disk_limit" and rec["trajectory"]["limits"][0]["limit"] == "disk", rec["trajectory"]
    assert "inodes" in rec["trajectory"]["stop_detail"]


def test_the_sandbox_leaves_the_users_kernel_counts_alone(round_four):
    """Refused: inotify and fanotify, a bigger pipe, keyrings, user namespaces, message queues;
    POSIX timers stop at the episode's 64 queued signals. The user running reme (as a user:
    the sandbox's own) still gets an inotify instance while the episode holds what it got."""
    assert round_four["model"].inotify == 0, errno.errorcode.get(round_four["model"].inotify)
    rec = round_four["units"]["toy0002_1", 0]
    got = dict(re.findall(r"\('(\w+)', '?(\w+)'?\)", outputs(rec)[0]))
    assert got["inotify"] == "0" and got["inotify_refused"] == "EPERM", got
    assert got["fanotify"] == "0" and got["fanotify_refused"] == "EPERM", got
    assert int(got["timers"]) <= 64 and got["timers_refused"] == "EAGAIN", got
    assert got["pipe_1mb"] == "EPERM", got
    assert {got[k + "_refused"] for k in ("keyring", "userns", "mqueue")} == {"EPERM"}, got
    assert rec["stop_reason"] == "answered", rec["stop_reason"]


def test_an_episodes_threads_get_its_episode_seconds_of_cpu_while_the_model_thinks(round_four):
    """Eight hashing threads left running after step 1: the kernel kills the episode's
    process at its 6 s of CPU (RLIMIT_CPU counts every thread) while the model still thinks,
    and the next step finds it gone: time_limit, the CPU it used recorded."""
    model = round_four["model"]
    assert model.thought[CPU_UNIT] == "gone", model.thought
    rec = round_four["units"][CPU_UNIT]
    assert outputs(rec)[0].strip() == "SPINNING"
    assert rec["stop_reason"] == "time_limit" and rec["error"] is None, rec["stop_reason"]
    (limit,) = rec["trajectory"]["limits"]
    used = float(re.search(r"used ([\d.]+) s of CPU", limit["detail"]).group(1))
    assert limit["limit"] == "time" and used <= 6.5, limit
    assert "benchmark.episode_timeout is 6 s" in rec["trajectory"]["stop_detail"]


def test_a_malformed_message_on_the_channel_is_the_episodes_failure_and_a_resume_keeps_it(round_four):
    """'{}' on the supervisor's socket mid-step: the episode crashed (scored, the reason
    recorded), not reme's error (exit 0), and the same command again finds nothing to redo."""
    rec = round_four["units"]["toy0003_1", 0]
    assert rec["stop_reason"] == "crashed" and rec["error"] is None and rec["success"] is False, rec
    assert "broke the channel to its supervisor: no 'output'" in rec["trajectory"]["stop_detail"], rec["trajectory"]
    assert len(outputs(rec)) == 1  # the episode ended at that step
    code, err, trials = round_four["again"]
    assert code == 0, err[-3000:]
    assert trials == round_four["first"]  # nothing retried

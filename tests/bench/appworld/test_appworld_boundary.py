"""The sandbox's boundary, round three (issue 45): the model's code never acts as host root,
reaches neither its supervisor nor the next episode, holds no memory outside its bound, and
AppWorld runs from any install path.

Every payload runs against the real sandbox on the toy world, answered step by step by a
scripted server (a TEST DOUBLE, tests/bench/appworld/test_appworld_sandbox.py's ``Payloads``); AppWorld's
import denylist is bypassed as an adversary would (``sneak``). Where an old sandbox would
have let a payload change the host, the payload writes back the value it read: the refusal
is what is tested, never a change."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

import pytest

from reme_cli.bench import sandbox
from tests.conftest import run_reme, run_watched, scripted_server_process
from tests.bench.appworld.test_appworld import common
from tests.bench.appworld.test_appworld_sandbox import (VENV_SITE, WALK, aw_eval, by_unit, outputs,  # noqa: F401 - a fixture
                                         payloads, sneak)

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)


def host_uid(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))


# ------------------------------------------------------------------ never host root


SYSCTLS = sneak("""
    import _io, time
    def attempt(path):
        try:
            value = _io.FileIO(path).read()
        except OSError as e:
            return 'unreadable %d' % e.errno
        try:
            f = _io.FileIO(path, 'w')
            f.write(value)  # the value it has: what is tested is the refusal, never a change
            f.close()
            return 'WROTE'
        except OSError as e:
            return 'refused %d' % e.errno
    for p in ['/proc/sys/kernel/core_pattern', '/proc/sys/fs/lease-break-time', '/proc/sys/kernel/pid_max']:
        print('SYSCTL', p, attempt(p))
    try:
        _io.FileIO('/proc/sysrq-trigger', 'w').close()  # opened only, never written
        print('SYSRQ opened')
    except OSError as e:
        print('SYSRQ refused', e.errno)
    time.sleep(2)  # the test samples the host uid meanwhile
""")
THREADS = sneak("""
    import threading
    threading.stack_size(256 * 1024)
    stop, n = threading.Event(), 0
    try:
        for i in range(300):
            threading.Thread(target=stop.wait, daemon=True).start()
            n += 1
    except RuntimeError:
        pass
    stop.set()
    print('THREADS', n)
""")


def test_model_code_never_acts_as_host_root(toy_world, tmp_path, payloads):
    payloads.by_unit = {("toy0001_1", 0): [SYSCTLS, THREADS]}
    uids: dict[int, tuple[str, int | None]] = {}

    def watch(pid: int) -> None:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes() if Path(f"/proc/{pid}").exists() else b""
        for script in (b"worker.py", b"evaluator.py"):
            if script in cmd and pid not in uids:
                uids[pid] = (script.decode(), host_uid(pid))

    proc, _ = run_watched(aw_eval(toy_world, payloads.url, "eval.runs=1", "benchmark.task_ids=[toy0001_1]",
                                  "out_dir=run"), tmp_path, watch=watch, every=0.1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = outputs(by_unit(tmp_path / "run")["toy0001_1", 0])
    # /proc/sys is read-only whatever the uid (EROFS), and sysrq cannot be opened for writing.
    assert first[0].count("SYSCTL") == 3 and "WROTE" not in first[0], first[0]
    assert all(re.search(r"refused (30|13)$", line) for line in first[0].splitlines() if "SYSCTL" in line)
    assert "SYSRQ refused" in first[0]
    # RLIMIT_NPROC binds: the host uid is not 0 (the default max_threads is 64, the supervisor
    # and the episode's main thread among them).
    started = int(re.search(r"THREADS (\d+)", first[1]).group(1))
    assert 40 < started < 64, first[1]
    # As root, each sandbox runs as an unprivileged host uid of its own; otherwise as the user.
    workers = {u for kind, u in uids.values() if kind == "worker.py"}
    evaluators = {u for kind, u in uids.values() if kind == "evaluator.py"}
    assert workers and evaluators, uids
    if os.geteuid() == 0:
        assert all(u is not None and u >= sandbox.HOST_UID_BASE for u in workers | evaluators), uids
        assert not workers & evaluators, uids
    else:
        assert workers | evaluators == {os.getuid()}, uids


# ------------------------------------------------------------------ neither the supervisor nor the next episode


CHECK = sneak(WALK, """
    import os, posix, resource
    print('NICE', os.getpriority(os.PRIO_PROCESS, 0))
    print('CPUS', len(os.sched_getaffinity(0)))
    print('MSGQ', resource.getrlimit(resource.RLIMIT_MSGQUEUE))
    print('SEEN', sorted(p for p in walk('/appworld', 4) + walk('/dev/shm', 4)
                         if '/base_dbs/' not in p and '/api_docs/' not in p))
    print('BASE', sorted(posix.listdir('/appworld/data/base_dbs')))
""")
PLANT = sneak("""
    import errno, fcntl, os, resource, signal, socket, struct, _io
    a, b = socket.socketpair()
    done = {}
    for name, call in [
            ('F_SETOWN', lambda: fcntl.fcntl(a, fcntl.F_SETOWN, 1)),  # pid 1: the supervisor
            ('F_SETSIG', lambda: fcntl.fcntl(a, 10, signal.SIGINT)),
            ('F_SETOWN_EX', lambda: fcntl.fcntl(a, 15, struct.pack('ii', 1, 1))),
            ('FIOSETOWN', lambda: fcntl.ioctl(a, 0x8901, struct.pack('i', 1))),
            ('O_ASYNC', lambda: fcntl.fcntl(a, fcntl.F_SETFL, os.O_ASYNC)),
            ('PRLIMIT', lambda: resource.prlimit(1, resource.RLIMIT_MSGQUEUE, (4096, 4096))),
            ('SETPRIORITY', lambda: os.setpriority(os.PRIO_PROCESS, 1, 19)),
            ('PRIO_USER', lambda: os.setpriority(os.PRIO_USER, 0, 19)),
            ('AFFINITY', lambda: os.sched_setaffinity(1, {0})),
            ('VSOCK', lambda: socket.socket(40, socket.SOCK_STREAM)),
            ('NETLINK', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
            ('MEMFD', lambda: os.memfd_create('x'))]:
        try:
            call()
            done[name] = 'done'
        except OSError as e:
            done[name] = errno.errorcode[e.errno]
    b.send(b'x')  # with an owner and O_ASYNC, a signal to that owner
    for path in ['/appworld/persist.txt', '/appworld/data/planted/x.jsonl', '/appworld/experiments/planted.txt',
                 '/appworld/data/tasks/planted.txt', '/dev/shm/planted']:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _io.FileIO(path, 'w').write(b'from an earlier episode')
    print('PLANT', sorted(done.items()))
""")
BREAK = sneak("""
    import os, _io
    for how, call in [('RENAME', lambda: os.rename('/appworld/data', '/appworld/moved')),
                      ('MKDIR', lambda: os.makedirs('/appworld/data/base_dbs', exist_ok=True)),
                      ('FAKE', lambda: _io.FileIO('/appworld/data/base_dbs/planted.jsonl', 'w').write(b'{}'))]:
        try:
            call()
            print(how, 'done')
        except OSError as e:
            print(how, 'refused', e.errno)
""")
SURROGATES = ["print('\\udcff')", "raise ValueError('\\ud800 lone')"]


def test_an_episode_reaches_neither_its_supervisor_nor_the_next_episode(toy_world, tmp_path, payloads):
    # One supervisor at a time (llm.concurrency=1), units in order: run 0 of the three
    # tasks, then run 1. Each unit first looks at what it was given (CHECK).
    payloads.by_unit = {
        ("toy0001_1", 0): [CHECK, PLANT, *SURROGATES],
        ("toy0002_1", 0): [CHECK, BREAK],  # a layout the supervisor cannot wipe back: a fresh one next
        ("toy0003_1", 0): [CHECK],
        ("toy0001_1", 1): [CHECK],
        ("toy0002_1", 1): [CHECK],
        ("toy0003_1", 1): [CHECK],
    }
    proc = run_reme(aw_eval(toy_world, payloads.url, "out_dir=run"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    units = by_unit(tmp_path / "run")
    assert all(r["error"] is None and r["stop_reason"] == "answered" for r in units.values()), \
        {k: (r["stop_reason"], r["error"]) for k, r in units.items()}
    planter = outputs(units["toy0001_1", 0])
    plant = dict(re.findall(r"\('(\w+)', '(\w+)'\)", planter[1]))
    assert plant == {"F_SETOWN": "EPERM", "F_SETSIG": "EPERM", "F_SETOWN_EX": "EPERM", "FIOSETOWN": "EPERM",
                     "O_ASYNC": "done", "PRLIMIT": "EPERM", "SETPRIORITY": "EPERM", "PRIO_USER": "EPERM",
                     "AFFINITY": "EPERM", "VSOCK": "EAFNOSUPPORT", "NETLINK": "EAFNOSUPPORT", "MEMFD": "EPERM"}, planter[1]
    # Output UTF-8 cannot hold is escaped, and the episode went on to its next step.
    assert planter[2].strip() == "\\udcff" and "ValueError: \\ud800 lone" in planter[3], planter[2:]
    # Every episode, the planter's own first look included, starts from the same state.
    base = sorted(p.name for p in (toy_world / "data" / "base_dbs").iterdir())
    checks = {k: outputs(r)[0] for k, r in units.items()}
    baseline = checks["toy0001_1", 0]
    for key, text in checks.items():
        for what in ("NICE", "CPUS", "MSGQ"):
            assert re.search(rf"^{what} .*$", text, re.M).group(0) == re.search(rf"^{what} .*$", baseline,
                                                                                  re.M).group(0), (key, text)
        assert "planted" not in text and "persist" not in text and "moved" not in text, (key, text)
        assert f"BASE {base}" in text, (key, text)
    assert "NICE 0" in baseline


# ------------------------------------------------------------------ memory


HOARD = sneak("""
    import os, posix, _io
    MB = b'x' * 2 ** 20
    held, files, got = [], [], {'memfd': 0, 'shm': 0, 'tmp': 0, 'anon': 0}
    try:
        try:
            fd = os.memfd_create('hoard')
            for i in range(400):  # a bounded hoard: 400 MB at most, even where nothing refuses it
                os.write(fd, MB)
                got['memfd'] += 1
        except OSError as e:
            got['memfd_refused'] = e.errno
        for name, path in [('shm', '/dev/shm/hoard'), ('tmp', '/tmp/hoard')]:
            try:
                f = _io.FileIO(path, 'w')
                files.append(f)
                for i in range(400):
                    f.write(MB)
                    got[name] += 1
            except OSError:
                pass
        try:
            while got['anon'] < 400:
                held.append(bytearray(2 ** 24))
                got['anon'] += 16
        except MemoryError:
            pass
        total = got['memfd'] + got['shm'] + got['tmp'] + got['anon']
    finally:
        del held[:]
        for f in files:
            f.close()
        posix.unlink('/tmp/hoard')  # room for AppWorld to save the world (it makes os.unlink a no-op)
    print('HELD', sorted(got.items()))
    print('TOTAL', total)
""")


def test_memory_written_anywhere_counts_against_the_memory_bound(toy_world, tmp_path, payloads):
    payloads.by_unit = {("toy0001_1", 0): [HOARD]}
    proc = run_reme(aw_eval(toy_world, payloads.url, "eval.runs=1", "benchmark.task_ids=[toy0001_1]",
                            "benchmark.memory_mb=256", "benchmark.disk_mb=64", "out_dir=run"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,) = by_unit(tmp_path / "run").values()
    text = outputs(rec)[0]
    held = dict(re.findall(r"\('(\w+)', (\d+)\)", text))
    assert held.get("memfd_refused") == "1" and held["memfd"] == "0", text  # EPERM
    assert int(held["tmp"]) <= 64 and int(held["shm"]) <= 1, text
    # Everything it held at once: within memory_mb (the address space gets what the tmpfs
    # mounts do not), give or take the last allocation.
    assert 150 < int(re.search(r"TOTAL (\d+)", text).group(1)) <= 256, text
    assert rec["stop_reason"] == "answered" and rec["error"] is None


# ------------------------------------------------------------------ a clone anywhere


@pytest.mark.parametrize("where", ["/tmp", "/var/tmp", "/dev/shm"])
def test_appworld_runs_whatever_the_install_path(toy_world, tmp_path, where):
    """The venv and the task data under a folder the sandbox makes a mount point of (its /tmp
    is a link, its /dev/shm a tmpfs), with a space in the path, reached through a link (a
    symlinked home): the gold solution still scores."""
    base = Path(where) / f"reme test {uuid.uuid4().hex[:8]}"
    try:
        (base / "real home").mkdir(parents=True)
        (base / "home").symlink_to(base / "real home")
        venv = base / "home" / "appworld venv"
        venv.symlink_to(VENV_SITE)
        data = base / "home" / "appworld data"
        shutil.copytree(toy_world / "data", data / "data")
        with scripted_server_process("--policy", "appworld-gold", "--appworld-root", str(data)) as url:
            proc = run_reme(["eval", *common(data, url), "benchmark.task_ids=[toy0002_1]", f"benchmark.venv={venv}",
                             "out_dir=run"], tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (rec,) = by_unit(tmp_path / "run").values()
        assert rec["success"], rec
    finally:
        shutil.rmtree(base, ignore_errors=True)

"""The out-of-process environment pattern (reme_cli/bench/worker.py), on a tiny real worker:
answers, a per-call timeout that kills a hung worker, a crash reported as WorkerCrashed,
restart, and close (also when cancelled) leaving no process behind."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap

import pytest

from reme_cli.bench.worker import Worker, WorkerCrashed

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

SCRIPT = textwrap.dedent('''
    import json, os, sys, time
    for line in sys.stdin:
        req = json.loads(line)
        m, p = req["method"], req["params"]
        if m == "echo":
            out = {"id": req["id"], "result": p}
        elif m == "fail":
            out = {"id": req["id"], "error": "the environment said no"}
        elif m == "hang":
            time.sleep(60)
            continue
        elif m == "die":
            os._exit(3)
        print(json.dumps(out), flush=True)
''')


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def worker(timeout: float = 5.0) -> Worker:
    return Worker([sys.executable, "-c", SCRIPT], timeout=timeout)


def test_calls_answer_and_environment_errors_leave_the_worker_intact():
    async def go():
        w = await worker().start()
        assert await w.call("echo", {"x": 1}) == {"x": 1}
        with pytest.raises(RuntimeError, match="the environment said no"):
            await w.call("fail")
        assert await w.call("echo", {"x": 2}) == {"x": 2}
        pid = w.pid
        await w.close()
        return pid

    assert not alive(asyncio.run(go()))


def test_a_hung_worker_is_killed_at_the_timeout_and_restarts():
    async def go():
        w = await worker(timeout=0.5).start()
        pid = w.pid
        with pytest.raises(WorkerCrashed, match="did not answer 'hang' within 0.5s"):
            await w.call("hang")
        assert not alive(pid)
        await w.restart()
        assert w.pid != pid and await w.call("echo", {"ok": True}) == {"ok": True}
        await w.close()

    asyncio.run(go())


def test_a_worker_that_dies_mid_call_is_reported_with_its_exit():
    async def go():
        w = await worker().start()
        with pytest.raises(WorkerCrashed, match=r"exited during 'die' \(exit code 3\)"):
            await w.call("die")
        with pytest.raises(WorkerCrashed, match="not running"):
            await w.call("echo")
        await w.close()

    asyncio.run(go())


def test_cancelling_an_episode_kills_its_worker():
    async def go():
        w = await worker(timeout=30).start()
        pid = w.pid
        task = asyncio.ensure_future(w.call("hang"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await w.close(grace=0.5)  # what an Env's close does on Ctrl-C
        return pid

    assert not alive(asyncio.run(go()))

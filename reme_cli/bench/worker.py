"""Environments that live in another process: the pattern every such benchmark follows.

A benchmark whose environment cannot share reme's process (AppWorld: its own virtualenv,
one world per process, ``execute`` on the main thread) runs it in a worker process and
talks to it with one JSON object per line over stdin/stdout:

    request  {"id": 7, "method": "execute", "params": {...}}
    response {"id": 7, "result": ...}  or  {"id": 7, "error": "message"}

``Worker`` owns one such process:
- ``start()`` launches it in its own session (Ctrl-C reaches reme, not the worker), dying
  with reme even on ``kill -9`` (Linux: a parent-death signal);
- ``call()`` sends one request and waits at most ``timeout`` seconds; a worker that hangs
  past it is killed and ``WorkerCrashed`` raised, as is one that exits mid-call;
- ``close()`` asks it to exit, then kills it; ``kill()`` (on cancellation and Ctrl-C, and
  ``kill_now()`` at interpreter exit) does not wait for a step to end;
- ``restart()`` replaces a crashed worker, so the next episode gets a fresh one.
The episode that was running when a worker crashed gets the ``WorkerCrashed`` error,
which the runner records with its traceback: the unit is an error, retried on resume,
never silently dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any


class WorkerCrashed(RuntimeError):
    """The worker process died, hung past its timeout, or broke the protocol."""


class Worker:
    def __init__(self, argv: Sequence[str], timeout: float = 100.0, env: dict[str, str] | None = None,
                 cwd: str | None = None, stderr_path: str | None = None, line_limit: int = 64 * 1024 * 1024,
                 preexec: Callable[[], None] | None = None):
        self.argv = list(argv)
        self.preexec = preexec  # run in the forked child before anything else (the sandbox's, as root)
        self.timeout = timeout
        self.env = env
        self.cwd = cwd
        self.stderr_path = stderr_path
        self.line_limit = line_limit  # the longest answer read (an untrusted worker may send more)
        self._proc: asyncio.subprocess.Process | None = None
        self._die_with_parent: Callable[[], None] | None = None
        self._stderr = None
        self._ids = 0
        self._lock = asyncio.Lock()  # one request at a time: a worker runs one episode

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> Worker:
        if self._proc is None or self._proc.returncode is not None:
            from reme_cli.llm.local_server import die_with_parent  # here: never an import in the forked child

            self._die_with_parent = die_with_parent if sys.platform == "linux" else None
            self._stderr = open(self.stderr_path, "ab") if self.stderr_path else None  # noqa: SIM115
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=self._stderr or asyncio.subprocess.DEVNULL, env=self.env, cwd=self.cwd,
                start_new_session=True, limit=self.line_limit, preexec_fn=self._preexec)  # noqa: PLW1509
        return self

    def _preexec(self) -> None:
        if self.preexec is not None:
            self.preexec()
        if self._die_with_parent is not None:
            self._die_with_parent()  # after the preexec: a change of uid clears the parent-death signal

    async def call(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        async with self._lock:
            if self._proc is None or self._proc.returncode is not None:
                raise WorkerCrashed(f"worker {self.argv[0]} is not running (exit {self._exit_text()})")
            self._ids += 1
            line = json.dumps({"id": self._ids, "method": method, "params": params or {}}) + "\n"
            try:
                self._proc.stdin.write(line.encode())
                await self._proc.stdin.drain()
                raw = await asyncio.wait_for(self._proc.stdout.readline(), timeout or self.timeout)
            except asyncio.TimeoutError:
                await self.kill()
                raise WorkerCrashed(f"worker did not answer {method!r} within {timeout or self.timeout:g}s; "
                                    "killed") from None
            except (BrokenPipeError, ConnectionResetError):
                raw = b""
            except (ValueError, asyncio.LimitOverrunError):  # a line past line_limit
                await self.kill()
                raise WorkerCrashed(f"worker answered {method!r} with more than {self.line_limit} bytes; "
                                    "killed") from None
            if not raw:
                await self._reap()
                raise WorkerCrashed(f"worker exited during {method!r} ({self._exit_text()})")
            try:
                reply = json.loads(raw)
            except json.JSONDecodeError:
                await self.kill()
                raise WorkerCrashed(f"worker broke the protocol: {raw[:200]!r}") from None
            if reply.get("id") != self._ids:
                await self.kill()
                raise WorkerCrashed(f"worker answered request {reply.get('id')}, expected {self._ids}")
            if "error" in reply:
                raise RuntimeError(reply["error"])  # the environment's own error, worker intact
            return reply.get("result")

    def _exit_text(self) -> str:
        from reme_cli.llm.local_server import describe_exit

        code = self._proc.returncode if self._proc else None
        return "not started" if code is None else describe_exit(code)

    async def _reap(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 5)

    async def kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self.kill_now()
            await self._proc.wait()
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()  # its pipe's transport goes with the loop that made it
        self._close_stderr()

    def kill_now(self) -> None:
        """SIGKILL to the worker's process group, without waiting (usable outside the loop)."""
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)

    async def close(self, grace: float = 5.0) -> None:
        """Ask the worker to exit (EOF on stdin), then kill it; safe to call twice, and
        the kill happens even when the close itself is cancelled (Ctrl-C)."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except asyncio.TimeoutError:
                pass
            finally:
                await self.kill()
        self._close_stderr()

    async def restart(self) -> Worker:
        await self.kill()
        self._proc = None
        return await self.start()

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

"""The seam's side of a memory method: whatever every method's state needs.

- The start state is loaded once per run. Fixed mode shares it, read-only, with every unit.
- Dynamic mode gives each (seed, run) stream its own copy under ``streams/sN_rM/``,
  shared by all the workers of that stream (``eval.dynamic_workers``).
- A unit learns by proposing events; when it commits, the seam applies them to the state
  and appends one line to the stream's commit log, in commit order, *before* the unit's
  trial record is written. A unit that fails proposes nothing that stays.
- Resume replays the commit log of finished units onto a fresh copy of the start state
  (lines of units whose trial record never got written are dropped first), so a kill at
  any point neither loses nor doubles an update. If applying events fails half-way, the
  state is rebuilt the same way before the error goes on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from reme_cli.bench.base import Task
from reme_cli.core.io import append_lines, keep_units
from reme_cli.methods.base import Episode, Learned, Memory, MethodContext, NoMemory, Solved
from reme_cli.core.run_log import COMMIT_LOG, COMMITS, STREAMS_DIR


def stream_dir(run_path: Path, stream: tuple[int, int]) -> Path:
    """Where a dynamic stream keeps its memory's state inside the run directory."""
    return run_path / STREAMS_DIR / f"s{stream[0]}_r{stream[1]}"


def _guarded(state: Memory, learning: bool) -> Memory:
    state.learning = learning
    state.guard = threading.RLock()
    return state


class MemoryStreams:
    """Builds the ``Method`` the runner drives for each stream."""

    def __init__(self, plugin: type[Memory], ctx: MethodContext):
        self.ctx = ctx
        self.dynamic = ctx.cfg.eval.mode == "dynamic"
        self.start = _guarded(plugin.load(ctx), learning=False)
        self._fixed = StateStream(self.start, None)
        self._streams: dict[tuple[int, int], StateStream] = {}

    def method_for(self, stream: tuple[int, int]) -> StateStream:
        if not self.dynamic:
            return self._fixed
        # scope=experiment: the runs of a seed are one stream, keyed by its first unit's run.
        if stream not in self._streams:
            self._streams[stream] = self._open(stream)
        shared = self._streams[stream]
        shared.workers += 1
        return shared

    def _open(self, stream: tuple[int, int]) -> StateStream:
        return open_stream(self.start, stream_dir(self.ctx.run_path, stream), self.ctx.finished_units)


def training_stream(plugin: type[Memory], ctx: MethodContext) -> StateStream:
    """The one stream of a method that adapts on the training tasks (``reme build-pool``):
    its state under ``streams/s0_r0/`` of the build directory, walked by one worker."""
    stream = open_stream(_guarded(plugin.load_for_training(ctx), learning=False),
                         stream_dir(ctx.run_path, (0, 0)), ctx.finished_units)
    stream.workers = 1
    return stream


def open_stream(start: Memory, where: Path, finished_units: set[str]) -> StateStream:
    """A dynamic stream's state under ``where``: a copy of ``start`` brought forward by the
    commit log's finished units (the lines of any other unit are dropped first)."""
    where.mkdir(parents=True, exist_ok=True)
    log = CommitLog(where / COMMIT_LOG)
    committed = log.keep_only(finished_units)

    def rebuild(lines: list[dict[str, Any]]) -> Memory:
        state = _guarded(start.fork(where), learning=True)
        for line in lines:
            state.replay(line["events"])
        return state

    return StateStream(rebuild(committed), log, rebuild=rebuild, committed=len(committed), where=where)


class CommitLog:
    """One line per committed unit, in commit order: ``{"unit", "seq", "events"}``."""

    def __init__(self, path: Path):
        self.path = path

    def keep_only(self, finished_units: set[str]) -> list[dict[str, Any]]:
        return keep_units(COMMITS, self.path, finished_units)

    def read(self) -> list[dict[str, Any]]:
        return COMMITS.records(self.path)

    def append(self, unit: str, seq: int, events: list[dict[str, Any]]) -> None:
        append_lines(self.path, [{"unit": unit, "seq": seq, "events": events}])


class StateStream:
    """One state and the units that use it: the runner's ``Method``."""

    def __init__(self, state: Memory, log: CommitLog | None, rebuild: Any = None, committed: int = 0,
                 where: Path | None = None):
        self.state = state
        self.log = log  # None: fixed mode, the state is read-only
        self._rebuild = rebuild
        self.committed = committed
        self.where = where
        self.workers = 0  # the runner's streams (workers) that share this state
        self._pending: dict[str, Learned] = {}
        self._commit_lock = threading.Lock()

    async def solve(self, task: Task, episode: Episode, unit: str) -> Solved:
        state = self.state
        started = time.perf_counter()
        retrieval = await state.retrieve(task, unit)
        retrieval.latency_s = round(time.perf_counter() - started, 4)
        tried = await state.attempt(task, episode, retrieval)
        if self.log is None:
            return Solved(retrieval, {**retrieval.details, **tried.record})
        learned = await state.learn(task, tried, retrieval, unit)
        self._pending[unit] = learned
        return Solved(retrieval, {**learned.record, **tried.record})

    async def commit(self, unit: str, worker: int = 0) -> dict[str, Any]:
        return await asyncio.to_thread(self._commit, unit, worker)

    def _commit(self, unit: str, worker: int) -> dict[str, Any]:
        learned = self._pending.pop(unit, None)
        if self.log is None or learned is None:
            return {}
        with self._commit_lock, self.state.guard:
            try:
                applied = self.state.apply(learned.events, self.committed, worker)
                self.log.append(unit, self.committed, applied.events)
            except BaseException:
                # Half-applied events must not stay: back to start + committed units.
                self.state = self._rebuild(self.log.read())
                raise
            self.committed += 1
        return applied.record

    def discard(self, unit: str) -> None:
        self._pending.pop(unit, None)

    def finish(self) -> None:
        self.workers -= 1
        if self.log is not None and self.workers <= 0:
            with self.state.guard:
                self.state.save(self.where)


def no_memory() -> StateStream:
    """The ``Method`` of a run without memory (build-pool's sampling of training tasks)."""
    return StateStream(_guarded(NoMemory(), learning=False), None)

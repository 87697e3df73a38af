"""Run every unit of an evaluation concurrently, record each as it ends, resume on rerun.

The runner knows units, streams and records; what happens inside a unit is the memory
method's business (``Method.solve``), with the runner's ``Episode`` as its one tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import Counter
import signal
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from reme_cli.agent.loop import Sampling, run_episode
from reme_cli.agent.protocols import ToolProtocol
from reme_cli.agent.trajectory import guidance_as_sent
from reme_cli.bench.base import Benchmark, Task
from reme_cli.core.errors import Interrupted, RunAborted, os_error_message
from reme_cli.core.io import now
from reme_cli.core.trials import TRAJECTORY_FIELDS
from reme_cli.llm.answer_health import answer_tally
from reme_cli.llm.client import LLM, REPLAY_SCOPE, episode_affinity
from reme_cli.methods.base import Attempt, Method, MethodFactory, Solved
from reme_cli.run.plan import Unit
from reme_cli.run.progress import RunProgress
from reme_cli.run.records import RunDir, UnitRecord
from reme_cli.run.user_model import UserModel


HEALTH_POLL_S = 0.25
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def on_signals(callback: Callable[[int], None]) -> Iterator[None]:
    """Call ``callback(signum)`` on the first SIGINT or SIGTERM inside the running loop; a
    second Ctrl-C gets the default action (exit at once). Earlier handlers come back after,
    but SIGTERM's once a stop began: it stays ignored while the stop is recorded and the run
    unwinds. A stop is asked for once; a dying parent sends its parent-death SIGTERM again
    for each of its threads that exits (a joblib suite's), and a repeat killing the run
    midway would leave its manifest saying "running"."""
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    installed = []
    stopped = []

    def first(sig: int) -> None:
        for s in STOP_SIGNALS:
            loop.remove_signal_handler(s)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        installed.clear()
        stopped.append(sig)
        callback(sig)

    try:
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, first, sig)
            installed.append(sig)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / platform
        pass
    touched = bool(installed)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        if touched:
            for sig, handler in previous.items():
                if not (stopped and sig == signal.SIGTERM):
                    signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@dataclass
class EpisodeSettings:
    protocol: ToolProtocol
    temperature: float
    top_p: float | None  # None: not sent
    max_tokens: int | None
    seed_base: int
    extra_body: dict[str, Any] | None
    system_prompt: str | None
    max_interactions: int
    max_steps_per_turn: int | None
    max_stored_chars: int = 20_000  # per stored string of a unit record (eval.max_stored_chars)
    # Store the trajectories whole, whatever max_stored_chars says: build-pool's summarizer
    # reads them back from the records and must see what the episode was.
    whole_trajectories: bool = False
    top_k: int | None = None
    min_p: float | None = None
    history_reasoning: str = "drop"  # benchmark.history_reasoning
    fixed_seed: int | None = None  # model.sampling.seed: one seed on every call (None: per unit and trial)

    def sampling(self, seed: int | None) -> Sampling:
        """What each request of an episode sends, with ``seed``."""
        return Sampling(self.temperature, self.top_p, self.max_tokens, seed, self.extra_body,
                        top_k=self.top_k, min_p=self.min_p)


class Batches:
    """Batches of ``size`` consecutive units of each memory stream (by their position in it),
    each starting when the one before it has ended, finished, errored or skipped: the
    authors' AppWorld script, which gathers every task of a batch before it starts the next
    (65971baf run_appworld.py:58-107). Unit ``p`` of a stream is in batch ``p // size``; the
    stream's worker ``p % size`` runs it, so the workers' shares are those of ``task_ids[i::W]``."""

    def __init__(self, streams: list[list[Unit]], size: int):
        self.size = size
        self._left = Counter((stream_key(s), u.position // size) for s in streams for u in s)
        self._ended = {batch: asyncio.Event() for batch in self._left}

    async def wait(self, key: tuple[int, int], unit: Unit) -> None:
        for earlier in range(unit.position // self.size):
            if (ended := self._ended.get((key, earlier))) is not None:
                await ended.wait()

    def done(self, key: tuple[int, int], unit: Unit) -> None:
        batch = (key, unit.position // self.size)
        self._left[batch] -= 1
        if self._left[batch] == 0:
            self._ended[batch].set()


def stream_key(stream: list[Unit]) -> tuple[int, int]:
    """The memory stream a chain of units belongs to (its method's key)."""
    return stream[0].seed, stream[0].run


@dataclass
class Runner:
    bench: Benchmark
    llm: LLM
    settings: EpisodeSettings
    run_dir: RunDir
    # Independent modes share one method object; dynamic mode gets one per stream.
    method_for: MethodFactory
    concurrency: int
    progress: RunProgress | None = None
    # Polled while the run goes: a message if the server died under it, else None.
    health: Callable[[], str | None] | None = None
    env_concurrency: int | None = None  # environments open at once (None: no limit of its own)
    # Dynamic mode with eval.dynamic_batches: the batch size (eval.dynamic_workers); None: each
    # chain of units goes on at its own pace.
    batch_size: int | None = None
    # The LLM the benchmark's simulated user speaks with (Benchmark.user_model); None: none.
    user_model: UserModel | None = None
    _done: set[str] = field(default_factory=set)
    _env_slots: asyncio.Semaphore | None = None

    async def run(self, streams: list[list[Unit]]) -> None:
        """Run every unfinished unit. Stops the whole run, recording nothing in flight, on
        Ctrl-C / SIGTERM (``Interrupted``) or when the server breaks (``RunAborted``)."""
        self._done = self.run_dir.finished_units()
        slots = asyncio.Semaphore(self.concurrency)
        writer = self.run_dir.trial_writer()
        # Every stream, finished ones too: opening a finished dynamic stream replays its
        # commit log and ``finish`` writes its final state, which a kill after the last
        # record but before that write would otherwise leave stale.
        todo = list(streams)
        if self.progress:
            self.progress.start(total=sum(len(s) for s in streams), done=self.run_dir.trials())

        stop: BaseException | None = None  # why the run stops early, once set
        batches = Batches(streams, self.batch_size) if self.batch_size else None

        async def run_stream(stream: list[Unit]) -> None:
            async with slots:
                key = stream_key(stream)
                method = self.method_for(key)
                reached = 0
                try:
                    for unit in stream:
                        if batches is not None:
                            await batches.wait(key, unit)
                        reached += 1
                        try:
                            if not await run_one(unit, method):
                                return
                        finally:
                            if batches is not None:
                                batches.done(key, unit)
                finally:
                    if batches is not None:  # a chain that ends early (a stop, an error) holds no batch back
                        for unit in stream[reached:]:
                            batches.done(key, unit)
                await asyncio.to_thread(method.finish)

        async def run_one(unit: Unit, method: Method) -> bool:
            """Run and record one unit; False when the run stops."""
            # A finished unit is skipped; its memory effects were restored from the stream's
            # commit log when the method was built.
            if unit.key in self._done:
                return True
            try:
                record = await self.run_unit(unit, method)
            except RunAborted as exc:  # stop every stream now, not at its next request
                halt(exc)
                raise
            if stop is not None:  # its error may be the stop itself: not a result
                return False
            try:
                if record.ok:
                    # The method's state and commit log, before the record that says so.
                    record.method.update(await method.commit(unit.key, unit.worker))
                else:
                    method.discard(unit.key)
                await writer.write(record)
            except OSError as exc:  # a full disk: stop, rather than run units it cannot keep
                halt(RunAborted(f"cannot record finished units: {os_error_message(exc)}; "
                                "then rerun the same command to resume"))
                return False
            if self.progress:
                self.progress.advance(record)
            return True

        tasks = [asyncio.ensure_future(run_stream(s)) for s in todo]

        def halt(reason: BaseException) -> None:
            nonlocal stop
            if stop is None:
                stop = reason
                for t in tasks:
                    t.cancel()

        async def watch_health() -> None:
            # A dead embedded server fails requests only after the client's retries; polling
            # its process stops the run within a fraction of a second instead.
            while True:
                await asyncio.sleep(HEALTH_POLL_S)
                if (failure := self.health()) is not None:
                    halt(RunAborted(failure))
                    return

        watchdog = asyncio.ensure_future(watch_health()) if self.health else None
        # Our own handlers rather than asyncio.run's: a library that turns the cancellation
        # into an ordinary exception would otherwise let streams go on and the run end
        # "normally". A second signal gets the default behaviour back: exit at once.
        with on_signals(lambda signum: halt(Interrupted(signum))):
            try:
                results = await asyncio.gather(*tasks, return_exceptions=True)
            finally:
                if watchdog is not None:
                    watchdog.cancel()
        if isinstance(stop, RunAborted) and self.health is not None:
            # The breaker can trip a moment before a dead server's exit is seen: the exit,
            # when there is one, is the better message.
            for _ in range(10):
                if (failure := self.health()) is not None:
                    stop = RunAborted(failure)
                    break
                await asyncio.sleep(0.1)
        if stop is not None:
            raise stop
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def run_unit(self, unit: Unit, method: Method) -> UnitRecord:
        """Ask the method to solve the unit's task; record every attempt it made."""
        started, t0 = now(), time.perf_counter()
        task = self.bench.load(unit.task_id)
        record = UnitRecord(unit=unit.key, task_id=unit.task_id, seed=unit.seed, run=unit.run,
                            position=unit.position)
        attempts: list[Attempt] = []

        async def episode(guidance: str | None, attempt: int) -> Attempt:
            done = await self._episode(unit, task, guidance, attempt)
            attempts.append(done)
            return done

        solved = Solved()
        try:
            # One replica for all of the unit's calls (its trials and summarizer calls too).
            with answer_tally() as answers, episode_affinity(unit.key):  # answers: summarizer calls, per role
                solved = await method.solve(task, episode, unit.key)
            if not attempts:
                raise RuntimeError(f"{type(method).__name__}.solve returned without running an episode")
            final = attempts[-1].outcome
            record.success, record.reward, record.checker = final.success, final.reward, final.details
            record.first_success = attempts[0].outcome.success
            record.method = solved.record
            record.stop_reason = attempts[-1].trajectory.stop_reason
        except RunAborted:
            raise  # the server broke, not this unit: nothing to record
        except Exception as exc:  # recorded with its traceback, like bfcl-eval; the run goes on
            record.error = f"{type(exc).__name__}: {exc}"
            record.traceback = traceback.format_exc()
        record.summarizer_answers = answers.to_dict()
        record.retrieved_ids = solved.retrieval.ids
        record.retrieval_scores = solved.retrieval.scores
        record.retrieval_s = solved.retrieval.latency_s
        record.guidance = guidance_as_sent(task, solved.retrieval.guidance)  # the text the model saw
        if attempts:
            trajs = [a.trajectory for a in attempts]
            record.trajectory = trajs[-1].to_dict()
            record.attempts = len(attempts)
            record.earlier_attempts = [
                {"success": a.outcome.success, "checker": a.outcome.details, "trajectory": a.trajectory.to_dict()}
                for a in attempts[:-1]]
            record.tokens = {"prompt": sum(t.prompt_tokens for t in trajs),
                             "completion": sum(t.completion_tokens for t in trajs),
                             "max_prompt": max(t.max_prompt_tokens for t in trajs)}
            record.llm_latency_s = round(sum(t.latency_s for t in trajs), 4)
            record.interactions = sum(t.interactions for t in trajs)
        record.started_at, record.finished_at = started, now()
        record.wall_s = round(time.perf_counter() - t0, 4)
        record.cap_stored(self.settings.max_stored_chars,
                          whole=TRAJECTORY_FIELDS if self.settings.whole_trajectories else ())
        return record

    async def _episode(self, unit: Unit, task: Task, guidance: str | None, attempt: int) -> Attempt:
        s = self.settings
        episode_key = _episode_key(unit)
        seed = unit.sampling_seed(s.seed_base) + attempt if s.fixed_seed is None else s.fixed_seed
        # With one seed on every call, the cache tells units and trials apart by this scope.
        scope = REPLAY_SCOPE.set(f"{unit.key}#{attempt}") if s.fixed_seed is not None else None
        headers = {"X-Reme-Task-Id": unit.task_id, "X-Reme-Episode": episode_key}
        user_llm = self.user_model.for_episode(seed, headers) if self.user_model is not None else None
        async with self._env_slot():
            env = await self.bench.open(task, episode_key)
            try:
                traj = await run_episode(
                    self.llm, s.protocol, env, task,
                    s.sampling(seed),
                    guidance=guidance,
                    system_prompt=s.system_prompt,
                    max_interactions=s.max_interactions,
                    max_steps_per_turn=s.max_steps_per_turn,
                    headers=headers,
                    history_reasoning=s.history_reasoning,
                    user=self.bench.user(task, user_llm),
                )
                return Attempt(traj, await env.evaluate())
            finally:
                if scope is not None:
                    REPLAY_SCOPE.reset(scope)
                await env.close()

    def _env_slot(self) -> contextlib.AbstractAsyncContextManager:
        if self.env_concurrency is None:
            return contextlib.nullcontext()
        if self._env_slots is None:
            self._env_slots = asyncio.Semaphore(self.env_concurrency)
        return self._env_slots


def _episode_key(unit: Unit) -> str:
    # Unique per attempt, so concurrent attempts of one task never share backend state.
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{unit.key}_{uuid.uuid4().hex[:8]}")

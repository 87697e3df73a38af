"""The seam between the runner and a memory method.

The runner asks a method to *solve* a task and hands it one thing to do that with: an
``Episode`` callable that runs the agent once on the task with some guidance and returns
the official verdict. A method decides how many attempts to make and what to learn; the
runner records what happened. ``OneAttempt`` is the plain behaviour (retrieve, one
episode, learn) that most methods only extend with ``retrieve`` and ``learn``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from reme_cli.agent.loop import Trajectory
from reme_cli.bench.base import Outcome, Task


@dataclass
class Retrieval:
    guidance: str | None = None  # the exact text appended to the first user message
    ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # more that the method records about it


@dataclass
class Attempt:
    trajectory: Trajectory
    outcome: Outcome


class Episode(Protocol):
    """Run the agent once on the unit's task; ``attempt`` numbers retries (0 first)."""

    async def __call__(self, guidance: str | None, attempt: int) -> Attempt: ...


@dataclass
class Solved:
    """What a method reports about a unit, beside the attempts the runner saw."""

    retrieval: Retrieval = field(default_factory=Retrieval)
    record: dict[str, Any] = field(default_factory=dict)  # the method's own fields, recorded as `method`


@dataclass
class MethodContext:
    """What a method may use to build itself; nothing here is benchmark-specific."""

    cfg: Any  # the validated Config
    llm: Any  # the executor's LLM client
    summarizer: Any  # reme_cli.methods.summarizer.SummarizerSettings, or None
    run_path: Path  # the run directory: a method keeps per-stream state under it
    finished_units: set[str]  # units already recorded (for resuming a stream's state)


class Method(Protocol):
    async def solve(self, task: Task, episode: Episode, unit: str) -> Solved: ...

    def commit(self) -> None:
        """Make the unit's memory changes durable (called before its record is written)."""

    def discard(self) -> None:
        """Forget the pending changes of a unit that failed."""

    def finish(self) -> None:
        """The stream is done (write its final state)."""


MethodFactory = Callable[[tuple[int, int]], Method]  # (seed, run) -> the method for that stream

STREAMS_DIR = "streams"


def stream_dir(run_path: Path, stream: tuple[int, int]) -> Path:
    """Where a dynamic stream keeps its memory's state inside the run directory."""
    return run_path / STREAMS_DIR / f"s{stream[0]}_r{stream[1]}"


@dataclass
class BuildContext:
    """What `reme build-pool` hands a method once the training trajectories are sampled.

    A method writes its own resumable intermediate files under ``work`` (the build run
    directory) and fills ``staging``, which replaces the pool directory whole afterwards."""

    cfg: Any  # the validated Config
    summarizer: Any  # SummarizerSettings: the LLM (and its sampling) that learns from trajectories
    embedder: Any  # the run's Embedder
    bench: Any  # the Benchmark (tasks are loaded from it)
    task_ids: list[str]  # the training tasks, in split order
    attempts: dict[str, list[tuple[Trajectory, Outcome]]]  # sampled trajectories per task (finished ones)
    work: Path


@dataclass
class BuildResult:
    report: dict[str, Any]  # merged into build/report.json
    rows: list[tuple[str, str]]  # what the console table shows, beside the sampling rows


class PoolBuilder(Protocol):
    """A method with a pool to build from training trajectories (``reme build-pool memory=NAME``)."""

    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """The LLM phase: resumable, its results in files under ``ctx.work``."""

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        """Write the pool into the empty ``staging`` dir from ``ctx.work``'s files (no LLM)."""


class MethodPlugin(Protocol):
    """What the ``reme.methods`` registry holds for a name."""

    config_class: ClassVar[type]  # the dataclass that validates ``memory.*``
    needs_summarizer: ClassVar[bool]

    @classmethod
    def factory(cls, ctx: MethodContext) -> MethodFactory: ...


class OneAttempt:
    """Retrieve, run one episode, learn from it. Subclasses override what they need."""

    config_class: ClassVar[type | None] = None
    needs_summarizer: ClassVar[bool] = False

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        return Retrieval()

    async def learn(self, task: Task, attempts: list[Attempt], retrieval: Retrieval, unit: str) -> dict[str, Any]:
        return {}

    async def solve(self, task: Task, episode: Episode, unit: str) -> Solved:
        retrieval = await self.retrieve(task, unit)
        attempt = await episode(retrieval.guidance, 0)
        return Solved(retrieval, await self.learn(task, [attempt], retrieval, unit))

    def commit(self) -> None:
        pass

    def discard(self) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass
class NoMemoryConfig:
    name: str = "none"


class NoMemory(OneAttempt):
    """``memory=none``: the agent runs without experiences."""

    config_class = NoMemoryConfig

    @classmethod
    def factory(cls, ctx: MethodContext) -> MethodFactory:
        shared = cls()
        return lambda stream: shared



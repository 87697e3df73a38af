"""The seam between the runner and a memory: retrieve before a task, learn after it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from reme_cli.agent.loop import Trajectory
from reme_cli.bench.base import Outcome, Task


@dataclass
class Retrieval:
    guidance: str | None = None  # the exact text appended to the first user message
    ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)


class Memory(Protocol):
    max_retries: int  # failure-aware retries per task (0: one attempt)

    async def retrieve(self, task: Task, unit: str) -> Retrieval: ...

    async def reflect(self, task: Task, traj: Trajectory, outcome: Outcome, lessons: list[str]) -> str | None:
        """Guidance for the retry of a failed attempt, or None to stop retrying."""

    async def after_task(self, task: Task, attempts: list[tuple[Trajectory, Outcome]], retrieval: Retrieval,
                         lessons: list[str], unit: str) -> dict[str, Any]:
        """Update the memory from a finished task; returns what to record with the unit."""

    def commit(self) -> None:
        """Make the unit's memory changes durable (called before its trial is recorded)."""

    def discard(self) -> None:
        """Forget a failed unit's pending changes."""

    def finish(self) -> None:
        """The stream is done (write its final state)."""


class NoMemory:
    """Mode ``none``: the agent runs without experiences."""

    max_retries = 0

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        return Retrieval()

    async def reflect(self, task: Task, traj: Trajectory, outcome: Outcome, lessons: list[str]) -> str | None:
        return None

    async def after_task(self, task: Task, attempts: list[tuple[Trajectory, Outcome]], retrieval: Retrieval,
                         lessons: list[str], unit: str) -> dict[str, Any]:
        return {}

    def commit(self) -> None:
        pass

    def discard(self) -> None:
        pass

    def finish(self) -> None:
        pass

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
    async def retrieve(self, task: Task) -> Retrieval: ...

    async def after_task(self, task: Task, trajectory: Trajectory, outcome: Outcome,
                         retrieval: Retrieval) -> dict[str, Any]:
        """Update the memory from a finished task; returns what to record with the unit."""


class NoMemory:
    """Mode ``none``: the agent runs without experiences."""

    async def retrieve(self, task: Task) -> Retrieval:
        return Retrieval()

    async def after_task(self, task: Task, trajectory: Trajectory, outcome: Outcome,
                         retrieval: Retrieval) -> dict[str, Any]:
        return {}

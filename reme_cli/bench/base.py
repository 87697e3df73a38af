"""The seam between the agent and a benchmark: tasks, environments, outcomes.

Everything the agent knows about a benchmark goes through these types, so a new
benchmark (AppWorld, ...) plugs in without touching the agent or the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Task:
    """One benchmark task. ``turns`` holds the user message(s) of each turn."""

    id: str
    turns: list[list[dict[str, str]]]
    query: str  # what memory retrieval keys on (BFCL: the first user message)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolResult:
    """What one tool call returned to the model; ``call`` is the canonical call text."""

    call: str
    output: str
    error: bool = False


@dataclass
class Outcome:
    """The official verdict on an episode."""

    success: bool
    reward: float
    details: dict[str, Any] = field(default_factory=dict)


class Env(Protocol):
    """One isolated episode of one task. Never shared between episodes."""

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-style tool schemas (``{"type": "function", "function": {...}}``)."""

    def execute(self, name: str, arguments: Any) -> ToolResult:
        """Run one call the model asked for. Unknown names or bad arguments give an
        error result for the model to read, never an exception and never eval/exec."""

    def end_step(self) -> None:
        """Mark the end of one model step (the calls of one assistant message)."""

    def end_turn(self) -> None:
        """Mark the end of one user turn."""

    def evaluate(self) -> Outcome:
        """Score the episode with the benchmark's official checker."""

    def close(self) -> None:
        """Release every resource of the episode (idempotent)."""


class Benchmark(Protocol):
    name: str

    def task_ids(self) -> list[str]:
        """The ids selected by the benchmark config (split, limit, explicit ids)."""

    def load(self, task_id: str) -> Task: ...

    def open(self, task: Task, episode_key: str) -> Env:
        """A fresh environment; ``episode_key`` is unique per episode."""

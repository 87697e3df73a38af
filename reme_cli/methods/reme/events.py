"""A dynamic stream's pool event log: what happened to its pool, task by task.

Ops: ``retrieve`` (ids and scores a task got), ``use`` (f += 1 for each, u += 1 on success),
``add`` (the whole experience, with its source), ``delete`` (id with f and u at deletion).
A unit's events are written in one durable append *before* its trial record, and replay
keeps only the events of units whose trial record exists, so a kill between the two can
neither lose nor double an update: the unit simply runs again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.pool import Pool
from reme_cli.core.io import append_lines, keep_units, read_lines


class EventLog:
    def __init__(self, path: Path):
        self.path = path
        self._pending: list[dict[str, Any]] = []

    def emit(self, unit: str, op: str, **fields: Any) -> None:
        self._pending.append({"unit": unit, "op": op, **fields})

    def flush(self) -> None:
        if self._pending:
            append_lines(self.path, self._pending)
            self._pending = []

    def discard(self) -> None:
        self._pending = []

    def read(self) -> list[dict[str, Any]]:
        return read_lines(self.path)  # a torn last line from a kill is skipped

    def keep_only(self, finished_units: set[str]) -> list[dict[str, Any]]:
        """Drop events of unfinished units (atomically) and return the rest in order."""
        return keep_units(self.path, finished_units)


def apply_events(pool: Pool, events: list[dict[str, Any]]) -> None:
    """Bring a copy of the stream's starting pool to the state the events describe
    (``retrieve`` events are a record of what was read; they change nothing)."""
    for event in events:
        op = event["op"]
        if op == "use":
            pool.update_counts(event["ids"], retrieved=True, success=event["success"])
        elif op == "add":
            pool.add([Experience.from_dict(event["experience"])], dedup_threshold=None)
        elif op == "delete":
            pool.remove([event["id"]])

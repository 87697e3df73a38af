"""A dynamic stream's pool event log: what happened to its pool, task by task.

Ops: ``retrieve`` (ids and scores a task got), ``use`` (f += 1 for each, u += 1 on success),
``add`` (the whole experience, with its source), ``delete`` (id with f and u at deletion).
A unit's events are written in one durable append *before* its trial record, and replay
keeps only the events of units whose trial record exists, so a kill between the two can
neither lose nor double an update: the unit simply runs again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.pool import Pool
from reme_cli.core.io import append_lines


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
        if not self.path.exists():
            return []
        events = []
        for line in self.path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line from a kill
                continue
        return events

    def keep_only(self, finished_units: set[str]) -> list[dict[str, Any]]:
        """Drop events of unfinished units (atomically) and return the rest in order."""
        if not self.path.exists():
            return []
        events = [e for e in self.read() if e.get("unit") in finished_units]
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        return events


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

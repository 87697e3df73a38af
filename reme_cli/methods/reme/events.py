"""ReMe's events: what a unit did to a dynamic stream's pool, as the seam logs them.

Ops: ``retrieve`` (ids and scores a task got), ``use`` (f += 1 for each, u += 1 on success),
``add`` (the whole experience, with its source), ``delete`` (id with f and u at deletion).
The seam (``methods/streams.py``) writes a unit's events in one durable line of the
stream's ``commits.jsonl`` *before* its trial record, and replay keeps only the lines of
units whose trial record exists, so a kill between the two can neither lose nor double an
update: the unit simply runs again.
"""

from __future__ import annotations

from typing import Any

from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.pool import Pool


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

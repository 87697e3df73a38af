"""What the toy memory's saved state holds, told for readers (``Memory.describe``): `reme pool
stats|show` and `reme view` read it through the registry, so nothing in reme knows its file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reme_cli.methods.state_view import StateChange, StateItem, StateView, stream_changes

STATE = "toy_memory.json"  # what ToyMemory.save writes


def change(unit: str, seq: int, events: list[dict[str, Any]]) -> StateChange:
    return StateChange(unit, seq, added=[StateItem("last", e["last"], kind="answer") for e in events])


def describe(where: Path) -> StateView | None:
    changes = stream_changes(where, change)
    if not (where / STATE).is_file() and changes is None:
        return None
    last = json.loads((where / STATE).read_text())["last"] if (where / STATE).is_file() else None
    items = [StateItem("last", last, title="the last successful answer", kind="answer",
                       numbers={"chars": len(last)})] if last else []
    return StateView("toy", items, {"remembered": "yes" if last else "no",
                                    "commits": len(changes or [])}, text=last, changes=changes)

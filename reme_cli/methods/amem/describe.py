"""An A-Mem pool, or a dynamic stream's store and commit log, as a ``StateView``
(``Memory.describe``): notes with their context, keywords, tags, links and retrievals, and
per committed unit the note it added, the neighbours it rewrote and what it retrieved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reme_cli.methods.amem.notes import FILES
from reme_cli.methods.state_view import StateChange, StateItem


def item(note: dict[str, Any]) -> StateItem:
    return StateItem(
        id=str(note.get("id", "")), text=str(note.get("content", "")), title=str(note.get("context", "")),
        kind="note", numbers={"retrievals": note.get("retrieval_count", 0), "links": len(note.get("links") or [])},
        origin=note.get("source", ""), created_at=note.get("timestamp", ""),
        fields={k: note[k] for k in ("keywords", "tags", "links") if note.get(k)}
        | ({"evolved": len(note["evolution_history"])} if note.get("evolution_history") else {}))


def change(unit: str, seq: int, events: list[dict[str, Any]]) -> StateChange:
    out = StateChange(unit, seq)
    for e in events:
        if e.get("op") == "add":
            out.added.append(item(e.get("note") or {}))
        elif e.get("op") == "update":
            out.updated.append(e.get("id", ""))
        elif e.get("op") == "retrieve":
            for i in e.get("ids", []):
                out.retrieved.append(i)
                out.increments.setdefault(i, {"retrievals": 0})["retrievals"] += 1
    return out


def read(store: Path) -> tuple[list[StateItem], dict[str, Any], None]:
    items = [item(n) for n in FILES.read_records(store, strict=False)]
    summary = {"notes": len(items), "links": sum(int(i.numbers["links"]) for i in items),
               "evolved notes": sum(1 for i in items if i.fields.get("evolved")),
               "never retrieved": sum(1 for i in items if not i.numbers["retrievals"])}
    return items, summary, None


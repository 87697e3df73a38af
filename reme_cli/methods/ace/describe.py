"""An ACE playbook (a pool, or a dynamic stream's playbook and commit log) as a ``StateView``
(``Memory.describe``): its bullets with section and helpful/harmful counters, the playbook
text as the agent sees it, and per committed unit its tags (counter increments) and the
bullets it added (an ADD found to repeat a bullet adds none)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from reme_cli.methods.ace.playbook import PLAYBOOK, PLAYBOOK_STATE, TEXT
from reme_cli.methods.state_view import StateChange, StateItem


def item(bullet: dict[str, Any]) -> StateItem:
    return StateItem(id=str(bullet.get("id", "")), text=str(bullet.get("content", "")),
                     kind=str(bullet.get("section", "")),
                     numbers={"helpful": bullet.get("helpful", 0), "harmful": bullet.get("harmful", 0)},
                     origin=str(bullet.get("source", "")))


def change(unit: str, seq: int, events: list[dict[str, Any]]) -> StateChange:
    out = StateChange(unit, seq)
    for e in events:
        if e.get("op") == "tag" and e.get("tag") in ("helpful", "harmful"):
            counts = out.increments.setdefault(e.get("id", ""), {"helpful": 0, "harmful": 0})
            counts[e["tag"]] += 1
        elif e.get("op") == "add" and e.get("id"):
            out.added.append(item({**e, "source": e.get("source") or unit}))
    return out


def read(book: Path) -> tuple[list[StateItem], dict[str, Any], str | None]:
    state = PLAYBOOK_STATE.read(book / PLAYBOOK) or {}  # damaged: one line naming it
    items = [item(b) for b in state.get("bullets", []) if isinstance(b, dict)]
    summary = {"bullets": len(items), "by section": dict(Counter(i.kind for i in items)),
               "updates applied": state.get("ops_applied")}
    text = (book / TEXT).read_text(encoding="utf-8", errors="replace") if (book / TEXT).is_file() else None
    return items, summary, text


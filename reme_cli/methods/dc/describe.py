"""A Dynamic Cheatsheet pool, or a dynamic stream's state and commit log, as a ``StateView``
(``Memory.describe``): the cheatsheet as the state's text, the stored (input, output) pairs
as items (DC-RS retrieves them), and per committed unit its rewrite of the cheatsheet or the
pair it stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reme_cli.methods.dc.pool import CHEATSHEET, FILES, manifest_of
from reme_cli.methods.state_view import StateChange, StateItem

SHEET_ID = "cheatsheet"  # the item a DC-Cu rewrite updates


def item(pair: dict[str, Any]) -> StateItem:
    return StateItem(id=str(pair.get("id", "")), text=str(pair.get("output", "")), title=str(pair.get("input", "")),
                     kind="pair", origin=str(pair.get("id", "")))


def change(unit: str, seq: int, events: list[dict[str, Any]]) -> StateChange:
    out = StateChange(unit, seq)
    for e in events:
        if e.get("op") == "rewrite":
            out.updated.append(SHEET_ID)
        elif e.get("op") == "pair":
            out.added.append(item(e))
    return out


def read(pool: Path) -> tuple[list[StateItem], dict[str, Any], str | None]:
    manifest = manifest_of(pool)
    items = [item(p) for p in FILES.read_records(pool, strict=False)]
    text = (pool / CHEATSHEET).read_text(encoding="utf-8", errors="replace") if (pool / CHEATSHEET).is_file() else None
    summary = {"variant": manifest.get("variant"), "pairs": len(items),
               "cheatsheet chars": len(text) if text is not None else None,
               "cheatsheet rewrites": (manifest.get("cheatsheet") or {}).get("rewrites")}
    return items, summary, text


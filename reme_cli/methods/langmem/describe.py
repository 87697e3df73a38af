"""A LangMem episodic pool, or a dynamic stream's store and commit log, as a ``StateView``
(``Memory.describe``): one item per stored episode (the last put of its key), told as the
guide's prompt tells it (When / Thought / Did / Result), and per committed unit its puts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reme_cli.methods.langmem.store import FILES
from reme_cli.methods.state_view import StateChange, StateItem


def item(put: dict[str, Any]) -> StateItem:
    value = put.get("value") or {}
    episode = value.get("content") if isinstance(value.get("content"), dict) else value
    text = "\n".join(f"{label}: {episode.get(key, '')}" for label, key in
                     (("Thought", "thoughts"), ("Did", "action"), ("Result", "result")))
    return StateItem(id=str(put.get("key", "")), text=text, title=str(episode.get("observation", "")),
                     kind=str(value.get("kind", "episode")), origin=str(put.get("unit", "")))


def change(unit: str, seq: int, events: list[dict[str, Any]]) -> StateChange:
    return StateChange(unit, seq, added=[item(e) for e in events if e.get("op") == "put"])


def read(store: Path) -> tuple[list[StateItem], dict[str, Any], None]:
    latest = {str(put.get("key", "")): item(put) for put in FILES.read_records(store, strict=False)}
    return list(latest.values()), {"episodes": len(latest)}, None


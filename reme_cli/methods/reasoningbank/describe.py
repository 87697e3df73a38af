"""A ReasoningBank (a pool, or a dynamic stream's store and commit log) as a ``StateView``
(``Memory.describe``): one item per memory item (title, description, content), named
``<record>.<j>`` as units record them retrieved, of the judged trajectory it was mined from;
per committed unit the items it added."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from reme_cli.methods.reasoningbank.items import FILES
from reme_cli.methods.state_view import StateChange, StateItem


def items_of(record: dict[str, Any]) -> list[StateItem]:
    return [StateItem(id=f"{record.get('id', '')}.{j}", text=str(it.get("content", "")), title=str(it.get("title", "")),
                      kind=str(record.get("verdict", "")), origin=str(record.get("source", "")),
                      fields={"description": it.get("description", ""), "query": record.get("query", "")})
            for j, it in enumerate(record.get("items") or [])]


def change(unit: str, seq: int, events: list[dict[str, Any]]) -> StateChange:
    return StateChange(unit, seq, added=[i for e in events if e.get("op") == "add"
                                         for i in items_of(e.get("record") or {})])


def read(store: Path) -> tuple[list[StateItem], dict[str, Any], None]:
    records = FILES.read_records(store, strict=False)
    items = [i for r in records for i in items_of(r)]
    return items, {"records": len(records), "items": len(items), "by verdict": dict(Counter(i.kind for i in items))}, None


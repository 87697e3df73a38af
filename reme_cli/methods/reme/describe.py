"""A ReMe pool, or a dynamic stream's pool and commit log, told as a ``StateView``
(``Memory.describe``): experiences with their when-to-use, content, source, f, u and
confidence; counts by source; and per committed unit what it retrieved, credited (f, u),
added and deleted. Read from the files alone (no embedder)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from reme_cli.methods.reme.pool import EXPERIENCES, MANIFEST, POOL_LINES, POOL_MANIFEST
from reme_cli.methods.state_view import StateChange, StateItem


def pool_dir(where: Path) -> Path | None:
    """The ReMe pool at ``where`` or its ``pool/`` (a build directory, a dynamic stream's)."""
    for candidate in (where / "pool", where):
        manifest = POOL_MANIFEST.probe(candidate / MANIFEST) if (candidate / EXPERIENCES).is_file() else None
        if manifest is not None and manifest.get("method") in (None, "reme"):
            return candidate
    return None


def item(exp: dict[str, Any]) -> StateItem:
    return StateItem(
        id=str(exp.get("id", "")), text=str(exp.get("content", "")), title=str(exp.get("when_to_use", "")),
        kind=str(exp.get("source", "")),
        numbers={"f": exp.get("f", 0), "u": exp.get("u", 0), "confidence": exp.get("confidence", 1.0)},
        origin=exp.get("origin_task") or "", created_at=exp.get("created_at", ""),
        fields={k: exp[k] for k in ("keywords", "tools_used", "task_query", "author") if exp.get(k)})


def change(unit: str, seq: int, events: list[dict[str, Any]]) -> StateChange:
    out = StateChange(unit, seq)
    for e in events:
        op = e.get("op")
        if op == "retrieve":
            out.retrieved += [i for i in e.get("ids", []) if i not in out.retrieved]
        elif op == "use":
            for i in e.get("ids", []):
                counts = out.increments.setdefault(i, {"f": 0, "u": 0})
                counts["f"] += 1
                counts["u"] += int(bool(e.get("success")))
        elif op == "add":
            out.added.append(item(e.get("experience") or {}))
        elif op == "delete":
            out.deleted.append(e.get("id", ""))
    return out


def read(pool: Path) -> tuple[list[StateItem], dict[str, Any], None]:
    manifest = POOL_MANIFEST.read(pool / MANIFEST) or {}  # damaged: one line naming it and the key
    items = [item(r) for r in POOL_LINES.records(pool / EXPERIENCES)]  # a damaged line: left out, a warning
    used = [i.numbers["u"] / i.numbers["f"] for i in items if i.numbers["f"]]
    summary = {
        "experiences": len(items),
        "by source": dict(sorted(Counter(i.kind for i in items).items())),
        "never retrieved": sum(1 for i in items if not i.numbers["f"]),
        "mean u/f (retrieved ones)": round(sum(used) / len(used), 4) if used else None,
        "retrieval key": manifest.get("retrieval_key"),
        "embedding": (manifest.get("embedding") or {}).get("name"),
    }
    source = (manifest.get("built_by") or {}).get("source")
    if source:
        summary["imported from"] = source
    return items, summary, None


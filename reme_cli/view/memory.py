"""The Memory page's data: the run's start state and, per dynamic stream, the state along its
commits (size, additions, deletions, updates) and each item's life (which unit added it,
which units retrieved it, its numbers, when it was deleted). Every method's state is read
through its own ``Memory.describe``; the lives are put together here from the method's
changes and the units' records, the same way for every method."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from reme_cli.methods.state_view import StateChange, StateItem, StateView
from reme_cli.view.runs import Run


def _stream_units(run: Run) -> dict[str, list[str]]:
    """unit -> the ids its record says it retrieved (every trial that retrieved)."""
    out: dict[str, list[str]] = {}
    for t in run.trials:
        ids = list(t.retrieved_ids)
        trials = (t.method or {}).get("trials")
        for trial in trials if isinstance(trials, list) else []:
            if isinstance(trial, dict):
                ids += [i for i in trial.get("retrieved_ids") or [] if i not in ids]
        out[t.unit] = ids
    return out


def _start(run: Run) -> tuple[Path | None, StateView | None]:
    where = run.start_state_dir()
    return where, run.describe(where)


def _streams(run: Run) -> list[tuple[Path, StateView | None]]:
    return [(s, run.describe(s)) for s in run.streams()] if run.config.mode == "dynamic" else []


def _committed(run: Run, view: StateView | None) -> list[StateChange]:
    """The stream's changes of units that have a record: a unit whose record was never written
    (killed between its commit and its record) is redone on resume, so it changed nothing."""
    done = {t.unit for t in run.trials if t.ok}
    return [c for c in (view.changes or []) if c.unit in done] if view else []


def item_catalog(run: Run) -> dict[str, StateItem]:
    """Every item the run's memory held at some point: the start state's, what the streams
    added, what the streams saved (texts a method rewrote, e.g. A-Mem's contexts)."""
    def make() -> dict[str, StateItem]:
        items: dict[str, StateItem] = {}
        _, start = _start(run)
        for item in start.items if start else []:
            items[item.id] = item
        for _, view in _streams(run):
            for change in _committed(run, view):
                for item in change.added:
                    items[item.id] = item
            for item in view.items if view else []:
                items.setdefault(item.id, item)
        return items
    return run.cached("items", make)


def _replay(run: Run, start: StateView | None, view: StateView | None, retrieved: dict[str, list[str]]
            ) -> dict[str, Any]:
    """One stream walked commit by commit from the start state: its timeline, its items' lives
    and numbers at the end, and, for each unit, the numbers of what it retrieved before its
    commit."""
    numbers = {i.id: dict(i.numbers) for i in (start.items if start else [])}
    present = dict.fromkeys(numbers)  # an ordered set: as stored, then as added
    order = list(present)
    lives: dict[str, dict[str, Any]] = {i: {"added_by": None, "added_seq": None, "retrieved_by": [],
                                            "deleted_by": None, "deleted_seq": None, "updated_by": []}
                                        for i in present}
    timeline: dict[str, list] = {k: [] for k in ("seq", "unit", "added", "deleted", "updated", "size")}
    before: dict[str, dict[str, dict[str, float]]] = {}
    for change in _committed(run, view):
        got = retrieved.get(change.unit, []) + [i for i in change.retrieved if i not in retrieved.get(change.unit, [])]
        before[change.unit] = {i: dict(numbers[i]) for i in got if i in numbers}
        for i in got:
            lives.setdefault(i, _life()).setdefault("retrieved_by", []).append([change.unit, change.seq])
        for i, delta in change.increments.items():
            row = numbers.setdefault(i, {})
            for name, d in delta.items():
                row[name] = row.get(name, 0) + d
        for item in change.added:
            numbers[item.id] = dict(item.numbers)
            present[item.id] = None
            if item.id not in order:
                order.append(item.id)
            lives[item.id] = {**_life(), "added_by": change.unit, "added_seq": change.seq,
                              "retrieved_by": lives.get(item.id, {}).get("retrieved_by", [])}
        for i in change.updated:
            lives.setdefault(i, _life())["updated_by"].append([change.unit, change.seq])
        for i in change.deleted:
            present.pop(i, None)
            lives.setdefault(i, _life()).update(deleted_by=change.unit, deleted_seq=change.seq)
        for key, value in (("seq", change.seq), ("unit", change.unit), ("added", len(change.added)),
                           ("deleted", len(change.deleted)), ("updated", len(change.updated)),
                           ("size", len(present))):
            timeline[key].append(value)
    return {"numbers": numbers, "present": list(present), "order": order, "lives": lives, "timeline": timeline,
            "before": before}


def _life() -> dict[str, Any]:
    return {"added_by": None, "added_seq": None, "retrieved_by": [], "deleted_by": None, "deleted_seq": None,
            "updated_by": []}


def _walks(run: Run) -> list[dict[str, Any]]:
    def make() -> list[dict[str, Any]]:
        _, start = _start(run)
        retrieved = _stream_units(run)
        return [{"name": path.name, "view": view, **_replay(run, start, view, retrieved)}
                for path, view in _streams(run)]
    return run.cached("walks", make)


def numbers_before(run: Run, unit: str) -> dict[str, dict[str, float]] | None:
    """The numbers of the items ``unit`` retrieved, as the commits before its own left them
    (None outside dynamic mode, or for a unit no stream committed)."""
    for walk in _walks(run):
        if unit in walk["before"]:
            return walk["before"][unit]
    return None


def _fixed_lives(run: Run, start: StateView | None) -> dict[str, Any]:
    """Fixed mode: the start state never changes; an item's life is the units that retrieved it."""
    lives: dict[str, dict[str, Any]] = {}
    for unit, ids in _stream_units(run).items():
        for i in ids:
            lives.setdefault(i, _life())["retrieved_by"].append([unit, None])
    ids = [i.id for i in start.items] if start else []
    return {"name": "start state (read-only)", "summary": start.summary if start else {},
            "text": start.text if start else None,
            "numbers": {i.id: i.numbers for i in start.items} if start else {}, "present": ids, "order": ids,
            "lives": lives, "timeline": None}


def _item_dict(item: StateItem) -> dict[str, Any]:
    d = asdict(item)
    d.pop("id")
    d.pop("numbers")  # per stream: numbers change along it
    return d


def memory_page(run: Run) -> dict[str, Any]:
    if run.config.mode == "none":
        return {"method": "none", "mode": "none", "streams": [], "items": {}, "start": None}
    if run.plugin() is None:
        return {"method": run.config.method, "mode": run.config.mode, "streams": [], "items": {}, "start": None,
                "note": f"memory method {run.config.method!r} is not installed here: its state cannot be read"}
    where, start = _start(run)
    start_info = None
    if start is not None:
        start_info = {"path": str(where), "summary": start.summary, "text": start.text,
                      "ids": [i.id for i in start.items]}
    if run.config.mode == "fixed":
        streams = [_fixed_lives(run, start)]
    else:
        streams = []
        for walk in _walks(run):
            view = walk["view"]
            streams.append({"name": walk["name"], "summary": view.summary if view else {},
                            "text": _final_text(view), **{k: walk[k] for k in ("numbers", "present", "order",
                                                                              "lives", "timeline")}})
    return {"method": run.config.method, "mode": run.config.mode, "start": start_info,
            "start_note": None if start is not None else _no_start(run),
            "items": {i: _item_dict(item) for i, item in item_catalog(run).items()}, "streams": streams}


def _final_text(view: StateView | None) -> str | None:
    return view.text if view else None


def _no_start(run: Run) -> str:
    pool = run.config.pool
    if not pool:
        return "the run started from the method's empty (or built-in) memory"
    return f"memory.pool={pool} is not found from here: its items show as the streams added them"

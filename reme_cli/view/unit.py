"""The Unit page's data: the unit's record, and each retrieved item told in full (its text,
what it is for, its score, its numbers when the task retrieved it)."""

from __future__ import annotations

from typing import Any

from reme_cli.agent.trajectory import with_guidance
from reme_cli.methods.state_view import StateItem
from reme_cli.view.memory import item_catalog, numbers_before
from reme_cli.view.runs import Run


def _retrieved(run: Run, ids: list[str], scores: list[float], recorded: dict[str, Any] | None,
               unit: str) -> list[dict[str, Any]]:
    """Each retrieved id with its item's texts and its numbers at retrieval: as the method
    recorded them (``retrieved_numbers``), else as the stream's commits before this unit
    left them (fixed mode: the start state's, which nothing changes)."""
    items = item_catalog(run)
    before = None if recorded else numbers_before(run, unit)
    out = []
    for i, rid in enumerate(ids):
        item: StateItem | None = items.get(rid)
        numbers, source = None, None
        if recorded and rid in recorded:
            numbers, source = recorded[rid], "recorded at retrieval"
        elif before is not None and rid in before:
            numbers, source = before[rid], "replayed from the commit log, before this unit's commit"
        elif item is not None and run.config.mode == "fixed":
            numbers, source = item.numbers, "the start state (fixed mode changes nothing)"
        out.append({"id": rid, "score": scores[i] if i < len(scores) else None,
                    "title": item.title if item else None, "text": item.text if item else None,
                    "kind": item.kind if item else None, "numbers": numbers, "numbers_from": source,
                    "known": item is not None})
    return out


def unit_detail(run: Run, unit: str) -> dict[str, Any]:
    record = next((t for t in run.trials if t.unit == unit), None)
    if record is None:
        raise KeyError(unit)
    data = record.to_dict()
    method = record.method or {}
    trials = method.get("trials") if isinstance(method.get("trials"), list) else []
    # Numbers at retrieval: the unit's (fixed mode), or its first trial's (ReMe's dynamic trials).
    recorded = method.get("retrieved_numbers") or (trials[0].get("retrieved_numbers") if trials and
                                                     isinstance(trials[0], dict) else None)
    data["retrieved"] = _retrieved(run, record.retrieved_ids, record.retrieval_scores, recorded, unit)
    # Retries that retrieved again (ReMe's dynamic trials) list their own retrievals.
    data["trial_retrievals"] = [
        _retrieved(run, t.get("retrieved_ids") or [], [], t.get("retrieved_numbers"), unit)
        if isinstance(t, dict) else [] for t in trials]
    # The first trial's first user message as it went out: the task's text, then the guidance.
    first_trial = (record.earlier_attempts[0].get("trajectory") if record.earlier_attempts else record.trajectory) or {}
    user = first_trial.get("user") or []
    first = user[0][0] if user and user[0] else None
    data["first_message"] = with_guidance(first, record.guidance) if first is not None else None
    return data

"""The Health page's data: what a team running ReMe in production watches, per run and along
its streams. Memory side: mean utility u/f and its spread, confidence by source, additions
vs deletions along the commits, retrieval hit rate (the page sets the similarity floor) and
latency, how often rewritten guidance was used. Task side: success, steps and time to solve,
per run and along a stream, and the method's summaries that failed."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from reme_cli.llm.answer_health import merge, summary_failures
from reme_cli.view.memory import memory_page
from reme_cli.view.runs import Run

CONFIDENCE_BINS = 10


def _spread(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    qs = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return {"n": len(values), "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "q1": qs[0], "median": qs[1], "q3": qs[2], "max": max(values)}


def _utility(numbers: dict[str, dict[str, float]], ids: list[str]) -> list[float]:
    return [numbers[i]["u"] / numbers[i]["f"] for i in ids
            if numbers.get(i, {}).get("f") and "u" in numbers[i]]


def _confidence(numbers: dict[str, dict[str, float]], ids: list[str], items: dict[str, Any]) -> dict[str, list[int]]:
    """Items' confidence as a histogram per source (kind): CONFIDENCE_BINS bins over [0, 1]."""
    out: dict[str, list[int]] = defaultdict(lambda: [0] * CONFIDENCE_BINS)
    for i in ids:
        c = numbers.get(i, {}).get("confidence")
        if c is None:
            continue
        kind = (items.get(i) or {}).get("kind") or "?"
        out[kind][min(int(float(c) * CONFIDENCE_BINS), CONFIDENCE_BINS - 1)] += 1
    return dict(out)


def _rewritten(run: Run) -> dict[str, int] | None:
    """How many retrievals ran the LLM rewrite, and how many used its text (an unusable answer
    falls back to the plain experiences); None when no record says (rewrite off)."""
    asked = used = 0
    for t in run.trials:
        method = t.method or {}
        trials = method.get("trials") if isinstance(method.get("trials"), list) else None
        for r in (trials if trials is not None else [method]):
            if isinstance(r, dict) and "rewritten" in r:
                asked += 1
                used += bool(r["rewritten"])
    return {"retrievals": asked, "used": used} if asked else None


def _along(run: Run) -> dict[str, list]:
    """Task side along a stream: per position, over the run's streams, the success rate, mean
    steps and mean seconds."""
    by_pos: dict[int, list] = defaultdict(list)
    for t in run.trials:
        if t.ok:
            by_pos[t.position].append(t)
    out: dict[str, list] = {"position": [], "success": [], "steps": [], "wall_s": [], "n": []}
    for pos in sorted(by_pos):
        units = by_pos[pos]
        out["position"].append(pos)
        out["success"].append(sum(u.success for u in units) / len(units))
        out["steps"].append(statistics.fmean(u.interactions for u in units))
        out["wall_s"].append(statistics.fmean(u.wall_s for u in units))
        out["n"].append(len(units))
    return out


def health(run: Run) -> dict[str, Any]:
    ok = [t for t in run.trials if t.ok]
    solved = [t for t in ok if t.success]
    task_side = {
        "units": len(run.trials), "errors": len(run.trials) - len(ok),
        "success": sum(t.success for t in ok) / len(ok) if ok else None,
        "steps": _spread([float(t.interactions) for t in ok]),
        "time_to_solve_s": _spread([t.wall_s for t in solved]),
        "along_stream": _along(run),
        # Summaries the method asked for, and those that raised (their trials kept their reward).
        "summaries": summary_failures(merge(*(t.summarizer_answers for t in run.trials))),
    }
    memory = memory_page(run) if run.config.mode != "none" else None
    streams = []
    for s in (memory or {}).get("streams", []):
        numbers, ids = s["numbers"], s["present"]
        timeline = s.get("timeline")
        streams.append({
            "name": s["name"], "items": len(ids), "utility": _spread(_utility(numbers, ids)),
            "confidence": _confidence(numbers, ids, memory["items"]),
            "adds": sum(timeline["added"]) if timeline else 0, "deletes": sum(timeline["deleted"]) if timeline else 0,
            "timeline": timeline,
        })
    retrieval = [t for t in ok if t.retrieved_ids or t.retrieval_s is not None] if run.config.mode != "none" else []
    latencies = [t.retrieval_s for t in retrieval if t.retrieval_s is not None]
    memory_side = None
    if run.config.mode != "none":
        memory_side = {
            "streams": streams,
            "utility": _spread([u for s in (memory or {}).get("streams", []) for u in _utility(s["numbers"], s["present"])]),
            # The page counts the hits above the floor the reader sets.
            "best_scores": [max(t.retrieval_scores) if t.retrieval_scores else None for t in retrieval],
            "latency_s": _spread(latencies),
            "rewritten": _rewritten(run),
        }
    return {"run": run.id, "mode": run.config.mode, "task": task_side, "memory": memory_side}

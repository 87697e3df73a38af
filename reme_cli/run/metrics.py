"""Avg@k and Pass@k from unit records (never from re-running anything).

Per seed: Avg@k = mean over tasks of the task's mean success over its k runs (errored
units excluded: they are errors, not failures);
Pass@k = fraction of tasks solved in at least one of the k runs. Across seeds: mean and
sample standard deviation (ddof=1; 0 for a single seed).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from reme_cli.run.records import UnitRecord


def compute_metrics(trials: list[UnitRecord], k: int, success_key: str = "success") -> dict[str, Any]:
    if not trials:
        return {"k": k, "tasks": 0, "units": 0, "errors": 0, "per_seed": {}}
    df = pd.DataFrame(
        {
            "seed": [t.seed for t in trials],
            "run": [t.run for t in trials],
            "task_id": [t.task_id for t in trials],
            "success": [bool(getattr(t, success_key)) for t in trials],
            "error": [not t.ok for t in trials],
        }
    )
    # An errored unit is no verdict: it is left out of every mean (and the run is not
    # complete), never counted as a failure.
    scored = df[~df["error"]]
    if scored.empty:
        return {"k": k, "tasks": int(df["task_id"].nunique()), "units": int(len(df)),
                "errors": int(df["error"].sum()), "complete": False, "per_seed": {},
                "stop_reasons": dict(Counter(t.stop_reason for t in trials).most_common())}
    per_task = scored.groupby(["seed", "task_id"])["success"].agg(["mean", "max", "count"])
    per_seed = per_task.groupby(level="seed").agg(avg=("mean", "mean"), pass_=("max", "mean"),
                                                  tasks=("mean", "size"))
    out: dict[str, Any] = {
        "k": k,
        "tasks": int(df["task_id"].nunique()),
        "units": int(len(df)),
        "errors": int(df["error"].sum()),
        # Why episodes ended (answered, context_overflow, ...).
        "stop_reasons": dict(Counter(t.stop_reason for t in trials).most_common()),
        "complete": bool((per_task["count"] == k).all()) and not df["error"].any(),
        "per_seed": {
            str(seed): {f"avg@{k}": float(row.avg), f"pass@{k}": float(row.pass_), "tasks": int(row.tasks)}
            for seed, row in per_seed.iterrows()
        },
    }
    for name, col in ((f"avg@{k}", "avg"), (f"pass@{k}", "pass_")):
        out[name] = _over_seeds(per_seed[col])
    scored_trials = [t for t in trials if t.ok]
    if scored_trials and all((t.checker or {}).get("scenario") for t in scored_trials):
        out.update(scenario_metrics(scored_trials, success_key))
    return out


def _over_seeds(values: pd.Series) -> dict[str, Any]:
    return {"mean": float(values.mean()), "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
            "n_seeds": int(len(values))}


def scenario_metrics(trials: list[UnitRecord], success_key: str = "success") -> dict[str, Any]:
    """AppWorld's scenario goal completion and its difficulty breakdown (see `scenario_scores`)."""
    return scenario_scores(pd.DataFrame({
        "seed": [t.seed for t in trials], "run": [t.run for t in trials],
        "scenario": [t.checker["scenario"] for t in trials],
        "difficulty": [t.checker.get("difficulty") for t in trials],
        "success": [bool(getattr(t, success_key)) for t in trials]}))


def scenario_scores(df: pd.DataFrame) -> dict[str, Any]:
    """SGC and ``by_difficulty`` from scored units (columns seed, run, scenario, difficulty,
    success); `reme report` computes them with this same function.

    SGC, per seed: the mean over runs of the fraction of scenarios whose every task succeeded
    in that run (AppWorld's own definition, applied per run like Avg@k). ``by_difficulty``:
    the success rate of the units of each difficulty level."""
    per_run = df.groupby(["seed", "run", "scenario"])["success"].all().groupby(level=["seed", "run"]).mean()
    out: dict[str, Any] = {"sgc": _over_seeds(per_run.groupby(level="seed").mean())}
    levels = df.dropna(subset=["difficulty"])
    if not levels.empty:
        out["by_difficulty"] = {_level(d): float(v) for d, v in levels.groupby("difficulty")["success"].mean().items()}
    return out


def _level(value: Any) -> str:
    # A level read back through pandas may be 2.0 where the record said 2.
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)

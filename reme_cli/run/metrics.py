"""Avg@k and Pass@k from unit records (never from re-running anything): the one place they
are computed, for `reme eval`'s metrics.json and for `reme report` alike.

Per seed: Avg@k = mean over tasks of the task's mean success over its k runs;
Pass@k = fraction of tasks solved in at least one of the k runs. Across seeds: mean and
sample standard deviation (ddof=1; 0 for a single seed).

An errored unit counts as a failure in both, as in the authors' harness (``get_reward``
returns 0 on any exception, agentscope-ai/ReMe 65971baf ``benchmark/bfcl/bfcl_agent.py:481-485``):
a run whose units error cannot score higher for it. That it errored stays visible: the
``errors`` count, ``complete: false`` (the report's partial mark) and exit 3.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pandas as pd

from reme_cli.bench.appworld_metrics import sgc_per_seed, success_by_difficulty
from reme_cli.llm.answer_health import merge
from reme_cli.run.records import UnitRecord


def headline(units: pd.DataFrame) -> pd.DataFrame:
    """``units`` (columns task_id, success, error; optionally scenario, difficulty) as the
    headline numbers count them: an errored unit failed. Its scenario and difficulty, which
    only a verdict carries, are the task's from its other units."""
    out = units.assign(success=units["success"].eq(True) & ~units["error"].eq(True))
    for col in ("scenario", "difficulty"):
        if col in out and out[col].isna().any():
            known = out.dropna(subset=[col]).drop_duplicates("task_id").set_index("task_id")[col]
            out[col] = out[col].where(out[col].notna(), out["task_id"].map(known))
    return out


def task_scores(scored: pd.DataFrame) -> pd.DataFrame:
    """Indexed by (seed, task_id), from scored units (columns seed, task_id, success as bool):
    ``avg`` = the task's mean success over its runs, ``pass`` = 1.0 if any run succeeded,
    ``runs`` = how many of its runs were scored."""
    success = scored["success"].astype(float)
    grouped = success.groupby([scored["seed"], scored["task_id"]])
    return pd.DataFrame({"avg": grouped.mean(), "pass": grouped.max(), "runs": grouped.size()})


def seed_scores(per_task: pd.DataFrame) -> pd.DataFrame:
    """Indexed by seed, from `task_scores`: ``avg`` (Avg@k) and ``pass`` (Pass@k) as
    fractions, the means over that seed's scored tasks, and ``tasks``, how many."""
    return per_task.groupby(level="seed").agg(**{"avg": ("avg", "mean"), "pass": ("pass", "mean"),
                                                  "tasks": ("avg", "size")})


def mean_std(values: pd.Series) -> tuple[float, float]:
    """Mean and sample std (ddof=1) over seeds: std 0.0 for a single seed, both NaN for none."""
    if len(values) == 0:
        return math.nan, math.nan
    if len(values) == 1:
        return float(values.iloc[0]), 0.0
    return float(values.mean()), float(values.std(ddof=1))


def over_seeds(values: pd.Series) -> dict[str, Any]:
    mean, std = mean_std(values)
    return {"mean": mean, "std": std, "n_seeds": int(len(values))}


def appworld_scores(scored: pd.DataFrame) -> dict[str, Any]:
    """``sgc`` (over seeds) and ``by_difficulty`` (when some unit names its level) of scored
    units (columns seed, run, scenario, difficulty, success) when every one names its AppWorld
    scenario; {} otherwise (not an AppWorld run)."""
    if scored.empty or "scenario" not in scored or not scored["scenario"].notna().all():
        return {}
    out: dict[str, Any] = {"sgc": over_seeds(sgc_per_seed(scored))}
    by_difficulty = success_by_difficulty(scored)
    if by_difficulty:
        out["by_difficulty"] = by_difficulty
    return out


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
            "scenario": [(t.checker or {}).get("scenario") or None for t in trials],
            "difficulty": [(t.checker or {}).get("difficulty") for t in trials],
        }
    )
    scored = headline(df)  # an errored unit failed (module docstring)
    stop_reasons = dict(Counter(t.stop_reason for t in trials).most_common())
    per_task = task_scores(scored)
    per_seed = seed_scores(per_task)
    out: dict[str, Any] = {
        "k": k,
        "tasks": int(df["task_id"].nunique()),
        "units": int(len(df)),
        "errors": int(df["error"].sum()),
        # Why episodes ended (answered, context_overflow, ...).
        "stop_reasons": stop_reasons,
        "complete": bool((per_task["runs"] == k).all()) and not df["error"].any(),
        "per_seed": {
            str(seed): {f"avg@{k}": float(row["avg"]), f"pass@{k}": float(row["pass"]), "tasks": int(row["tasks"])}
            for seed, row in per_seed.iterrows()
        },
    }
    for name, col in ((f"avg@{k}", "avg"), (f"pass@{k}", "pass")):
        out[name] = over_seeds(per_seed[col])
    out.update(appworld_scores(scored))
    return out


def final_metrics(trials: list[UnitRecord], k: int, mode: str) -> dict[str, Any]:
    """What `reme eval` writes to metrics.json (before its LLM usage): the metrics of the final
    attempts, in dynamic mode those of the first attempts beside them, and the memory
    method's summarizer answers per role (every recorded unit's, errored ones included)."""
    metrics = compute_metrics(trials, k)
    if mode == "dynamic":  # retries make first-attempt and final success differ
        metrics["first_attempt"] = compute_metrics(trials, k, success_key="first_success")
        metrics["variants"] = {"final": metrics.copy(), "first attempt": metrics["first_attempt"]}
    metrics["summarizer_answers"] = merge(*(t.summarizer_answers for t in trials))
    return metrics

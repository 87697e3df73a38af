"""Avg@k, Pass@k and the benchmark's own declared metrics (``reme_cli.bench.scoring``) from
unit records (never from re-running anything): the one place they are computed, for
`reme eval`'s metrics.json and for `reme report` alike.

Per seed: Avg@k = mean over tasks of the task's mean success over its k runs;
Pass@k = fraction of tasks solved in at least one of the k runs. Across seeds: mean and
sample standard deviation (ddof=1; 0 for a single seed).

An errored unit counts as a failure in both, as in the authors' harness (``get_reward``
returns 0 on any exception, agentscope-ai/ReMe 65971baf ``benchmark/bfcl/bfcl_agent.py:481-485``):
a run whose units error cannot score higher for it. That it errored stays visible: the
``errors`` count, ``complete: false`` (the report's partial mark) and exit 3.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd

from reme_cli.bench.scoring import (TASK_METRICS, Reducer, fields_of, mean_std, over_seeds, seed_scores,
                                    task_scores)
from reme_cli.llm.answer_health import merge, summary_failures
from reme_cli.run.records import UnitRecord

__all__ = ["compute_metrics", "declared_scores", "final_metrics", "headline", "mean_std", "over_seeds",
           "seed_scores", "task_scores"]


def headline(units: pd.DataFrame, fields: Sequence[str] = ()) -> pd.DataFrame:
    """``units`` (columns task_id, success, error; optionally the checker ``fields``) as the
    headline numbers count them: an errored unit failed. Its checker fields, which only a
    verdict carries, are the task's from its other units."""
    out = units.assign(success=units["success"].eq(True) & ~units["error"].eq(True))
    for col in fields:
        if col in out and out[col].isna().any():
            known = out.dropna(subset=[col]).drop_duplicates("task_id").set_index("task_id")[col]
            out[col] = out[col].where(out[col].notna(), out["task_id"].map(known))
    return out


def reducers(metrics: Sequence[Reducer]) -> tuple[Reducer, ...]:
    """The paper's Avg@k and Pass@k first, always, then what the benchmark adds."""
    return (*TASK_METRICS, *(m for m in metrics if m not in TASK_METRICS))


def declared_scores(scored: pd.DataFrame, k: int, metrics: Sequence[Reducer]) -> dict[str, Any]:
    """{key: value} of each declared reducer beyond Avg@k / Pass@k that applies to the scored
    units (columns seed, run, task_id, success and the reducers' fields)."""
    if scored.empty:
        return {}
    found = {m.key(k): m.value(scored) for m in reducers(metrics)[len(TASK_METRICS):]}
    return {key: value for key, value in found.items() if value is not None}


def _checker_value(checker: dict | None, name: str) -> Any:
    value = (checker or {}).get(name)
    return None if value == "" else value


def compute_metrics(trials: list[UnitRecord], k: int, success_key: str = "success",
                    metrics: Sequence[Reducer] = TASK_METRICS) -> dict[str, Any]:
    """metrics.json's numbers: Avg@k and Pass@k over seeds and per seed, then each other
    reducer the benchmark declares (``metrics``, e.g. ``AppWorldBenchmark.metrics``)."""
    if not trials:
        return {"k": k, "tasks": 0, "units": 0, "errors": 0, "per_seed": {}}
    fields = fields_of(metrics)
    df = pd.DataFrame(
        {
            "seed": [t.seed for t in trials],
            "run": [t.run for t in trials],
            "task_id": [t.task_id for t in trials],
            "success": [bool(getattr(t, success_key)) for t in trials],
            "error": [not t.ok for t in trials],
            **{f: [_checker_value(t.checker, f) for t in trials] for f in fields},
        }
    )
    scored = headline(df, fields)  # an errored unit failed (module docstring)
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
    out.update(declared_scores(scored, k, metrics))
    return out


def final_metrics(trials: list[UnitRecord], k: int, mode: str,
                  metrics: Sequence[Reducer] = TASK_METRICS) -> dict[str, Any]:
    """What `reme eval` writes to metrics.json (before its LLM usage): the metrics of the final
    attempts, in dynamic mode those of the first attempts beside them, and the memory
    method's summarizer answers per role (every recorded unit's, errored ones included)."""
    metrics_json = compute_metrics(trials, k, metrics=metrics)
    if mode == "dynamic":  # retries make first-attempt and final success differ
        metrics_json["first_attempt"] = compute_metrics(trials, k, success_key="first_success", metrics=metrics)
        metrics_json["variants"] = {"final": metrics_json.copy(), "first attempt": metrics_json["first_attempt"]}
    metrics_json["summarizer_answers"] = merge(*(t.summarizer_answers for t in trials))
    # Summaries that raised: their trials kept their reward and added nothing (methods/reme/summarize.py).
    metrics_json["summary_failures"] = summary_failures(metrics_json["summarizer_answers"])
    return metrics_json

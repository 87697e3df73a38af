"""Avg@k / Pass@k per run for the report, from the unit frame `reme report` loads.

The numbers come from ``reme_cli.run.metrics`` (the paper's definitions, written once), the
same functions as a run's own metrics.json; this module adapts the report's frames to them.

An errored unit counts as a failure in every Avg@k / Pass@k / SGC (as in the authors'
harness, ``reme_cli.run.metrics``); it is counted (``n_errors``) and flags the run
``partial``, so a table marks what it cannot hide. Token columns leave errored units out.

Beside the scored success (a unit's last trial) every run also gets Avg@k / Pass@k over its
units' first trials (``first_*``), with the same functions: the two differ where a method
retried a failed task (the authors' dynamic protocol: up to 3 trials, the last one scored).
``n_retried`` counts the scored units that ran more than one trial. A unit frame without
``first_success`` (or with it missing for a unit) reads as scored on its first trial.

Each run also gets the metrics its benchmark declares beyond Avg@k / Pass@k
(``reme_cli.bench.scoring``: AppWorld's SGC and success per difficulty): a per-seed metric
as ``{name}_mean`` / ``{name}_std``, a breakdown as ``{name}`` ({group: value}). The columns
are those of every benchmark loadable here, so a report's CSV keeps its shape whatever runs
it holds; a cell is NaN ({}) where the metric does not apply.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import pandas as pd

from reme_cli.bench.scoring import Breakdown, Reducer, benchmark_class, fields_of, own_metrics, registered
from reme_cli.run import metrics as scores

BASE_COLUMNS = ["run_id", "avg_mean", "avg_std", "pass_mean", "pass_std", "n_seeds", "n_tasks",
                "n_units", "n_errors", "expected_units", "partial", "per_seed"]
AFTER_COLUMNS = ["n_retried", "first_avg_mean", "first_avg_std", "first_pass_mean",
                 "first_pass_std", "tokens_per_unit", "max_prompt", "n_summaries", "n_summary_failures"]


@cache
def declared_reducers() -> tuple[Reducer, ...]:
    """Every loadable benchmark's own metrics (beyond Avg@k / Pass@k), each name once."""
    found: dict[str, Reducer] = {}
    for cls in registered().values():
        for metric in own_metrics(cls):
            found.setdefault(metric.name, metric)
    return tuple(found.values())


def breakdown_names() -> list[str]:
    return [m.name for m in declared_reducers() if isinstance(m, Breakdown)]


def reducer_columns(reducers: tuple[Reducer, ...]) -> list[str]:
    return [c for m in reducers for c in ([m.name] if isinstance(m, Breakdown) else [f"{m.name}_mean", f"{m.name}_std"])]


def metric_columns() -> list[str]:
    """The columns of ``run_metrics``' frame."""
    return [*BASE_COLUMNS, *reducer_columns(declared_reducers()), *AFTER_COLUMNS]


def as_flag(column: pd.Series) -> pd.Series:
    """A boolean column where only True counts (a missing value must not read as True)."""
    return column.eq(True)


def scored_units(units: pd.DataFrame) -> pd.DataFrame:
    """The units with a verdict: those that did not error (what token columns average)."""
    return units[~as_flag(units["error"])]


def counted_units(units: pd.DataFrame) -> pd.DataFrame:
    """Every unit as the scores count it: an errored one failed."""
    return scores.headline(units.assign(success=as_flag(units["success"]), error=as_flag(units["error"])),
                           fields_of(declared_reducers()))


def first_trial(units: pd.DataFrame) -> pd.Series:
    """Each unit's verdict on its first trial; its scored verdict where the frame has none."""
    if "first_success" not in units:
        return as_flag(units["success"])
    return as_flag(units["first_success"].where(units["first_success"].notna(), units["success"]))


def retried(units: pd.DataFrame) -> pd.Series:
    """Which units ran more than one trial (or were scored on another trial than their first)."""
    attempts = pd.to_numeric(units["attempts"], errors="coerce") if "attempts" in units else None
    more = attempts.gt(1) if attempts is not None else pd.Series(False, index=units.index)
    return more | first_trial(units).ne(as_flag(units["success"]))


def counted_seed_scores(units: pd.DataFrame) -> pd.DataFrame:
    """Avg@k and Pass@k per seed (``reme_cli.bench.scoring``), an errored unit a failed run."""
    return scores.seed_scores(scores.task_scores(counted_units(units)))


def run_reducers(benchmark: Any) -> tuple[Reducer, ...]:
    """The reducers a run's benchmark declares; every known one where its benchmark cannot be
    loaded here (or is not given), each then applying only where its fields are in the units."""
    cls = benchmark_class(benchmark)
    return own_metrics(cls) if cls is not None else declared_reducers()


def declared_columns(units: pd.DataFrame, k: int, reducers: tuple[Reducer, ...]) -> dict[str, Any]:
    """The declared metrics' columns of one run's units: NaN / {} where one does not apply."""
    found = scores.declared_scores(counted_units(units), k, reducers)
    out: dict[str, Any] = {}
    for m in declared_reducers():
        value = found.get(m.key(k)) if m in reducers else None
        if isinstance(m, Breakdown):
            out[m.name] = value or {}
        else:
            out[f"{m.name}_mean"] = math.nan if value is None else value["mean"]
            out[f"{m.name}_std"] = math.nan if value is None else value["std"]
    return out


def _one_run(run: pd.Series, units: pd.DataFrame) -> dict:
    """The metrics row of one run from its own units."""
    per_seed = counted_seed_scores(units)
    avg_mean, avg_std = scores.mean_std(per_seed["avg"])
    pass_mean, pass_std = scores.mean_std(per_seed["pass"])
    first = counted_seed_scores(units.assign(success=first_trial(units)))
    first_avg_mean, first_avg_std = scores.mean_std(first["avg"])
    first_pass_mean, first_pass_std = scores.mean_std(first["pass"])
    n_errors = int(as_flag(units["error"]).sum())
    expected = int(run["seeds"]) * int(run["k"]) * int(run["tasks"])
    partial = len(units) < expected or n_errors > 0 or run["status"] != "complete"
    return {
        "run_id": run["run_id"], "avg_mean": avg_mean, "avg_std": avg_std,
        "pass_mean": pass_mean, "pass_std": pass_std, "n_seeds": len(per_seed),
        "n_tasks": int(units["task_id"].nunique()), "n_units": len(units),
        "n_errors": n_errors, "expected_units": expected, "partial": bool(partial),
        "per_seed": {int(seed): (float(r["avg"]), float(r["pass"])) for seed, r in per_seed.iterrows()},
        **declared_columns(units, int(run["k"]), run_reducers(run.get("benchmark"))),
        "n_retried": int(retried(scored_units(units)).sum()),
        "first_avg_mean": first_avg_mean, "first_avg_std": first_avg_std,
        "first_pass_mean": first_pass_mean, "first_pass_std": first_pass_std,
        **token_columns(units),
        # The memory method's summaries and those that raised (their trials kept their reward).
        **{f"n_{c}": int(pd.to_numeric(units[c], errors="coerce").fillna(0).sum()) if c in units else 0
           for c in ("summaries", "summary_failures")},
    }


def token_columns(units: pd.DataFrame) -> dict:
    """tokens_per_unit (the executor's prompt + completion tokens of a scored unit, all its
    trials, averaged) and max_prompt (the longest prompt any step sent): what a method's
    memory costs per task, and how close it came to the context. NaN where no record kept them."""
    scored = scored_units(units)
    tokens = pd.to_numeric(scored["tokens"], errors="coerce") if "tokens" in scored else pd.Series(dtype=float)
    longest = pd.to_numeric(scored["max_prompt"], errors="coerce") if "max_prompt" in scored else pd.Series(dtype=float)
    return {"tokens_per_unit": float(tokens.mean()) if tokens.notna().any() else math.nan,
            "max_prompt": float(longest.max()) if longest.notna().any() else math.nan}


def run_metrics(units: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run in ``runs`` (sorted by run_id) with the columns of ``metric_columns()``.

    ``partial`` is True when the run has fewer units than planned (seeds*k*tasks), any errored
    unit, or a status other than "complete"; tables mark such runs instead of hiding it.
    """
    rows = [_one_run(run, units[units["run_id"] == run["run_id"]])
            for _, run in runs.sort_values("run_id", kind="stable").iterrows()]
    return pd.DataFrame(rows, columns=metric_columns())

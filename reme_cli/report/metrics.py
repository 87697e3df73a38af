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

Runs whose every scored unit names its scenario (AppWorld) also get SGC and the success rate
per difficulty level.
"""

from __future__ import annotations

import math

import pandas as pd

from reme_cli.run import metrics as scores

METRIC_COLUMNS = ["run_id", "avg_mean", "avg_std", "pass_mean", "pass_std", "n_seeds", "n_tasks",
                  "n_units", "n_errors", "expected_units", "partial", "per_seed", "sgc_mean", "sgc_std",
                  "by_difficulty", "n_retried", "first_avg_mean", "first_avg_std", "first_pass_mean",
                  "first_pass_std", "tokens_per_unit", "max_prompt"]


def as_flag(column: pd.Series) -> pd.Series:
    """A boolean column where only True counts (a missing value must not read as True)."""
    return column.eq(True)


def scored_units(units: pd.DataFrame) -> pd.DataFrame:
    """The units with a verdict: those that did not error (what token columns average)."""
    return units[~as_flag(units["error"])]


def counted_units(units: pd.DataFrame) -> pd.DataFrame:
    """Every unit as the scores count it: an errored one failed."""
    return scores.headline(units.assign(success=as_flag(units["success"]), error=as_flag(units["error"])))


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


def task_scores(units: pd.DataFrame) -> pd.DataFrame:
    """One row per (seed, task_id): ``avg`` = mean success over its runs, ``pass`` = any
    success; an errored unit counts as a failed run."""
    scored = counted_units(units)
    if scored.empty:
        return pd.DataFrame({"seed": pd.Series(dtype=int), "task_id": pd.Series(dtype=str),
                             "avg": pd.Series(dtype=float), "pass": pd.Series(dtype=float)})
    per_task = scores.task_scores(scored)[["avg", "pass"]]
    return per_task.reset_index().sort_values(["seed", "task_id"], kind="stable").reset_index(drop=True)


def seed_scores(units: pd.DataFrame) -> pd.DataFrame:
    """One row per seed: Avg@k and Pass@k as fractions (means over that seed's tasks)."""
    per_task = task_scores(units)
    if per_task.empty:
        return pd.DataFrame({"seed": pd.Series(dtype=int), "avg": pd.Series(dtype=float),
                             "pass": pd.Series(dtype=float)})
    return scores.seed_scores(per_task.set_index(["seed", "task_id"]))[["avg", "pass"]].reset_index()


def scenario_columns(units: pd.DataFrame) -> dict:
    """sgc_mean, sgc_std and by_difficulty ({level: success rate}) of one run's units; NaN
    and {} when some unit has no scenario (not an AppWorld run)."""
    scored = counted_units(units)
    frame = pd.DataFrame({"seed": scored["seed"], "run": scored["run"],
                          "scenario": scored["scenario"] if "scenario" in scored else None,
                          "difficulty": scored["difficulty"] if "difficulty" in scored else None,
                          "success": scored["success"]})
    appworld = scores.appworld_scores(frame)
    if not appworld:
        return {"sgc_mean": math.nan, "sgc_std": math.nan, "by_difficulty": {}}
    return {"sgc_mean": appworld["sgc"]["mean"], "sgc_std": appworld["sgc"]["std"],
            "by_difficulty": appworld.get("by_difficulty", {})}


def _one_run(run: pd.Series, units: pd.DataFrame) -> dict:
    """The metrics row of one run from its own units."""
    per_seed = seed_scores(units)
    avg_mean, avg_std = scores.mean_std(per_seed["avg"])
    pass_mean, pass_std = scores.mean_std(per_seed["pass"])
    first = seed_scores(units.assign(success=first_trial(units)))  # errored: failed (task_scores)
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
        "per_seed": {int(r.seed): (float(r.avg), float(r["pass"])) for _, r in per_seed.iterrows()},
        **scenario_columns(units),
        "n_retried": int(retried(scored_units(units)).sum()),
        "first_avg_mean": first_avg_mean, "first_avg_std": first_avg_std,
        "first_pass_mean": first_pass_mean, "first_pass_std": first_pass_std,
        **token_columns(units),
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
    """One row per run in ``runs`` (sorted by run_id) with the columns in ``METRIC_COLUMNS``.

    ``partial`` is True when the run has fewer units than planned (seeds*k*tasks), any errored
    unit, or a status other than "complete"; tables mark such runs instead of hiding it.
    """
    rows = [_one_run(run, units[units["run_id"] == run["run_id"]])
            for _, run in runs.sort_values("run_id", kind="stable").iterrows()]
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)

"""Is a difference between two runs larger than the noise? A paired cluster bootstrap.

Two runs are compared on the same (seed, task) pairs only, so that a task one run never
finished cannot move the difference. Tasks are the resampling unit (a cluster bootstrap):
a task's seeds move together, because the seeds of one task are not independent draws.
The interval comes from ``scipy.stats.bootstrap`` (paired, percentile); nothing here
re-implements a statistic, it only arranges the arrays.
"""

from __future__ import annotations

import inspect
import math
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from reme_cli.bench.scoring import task_scores
from reme_cli.report.metrics import counted_units

Metric = Literal["avg", "pass"]


def paired_task_matrix(units_a: pd.DataFrame, units_b: pd.DataFrame,
                       metric: Metric) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Per-task scores of a and b (each the mean over the shared seeds), aligned by task.

    Keeps the (seed, task) pairs scored in both runs, then the tasks that have every shared
    seed, so each task contributes the same seeds to both sides and the per-seed metric
    mean equals the mean of these per-task values. Returns (a, b, n_seeds, dropped_pairs).
    """
    a = task_scores(counted_units(units_a))[metric]  # an errored unit: a failed run
    b = task_scores(counted_units(units_b))[metric]
    common = a.index.intersection(b.index)
    seeds = sorted(set(common.get_level_values("seed")))
    both = pd.DataFrame({"a": a.loc[common], "b": b.loc[common]}).reset_index()
    seeds_per_task = both.groupby("task_id")["seed"].nunique()
    full_tasks = sorted(seeds_per_task[seeds_per_task == len(seeds)].index)
    kept = both[both["task_id"].isin(full_tasks)]
    per_task = kept.groupby("task_id")[["a", "b"]].mean().reindex(full_tasks)
    dropped = len(a) + len(b) - 2 * len(kept)
    return per_task["a"].to_numpy(float), per_task["b"].to_numpy(float), len(seeds), dropped


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """The statistic: metric(a) - metric(b) over the (resampled) tasks."""
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _rng_kwarg(seed: int) -> dict:
    """The generator argument under its name in the installed SciPy (``rng`` since 1.15)."""
    name = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    return {name: np.random.default_rng(seed)}


def paired_bootstrap(units_a: pd.DataFrame, units_b: pd.DataFrame, metric: Metric = "avg",
                     n_resamples: int = 10000, seed: int = 0) -> dict:
    """Difference (a - b) of Avg@k or Pass@k with a 95% task-cluster bootstrap interval.

    Returns ``diff, lo, hi`` (fractions), ``n_tasks, n_seeds`` actually compared,
    ``dropped_pairs`` ((seed, task) pairs present in only one run, or on a task missing a
    shared seed) and ``distinguishable`` (the interval excludes 0).

    The percentile interval is used rather than BCa: when every task has the same difference
    (identical inputs, or all-success vs all-failure) BCa's acceleration divides by a zero
    spread and returns NaN, while the percentile interval is the exact point [diff, diff].
    With fewer than two shared tasks there is no spread to resample: the interval is NaN and
    the difference is reported as not distinguishable.
    """
    a, b, n_seeds, dropped = paired_task_matrix(units_a, units_b, metric)
    result = {"metric": metric, "n_tasks": len(a), "n_seeds": n_seeds, "dropped_pairs": dropped,
              "diff": float(_mean_difference(a, b)) if len(a) else math.nan}
    if len(a) < 2:
        return {**result, "lo": math.nan, "hi": math.nan, "distinguishable": False}
    res = stats.bootstrap((a, b), _mean_difference, paired=True, vectorized=True,
                          n_resamples=n_resamples, confidence_level=0.95, method="percentile",
                          **_rng_kwarg(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return {**result, "lo": lo, "hi": hi, "distinguishable": bool(lo > 0 or hi < 0)}


def task_interval(units: pd.DataFrame, metric: Metric = "avg", n_resamples: int = 2000,
                  seed: int = 0) -> tuple[float, float]:
    """A 95% interval of one run's Avg@k or Pass@k: the tasks resampled (each task's score the
    mean over its seeds), percentile bootstrap as in ``paired_bootstrap``. NaN with fewer than
    two tasks; the point itself when every task scores the same."""
    per_task = task_scores(counted_units(units)).groupby(level="task_id")[metric].mean().to_numpy(float)
    if len(per_task) < 2:
        return math.nan, math.nan
    if np.all(per_task == per_task[0]):
        return float(per_task[0]), float(per_task[0])
    res = stats.bootstrap((per_task,), np.mean, vectorized=True, n_resamples=n_resamples,
                          confidence_level=0.95, method="percentile", **_rng_kwarg(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)

"""What a benchmark scores and what the report calls it: named reducers it declares.

A benchmark lists its metrics in a ``metrics`` class attribute and its words in ``labels``
(compare inspect_ai's ``@scorer(metrics=[accuracy(), stderr()])`` and lm-evaluation-harness's
``metric_list``). `reme eval`'s metrics.json and `reme report` iterate what it declares, so
neither names a benchmark, and a new benchmark's own score needs no edit outside its module.

Every reducer reads one frame of a run's units, as the headline counts them (an errored unit
failed): the columns seed, run, task_id, success (bool), error, and each checker field a
declared reducer asks for in ``fields`` (``Outcome.details``, e.g. AppWorld's scenario). Two kinds:

- ``Metric``: one value per seed, reported as mean and sample std over seeds
  (metrics.json: ``{name: {"mean", "std", "n_seeds"}}``; the report: ``{name}_mean``, ``{name}_std``);
- ``Breakdown``: one value per group (metrics.json and the report: ``{name: {group: value}}``).

Either returns None where it does not apply to the units (e.g. some unit lacks its field).
``{k}`` in a name or label stands for the runs per task.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from reme_cli.bench.base import Benchmark
from reme_cli.core.registry import BENCHMARKS

if TYPE_CHECKING:  # reducers get frames; declaring them (a benchmark's class, loaded to validate a config) needs none
    import pandas as pd


@dataclass(frozen=True)
class Metric:
    """A score per seed: ``per_seed(units)`` -> a Series indexed by seed (None: n/a)."""

    name: str  # the metrics.json key ("{k}" = runs per task)
    label: str  # the report's column words ("{k}" = runs per task)
    per_seed: Callable[[pd.DataFrame], Optional[pd.Series]]
    fields: tuple[str, ...] = ()  # checker fields it reads

    def key(self, k: Any) -> str:
        return self.name.replace("{k}", str(k))

    def title(self, k: Any) -> str:
        return self.label.replace("{k}", str(k))

    def value(self, units: pd.DataFrame) -> Optional[dict[str, Any]]:
        values = self.per_seed(units)
        return None if values is None else over_seeds(values)


@dataclass(frozen=True)
class Breakdown:
    """A score per group over all seeds and runs: ``by_group(units)`` -> {group: value}
    ({} or None: n/a). ``label`` names one group's column ("{group}")."""

    name: str
    label: str
    by_group: Callable[[pd.DataFrame], Optional[dict[str, float]]]
    fields: tuple[str, ...] = ()

    def key(self, k: Any) -> str:
        return self.name

    def title(self, group: Any) -> str:
        return self.label.replace("{group}", str(group))

    def value(self, units: pd.DataFrame) -> Optional[dict[str, float]]:
        return self.by_group(units) or None


Reducer = Union[Metric, Breakdown]


@dataclass(frozen=True)
class Labels:
    """The benchmark's words in tables: its name, what one task's success is called (AppWorld:
    TGC), a note every table holding its runs carries, and the title and note of the table of
    its own metrics (``reme report`` writes one when it declares any beyond Avg@k / Pass@k)."""

    name: str
    success: Optional[str] = None
    note: Optional[str] = None
    table_title: Optional[str] = None
    table_note: Optional[str] = None


# ---------------------------------------------------------------- the paper's two

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


def task_scores(scored: pd.DataFrame) -> pd.DataFrame:
    """Indexed by (seed, task_id), from scored units (columns seed, task_id, success as bool):
    ``avg`` = the task's mean success over its runs, ``pass`` = 1.0 if any run succeeded,
    ``runs`` = how many of its runs were scored."""
    success = scored["success"].astype(float)
    grouped = success.groupby([scored["seed"], scored["task_id"]])
    return grouped.agg(**{"avg": "mean", "pass": "max", "runs": "size"})


def seed_scores(per_task: pd.DataFrame) -> pd.DataFrame:
    """Indexed by seed, from `task_scores`: ``avg`` (Avg@k) and ``pass`` (Pass@k) as
    fractions, the means over that seed's scored tasks, and ``tasks``, how many."""
    return per_task.groupby(level="seed").agg(**{"avg": ("avg", "mean"), "pass": ("pass", "mean"),
                                                  "tasks": ("avg", "size")})


def _task_metric(column: str) -> Callable[[pd.DataFrame], pd.Series]:
    return lambda units: seed_scores(task_scores(units))[column]


# Per seed: Avg@k = mean over tasks of the task's mean success over its k runs; Pass@k =
# fraction of tasks solved in at least one of the k runs (the paper's two, every benchmark's).
AVG_AT_K = Metric("avg@{k}", "Avg@{k}", _task_metric("avg"))
PASS_AT_K = Metric("pass@{k}", "Pass@{k}", _task_metric("pass"))
TASK_METRICS: tuple[Reducer, ...] = (AVG_AT_K, PASS_AT_K)


# ---------------------------------------------------------------- what a benchmark declares

def declared_metrics(bench: Benchmark | type[Benchmark]) -> tuple[Reducer, ...]:
    """A benchmark's (class or instance) ``metrics``; Avg@k and Pass@k when it declares none."""
    return tuple(bench.metrics or TASK_METRICS)


def own_metrics(bench: Any) -> tuple[Reducer, ...]:
    """What it declares beyond the paper's Avg@k and Pass@k."""
    return tuple(m for m in declared_metrics(bench) if m not in TASK_METRICS)


def declared_labels(bench: Benchmark | type[Benchmark], name: str) -> Labels:
    return bench.labels if isinstance(bench.labels, Labels) else Labels(name)


def fields_of(metrics: Sequence[Reducer]) -> tuple[str, ...]:
    """The checker fields the reducers read, each once, in declaration order."""
    return tuple(dict.fromkeys(f for m in metrics for f in m.fields))


def benchmark_class(name: str) -> type[Benchmark] | None:
    """The benchmark registered as ``name``, or None where it cannot be loaded here (a run of
    a plug-in not installed still reports, with Avg@k and Pass@k only)."""
    return cast("type[Benchmark] | None", BENCHMARKS.find(name))


def registered() -> dict[str, type[Benchmark]]:
    """Every benchmark loadable here, by name."""
    found = {name: benchmark_class(name) for name in BENCHMARKS.names()}
    return {name: cls for name, cls in found.items() if cls is not None}

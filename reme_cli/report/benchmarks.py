"""What the report knows of a benchmark: what the benchmark itself declares
(``reme_cli.bench.scoring``: its name in tables, its notes, its own metrics), looked up by
the run's benchmark name. Nothing here names a benchmark."""

from __future__ import annotations

from functools import cache
from typing import Any

from reme_cli.bench.scoring import Labels, Metric, Reducer, benchmark_class, declared_labels
from reme_cli.report.metrics import run_reducers
from reme_cli.report.paper import paper_benchmarks


@cache
def labels_of(benchmark: str) -> Labels:
    cls = benchmark_class(benchmark)
    return declared_labels(cls, str(benchmark)) if cls is not None else Labels(str(benchmark))


def benchmark_label(benchmark: str) -> str:
    """How tables name a benchmark (its declared label, else its name)."""
    return labels_of(benchmark).name


@cache
def own_metrics_of(benchmark: Any) -> tuple[Reducer, ...]:
    return run_reducers(benchmark)


def seed_metrics_of(benchmark: Any) -> tuple[Metric, ...]:
    """Its own per-seed metrics: each gets an "ours" column beside Avg@k / Pass@k."""
    return tuple(m for m in own_metrics_of(benchmark) if isinstance(m, Metric))


def bench_rank(benchmark: str) -> tuple:
    """The paper's benchmarks first, in the paper's order, then any other by name."""
    order = paper_benchmarks()
    return (order.index(benchmark) if benchmark in order else len(order), str(benchmark))

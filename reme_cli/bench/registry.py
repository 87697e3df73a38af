"""The benchmark a config names, built from its validated section."""

from __future__ import annotations

from typing import Any, cast

from reme_cli.bench.base import Benchmark
from reme_cli.core.registry import BENCHMARKS


def benchmark_plugin(name: str) -> type[Benchmark]:
    """The ``Benchmark`` subclass registered as ``name`` (the registry has held it to the seam)."""
    return cast("type[Benchmark]", BENCHMARKS.get(name))


def make_benchmark(cfg: Any) -> Benchmark:
    """``cfg``: the ``benchmark`` section, already an instance of the plug-in's config class."""
    return benchmark_plugin(cfg.name).from_config(cfg)


def prepare_benchmark(bench: Benchmark) -> None:
    """What running the benchmark's episodes needs (``Benchmark.prepare``: AppWorld's venv,
    data and sandbox), checked by the commands that run episodes before they write
    anything; plans, reports and pool commands never ask."""
    bench.prepare()

"""The benchmark a config names, built from its validated section."""

from __future__ import annotations

from typing import Any

from reme_cli.bench.base import Benchmark
from reme_cli.core.registry import BENCHMARKS


def make_benchmark(cfg: Any) -> Benchmark:
    """``cfg``: the ``benchmark`` section, already an instance of the plug-in's config class."""
    return BENCHMARKS.get(cfg.name).from_config(cfg)


def prepare_benchmark(bench: Benchmark) -> None:
    """What running the benchmark's episodes needs (its optional ``prepare()``: AppWorld's
    venv, data and sandbox), checked by the commands that run episodes before they write
    anything; plans, reports and pool commands never ask."""
    prepare = getattr(bench, "prepare", None)
    if prepare is not None:
        prepare()

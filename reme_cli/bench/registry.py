"""The benchmark a config names, built from its validated section."""

from __future__ import annotations

from typing import Any

from reme_cli.bench.base import Benchmark
from reme_cli.core.registry import BENCHMARKS


def make_benchmark(cfg: Any) -> Benchmark:
    """``cfg``: the ``benchmark`` section, already an instance of the plug-in's config class."""
    return BENCHMARKS.get(cfg.name).from_config(cfg)

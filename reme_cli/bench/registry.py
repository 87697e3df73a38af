"""Benchmark names (the ``benchmark.name`` config value) to implementations."""

from __future__ import annotations

from reme_cli.bench.base import Benchmark
from reme_cli.config import BenchmarkCfg


def make_benchmark(cfg: BenchmarkCfg) -> Benchmark:
    if cfg.name == "bfcl_v3":
        from reme_cli.bench.bfcl import BFCLBenchmark

        return BFCLBenchmark(split=cfg.split, limit=cfg.limit, task_ids=cfg.task_ids)
    raise ValueError(f"unknown benchmark {cfg.name!r}")  # config validation prevents this

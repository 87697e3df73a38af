"""Units of work and the streams they run in.

A unit is one attempt of one task: (seed, run, task). Without an evolving memory every
unit is independent and is its own stream; in dynamic mode each (seed, run) is one stream
that walks the tasks in a seed-determined order, because the pool it evolves makes each
task depend on the ones before it.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    seed: int
    run: int
    task_id: str
    position: int = 0  # index within its stream

    @property
    def key(self) -> str:
        return f"s{self.seed}/r{self.run}/{self.task_id}"

    def sampling_seed(self, seed_base: int) -> int:
        """A per-unit request seed: reruns replay, different units sample differently."""
        digest = hashlib.sha256(f"{seed_base + self.seed}:{self.run}:{self.task_id}".encode()).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def task_order(task_ids: list[str], seed: int, seed_base: int) -> list[str]:
    order = list(task_ids)
    random.Random(seed_base + seed).shuffle(order)
    return order


def plan_streams(task_ids: list[str], seeds: int, runs: int, seed_base: int,
                 sequential: bool) -> list[list[Unit]]:
    streams: list[list[Unit]] = []
    for seed in range(seeds):
        for run in range(runs):
            if sequential:
                order = task_order(task_ids, seed, seed_base)
                streams.append([Unit(seed, run, t, i) for i, t in enumerate(order)])
            else:
                streams.extend([Unit(seed, run, t)] for t in task_ids)
    return streams

"""Units of work and the streams they run in.

A unit is one attempt of one task: (seed, run, task). Without an evolving memory every
unit is independent and is its own stream; in dynamic mode each (seed, run) is one stream
that walks the tasks in order, because the pool it evolves makes each task depend on the
ones before it: the split's file order, as the authors' run_bfcl.py reads it (``file``), or
a permutation per seed (``shuffle``).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, replace

from reme_cli.core.errors import UserError

# More units than any experiment has (the paper's largest: 417 tasks x 4 runs x 3 seeds =
# 5,004), and few enough to plan in memory at once.
MAX_UNITS = 1_000_000


@dataclass(frozen=True)
class Unit:
    seed: int
    run: int
    task_id: str
    position: int = 0  # index within its stream
    worker: int = 0  # which of the stream's workers runs it (eval.dynamic_workers)

    @property
    def key(self) -> str:
        return f"s{self.seed}/r{self.run}/{self.task_id}"

    def sampling_seed(self, seed_base: int) -> int:
        """A per-unit request seed: reruns replay, different units sample differently."""
        digest = hashlib.sha256(f"{seed_base + self.seed}:{self.run}:{self.task_id}".encode()).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def task_order(task_ids: list[str], seed: int, seed_base: int, order: str = "file") -> list[str]:
    """The order a seed's streams walk the tasks: as given (``file``), or shuffled by the seed."""
    ids = list(task_ids)
    if order == "shuffle":
        random.Random(seed_base + seed).shuffle(ids)
    return ids


def plan_streams(task_ids: list[str], seeds: int, runs: int, seed_base: int,
                 sequential: bool, scope: str = "stream", workers: int = 1,
                 order: str = "file") -> list[list[Unit]]:
    """``scope`` (sequential only): ``stream``, each (seed, run) evolves its own memory;
    ``experiment``, the runs of a seed share one memory, run after run (the official
    scripts load the pool once per experiment). ``order`` (sequential only): ``file``, the
    tasks as given, or ``shuffle``, a permutation per seed (``task_order``).

    ``workers`` (sequential only): each memory stream is walked by that many workers at
    once, worker i taking units i, i+W, ... of it (the authors' ``task_ids[i::W]`` on BFCL);
    they share the stream's memory, which then evolves in the order units finish. With
    ``eval.dynamic_batches`` (AppWorld) the runner holds the units i, i+W, ... to batches
    (``run.runner.Batches``): the same shares, W consecutive tasks at a time."""
    units = len(task_ids) * seeds * runs
    if units > MAX_UNITS:
        raise UserError(f"{len(task_ids)} tasks x eval.runs={runs} x eval.seeds={seeds} = {units:,} units, more "
                        f"than reme plans at once ({MAX_UNITS:,}); lower eval.runs or eval.seeds")
    planned = _plan(task_ids, seeds, runs, seed_base, sequential, scope, order)
    if not sequential or workers <= 1:
        return planned
    return [part for stream in planned
            for part in ([replace(u, worker=i) for u in stream[i::workers]] for i in range(workers)) if part]


def _plan(task_ids: list[str], seeds: int, runs: int, seed_base: int, sequential: bool,
          scope: str, how: str) -> list[list[Unit]]:
    streams: list[list[Unit]] = []
    for seed in range(seeds):
        order = task_order(task_ids, seed, seed_base, how)
        if sequential and scope == "experiment":
            streams.append([Unit(seed, run, t, run * len(order) + i)
                            for run in range(runs) for i, t in enumerate(order)])
            continue
        for run in range(runs):
            if sequential:
                streams.append([Unit(seed, run, t, i) for i, t in enumerate(order)])
            else:
                streams.extend([Unit(seed, run, t)] for t in task_ids)
    return streams


def plan_passes(task_ids: list[str], passes: int) -> list[list[Unit]]:
    """One stream that walks ``task_ids`` in their order, pass after pass (pass i is run i):
    a method adapting on the training split, as its authors' offline loops do."""
    return [[Unit(0, run, t, run * len(task_ids) + i) for run in range(passes) for i, t in enumerate(task_ids)]]

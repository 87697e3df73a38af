"""The toy benchmark's own metrics, declared the way a benchmark declares them
(``reme_cli.bench.scoring``): `reme eval` writes them to metrics.json and `reme report`
shows them, though nothing in reme names them.

- ``progress``: per seed, how far the counter got toward its target, averaged over units
  (a task stopped short of its target still counts its share);
- ``by_target``: the success rate of the units of each target.
Both read the checker's ``counter`` and ``target`` (``benchmark.CounterEnv.evaluate``).
"""

from __future__ import annotations

import pandas as pd

from reme_cli.bench.scoring import TASK_METRICS, Breakdown, Labels, Metric


def progress_per_seed(units: pd.DataFrame) -> pd.Series | None:
    if units[["counter", "target"]].isna().any().any():
        return None
    share = (units["counter"].astype(float) / units["target"].astype(float)).clip(upper=1.0)
    return share.groupby(units["seed"]).mean()


def success_by_target(units: pd.DataFrame) -> dict[str, float]:
    known = units.dropna(subset=["target"])
    return {str(int(t)): float(v) for t, v in known.groupby("target")["success"].mean().items()}


PROGRESS = Metric("progress", "progress", progress_per_seed, fields=("counter", "target"))
BY_TARGET = Breakdown("by_target", "target {group}", success_by_target, fields=("target",))
METRICS = (*TASK_METRICS, PROGRESS, BY_TARGET)
LABELS = Labels(name="Toy", success="reached",
                note="Toy: progress is the counter's share of its target, averaged over units.",
                table_title="Toy: progress and success per target",
                table_note="target t: the success rate of the units whose counter had to reach t.")

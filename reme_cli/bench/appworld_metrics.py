"""AppWorld's own scores beside the paper's task-level Avg@k / Pass@k: scenario goal
completion (SGC) and the success rate per difficulty level.

Both read scored units (errored ones already left out) as a frame with the columns seed,
run, scenario, difficulty and success, the names AppWorld's checker records
(``bench/appworld.py``); `reme eval`'s metrics.json and `reme report` call these same
functions, so the two agree.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


def sgc_per_seed(units: pd.DataFrame) -> pd.Series:
    """SGC of each seed: the mean over runs of the fraction of scenarios whose every task
    succeeded in that run (AppWorld's own definition, applied per run like Avg@k)."""
    per_run = units.groupby(["seed", "run", "scenario"])["success"].all().groupby(level=["seed", "run"]).mean()
    return per_run.groupby(level="seed").mean()


def success_by_difficulty(units: pd.DataFrame) -> dict[str, float]:
    """{level: success rate of the units of that difficulty level}; {} when none names one."""
    levels = units.dropna(subset=["difficulty"])
    return {_level(d): float(v) for d, v in levels.groupby("difficulty")["success"].mean().items()}


def _level(value: Any) -> str:
    # A level read back through pandas may be 2.0 where the record said 2.
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)

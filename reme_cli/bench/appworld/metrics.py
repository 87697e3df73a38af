"""AppWorld's own scores beside the paper's task-level Avg@k / Pass@k: scenario goal
completion (SGC) and the success rate per difficulty level, and AppWorld's words for them.

Both read a run's units as ``reme_cli.bench.scoring`` hands them over (an errored unit
failed), with the checker fields scenario and difficulty that AppWorld's checker records
(``bench/appworld/benchmark.py``); `reme eval`'s metrics.json and `reme report` call these same
reducers, so the two agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from reme_cli.bench.scoring import TASK_METRICS, Breakdown, Labels, Metric

if TYPE_CHECKING:  # the reducers are handed frames; the benchmark's class is loaded without pandas
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


def _every_unit_names_its_scenario(units: pd.DataFrame) -> bool:
    return not units.empty and "scenario" in units and bool(units["scenario"].notna().all())


def _sgc(units: pd.DataFrame) -> Optional[pd.Series]:
    return sgc_per_seed(units) if _every_unit_names_its_scenario(units) else None


def _by_difficulty(units: pd.DataFrame) -> Optional[dict[str, float]]:
    return success_by_difficulty(units) if _every_unit_names_its_scenario(units) else None


SGC = Metric("sgc", "SGC Avg@{k}", _sgc, fields=("scenario", "difficulty"))
BY_DIFFICULTY = Breakdown("by_difficulty", "difficulty {group}", _by_difficulty, fields=("scenario", "difficulty"))
METRICS = (*TASK_METRICS, SGC, BY_DIFFICULTY)
LABELS = Labels(
    name="AppWorld",
    success="TGC",
    note=("AppWorld: Avg@k and Pass@k are over task goal completion (TGC, every test of the task "
          "passes); SGC Avg@k is scenario goal completion (every task of a scenario passes in a run), "
          "averaged over the k runs. The paper reports no SGC."),
    table_title="AppWorld: scenario goal completion and difficulty",
    table_note=("TGC: every test of a task passes; SGC: every task of a scenario passes in a run, averaged "
                "over the k runs; difficulty d: the success rate of the units of AppWorld's difficulty level d, "
                "over all seeds and runs. Cells in %, mean ± std over seeds; n = seeds/tasks."),
)

"""The frames `reme report` and `reme view` compute on, from run logs (``core/run_log.py``):
one row per unit, one per run, and a dynamic run's series along its streams.

Nothing is recomputed from episodes: every number comes from the runs' records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from reme_cli.core.run_log import RunLog, UnitRecord
from reme_cli.llm.answer_health import summary_failures
from reme_cli.report.fidelity import pool_origin

UNIT_COLUMNS = ["run_id", "seed", "run", "task_id", "success", "first_success", "attempts", "error",
                "stop_reason", "checker_error_type", "tokens", "max_prompt", "summaries", "summary_failures"]


def run_ids(paths: list[Path]) -> dict[Path, str]:
    """Each run's id: the shortest unique tail of its path (its name, or parent/name)."""
    def one(path: Path) -> str:
        for depth in range(1, len(path.parts) + 1):
            if sum(1 for p in paths if p.parts[-depth:] == path.parts[-depth:]) == 1:
                return str(Path(*path.parts[-depth:]))
        return str(path)
    return {path: one(path) for path in paths}


def load_frames(logs: list[RunLog], order: list[str] | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """(units, runs, pool_series) in the columns reme_cli.report expects.

    ``order``: the suite's run labels as it lists its variants; a run named there gets its
    place as ``suite_rank``, which orders the report's rows, bars and points.
    """
    from reme_cli.report.columns import method_columns
    from reme_cli.report.order import SUITE_RANK

    rank = {label: i for i, label in enumerate(order or [])}
    ids = run_ids([log.path for log in logs])
    unit_rows, run_rows, series_rows = [], [], []
    for log in logs:
        cfg, run_id = log.config, ids[log.path]
        run_rows.append({
            "run_id": run_id, "path": str(log.path), "benchmark": cfg.benchmark, "model": cfg.model,
            "mode": cfg.mode, "memory": cfg.method, "k": cfg.k, "seeds": cfg.seeds,
            "tasks": len(log.manifest.task_ids), "status": log.manifest.status,
            "variant": log.path.name, "params": cfg.flat(), SUITE_RANK: rank.get(log.path.name),
            **pool_origin(cfg, cfg.mode),
        })
        unit_rows += [unit_row(run_id, t) for t in log.trials]
        if cfg.mode == "dynamic":
            fields = list(method_columns(cfg.method).series)
            series_rows += [{"run_id": run_id, **row} for row in _series(log.trials, fields)]
    units = pd.DataFrame(unit_rows, columns=unit_columns())
    series = pd.DataFrame(series_rows) if series_rows else None
    return units, pd.DataFrame(run_rows), series


def unit_columns() -> list[str]:
    """The unit frame's columns: ``UNIT_COLUMNS`` and the checker fields the benchmarks' own
    metrics read (``reme_cli.bench.scoring``)."""
    return [*UNIT_COLUMNS, *checker_fields()]


def checker_fields() -> tuple[str, ...]:
    from reme_cli.bench.scoring import fields_of
    from reme_cli.report.metrics import declared_reducers

    return fields_of(declared_reducers())


def unit_row(run_id: str, t: UnitRecord) -> dict[str, Any]:
    """One unit as the report's unit frame holds it (``unit_columns()``)."""
    checker = t.checker or {}
    summaries = summary_failures(t.summarizer_answers)
    return {"run_id": run_id, "seed": t.seed, "run": t.run, "task_id": t.task_id,
            "success": t.success, "first_success": first_trial_success(t),
            "attempts": t.attempts, "error": not t.ok, "stop_reason": t.stop_reason,
            "checker_error_type": None if t.success else checker.get("error_type"),
            # The executor's tokens over the unit's trials (the methods table's cost).
            "tokens": (t.tokens.get("prompt", 0) + t.tokens.get("completion", 0)) if t.tokens else None,
            "max_prompt": t.tokens.get("max_prompt") if t.tokens else None,
            # The method's summaries of the unit's trials, and how many of them raised.
            "summaries": summaries["summaries"], "summary_failures": summaries["failed"],
            # What the benchmarks' own metrics read (AppWorld's SGC: scenario, difficulty).
            **{f: checker.get(f) for f in checker_fields()}}


def first_trial_success(t: UnitRecord) -> bool:
    """The verdict on a unit's first trial: its ``first_success``, except that a unit that ran
    one trial (``attempts`` <= 1) was scored on it. The exception is how a line without
    ``first_success`` reads: reme 0.1 wrote neither field for its single-trial units, and
    the record's default (False) would count a solved unit as a first-trial failure."""
    return bool(t.first_success if t.attempts > 1 else t.success)


def _series(trials: list[UnitRecord], fields: list[str]) -> list[dict[str, Any]]:
    """The method's declared series fields along each dynamic stream, from its per-unit records
    (``reme_cli.report.columns``: ReMe's pool size and mean utility)."""
    rows = []
    for t in trials:
        if t.ok and any(f in t.method for f in fields):
            rows.append({"seed": t.seed, "run": t.run, "position": t.position,
                         **{f: t.method.get(f) for f in fields}})
    return rows

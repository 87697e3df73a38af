"""The order runs are shown in: as their suite lists its variants, then by natural name order.

A run's place in its suite is the optional ``suite_rank`` column of the runs frame (0 for the
suite's first variant; missing or NaN for a run the suite does not list). Without it, names
sort with their numbers as numbers, so k3 comes before k10.
"""

from __future__ import annotations

import math
import re

import pandas as pd

SUITE_RANK = "suite_rank"


def natural_key(text: object) -> tuple:
    """"k10" -> (("s", "k"), ("n", 10)): digit runs compare as numbers."""
    return tuple(("n", int(part)) if part.isdigit() else ("s", part)
                 for part in re.split(r"(\d+)", str(text)) if part)


def suite_ranks(frame: pd.DataFrame) -> list[float]:
    """Each row's place in its suite (inf where unknown)."""
    if SUITE_RANK not in frame.columns:
        return [math.inf] * len(frame)
    return [math.inf if pd.isna(r) else float(r) for r in frame[SUITE_RANK]]


def in_run_order(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (rows of runs, with ``run_id``) in suite order, then natural run-id order."""
    keys = [(rank, natural_key(run_id)) for rank, run_id in zip(suite_ranks(frame), frame["run_id"])]
    return frame.iloc[sorted(range(len(frame)), key=keys.__getitem__)]


def ids_in_run_order(run_ids: list, runs: pd.DataFrame | None = None) -> list:
    """Run ids (duplicates dropped) in run order, ranked by ``runs``' suite_rank if given."""
    frame = pd.DataFrame({"run_id": list(dict.fromkeys(run_ids))})
    if runs is not None and SUITE_RANK in runs.columns:
        frame = frame.merge(runs[["run_id", SUITE_RANK]], on="run_id", how="left")
    return list(in_run_order(frame)["run_id"])

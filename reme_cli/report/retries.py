"""What retries add: each retried run's first-trial Avg@k / Pass@k beside its scored ones.

A method that retries a failed task (ReMe dynamic, as the authors ran it: up to 3 trials, the
last one scored) is scored on its last trial; its first trial is what it solves without
retrying. Only runs where some unit ran more than one trial get a row: elsewhere the first
trial is the scored one and a row would only repeat the run's numbers.
"""

from __future__ import annotations

import pandas as pd

from reme_cli.report.order import in_run_order
from reme_cli.report.tables import DAGGER, fmt_mean_std, fmt_points, setting_label

TITLE = "First trial vs scored (last) trial"
NOTE = ("first: Avg@k / Pass@k over each unit's first trial; scored: over the last trial that ran (the "
        "tables' \"ours\"); gain = scored − first in points. Retried units: units that ran more than one "
        "trial / units scored (errored units excluded). Cells in %, mean ± std over seeds.")
METRICS = {"avg": "Avg@k", "pass": "Pass@k"}


def first_trial_table(metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run with a retried unit: run, setting, mode, k, retried units, then first /
    scored / gain for Avg@k and Pass@k; empty when no run retried."""
    joined = in_run_order(runs.merge(metrics, on="run_id", how="inner"))
    joined = joined[joined["n_retried"] > 0]
    rows = []
    for _, run in joined.iterrows():
        dagger = f" {DAGGER}" if run["partial"] else ""
        row = {"run": run["run_id"], "setting": setting_label(run), "mode": run["mode"], "k": int(run["k"]),
               "retried units": f"{int(run['n_retried'])}/{int(run['n_units']) - int(run['n_errors'])}"}
        for metric, name in METRICS.items():
            first, scored = run[f"first_{metric}_mean"], run[f"{metric}_mean"]
            row[f"{name} first"] = fmt_mean_std(first, run[f"first_{metric}_std"]) + dagger
            row[f"{name} scored"] = fmt_mean_std(scored, run[f"{metric}_std"]) + dagger
            row[f"{name} gain"] = fmt_points((scored - first) * 100)
        rows.append(row)
    columns = ["run", "setting", "mode", "k", "retried units",
               *[f"{name} {part}" for name in METRICS.values() for part in ("first", "scored", "gain")]]
    df = pd.DataFrame(rows, columns=columns)
    df.attrs["title"] = TITLE
    df.attrs["notes"] = [NOTE] if rows else []
    return df

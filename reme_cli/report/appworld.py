"""AppWorld's own breakdown beside the paper's TGC tables: SGC and success per difficulty.

One row per AppWorld run. The paper reports only TGC Avg@4 / Pass@4, so this table has no
paper column.
"""

from __future__ import annotations

import math

import pandas as pd

from reme_cli.report.order import in_run_order
from reme_cli.report.tables import DAGGER, fmt_mean_std, fmt_pct, model_label, setting_label

TITLE = "AppWorld: scenario goal completion and difficulty"
NOTE = ("TGC: every test of a task passes; SGC: every task of a scenario passes in a run, averaged over "
        "the k runs; difficulty d: the success rate of the units of AppWorld's difficulty level d, over all "
        "seeds and runs. Cells in %, mean ± std over seeds; n = seeds/tasks.")


def appworld_table(metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """run, setting, model, n, k, TGC Avg@k / Pass@k, SGC Avg@k and one column per
    difficulty level; empty when no AppWorld run has SGC."""
    joined = in_run_order(runs.merge(metrics, on="run_id", how="inner"))
    joined = joined[(joined["benchmark"] == "appworld") & joined["sgc_mean"].notna()]
    levels = sorted({str(d) for b in joined["by_difficulty"] for d in b}, key=lambda d: (len(d), d))
    rows = []
    for _, run in joined.iterrows():
        dagger = f" {DAGGER}" if run["partial"] else ""
        row = {"run": run["run_id"], "setting": setting_label(run), "model": model_label(run["model"]),
               "n": f"{int(run['n_seeds'])}/{int(run['n_tasks'])}", "k": int(run["k"]),
               "TGC Avg@k": fmt_mean_std(run["avg_mean"], run["avg_std"]) + dagger,
               "TGC Pass@k": fmt_mean_std(run["pass_mean"], run["pass_std"]) + dagger,
               "SGC Avg@k": fmt_mean_std(run["sgc_mean"], run["sgc_std"]) + dagger}
        for level in levels:
            row[f"difficulty {level}"] = fmt_pct(run["by_difficulty"].get(level, math.nan))
        rows.append(row)
    columns = ["run", "setting", "model", "n", "k", "TGC Avg@k", "TGC Pass@k", "SGC Avg@k",
               *[f"difficulty {level}" for level in levels]]
    df = pd.DataFrame(rows, columns=columns)
    df.attrs["title"] = TITLE
    df.attrs["notes"] = [NOTE] if rows else []
    return df

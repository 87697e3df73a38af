"""Each benchmark's own metrics beside the paper's tables (AppWorld: SGC and success per
difficulty), one table per benchmark that declares some, laid out from its declaration
(``reme_cli.bench.scoring``).

One row per run of that benchmark where its metrics apply. The paper reports only Avg@k /
Pass@k, so these tables have no paper column.
"""

from __future__ import annotations

import math

import pandas as pd

from reme_cli.bench.scoring import Breakdown, Metric
from reme_cli.report.benchmarks import bench_rank, labels_of, own_metrics_of
from reme_cli.report.order import in_run_order
from reme_cli.report.tables import DAGGER, fmt_mean_std, fmt_pct, model_label, setting_label


def _applies(run: pd.Series, reducers) -> bool:
    return any(pd.notna(run.get(f"{m.name}_mean")) if isinstance(m, Metric) else bool(run.get(m.name))
               for m in reducers)


def declared_table(benchmark: str, metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """run, setting, model, n, k, Avg@k / Pass@k (named by what the benchmark calls a task's
    success), then each declared metric: a per-seed one as mean ± std, a breakdown as one
    column per group; empty when no run of ``benchmark`` has one."""
    reducers = own_metrics_of(benchmark)
    labels = labels_of(benchmark)
    joined = in_run_order(runs.merge(metrics, on="run_id", how="inner"))
    joined = joined[joined["benchmark"] == benchmark]
    joined = joined[[_applies(run, reducers) for _, run in joined.iterrows()]] if len(joined) else joined
    seed_metrics = [m for m in reducers if isinstance(m, Metric)]
    groups = {m.name: sorted({str(g) for b in joined[m.name] for g in b}, key=lambda g: (len(g), g))
              for m in reducers if isinstance(m, Breakdown)}
    success = f"{labels.success} " if labels.success else ""
    rows = []
    for _, run in joined.iterrows():
        dagger = f" {DAGGER}" if run["partial"] else ""
        row = {"run": run["run_id"], "setting": setting_label(run), "model": model_label(run["model"]),
               "n": f"{int(run['n_seeds'])}/{int(run['n_tasks'])}", "k": int(run["k"]),
               f"{success}Avg@k": fmt_mean_std(run["avg_mean"], run["avg_std"]) + dagger,
               f"{success}Pass@k": fmt_mean_std(run["pass_mean"], run["pass_std"]) + dagger}
        for m in seed_metrics:
            row[m.title("k")] = fmt_mean_std(run[f"{m.name}_mean"], run[f"{m.name}_std"]) + dagger
        for m in reducers:
            if isinstance(m, Breakdown):
                for group in groups[m.name]:
                    row[m.title(group)] = fmt_pct(run[m.name].get(group, math.nan))
        rows.append(row)
    columns = ["run", "setting", "model", "n", "k", f"{success}Avg@k", f"{success}Pass@k",
               *[m.title("k") for m in seed_metrics],
               *[m.title(g) for m in reducers if isinstance(m, Breakdown) for g in groups[m.name]]]
    df = pd.DataFrame(rows, columns=columns)
    df.attrs["title"] = labels.table_title or f"{labels.name}: its own metrics"
    df.attrs["notes"] = [labels.table_note] if rows and labels.table_note else []
    return df


def declared_tables(metrics: pd.DataFrame, runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """{benchmark: its table}, for each benchmark of ``runs`` whose own metrics some run has."""
    names = sorted({str(b) for b in runs["benchmark"]}, key=bench_rank) if "benchmark" in runs else []
    tables = {name: declared_table(name, metrics, runs) for name in names if own_metrics_of(name)}
    return {name: table for name, table in tables.items() if len(table)}

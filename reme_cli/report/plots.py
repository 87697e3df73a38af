"""Figures for the report: scores with their seed spread, and the memory pool over time.

Figures are built with ``matplotlib.figure.Figure`` directly (rendered by Agg on save), so
nothing touches pyplot's global state or opens a window. Each score plot shows the error
bar (sample std over seeds) *and* every seed's point, since with 3 seeds the bar alone hides
how the seeds actually fall. Runs appear in run order (``reme_cli.report.order``): as their
suite lists them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from reme_cli.report.columns import series_labels
from reme_cli.report.order import ids_in_run_order, in_run_order
from reme_cli.report.benchmarks import benchmark_label
from reme_cli.report.tables import DAGGER, model_label, row_label, table_spec

SERIES_KEYS = ("run_id", "seed", "run", "position")  # the other columns of pool_series are series

SMOKE_TITLE = "smoke-level (embedded 135M CPU model)"
METRICS = (("avg", "Avg"), ("pass", "Pass"))


def _title(title: str, models: pd.Series) -> str:
    """The title, marked smoke-level when every run used the embedded CPU model."""
    if len(models) and (models == "local").all():
        return f"{title}\n{SMOKE_TITLE}"  # its own line: one line overflows the figure
    return title


def _save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=120, metadata={"Software": None})
    return out


def _seed_values(per_seed: dict, metric: str) -> list[float]:
    """Per-seed scores in percent, in seed order."""
    index = 0 if metric == "avg" else 1
    return [per_seed[s][index] * 100 for s in sorted(per_seed)]


def plot_topk(metrics: pd.DataFrame, runs: pd.DataFrame, path: str | Path) -> Path:
    """Avg@k and Pass@k vs the number of retrieved experiences K, one line per model/benchmark."""
    joined = in_run_order(runs.merge(metrics, on="run_id"))
    spec = table_spec("topk")
    joined["K"] = [row_label(spec, r) for _, r in joined.iterrows()]
    joined = joined[joined["K"].notna()].copy()
    joined["K"] = joined["K"].str.removeprefix("K=").astype(int)
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for (model, bench, k), group in joined.groupby(["model", "benchmark", "k"], sort=True):
        group = group.sort_values("K", kind="stable")  # a line through K in order; ties in run order
        for metric, name in METRICS:
            label = f"{model_label(model)} {benchmark_label(bench)} {name}@{k}"
            line = ax.errorbar(group["K"], group[f"{metric}_mean"] * 100,
                               yerr=group[f"{metric}_std"] * 100, marker="o", capsize=4,
                               label=label, linestyle="-" if metric == "avg" else "--")
            for K, per_seed in zip(group["K"], group["per_seed"]):
                values = _seed_values(per_seed, metric)
                ax.scatter([K] * len(values), values, s=14, alpha=0.5,
                           color=line.lines[0].get_color())
    ax.set_xlabel("K (retrieved experiences)")
    ax.set_ylabel("score (%)")
    ax.set_xticks(sorted(joined["K"].unique()))
    ax.set_title(_title("Score vs K (mean ± std over seeds; dots = seeds)", joined["model"]))
    if len(joined):
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_bars(metrics: pd.DataFrame, runs: pd.DataFrame, path: str | Path, title: str) -> Path:
    """One Avg@k and one Pass@k bar per run (std error bars), each seed's score as a dot."""
    joined = in_run_order(runs.merge(metrics, on="run_id"))
    fig = Figure(figsize=(max(6.0, 1.2 * len(joined) + 2), 4.5))
    ax = fig.add_subplot()
    width = 0.38
    positions = range(len(joined))
    for offset, (metric, name) in zip((-width / 2, width / 2), METRICS):
        xs = [p + offset for p in positions]
        ax.bar(xs, joined[f"{metric}_mean"] * 100, width, yerr=joined[f"{metric}_std"] * 100,
               capsize=4, label=f"{name}@k", alpha=0.8)
        for x, per_seed in zip(xs, joined["per_seed"]):
            values = _seed_values(per_seed, metric)
            ax.scatter([x] * len(values), values, s=14, color="black", zorder=3)
    labels = [f"{r}{' ' + DAGGER if p else ''}" for r, p in zip(joined["run_id"], joined["partial"])]
    ax.set_xticks(list(positions), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("score (%)")
    ax.set_title(_title(title, joined["model"]))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_pool_series(pool_series: pd.DataFrame, path: str | Path,
                     runs: pd.DataFrame | None = None) -> Path:
    """Each series the methods record (one panel per column beside run_id, seed, run and
    position: ReMe's pool size and mean utility), averaged over each run's streams.

    A stream is one (seed, run); lines are per run_id (labelled with the model when ``runs``
    is given, axes with the labels the runs' methods declare). Positions where a series has
    no value (ReMe's mean utility before anything is retrieved) are left out of its mean.
    """
    models = {} if runs is None else dict(zip(runs["run_id"], runs["model"]))
    labels = {} if runs is None else series_labels(runs["memory"].astype(str))
    fields = [c for c in pool_series.columns if c not in SERIES_KEYS]
    fig = Figure(figsize=(7, 3 * max(1, len(fields))))
    axes = fig.subplots(max(1, len(fields)), 1, sharex=True, squeeze=False)[:, 0]
    for run_id in ids_in_run_order(pool_series["run_id"], runs):
        group = pool_series[pool_series["run_id"] == run_id]
        mean = group.groupby("position")[fields].mean().sort_index()
        label = f"{model_label(models[run_id])} · {run_id}" if run_id in models else str(run_id)
        for ax, name in zip(axes, fields):
            ax.plot(mean.index, mean[name], label=label)
    for ax, name in zip(axes, fields):
        ax.set_ylabel(labels.get(name, name))
    axes[-1].set_xlabel("task position in the stream")
    title = "Memory pool along the task stream (mean over streams)"
    shown = [models[r] for r in sorted(pool_series["run_id"].unique()) if r in models]
    axes[0].set_title(_title(title, pd.Series(shown, dtype=object)))
    if pool_series["run_id"].nunique():
        axes[0].legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)

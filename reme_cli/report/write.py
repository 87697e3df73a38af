"""Write a whole report directory: report.md, one CSV per table, and the figures.

This is the only module here that touches the file system. It picks the tables that fit the
runs (the suite's table, or table 1 plus every ablation whose parameter actually varies),
and writes everything in a fixed order with fixed number formatting so that the same
records always produce byte-identical text files.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reme_cli.report.declared import declared_tables
from reme_cli.report.metrics import breakdown_names, run_metrics
from reme_cli.report.order import SUITE_RANK, in_run_order
from reme_cli.report.plots import plot_bars, plot_pool_series, plot_topk
from reme_cli.report.retries import first_trial_table
from reme_cli.report.tables import (ErrorAnalysis, build_table, comparisons, error_analysis,
                                    row_label, table_names, table_spec, to_markdown)

RUN_COLUMNS = ["run_id", "benchmark", "model", "memory", "mode", "variant", "k", "seeds",
               "tasks", "status"]
MAX_TASK_IDS = 30  # task ids listed per error-analysis line; the full count is always given


def choose_tables(runs: pd.DataFrame, suite: str | None = None) -> list[str]:
    """The suite's table; without a suite, table 1 plus each ablation whose rows vary.

    An ablation applies when its row label takes at least two values over the runs (e.g.
    two different memory.top_k), which is exactly when it has something to compare.
    """
    if suite is not None:
        table_spec(suite)  # a UserError for an unknown suite
        return [suite]
    chosen = ["table1"]
    for name in table_names():
        if name in ("table1", "methods"):  # the methods table is the methods suite's (reme ablate methods)
            continue
        labels = {row_label(table_spec(name), run) for _, run in runs.iterrows()} - {None}
        if len(labels) >= 2:
            chosen.append(name)
    return chosen


def _per_seed_text(per_seed: dict) -> str:
    """per_seed as "seed:avg/pass" with fixed decimals, for the CSV."""
    return ";".join(f"{s}:{a:.6f}/{p:.6f}" for s, (a, p) in sorted(per_seed.items()))


def _metrics_frame(metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Run metadata and metrics side by side, one row per run in run order, for metrics.csv."""
    cols = [c for c in [*RUN_COLUMNS, SUITE_RANK] if c in runs.columns]
    out = in_run_order(runs[cols].merge(metrics, on="run_id")).drop(columns=SUITE_RANK, errors="ignore")
    return out.assign(per_seed=out["per_seed"].map(_per_seed_text),
                      **{name: out[name].map(_groups_text) for name in breakdown_names()})


def _groups_text(by_group: dict) -> str:
    """A declared breakdown as "group:value" with fixed decimals, for the CSV ("" where it
    does not apply)."""
    return ";".join(f"{d}:{r:.6f}" for d, r in sorted(by_group.items()))


def _runs_overview(metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The runs section of report.md: what each run is and how complete it is."""
    frame = _metrics_frame(metrics, runs)
    frame["units"] = [f"{u}/{e}" for u, e in zip(frame["n_units"], frame["expected_units"])]
    frame["partial"] = frame["partial"].map({True: "yes †", False: "no"})
    if "n_summaries" in frame.columns:
        frame["summaries failed"] = [f"{f}/{n}" if n else "-"
                                     for f, n in zip(frame["n_summary_failures"], frame["n_summaries"])]
    keep = [c for c in [*RUN_COLUMNS, "units", "n_errors", "partial", "summaries failed"] if c in frame.columns]
    return frame[keep]


def _notes_md(df: pd.DataFrame) -> list[str]:
    notes = df.attrs.get("notes", [])
    return ["", "Notes:", *[f"- {n}" for n in notes]] if notes else []


def _task_list(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_TASK_IDS])
    more = f", … ({len(ids) - MAX_TASK_IDS} more)" if len(ids) > MAX_TASK_IDS else ""
    return f"{len(ids)}" + (f": {shown}{more}" if ids else "")


def _error_md(analysis: ErrorAnalysis) -> list[str]:
    lines = [f"### {analysis.run_a} vs {analysis.run_b}", "",
             f"Tasks attempted by both (without error): {analysis.n_common_tasks}.",
             f"- solved by {analysis.run_a} (any seed/run), never by {analysis.run_b}: "
             f"{_task_list(analysis.only_a)}",
             f"- solved by {analysis.run_b}, never by {analysis.run_a}: "
             f"{_task_list(analysis.only_b)}", "",
             "Failure categories (failed units that did not error):", ""]
    if analysis.categories.empty:
        return [*lines, "none", ""]
    return [*lines, to_markdown(analysis.categories), ""]


def _error_long(analysis: ErrorAnalysis) -> pd.DataFrame:
    """One analysis's category counts in long form for error_analysis.csv."""
    cats = analysis.categories
    return pd.DataFrame({"run_a": analysis.run_a, "run_b": analysis.run_b,
                         "category": cats["category"],
                         "count_a": cats.get(analysis.run_a, 0),
                         "count_b": cats.get(analysis.run_b, 0),
                         "n_only_a": len(analysis.only_a), "n_only_b": len(analysis.only_b)})


def _write_csv(df: pd.DataFrame, path: Path, written: list[Path]) -> None:
    df.to_csv(path, index=False, float_format="%.6f", lineterminator="\n")
    written.append(path)


def _header_md(runs: pd.DataFrame, metrics: pd.DataFrame) -> list[str]:
    return ["# ReMe reproduction report", "",
            "Avg@k: per seed, the mean over tasks of each task's mean success over its k runs; "
            "Pass@k: per seed, the fraction of tasks solved in at least one of the k runs. "
            "Cells show mean ± sample std (ddof=1) over seeds in %, then n = seeds/tasks, the "
            "paper's value and Δ = ours − paper in points. Errored units are excluded from "
            "every mean and make a run partial (†). A unit that ran several trials is scored on its "
            "last; runs with such units also show their first trial's numbers.", "",
            "## Runs", "", to_markdown(_runs_overview(metrics, runs)), ""]


def write_report(out_dir: str | Path, units: pd.DataFrame, runs: pd.DataFrame,
                 pool_series: pd.DataFrame | None = None, suite: str | None = None) -> list[Path]:
    """Write report.md, CSVs (metrics, each table, each benchmark's own metrics (AppWorld: SGC, difficulty),
    first trial vs scored where some run retried, comparisons, error analysis) and PNGs.

    Returns every written path, report.md last.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    metrics = run_metrics(units, runs)
    _write_csv(_metrics_frame(metrics, runs), out / "metrics.csv", written)
    md = _header_md(runs, metrics)
    for name in choose_tables(runs, suite):
        table = build_table(name, metrics, runs)
        _write_csv(table, out / f"table_{name}.csv", written)
        body = to_markdown(table) if len(table) else "No run applies to this table."
        md += [f"## {table.attrs['title']}", "", body, *_notes_md(table), ""]
    for benchmark, own in declared_tables(metrics, runs).items():
        _write_csv(own, out / f"table_{benchmark}.csv", written)
        md += [f"## {own.attrs['title']}", "", to_markdown(own), *_notes_md(own), ""]
    first = first_trial_table(metrics, runs)
    if len(first):
        _write_csv(first, out / "table_first_trial.csv", written)
        md += [f"## {first.attrs['title']}", "", to_markdown(first), *_notes_md(first), ""]
    md += _figures(out, metrics, runs, pool_series, suite, written)
    md += _comparisons_section(out, units, metrics, runs, written)
    report = out / "report.md"
    report.write_text("\n".join(md).rstrip("\n") + "\n", encoding="utf-8")
    written.append(report)
    return written


def _figures(out: Path, metrics: pd.DataFrame, runs: pd.DataFrame,
             pool_series: pd.DataFrame | None, suite: str | None, written: list[Path]) -> list[str]:
    """Draw the figures that apply and return their Markdown section."""
    if runs.empty:
        return []
    paths = [plot_bars(metrics, runs, out / "scores.png", "Avg@k and Pass@k per run")]
    if suite == "topk" or (suite is None and "topk" in choose_tables(runs)):
        paths.append(plot_topk(metrics, runs, out / "topk.png"))
    if pool_series is not None and not pool_series.empty:
        paths.append(plot_pool_series(pool_series, out / "pool_series.png", runs))
    written.extend(paths)
    return ["## Figures", "", *[f"![{p.stem}]({p.name})" for p in paths], ""]


def _comparisons_section(out: Path, units: pd.DataFrame, metrics: pd.DataFrame,
                         runs: pd.DataFrame, written: list[Path]) -> list[str]:
    """Bootstrap comparisons against the baseline and the error analysis of each pair."""
    comp = comparisons(units, metrics, runs)
    if comp.empty:
        return ["## Comparisons", "", "No run has a no-memory baseline of the same model and "
                "benchmark, so nothing was compared.", ""]
    _write_csv(comp, out / "comparisons.csv", written)
    lines = ["## Comparisons against the no-memory baseline", "",
             *[f"- {s}" for s in comp["sentence"]], "", "## Error analysis", ""]
    analyses = [error_analysis(units, a, b)
                for a, b in zip(comp["run_id"], comp["baseline_run_id"])]
    for analysis in analyses:
        lines += _error_md(analysis)
    _write_csv(pd.concat([_error_long(a) for a in analyses], ignore_index=True),
               out / "error_analysis.csv", written)
    return lines

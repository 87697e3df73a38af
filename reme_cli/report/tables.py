"""The paper's tables, rebuilt from our runs with the paper's numbers beside ours.

Every table is a plain DataFrame of formatted strings (one row per setting, one column per
(model, benchmark, metric) x (ours, n, paper, delta), and "first trial" when some run retried), so the same object becomes Markdown
(``to_markdown``) and CSV (``DataFrame.to_csv``). Notes that must travel with a table (partial
runs, smoke-level models, paper cells we refuse to compare) are in ``df.attrs["notes"]``.

Two runs that land in the same cell are never averaged: each gets its own row, labelled by
its variant (or run id). A partial run is shown with a dagger and explained in a footnote.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from reme_cli.report.benchmarks import bench_rank, benchmark_label, labels_of, seed_metrics_of
from reme_cli.report.fidelity import CellCount, departures, embedding_name, fidelity_text
from reme_cli.report.columns import method_columns
from reme_cli.report.metrics import as_flag, scored_units
from reme_cli.report.order import in_run_order, natural_key, suite_ranks
from reme_cli.report.paper import load_paper_tables, paper_model_label, served_model_label
from reme_cli.report.published import load_published, published_text
from reme_cli.report.specs import TableSpec, numbers_in, table_names, table_spec
from reme_cli.report.stats import paired_bootstrap

DASH = "—"
FIDELITY = "fidelity"  # where the row's runs depart from the authors' setup (reme_cli/report/fidelity.py)
DAGGER = "†"
SMOKE_NOTE = "smoke-level: embedded 135M model, not comparable to the paper"
FIRST = "first trial"
FIRST_NOTE = ("first trial: Avg@k / Pass@k over each unit's first trial, for the runs where some unit "
              "ran more than one (blank: every unit ran one trial, so it equals ours). Ours scores the "
              "last trial that ran, as the authors' dynamic protocol does: up to 3 trials, a retry only "
              "after a failure (results/authors_setup_evidence.md §1a).")
SUB_COLUMNS = ("ours", "n", "paper", "Δ", FIRST)  # per (group, metric); the first trial after Δ
TOKENS, MAX_PROMPT, PUBLISHED = "tokens/task", "max prompt", "published elsewhere (context, not a target)"
COST_NOTE = (f"{TOKENS}: the executor's prompt + completion tokens per task over all its trials (summarizer "
             f"calls not included); {MAX_PROMPT}: the longest prompt any step sent. Methods that keep their "
             "whole memory in the prompt (a playbook, a cheatsheet) grow both as they learn.")
PUBLISHED_NOTE = (f"{PUBLISHED}: numbers other papers report for the same method, with their model, split and "
                  "source; measured with other models and harnesses (one run per task), so no Δ is taken.")
MODEL_ORDER = ["qwen3-8b", "qwen3-14b", "qwen3-32b", "local"]
# ---------------------------------------------------------------- labels and formatting

def model_label(model: str) -> str:
    """Header label of a model: the paper's label, or the id (the embedded model is marked)."""
    if model == "local":
        return "local (135M)"
    return paper_model_label(model) or str(model)


def _params(run: pd.Series) -> dict:
    params = run.get("params")
    return params if isinstance(params, dict) else {}


def fmt_pct(fraction: float) -> str:
    """A fraction as a percentage with 2 decimals."""
    return DASH if fraction is None or math.isnan(fraction) else f"{fraction * 100:.2f}"


def fmt_mean_std(mean: float, std: float | None) -> str:
    """"mean ± std" in percent (std omitted when unknown)."""
    if std is None or math.isnan(std):
        return fmt_pct(mean)
    return f"{fmt_pct(mean)} ± {fmt_pct(std)}"


def fmt_points(points: float) -> str:
    """A signed difference in percentage points."""
    return f"{points:+.2f}"


# ---------------------------------------------------------------- row labels

def setting_label(run: pd.Series) -> str | None:
    """Table 1's setting: the memory method's declared label, with the mode where it says so."""
    return method_columns(str(run["memory"])).setting_label(run["mode"], _params(run))


def row_label(spec: TableSpec, run: pd.Series) -> str | None:
    """The run's row in ``spec``'s table; None if its method does not declare the table's keys."""
    if not set(spec.params) <= set(method_columns(str(run["memory"])).params):
        return None
    return spec.label(run)


# ---------------------------------------------------------------- generic layout

def _row_sort_key(spec: TableSpec, label: str) -> tuple:
    if spec.numeric:
        return (numbers_in(label), label)
    rank = spec.order.index(label) if label in spec.order else len(spec.order)
    return (rank, label)


def _model_rank(model: str) -> tuple:
    return (MODEL_ORDER.index(model) if model in MODEL_ORDER else len(MODEL_ORDER), model)


def _labelled_runs(metrics: pd.DataFrame, runs: pd.DataFrame, spec: TableSpec) -> pd.DataFrame:
    """Runs joined with their metrics, with ``base`` (paper row) and ``row`` (displayed) labels.

    Runs sharing a cell (same base, model, benchmark, k) get their variant or run id appended
    so that each keeps its own row.
    """
    joined = in_run_order(runs.merge(metrics, on="run_id", how="inner"))
    joined["base"] = [row_label(spec, run) for _, run in joined.iterrows()]
    joined = joined[joined["base"].notna()].copy()
    if joined.empty:
        return joined.assign(row=joined["base"])
    cell = ["base", "model", "benchmark", "k"]
    shared = joined.groupby(cell)["run_id"].transform("count") > 1
    variants = joined["variant"].fillna("").astype(str)
    unique_variant = variants.groupby([joined[c] for c in cell]).transform(
        lambda v: v.ne("").all() and v.nunique() == len(v)).astype(bool)
    suffix = variants.where(unique_variant, joined["run_id"])
    joined["row"] = joined["base"].where(~shared, joined["base"] + " [" + suffix + "]")
    return joined


def _metric_name(metric: str, k: int) -> str:
    return f"{'Avg' if metric == 'avg' else 'Pass'}@{int(k)}"


def _paper_mode(note: object) -> str | None:
    """The ReMe mode a paper ablation value was measured in, read from the CSV's note."""
    text = str(note).lower() if isinstance(note, str) else ""
    return next((mode for mode in ("dynamic", "fixed") if mode in text), None)


def _paper_cell(paper: pd.DataFrame, spec: TableSpec, run: pd.Series,
                metric_name: str) -> tuple[float, float | None, str | None] | None:
    """(value, std, mode) the paper reports for this run's cell, if any."""
    label = served_model_label(run["model"])
    if spec.paper_table is None or label is None:
        return None
    hit = paper[(paper["table"] == spec.paper_table) & (paper["model"] == label)
                & (paper["setting"] == run["base"]) & (paper["benchmark"] == run["benchmark"])
                & (paper["metric"].str.lower() == metric_name.lower())]
    if hit.empty:
        return None
    row = hit.iloc[0]
    std = None if pd.isna(row["std_pct"]) else float(row["std_pct"])
    return float(row["value_pct"]), std, _paper_mode(row["note"])


def _fill_cells(cells: dict, run: pd.Series, spec: TableSpec, paper: pd.DataFrame,
                notes: list[str]) -> None:
    """Write one run's ours / n / paper / Δ cells (both metrics) into ``cells``."""
    group = f"{model_label(run['model'])} {benchmark_label(run['benchmark'])}"
    for metric in ("avg", "pass"):
        name = _metric_name(metric, run["k"])
        prefix = f"{group} {name}"
        ours = fmt_mean_std(run[f"{metric}_mean"], run[f"{metric}_std"])
        cells[f"{prefix} ours"] = f"{ours} {DAGGER}" if run["partial"] else ours
        cells[f"{prefix} n"] = f"{int(run['n_seeds'])}/{int(run['n_tasks'])}"
        if run["n_retried"] > 0:
            first = fmt_mean_std(run[f"first_{metric}_mean"], run[f"first_{metric}_std"])
            cells[f"{prefix} {FIRST}"] = f"{first} {DAGGER}" if run["partial"] else first
        if spec.paper_table is None:
            continue
        found = _paper_cell(paper, spec, run, name)
        if found is not None and found[2] is not None and found[2] != run["mode"]:
            notes.append(f"paper values for {run['base']} were measured with ReMe {found[2]}; "
                         f"run {run['run_id']} uses mode {run['mode']}, so they are not shown.")
            found = None
        if found is None:
            cells[f"{prefix} paper"] = cells[f"{prefix} Δ"] = DASH
            continue
        cells[f"{prefix} paper"] = fmt_mean_std(found[0] / 100, None if found[1] is None
                                                else found[1] / 100)
        mean = run[f"{metric}_mean"]
        cells[f"{prefix} Δ"] = DASH if math.isnan(mean) else fmt_points(mean * 100 - found[0])
    for own in seed_metrics_of(run["benchmark"]):  # what the benchmark declares beside them
        if pd.notna(run.get(f"{own.name}_mean")):
            ours = fmt_mean_std(run[f"{own.name}_mean"], run[f"{own.name}_std"])
            cells[f"{group} {own.title(int(run['k']))} ours"] = f"{ours} {DAGGER}" if run["partial"] else ours
    if spec.cost:
        for column, value in ((TOKENS, run.get("tokens_per_unit")), (MAX_PROMPT, run.get("max_prompt"))):
            cells[f"{group} {column}"] = DASH if value is None or pd.isna(value) else f"{value:,.0f}"


def _partial_note(run: pd.Series) -> str:
    return (f"{DAGGER} partial run {run['run_id']}: {int(run['n_units'])}/"
            f"{int(run['expected_units'])} planned units, {int(run['n_errors'])} errored, "
            f"status {run['status']}; errored units are excluded and missing units are not "
            f"counted, so this cell is not comparable to a complete run.")


def run_departures(run: pd.Series, spec: TableSpec) -> list[str]:
    """Where one run departs from the authors' setup; the keys its table varies do not count."""
    pool_params = run.get("pool_params")
    # The run's own columns stand in for what a hand-made record's params may lack.
    known = {"benchmark.name": run["benchmark"], "model.name": run["model"], "eval.mode": run["mode"],
             "memory.name": run["memory"]}
    return departures({**known, **_params(run)}, pool=run.get("pool_start") if isinstance(run.get("pool_start"), str) else None,
                      varied=spec.params, pool_params=pool_params if isinstance(pool_params, dict) else None)


def paper_cells(spec: TableSpec, run: Mapping, paper: pd.DataFrame) -> set[tuple[str, str, str, str]]:
    """The paper's cells (setting, model, benchmark, metric) a run's row fills in ``spec``'s
    paper table; ``run`` holds what the report's runs frame holds (params, memory, mode,
    model, benchmark)."""
    label, model = row_label(spec, run), served_model_label(str(run["model"]))
    if spec.paper_table is None or label is None or model is None:
        return set()
    hit = paper[(paper["table"] == spec.paper_table) & (paper["model"] == model) & (paper["setting"] == label)
                & (paper["benchmark"] == run["benchmark"])]
    return {(label, model, str(run["benchmark"]), str(m).lower()) for m in hit["metric"]}


def embedding_note(joined: pd.DataFrame) -> str | None:
    """The caption's embedding: what the table's memory runs retrieved with."""
    used = sorted({embedding_name(_params(run)) for _, run in joined.iterrows()
                   if run["memory"] != "none" and "embedding.model" in _params(run)})
    return f"embedding: {', '.join(used)}." if used else None


def _table_notes(joined: pd.DataFrame, spec: TableSpec, cell_notes: list[str], published: bool = False) -> list[str]:
    """Footnotes, deduplicated, in a fixed order."""
    notes = [_partial_note(run) for _, run in joined.iterrows() if run["partial"]]
    if (embedding := embedding_note(joined)) is not None:
        notes.append(embedding)
    notes.append(f"{FIDELITY}: where a row's runs depart from the authors' setup (docs/fidelity.md, the ledger "
                 "and \"Named, not changed\"), or \"authors' setup\"; what the table varies is not a departure.")
    if (joined["model"] == "local").any():
        notes.append(SMOKE_NOTE)
    paper_models = joined["model"].map(served_model_label).notna()
    if spec.paper_table is not None and (paper_models & (joined["k"] != 4)).any():
        notes.append("the paper reports Avg@4/Pass@4; columns with another k show no paper value.")
    for benchmark in sorted(set(joined["benchmark"]), key=bench_rank):
        if (note := labels_of(benchmark).note) is not None:
            notes.append(note)
    if (joined["n_retried"] > 0).any():
        notes.append(FIRST_NOTE)
    if spec.cost:
        notes.append(COST_NOTE)
    if published:
        notes.append(PUBLISHED_NOTE)
    notes.extend(cell_notes)
    return list(dict.fromkeys(notes))


def _column_order(joined: pd.DataFrame, columns: set[str]) -> list[str]:
    """Columns grouped by (model, benchmark, k) in paper order, then metric, then sub-column."""
    ordered = []
    groups = joined[["model", "benchmark", "k"]].drop_duplicates()
    keys = sorted(groups.itertuples(index=False),
                  key=lambda g: (_model_rank(g.model), bench_rank(g.benchmark), int(g.k)))
    for g in keys:
        group = f"{model_label(g.model)} {benchmark_label(g.benchmark)}"
        for metric in ("avg", "pass"):
            for sub in SUB_COLUMNS:
                name = f"{group} {_metric_name(metric, g.k)} {sub}"
                if name in columns and name not in ordered:
                    ordered.append(name)
        own = [f"{group} {m.title(int(g.k))} ours" for m in seed_metrics_of(g.benchmark)]
        for name in (*own, f"{group} {TOKENS}", f"{group} {MAX_PROMPT}"):
            if name in columns and name not in ordered:
                ordered.append(name)
    return ordered + ([PUBLISHED] if PUBLISHED in columns else []) + ([FIDELITY] if FIDELITY in columns else [])


def layout(metrics: pd.DataFrame, runs: pd.DataFrame, spec: TableSpec) -> pd.DataFrame:
    """The table ``spec`` describes, over every run it applies to (empty if none does)."""
    joined = _labelled_runs(metrics, runs, spec)
    paper = load_paper_tables()
    rows: dict[str, dict] = {}
    cell_notes: list[str] = []
    published = load_published() if spec.published else None
    count = CellCount()
    for _, run in joined.iterrows():
        cells = rows.setdefault(run["row"], {spec.row_header: run["row"]})
        _fill_cells(cells, run, spec, paper, cell_notes)
        found = run_departures(run, spec)
        count += CellCount.of(found)
        known = [t for t in cells.get(FIDELITY, "").split("; ") if t and t != fidelity_text([])]
        cells[FIDELITY] = fidelity_text(known + found)
        if published is not None and (text := published_text(run["base"], run["benchmark"], published)):
            cells[PUBLISHED] = text
    base_of = dict(zip(joined["row"], joined["base"]))
    rank_of: dict[str, float] = {}
    for row, rank in zip(joined["row"], suite_ranks(joined)):
        rank_of[row] = min(rank, rank_of.get(row, rank))
    order = sorted(rows, key=lambda r: (rank_of[r], _row_sort_key(spec, base_of[r]), natural_key(r)))
    columns = {c for cells in rows.values() for c in cells} - {spec.row_header}
    df = pd.DataFrame([rows[r] for r in order],
                      columns=[spec.row_header, *_column_order(joined, columns)]).fillna("")
    df.attrs["title"] = spec.title
    df.attrs["notes"] = _table_notes(joined, spec, cell_notes, PUBLISHED in columns) if len(joined) else []
    df.attrs["clean_cells"] = count
    if len(joined):  # beside the column it counts from
        df.attrs["notes"].append(f"{FIDELITY} count: {count.text()} (a run's Avg@k and Pass@k cells are free when "
                                 "each departure its column names is low: docs/fidelity.md, \"How far a departure "
                                 "goes\").")
    return df


# ---------------------------------------------------------------- the tables

def build_table(name: str, metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The table of suite ``name`` (its ``table:`` block, ``reme_cli.report.specs``), e.g.
    "table1" (memory systems x models x benchmarks) or "topk"."""
    return layout(metrics, runs, table_spec(name))


# ---------------------------------------------------------------- Markdown

def _md_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no dependency on ``tabulate``)."""
    header = "| " + " | ".join(_md_cell(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(_md_cell(v) for v in row) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([header, rule, *body])


# ---------------------------------------------------------------- comparisons

BaselineSelector = Callable[[pd.Series, pd.DataFrame], "str | None"]


def no_memory_baseline(run: pd.Series, runs: pd.DataFrame) -> str | None:
    """The no-memory run of the same model and benchmark (same k preferred; complete first)."""
    same = runs[(runs["model"] == run["model"]) & (runs["benchmark"] == run["benchmark"])
                & (runs["memory"] == "none") & (runs["run_id"] != run["run_id"])]
    if same.empty or run["memory"] == "none":
        return None
    ranked = same.assign(_k=(same["k"] != run["k"]), _s=(same["status"] != "complete"))
    return str(ranked.sort_values(["_k", "_s", "run_id"], kind="stable").iloc[0]["run_id"])


def _interval_text(res: dict) -> str:
    if math.isnan(res["lo"]):
        return f"{fmt_points(res['diff'] * 100)} pts (no interval: fewer than 2 shared tasks)"
    return (f"{fmt_points(res['diff'] * 100)} pts (95% CI {fmt_points(res['lo'] * 100)} to "
            f"{fmt_points(res['hi'] * 100)})")


def _comparison_sentence(run_id: str, base_id: str, k: int, results: dict[str, dict],
                         partial: bool) -> str:
    """One sentence per comparison naming what is, and is not, distinguishable from noise."""
    first = next(iter(results.values()))
    names = {m: _metric_name(m, k) for m in results}
    if first["n_tasks"] == 0:
        return f"{run_id} vs {base_id}: no (seed, task) pairs in common, nothing to compare."
    parts = [f"{names[m]} {_interval_text(r)}" for m, r in results.items()]
    yes = [names[m] for m, r in results.items() if r["distinguishable"]]
    no = [names[m] for m, r in results.items() if not r["distinguishable"]]
    verdict = []
    if yes:
        verdict.append(f"distinguishable from noise: {', '.join(yes)}")
    if no:
        verdict.append(f"not distinguishable from noise: {', '.join(no)}")
    caveat = " One of the two runs is partial (†)." if partial else ""
    return (f"{run_id} vs {base_id} on {first['n_tasks']} tasks × {first['n_seeds']} seeds "
            f"(paired task bootstrap): {'; '.join(parts)}; {'; '.join(verdict)}.{caveat}")


def comparisons(units: pd.DataFrame, metrics: pd.DataFrame, runs: pd.DataFrame,
                baseline_selector: BaselineSelector | None = None) -> pd.DataFrame:
    """Each run vs its baseline (default: the no-memory run of its model and benchmark).

    One row per compared run: the paired bootstrap of Avg@k and Pass@k (differences and
    interval bounds in percentage points, 2 decimals) and a sentence saying which of the two
    differences the interval separates from zero.
    """
    select = baseline_selector or no_memory_baseline
    partial = dict(zip(metrics["run_id"], metrics["partial"]))
    rows = []
    for _, run in in_run_order(runs).iterrows():
        base_id = select(run, runs)
        if base_id is None:
            continue
        ua, ub = units[units["run_id"] == run["run_id"]], units[units["run_id"] == base_id]
        results = {m: paired_bootstrap(ua, ub, metric=m) for m in ("avg", "pass")}
        row = {"run_id": run["run_id"], "baseline_run_id": base_id, "model": run["model"],
               "benchmark": run["benchmark"], "k": int(run["k"]),
               "n_tasks": results["avg"]["n_tasks"], "n_seeds": results["avg"]["n_seeds"],
               "dropped_pairs": results["avg"]["dropped_pairs"]}
        for m, r in results.items():
            row.update({f"{m}_diff_pts": round(r["diff"] * 100, 2), f"{m}_lo_pts": round(r["lo"] * 100, 2),
                        f"{m}_hi_pts": round(r["hi"] * 100, 2),
                        f"{m}_distinguishable": r["distinguishable"]})
        either_partial = bool(partial.get(run["run_id"], True) or partial.get(base_id, True))
        row["sentence"] = _comparison_sentence(run["run_id"], base_id, run["k"], results,
                                               either_partial)
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- error analysis

@dataclass(frozen=True)
class ErrorAnalysis:
    """Which tasks only one of two runs solves, and how each run's failures were classified."""

    run_a: str
    run_b: str
    n_common_tasks: int
    only_a: list[str]
    only_b: list[str]
    categories: pd.DataFrame  # columns: category, <run_a>, <run_b> (counts)


def _solved(units: pd.DataFrame) -> set[str]:
    return set(units.loc[as_flag(units["success"]), "task_id"])


def _failure_counts(units: pd.DataFrame) -> pd.Series:
    """checker_error_type counts over failed units that did not error ("(none)" if missing)."""
    failed = units[~as_flag(units["success"])]
    return failed["checker_error_type"].fillna("(none)").astype(str).value_counts()


def error_analysis(units: pd.DataFrame, run_a: str, run_b: str) -> ErrorAnalysis:
    """Tasks solved in any seed/run by one run but never by the other, over the tasks both
    attempted (without error), plus per-run counts of the checker's failure categories.
    """
    scored = scored_units(units)
    ua, ub = scored[scored["run_id"] == run_a], scored[scored["run_id"] == run_b]
    common = set(ua["task_id"]) & set(ub["task_id"])
    solved_a, solved_b = _solved(ua) & common, _solved(ub) & common
    counts = pd.DataFrame({run_a: _failure_counts(ua), run_b: _failure_counts(ub)}).fillna(0)
    counts = counts.astype(int).rename_axis("category").reset_index()
    counts = counts.sort_values("category", kind="stable").reset_index(drop=True)
    return ErrorAnalysis(run_a, run_b, len(common), sorted(solved_a - solved_b),
                         sorted(solved_b - solved_a), counts)

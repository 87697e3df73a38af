"""The report package on hand-made records: every expected number is worked out by hand here."""

import math
import warnings

import pandas as pd
import pytest

from reme_cli.core.errors import UserError
from reme_cli.report.metrics import run_metrics
from reme_cli.report.paper import paper_model_label, paper_value
from reme_cli.report.plots import plot_bars, plot_pool_series, plot_topk
from reme_cli.report.stats import paired_bootstrap
from reme_cli.report.tables import (DAGGER, DASH, SMOKE_NOTE, comparisons, error_analysis,
                                    build_table, to_markdown)
from reme_cli.report.write import choose_tables, write_report

ERR = "E"  # an outcome that errored (scored as a failure, counted as an error)


def make_units(run_id: str, outcomes: dict[tuple[int, str], list]) -> pd.DataFrame:
    """Units from {(seed, task): [outcome per run]}, outcome 1 / 0 / ERR."""
    rows = []
    for (seed, task), per_run in outcomes.items():
        for run, outcome in enumerate(per_run):
            error = outcome == ERR
            success = outcome == 1
            rows.append({"run_id": run_id, "seed": seed, "run": run, "task_id": task,
                         "success": success, "error": error,
                         "stop_reason": "error" if error else "done",
                         "checker_error_type": None if success or error
                         else "multi_turn:execution_response_mismatch"})
    return pd.DataFrame(rows)


def make_run(run_id: str, *, model="qwen3-8b", benchmark="bfcl_v3", mode="none", memory="none",
             k=2, seeds=1, tasks=3, status="complete", variant="", params=None) -> dict:
    return {"run_id": run_id, "path": f"/runs/{run_id}", "benchmark": benchmark, "model": model,
            "mode": mode, "memory": memory, "k": k, "seeds": seeds, "tasks": tasks,
            "status": status, "variant": variant, "params": params or {}}


def one_row(metrics: pd.DataFrame, run_id: str) -> pd.Series:
    return metrics.set_index("run_id").loc[run_id]


# ---------------------------------------------------------------- metrics

def test_run_metrics_avg_pass_and_sample_std_over_two_seeds():
    units = make_units("r", {
        (0, "t1"): [1, 1], (0, "t2"): [1, 0], (0, "t3"): [0, 0],
        (1, "t1"): [1, 0], (1, "t2"): [0, 0], (1, "t3"): [0, 0],
    })
    runs = pd.DataFrame([make_run("r", seeds=2, k=2, tasks=3)])
    row = one_row(run_metrics(units, runs), "r")
    # seed 0: task means 1, 0.5, 0 -> Avg = 1.5/3 = 0.5 ; solved t1,t2 -> Pass = 2/3
    # seed 1: task means 0.5, 0, 0 -> Avg = 0.5/3 = 1/6 ; solved t1 -> Pass = 1/3
    # mean Avg = (1/2 + 1/6)/2 = 1/3 ; sample std of two values = |a - b| / sqrt(2) = (1/3)/sqrt(2)
    assert row["avg_mean"] == pytest.approx(1 / 3)
    assert row["avg_std"] == pytest.approx((1 / 3) / math.sqrt(2))
    # mean Pass = (2/3 + 1/3)/2 = 1/2 ; std = (1/3)/sqrt(2)
    assert row["pass_mean"] == pytest.approx(0.5)
    assert row["pass_std"] == pytest.approx((1 / 3) / math.sqrt(2))
    assert row["avg_mean"] != pytest.approx(row["pass_mean"])
    assert row["per_seed"][0] == pytest.approx((0.5, 2 / 3))
    assert row["per_seed"][1] == pytest.approx((1 / 6, 1 / 3))
    # 2 seeds * 2 runs * 3 tasks = 12 planned and present, no error, complete -> not partial
    assert (row["n_seeds"], row["n_tasks"], row["n_units"], row["expected_units"]) == (2, 3, 12, 12)
    assert not row["partial"]


def test_single_seed_std_is_zero():
    units = make_units("r", {(0, "t1"): [1, 0], (0, "t2"): [0, 0]})
    row = one_row(run_metrics(units, pd.DataFrame([make_run("r", tasks=2)])), "r")
    # Avg = (0.5 + 0)/2 = 0.25, Pass = 1/2; one seed -> std 0.0 (not NaN)
    assert row["avg_mean"] == pytest.approx(0.25)
    assert row["pass_mean"] == pytest.approx(0.5)
    assert row["avg_std"] == 0.0 and row["pass_std"] == 0.0


def test_an_errored_unit_counts_as_a_failure_and_makes_run_partial():
    units = make_units("r", {(0, "t1"): [1, ERR], (0, "t2"): [0, 1], (0, "t3"): [ERR, ERR]})
    row = one_row(run_metrics(units, pd.DataFrame([make_run("r", tasks=3)])), "r")
    # as the authors' harness scores it: t1 0.5 (its errored run failed), t2 0.5, t3 0 (never ran
    # to a verdict) -> Avg = 1.0/3 ; Pass = t1, t2 solved -> 2/3 ; t3 still counts as a task
    assert row["avg_mean"] == pytest.approx(1 / 3)
    assert row["pass_mean"] == pytest.approx(2 / 3)
    assert row["n_tasks"] == 3 and row["n_errors"] == 3 and row["n_units"] == 6 and row["expected_units"] == 6
    assert row["partial"]
    # without its errors the same run would read 0.75 / 1.0: the error cannot raise a score
    clean = make_units("c", {(0, "t1"): [1], (0, "t2"): [0, 1]})
    assert one_row(run_metrics(clean, pd.DataFrame([make_run("c", tasks=2)])), "c")["avg_mean"] == pytest.approx(0.75)


def test_missing_flag_values_do_not_read_as_true():
    units = make_units("r", {(0, "t1"): [1, 0]}).astype({"error": object, "success": object})
    units.loc[1, "error"] = None  # unknown error flag: not an error
    units.loc[0, "success"] = None  # unknown success: not a success
    row = one_row(run_metrics(units, pd.DataFrame([make_run("r", tasks=1)])), "r")
    # both units count, neither succeeded -> Avg = Pass = 0 ; no error -> 2/2 units, not partial
    assert row["avg_mean"] == 0.0 and row["pass_mean"] == 0.0
    assert row["n_errors"] == 0 and not row["partial"]


def test_missing_units_or_unfinished_status_make_run_partial_and_table1_marks_it():
    # planned 1 seed * 2 runs * 3 tasks = 6 units, only 4 present
    short = make_units("short", {(0, "t1"): [1, 1], (0, "t2"): [0, 1]})
    full = make_units("full", {(0, "t1"): [1, 1], (0, "t2"): [0, 1], (0, "t3"): [0, 0]})
    stopped = make_units("stopped", {(0, "t1"): [1, 1], (0, "t2"): [0, 1], (0, "t3"): [0, 0]})
    units = pd.concat([short, full, stopped])
    runs = pd.DataFrame([make_run("short", memory="none"),
                         make_run("full", memory="reme", mode="fixed"),
                         make_run("stopped", memory="reme", mode="dynamic", status="interrupted")])
    metrics = run_metrics(units, runs)
    assert one_row(metrics, "short")["partial"]
    assert not one_row(metrics, "full")["partial"]
    assert one_row(metrics, "stopped")["partial"]
    table = build_table("table1", metrics, runs).set_index("setting")
    ours = "Qwen3-8B BFCL-v3 Avg@2 ours"
    assert table.loc["No Memory", ours].endswith(DAGGER)
    assert table.loc["ReMe (dynamic)", ours].endswith(DAGGER)
    assert DAGGER not in table.loc["ReMe (fixed)", ours]
    notes = "\n".join(build_table("table1", metrics, runs).attrs["notes"])
    assert "short" in notes and "4/6" in notes and "stopped" in notes and "interrupted" in notes


# ---------------------------------------------------------------- paper values and table 1

def test_paper_value_lookup():
    assert paper_model_label("qwen3-14b") == "Qwen3-14B"
    assert paper_model_label("local") is None
    assert paper_value("table1", "Qwen3-8B", "No Memory", "bfcl_v3", "avg@4") == (40.33, 0.94)
    assert paper_value("table1", "qwen3-32b", "ReMe (dynamic)", "appworld", "Pass@4") == (63.49, 0.28)
    # ablation tables have no std in the paper
    assert paper_value("table2_granularity", "Qwen3-8B", "trajectory-level", "bfcl_v3",
                       "avg@4") == (43.0, None)
    assert paper_value("table1", "local", "No Memory", "bfcl_v3", "avg@4") is None
    assert paper_value("table1", "Qwen3-8B", "No Memory", "bfcl_v3", "avg@2") is None


def _table1_runs():
    # no memory, 1 seed, k=4, 4 tasks: task means 1, 0.25, 0, 0.5 -> Avg = 1.75/4 = 43.75 %
    # solved t1, t2, t4 -> Pass = 3/4 = 75.00 %
    none = make_units("nomem", {(0, "t1"): [1, 1, 1, 1], (0, "t2"): [1, 0, 0, 0],
                                (0, "t3"): [0, 0, 0, 0], (0, "t4"): [1, 1, 0, 0]})
    # ReMe fixed solves everything -> Avg = Pass = 100.00 %
    fixed = make_units("fixed", {(0, t): [1, 1, 1, 1] for t in ("t1", "t2", "t3", "t4")})
    runs = pd.DataFrame([make_run("nomem", k=4, tasks=4),
                         make_run("fixed", memory="reme", mode="fixed", k=4, tasks=4)])
    return pd.concat([none, fixed]), runs


def test_table1_shows_paper_values_and_delta_beside_ours():
    units, runs = _table1_runs()
    table = build_table("table1", run_metrics(units, runs), runs)
    assert list(table["setting"]) == ["No Memory", "ReMe (fixed)"]  # paper order, only present
    t = table.set_index("setting")
    g = "Qwen3-8B BFCL-v3"
    assert t.loc["No Memory", f"{g} Avg@4 ours"] == "43.75 ± 0.00"
    assert t.loc["No Memory", f"{g} Avg@4 n"] == "1/4"
    assert t.loc["No Memory", f"{g} Avg@4 paper"] == "40.33 ± 0.94"
    assert t.loc["No Memory", f"{g} Avg@4 Δ"] == "+3.42"  # 43.75 - 40.33
    assert t.loc["No Memory", f"{g} Pass@4 paper"] == "59.55 ± 0.83"
    assert t.loc["No Memory", f"{g} Pass@4 Δ"] == "+15.45"  # 75.00 - 59.55
    assert t.loc["ReMe (fixed)", f"{g} Avg@4 paper"] == "44.50 ± 0.85"
    assert t.loc["ReMe (fixed)", f"{g} Avg@4 Δ"] == "+55.50"  # 100.00 - 44.50
    assert t.loc["ReMe (fixed)", f"{g} Pass@4 Δ"] == "+34.23"  # 100.00 - 65.77
    md = to_markdown(table)
    assert "40.33 ± 0.94" in md and md.count("\n") == 3  # header, rule, two rows


def test_table1_local_model_has_no_paper_value_and_carries_smoke_note():
    units = make_units("loc", {(0, "t1"): [1, 0]})
    runs = pd.DataFrame([make_run("loc", model="local", tasks=1)])
    table = build_table("table1", run_metrics(units, runs), runs)
    assert table.loc[0, "local (135M) BFCL-v3 Avg@2 paper"] == DASH
    assert table.loc[0, "local (135M) BFCL-v3 Avg@2 Δ"] == DASH
    assert table.loc[0, "local (135M) BFCL-v3 Avg@2 ours"] == "50.00 ± 0.00"
    assert SMOKE_NOTE in table.attrs["notes"]


def test_two_runs_in_one_cell_keep_separate_rows():
    units = pd.concat([make_units("a", {(0, "t1"): [1, 1]}), make_units("b", {(0, "t1"): [0, 0]})])
    runs = pd.DataFrame([make_run("a", tasks=1, variant="v1"), make_run("b", tasks=1, variant="v2")])
    table = build_table("table1", run_metrics(units, runs), runs)
    assert list(table["setting"]) == ["No Memory [v1]", "No Memory [v2]"]
    # never averaged: 100 and 0, not 50
    assert list(table["Qwen3-8B BFCL-v3 Avg@2 ours"]) == ["100.00 ± 0.00", "0.00 ± 0.00"]
    # the paper value still applies to both
    assert set(table["Qwen3-8B BFCL-v3 Avg@2 paper"]) == {DASH}  # k=2: the paper has only @4


# ---------------------------------------------------------------- ablation tables

def _reme(run_id, **params):
    return make_run(run_id, memory="reme", mode="dynamic", k=4, tasks=1, params=params)


def test_table3_cumulative_component_rows_in_paper_order():
    ids = ["c", "a", "d", "b"]
    combos = {"a": ("full", False, False), "b": ("selective", False, False),
              "c": ("selective", True, False), "d": ("selective", True, True)}
    runs = pd.DataFrame([_reme(i, **{"memory.addition": combos[i][0],
                                     "memory.reflection.enabled": combos[i][1],
                                     "memory.deletion.enabled": combos[i][2]}) for i in ids])
    units = pd.concat([make_units(i, {(0, "t1"): [1, 1, 1, 1]}) for i in ids])
    table = build_table("table3", run_metrics(units, runs), runs)
    assert list(table["components"]) == ["full addition", "selective addition", "+ reflection",
                                          "+ deletion"]
    # paper table 3 (dynamic): + deletion Pass@4 = 68.0, no std -> "68.00"; ours 100 -> +32.00
    row = table.set_index("components").loc["+ deletion"]
    assert row["Qwen3-8B BFCL-v3 Pass@4 paper"] == "68.00"
    assert row["Qwen3-8B BFCL-v3 Pass@4 Δ"] == "+32.00"


def test_table4_same_summarizer_means_the_executor():
    runs = pd.DataFrame([_reme("s", **{"summarizer.name": "same"}) | {"mode": "fixed"},
                         _reme("b", **{"summarizer.name": "qwen3-14b"}) | {"mode": "fixed"}])
    units = pd.concat([make_units(i, {(0, "t1"): [1, 0, 0, 0]}) for i in ("s", "b")])
    table = build_table("table4", run_metrics(units, runs), runs).set_index("summarizer")
    assert list(table.index) == ["summarizer=Qwen3-8B", "summarizer=Qwen3-14B"]
    # ours Avg = 1/4 = 25.00; paper 8B-summarizer Avg@4 = 44.5 -> 25.00 - 44.50 = -19.50
    assert table.loc["summarizer=Qwen3-8B", "Qwen3-8B BFCL-v3 Avg@4 Δ"] == "-19.50"
    assert table.loc["summarizer=Qwen3-14B", "Qwen3-8B BFCL-v3 Avg@4 paper"] == "46.33"


def test_topk_rows_sorted_numerically_and_plot_written(tmp_path):
    ks = {"r10": 10, "r1": 1, "r5": 5}
    runs = pd.DataFrame([_reme(r, **{"memory.top_k": k}) for r, k in ks.items()])
    units = pd.concat([make_units(r, {(0, "t1"): [1, 0, 0, 0], (1, "t1"): [1, 1, 0, 0]})
                       for r in ks])
    metrics = run_metrics(units, runs)
    table = build_table("topk", metrics, runs)
    assert list(table["K"]) == ["K=1", "K=5", "K=10"]  # a string sort would put K=10 second
    assert not any("paper" in c for c in table.columns)
    png = plot_topk(metrics, runs, tmp_path / "topk.png")
    assert png.exists() and png.stat().st_size > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bar_and_pool_plots_written(tmp_path):
    units, runs = _table1_runs()
    bars = plot_bars(run_metrics(units, runs), runs, tmp_path / "bars.png", "scores")
    assert bars.read_bytes()[:4] == b"\x89PNG"
    pool = pd.DataFrame({"run_id": ["fixed"] * 4, "seed": [0, 0, 1, 1], "run": [0] * 4,
                         "position": [0, 1, 0, 1], "pool_size": [1, 2, 1, 3],
                         "mean_utility": [float("nan"), 0.5, 0.0, 1.0]})
    out = plot_pool_series(pool, tmp_path / "sub" / "pool.png", runs)
    assert out.exists() and out.stat().st_size > 0


# ---------------------------------------------------------------- bootstrap

def _grid(run_id, n_tasks, n_seeds, outcome):
    """Units over n_tasks x n_seeds with 2 runs each; outcome(seed, task_index) -> [o, o]."""
    return make_units(run_id, {(s, f"t{t:02d}"): outcome(s, t)
                               for s in range(n_seeds) for t in range(n_tasks)})


def test_bootstrap_identical_inputs_give_zero_without_warnings():
    pattern = lambda s, t: [int((s + t) % 3 == 0), int(t % 2 == 0)]  # noqa: E731
    a, b = _grid("a", 20, 3, pattern), _grid("b", 20, 3, pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for metric in ("avg", "pass"):
            res = paired_bootstrap(a, b, metric=metric, n_resamples=2000)
            assert res["diff"] == 0.0
            assert res["lo"] <= 0.0 <= res["hi"]
            assert not math.isnan(res["lo"]) and not math.isnan(res["hi"])
            assert not res["distinguishable"]
            assert (res["n_tasks"], res["n_seeds"]) == (20, 3)


def test_bootstrap_all_success_vs_all_failure_is_distinguishable():
    a = _grid("a", 20, 3, lambda s, t: [1, 1])
    b = _grid("b", 20, 3, lambda s, t: [0, 0])
    res = paired_bootstrap(a, b, metric="avg", n_resamples=2000)
    # every task: 1 - 0 = 1 -> diff 1 and the interval is [1, 1]
    assert res["diff"] == pytest.approx(1.0)
    assert res["lo"] > 0
    assert res["distinguishable"]
    reverse = paired_bootstrap(b, a, metric="pass", n_resamples=2000)
    assert reverse["hi"] < 0 and reverse["distinguishable"]


def test_bootstrap_runs_scipy_on_mixed_differences():
    # a solves tasks 0..14, b solves tasks 10..19 (per task, all seeds and runs alike)
    a = _grid("a", 20, 3, lambda s, t: [int(t < 15)] * 2)
    b = _grid("b", 20, 3, lambda s, t: [int(t >= 10)] * 2)
    res = paired_bootstrap(a, b, metric="avg", n_resamples=3000, seed=1)
    # per-task diffs: tasks 0-9 -> +1, 10-14 -> 0, 15-19 -> -1 ; mean = (10 - 5)/20 = 0.25
    assert res["diff"] == pytest.approx(0.25)
    assert res["lo"] < 0.25 < res["hi"]  # a real interval, not a point
    # zero-mean noise: a solves 0..9, b solves 10..19 -> diff 0, the interval straddles 0
    c = _grid("c", 20, 3, lambda s, t: [int(t < 10)] * 2)
    noise = paired_bootstrap(c, b, metric="pass", n_resamples=3000)
    assert noise["diff"] == pytest.approx(0.0)
    assert noise["lo"] < 0 < noise["hi"] and not noise["distinguishable"]
    assert paired_bootstrap(a, b, n_resamples=500, seed=7) == paired_bootstrap(
        a, b, n_resamples=500, seed=7)  # deterministic for a fixed seed


def test_bootstrap_uses_only_shared_seed_task_pairs():
    a = make_units("a", {(0, "t1"): [1], (0, "t2"): [1], (1, "t1"): [1], (0, "t3"): [1]})
    b = make_units("b", {(0, "t1"): [0], (0, "t2"): [0], (1, "t1"): [0]})
    res = paired_bootstrap(a, b, metric="avg", n_resamples=500)
    # shared pairs: (0,t1), (0,t2), (1,t1); shared seeds {0,1}; t2 lacks seed 1 -> only t1 kept
    # dropped: a has 4 pairs, b 3, kept 2 per side -> 4 + 3 - 2*2 = 3
    assert (res["n_tasks"], res["n_seeds"], res["dropped_pairs"]) == (1, 2, 3)
    assert res["diff"] == pytest.approx(1.0)
    # one task has no spread to resample: no interval, and never called distinguishable
    assert math.isnan(res["lo"]) and not res["distinguishable"]


# ---------------------------------------------------------------- comparisons and errors

def test_comparisons_against_no_memory_baseline():
    a = _grid("mem", 20, 3, lambda s, t: [1, 1])
    b = _grid("base", 20, 3, lambda s, t: [int(t < 10), 0])
    runs = pd.DataFrame([make_run("base", seeds=3, tasks=20),
                         make_run("mem", memory="reme", mode="fixed", seeds=3, tasks=20),
                         make_run("other", model="qwen3-14b", memory="reme", mode="fixed")])
    units = pd.concat([a, b])
    comp = comparisons(units, run_metrics(units, runs), runs)
    assert list(comp["run_id"]) == ["mem"]  # base is the baseline, other has none
    row = comp.iloc[0]
    assert row["baseline_run_id"] == "base"
    # Avg: mem 1.0, base: tasks 0-9 -> 0.5, 10-19 -> 0 -> 0.25 ; diff 75.00 points
    # Pass: mem 1.0, base 10/20 = 0.5 ; diff 50.00 points
    assert row["avg_diff_pts"] == pytest.approx(75.0)
    assert row["pass_diff_pts"] == pytest.approx(50.0)
    assert row["avg_distinguishable"] and row["pass_distinguishable"]
    assert "distinguishable from noise: Avg@2, Pass@2" in row["sentence"]


def test_error_analysis_only_solved_sets_and_categories():
    a = make_units("a", {(0, "t1"): [1, 0], (0, "t2"): [0, 0], (1, "t3"): [0, 1],
                         (0, "t4"): [1, 1]})
    b = make_units("b", {(0, "t1"): [0, 0], (0, "t2"): [1, ERR], (1, "t3"): [1, 0],
                         (0, "t5"): [1, 1]})
    b.loc[(b["task_id"] == "t1") & (b["run"] == 0), "checker_error_type"] = \
        "multi_turn:force_terminated"
    res = error_analysis(pd.concat([a, b]), "a", "b")
    # common tasks: t1, t2, t3 (t4 only a, t5 only b); a solves t1, t3; b solves t2, t3
    assert res.n_common_tasks == 3
    assert res.only_a == ["t1"] and res.only_b == ["t2"]
    cats = res.categories.set_index("category")
    # a's failures: t1 run1, t2 x2, t3 run0 -> 4 mismatches (t4 has none)
    # b's failures: t1 run0 forced, t1 run1 mismatch, t3 run1 mismatch; the error is not counted
    assert cats.loc["multi_turn:execution_response_mismatch", "a"] == 4
    assert cats.loc["multi_turn:execution_response_mismatch", "b"] == 2
    assert cats.loc["multi_turn:force_terminated", "b"] == 1
    assert cats.loc["multi_turn:force_terminated", "a"] == 0


# ---------------------------------------------------------------- write_report

def test_write_report_writes_markdown_csvs_and_figures(tmp_path):
    units, runs = _table1_runs()
    paths = write_report(tmp_path / "rep", units, runs)
    names = {p.name for p in paths}
    assert {"report.md", "metrics.csv", "table_table1.csv", "comparisons.csv",
            "error_analysis.csv", "scores.png"} <= names
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Qwen3-8B BFCL-v3 Avg@4 paper" in md and "40.33 ± 0.94" in md and "+3.42" in md
    assert "fixed vs nomem" in md
    csv = pd.read_csv(tmp_path / "rep" / "table_table1.csv")
    assert list(csv["setting"]) == ["No Memory", "ReMe (fixed)"]
    # deterministic: a second write gives identical text files
    write_report(tmp_path / "rep2", units, runs)
    for name in ("report.md", "metrics.csv", "table_table1.csv", "comparisons.csv"):
        assert (tmp_path / "rep" / name).read_text() == (tmp_path / "rep2" / name).read_text()


def test_choose_tables_by_suite_or_by_varying_params():
    runs = pd.DataFrame([_reme("a", **{"memory.top_k": 1, "memory.granularity": "keypoint"}),
                         _reme("b", **{"memory.top_k": 5, "memory.granularity": "keypoint"})])
    assert choose_tables(runs) == ["table1", "topk"]  # only top_k varies
    assert choose_tables(runs, "table2") == ["table2"]
    with pytest.raises(UserError, match="unknown table 'table9'; choose one of .*table1"):
        choose_tables(runs, "table9")


def test_write_report_topk_suite_draws_topk_plot_and_smoke_title(tmp_path):
    runs = pd.DataFrame([_reme(r, **{"memory.top_k": k}) | {"model": "local"}
                         for r, k in (("x", 1), ("y", 3))])
    units = pd.concat([make_units(r, {(0, "t1"): [1, 0, 0, 0]}) for r in ("x", "y")])
    paths = write_report(tmp_path, units, runs, suite="topk")
    assert {"topk.png", "table_topk.csv", "report.md"} <= {p.name for p in paths}
    md = (tmp_path / "report.md").read_text()
    assert SMOKE_NOTE in md and "K=1" in md


# ---------------------------------------------------------------- AppWorld: SGC and difficulty

AW_LEVELS = {"s1_1": 1, "s1_2": 2, "s2_1": 3}  # scenario s1 has two tasks, s2 one


def make_aw_units(run_id: str, outcomes: dict[tuple[int, str], list]) -> pd.DataFrame:
    units = make_units(run_id, outcomes)
    # What AppWorld's checker records: the scenario (id before "_") and the difficulty level.
    return units.assign(scenario=units["task_id"].str.split("_").str[0],
                        difficulty=units["task_id"].map(AW_LEVELS))


def _appworld_runs():
    aw = make_aw_units("aw", {
        (0, "s1_1"): [1, 1], (0, "s1_2"): [1, 0], (0, "s2_1"): [0, 1],
        (1, "s1_1"): [1, ERR], (1, "s1_2"): [1, 1], (1, "s2_1"): [1, 0],
    })
    bfcl = make_units("bf", {(0, "t1"): [1, 0]})
    runs = pd.DataFrame([make_run("aw", benchmark="appworld", seeds=2, k=2, tasks=3),
                         make_run("bf", tasks=1)])
    return pd.concat([aw, bfcl]), runs


def test_appworld_sgc_per_run_then_seed_with_errors_failed_and_difficulty_rates():
    units, runs = _appworld_runs()
    metrics = run_metrics(units, runs)
    row = one_row(metrics, "aw")
    # seed 0: run 0 s1 passes (1,1), s2 fails -> 1/2 ; run 1 s1 fails, s2 passes -> 1/2 ; SGC 0.5
    # seed 1: run 0 both pass -> 1 ; run 1 s1 = {s1_1: error = failed, s1_2: 1} fails, s2 fails
    #         -> 0 ; SGC 0.5   (0.75 if the errored unit were left out)
    assert row["sgc_mean"] == pytest.approx(0.5)
    assert row["sgc_std"] == pytest.approx(0.0)
    # TGC Avg: seed 0 (1 + 0.5 + 0.5)/3 = 2/3 ; seed 1 (0.5 + 1 + 0.5)/3 = 2/3
    assert row["avg_mean"] == pytest.approx(2 / 3)
    # level 1 = s1_1: 3 of its 4 units solved (the errored one failed); level 2 = s1_2: 3/4; level 3 = s2_1: 2/4
    assert row["by_difficulty"] == pytest.approx({"1": 0.75, "2": 0.75, "3": 0.5})
    bf = one_row(metrics, "bf")
    assert math.isnan(bf["sgc_mean"]) and bf["by_difficulty"] == {}


def test_table1_has_an_sgc_column_for_appworld_only_and_says_what_it_is():
    units, runs = _appworld_runs()
    table = build_table("table1", run_metrics(units, runs), runs)
    columns = list(table.columns)
    sgc = "Qwen3-8B AppWorld SGC Avg@2 ours"
    assert columns.index(sgc) == columns.index("Qwen3-8B AppWorld Pass@2 Δ") + 1  # beside TGC Avg/Pass
    assert not any("BFCL-v3 SGC" in c for c in columns)
    (row,) = table.to_dict("records")  # one setting, its BFCL and AppWorld cells side by side
    assert row[sgc] == f"50.00 ± 0.00 {DAGGER}"  # "aw" has an errored unit: partial, so marked
    assert row["Qwen3-8B BFCL-v3 Avg@2 ours"] == "50.00 ± 0.00"
    assert any("scenario goal completion" in n for n in table.attrs["notes"])


def test_report_writes_the_appworld_sgc_and_difficulty_table(tmp_path):
    units, runs = _appworld_runs()
    paths = write_report(tmp_path / "rep", units, runs)
    assert "table_appworld.csv" in {p.name for p in paths}
    csv = pd.read_csv(tmp_path / "rep" / "table_appworld.csv", dtype=str)
    assert list(csv["run"]) == ["aw"]  # the BFCL run has no row
    (row,) = csv.to_dict("records")
    assert row["SGC Avg@k"] == f"50.00 ± 0.00 {DAGGER}" and row["TGC Avg@k"] == f"66.67 ± 0.00 {DAGGER}"
    assert (row["difficulty 1"], row["difficulty 2"], row["difficulty 3"]) == ("75.00", "75.00", "50.00")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## AppWorld: scenario goal completion and difficulty" in md
    metrics_csv = pd.read_csv(tmp_path / "rep" / "metrics.csv").set_index("run_id")
    assert metrics_csv.loc["aw", "by_difficulty"] == "1:0.750000;2:0.750000;3:0.500000"
    # A report without AppWorld runs has no such section.
    bf_units, bf_runs = units[units["run_id"] == "bf"], runs[runs["run_id"] == "bf"]
    paths = write_report(tmp_path / "bf", bf_units, bf_runs)
    assert "table_appworld.csv" not in {p.name for p in paths}
    assert "AppWorld" not in (tmp_path / "bf" / "report.md").read_text()

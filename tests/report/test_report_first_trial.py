"""`reme report` shows first-trial Avg@k / Pass@k beside the scored (last-trial) ones where a
method retried, on hand-made records whose every expected number is worked out here."""

import json
import math

import pandas as pd
import pytest

from reme_cli.commands.report import report
from reme_cli.core.config import compose, config_hash, to_dict
from reme_cli.core.io import append_lines
from reme_cli.core.run_log import read_run_log
from reme_cli.report.frames import load_frames
from reme_cli.report.metrics import run_metrics
from reme_cli.report.retries import first_trial_table
from reme_cli.report.tables import FIRST_NOTE, build_table
from reme_cli.report.write import write_report
from reme_cli.run.records import TRIALS_FILE, RunDir, UnitRecord
from tests.report.test_report_pkg import make_run, make_units, one_row

# {(seed, task): [(first trial, scored trial, trials run) per run]}
DYNAMIC = {
    (0, "t1"): [(0, 1, 2), (1, 1, 1)],
    (0, "t2"): [(0, 0, 3), (0, 1, 2)],
    (1, "t1"): [(0, 0, 3), (0, 0, 3)],
    (1, "t2"): [(1, 1, 1), (0, 1, 2)],
}
# Scored: seed 0 task means 1, 0.5 -> Avg 0.75, Pass 1; seed 1: 0, 1 -> Avg 0.5, Pass 0.5.
# First:  seed 0 task means 0.5, 0 -> Avg 0.25, Pass 0.5; seed 1: 0, 0.5 -> Avg 0.25, Pass 0.5.
# Units with more than one trial: 6 of 8.


def dynamic_units(run_id: str = "dyn") -> pd.DataFrame:
    units = make_units(run_id, {key: [final for _, final, _ in runs] for key, runs in DYNAMIC.items()})
    trials = [t for runs in DYNAMIC.values() for t in runs]
    return units.assign(first_success=[bool(first) for first, _, _ in trials],
                        attempts=[n for _, _, n in trials])


def _runs_and_units():
    nomem = make_units("nomem", {(s, t): [1, 0] for s in (0, 1) for t in ("t1", "t2")})
    runs = pd.DataFrame([make_run("nomem", seeds=2, tasks=2),
                         make_run("dyn", memory="reme", mode="dynamic", seeds=2, tasks=2)])
    return pd.concat([nomem.assign(first_success=nomem["success"], attempts=1), dynamic_units()]), runs


def test_first_trial_metrics_beside_the_scored_ones():
    units, runs = _runs_and_units()
    metrics = run_metrics(units, runs)
    dyn = one_row(metrics, "dyn")
    assert dyn["avg_mean"] == pytest.approx(0.625) and dyn["avg_std"] == pytest.approx(0.25 / math.sqrt(2))
    assert dyn["pass_mean"] == pytest.approx(0.75) and dyn["pass_std"] == pytest.approx(0.5 / math.sqrt(2))
    assert dyn["first_avg_mean"] == pytest.approx(0.25) and dyn["first_avg_std"] == pytest.approx(0.0)
    assert dyn["first_pass_mean"] == pytest.approx(0.5) and dyn["first_pass_std"] == pytest.approx(0.0)
    assert dyn["n_retried"] == 6
    # no retries: the first trial is the scored one
    nomem = one_row(metrics, "nomem")
    assert nomem["n_retried"] == 0
    assert (nomem["first_avg_mean"], nomem["first_pass_mean"]) == (nomem["avg_mean"], nomem["pass_mean"]) == (0.5, 1.0)


def test_an_errored_unit_is_not_counted_as_retried_and_a_frame_without_first_success_reads_as_one_trial():
    units = dynamic_units()
    units.loc[0, ["error", "success"]] = [True, False]  # (0, t1) run 0, which had retried
    runs = pd.DataFrame([make_run("dyn", memory="reme", mode="dynamic", seeds=2, tasks=2)])
    row = one_row(run_metrics(units, runs), "dyn")
    assert row["n_retried"] == 5
    # seed 0 first trials now: t1 0.5 (its errored run 0 failed, run 1 first trial 1), t2 0 -> Avg 0.25,
    # Pass 0.5; seed 1 as before: 0.25, 0.5
    assert row["first_avg_mean"] == pytest.approx(0.25) and row["first_pass_mean"] == pytest.approx(0.5)
    bare = run_metrics(dynamic_units().drop(columns=["first_success", "attempts"]), runs).iloc[0]
    assert bare["n_retried"] == 0 and bare["first_avg_mean"] == bare["avg_mean"] == pytest.approx(0.625)


def test_table1_gets_a_first_trial_column_only_where_some_run_retried():
    units, runs = _runs_and_units()
    table = build_table("table1", run_metrics(units, runs), runs)
    g = "Qwen3-8B BFCL-v3"
    t = table.set_index("setting")
    assert t.loc["ReMe (dynamic)", f"{g} Avg@2 first trial"] == "25.00 ± 0.00"
    assert t.loc["ReMe (dynamic)", f"{g} Pass@2 first trial"] == "50.00 ± 0.00"
    assert t.loc["ReMe (dynamic)", f"{g} Avg@2 ours"] == f"62.50 ± {25 / math.sqrt(2):.2f}"
    assert t.loc["No Memory", f"{g} Avg@2 first trial"] == ""
    # the paper's columns stay beside ours; the first trial comes after them
    cols = list(table.columns)
    assert cols[1:6] == [f"{g} Avg@2 {s}" for s in ("ours", "n", "paper", "Δ", "first trial")]
    assert FIRST_NOTE in table.attrs["notes"]
    without = runs[runs["run_id"] == "nomem"]
    plain = build_table("table1", run_metrics(units, without), without)
    assert not any("first trial" in c for c in plain.columns) and FIRST_NOTE not in plain.attrs["notes"]


def test_report_writes_the_first_trial_table_and_metrics_columns(tmp_path):
    units, runs = _runs_and_units()
    first = first_trial_table(run_metrics(units, runs), runs)
    assert list(first["run"]) == ["dyn"]  # the run without retries has no row
    row = first.iloc[0]
    assert row["retried units"] == "6/8"
    assert (row["Avg@k first"], row["Avg@k gain"]) == ("25.00 ± 0.00", "+37.50")  # 62.50 - 25.00
    assert (row["Pass@k first"], row["Pass@k gain"]) == ("50.00 ± 0.00", "+25.00")  # 75.00 - 50.00
    write_report(tmp_path, units, runs)
    md = (tmp_path / "report.md").read_text()
    assert "## First trial vs scored (last) trial" in md and "+37.50" in md
    csv = pd.read_csv(tmp_path / "metrics.csv").set_index("run_id")
    assert csv.loc["dyn", ["first_avg_mean", "first_pass_mean", "n_retried"]].tolist() == [0.25, 0.5, 6]
    assert pd.read_csv(tmp_path / "table_first_trial.csv")["run"].tolist() == ["dyn"]
    nomem = runs[runs["run_id"] == "nomem"]
    write_report(tmp_path / "plain", units[units["run_id"] == "nomem"], nomem)
    assert not (tmp_path / "plain" / "table_first_trial.csv").exists()
    assert "First trial" not in (tmp_path / "plain" / "report.md").read_text()


def _run_dir(path, lines: list[dict]) -> RunDir:
    cfg = compose(["benchmark=bfcl_v3", "eval.mode=dynamic", "memory=reme", "eval.seeds=1", "eval.runs=1"])
    run_dir = RunDir.open(path, to_dict(cfg), config_hash(cfg), kind="eval")
    run_dir.update_manifest(status="complete", task_ids=["a", "b", "c"])
    append_lines(path / TRIALS_FILE, lines)
    return run_dir


@pytest.mark.slow
def test_records_on_disk_and_a_line_without_first_success_load(tmp_path):
    def unit(task, **fields):
        return UnitRecord(unit=f"s0/r0/{task}", task_id=task, seed=0, run=0, stop_reason="answered",
                          **fields).to_dict()

    old = unit("c", success=True)
    for key in ("first_success", "attempts", "schema_version"):  # as reme 0.1 wrote a one-trial unit
        del old[key]
    lines = [unit("a", success=True, first_success=False, attempts=2),
             unit("b", success=False, first_success=False, attempts=3), old]
    run_dir = _run_dir(tmp_path / "run", lines)
    units, runs = load_frames([read_run_log(run_dir.path)])[:2]
    by_task = units.set_index("task_id")
    assert by_task.loc["c", "first_success"] == True  # noqa: E712 (a numpy bool)
    row = run_metrics(units, runs).iloc[0]
    # scored: a, c solved -> 2/3; first trial: c only -> 1/3; k = 1 so Pass = Avg
    assert row["avg_mean"] == pytest.approx(2 / 3) and row["first_avg_mean"] == pytest.approx(1 / 3)
    assert row["first_pass_mean"] == pytest.approx(1 / 3) and row["n_retried"] == 2
    out, _ = report([run_dir.path], out=tmp_path / "rep")
    csv = pd.read_csv(out / "metrics.csv")
    assert csv.loc[0, "first_avg_mean"] == pytest.approx(1 / 3, abs=1e-6)
    assert json.loads((out / "REME_REPORT").read_text())["runs"] == [str(run_dir.path.resolve())]

"""The report learns a method's columns from the method, and shows runs as their suite lists them."""

import contextlib
import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

import reme_cli.report.plots as plots
from reme_cli.commands.report import report, suite_dir_order, suite_order
from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Section
from reme_cli.core.registry import METHODS
from reme_cli.methods.base import Memory
from reme_cli.report.columns import method_columns, series_labels
from reme_cli.core.run_log import read_run_log
from reme_cli.report.frames import load_frames
from reme_cli.report.metrics import run_metrics
from reme_cli.report.order import SUITE_RANK
from reme_cli.report.tables import build_table
from reme_cli.report.write import choose_tables, write_report
from tests.report.test_report_pkg import make_run, make_units

TOPK_SUITE = ["k0", "k1", "k3", "k5", "k7", "k10"]


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots draw, by file name, instead of only their PNG bytes."""
    drawn = {}
    save = plots._save

    def keep(fig, path):
        drawn[str(path).rsplit("/", 1)[-1]] = fig
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return drawn


@pytest.fixture
def plugin():
    """Register a throwaway plug-in method for the test (held to the seam as an installed one
    is) that declares its report columns."""
    with contextlib.ExitStack() as registered:
        def register(name: str, columns: object) -> None:
            section = dataclasses.make_dataclass(f"{name}_config", [("name", str, name)], bases=(Section,))
            method = type(name, (Memory,), {"report_columns": columns, "config_class": section})
            registered.enter_context(METHODS.temporarily(name, method))
        method_columns.cache_clear()
        yield register
    method_columns.cache_clear()


def _topk_runs(labels, ranks=None):
    runs = pd.DataFrame([make_run(label, memory="reme", mode="fixed", k=1, tasks=1, variant=label,
                                  params={"memory.top_k": int(label[1:])}) for label in labels])
    if ranks is not None:
        runs[SUITE_RANK] = [ranks.index(label) if label in ranks else None for label in labels]
    outcomes = {label: [int(label[1:]) % 2] for label in labels}  # odd K solves, for distinct bars
    units = pd.concat([make_units(label, {(0, "t1"): outcomes[label]}) for label in labels])
    return units, runs


def _bar_labels(fig):
    return [t.get_text() for t in fig.axes[0].get_xticklabels()]


# ---------------------------------------------------------------- order

def test_suite_order_lists_runs_as_the_suite_file_does():
    assert suite_order("topk") == TOPK_SUITE
    swept = suite_order("alpha_beta")  # a swept variant: one run per point, in sweep order
    assert swept == [f"ab-alpha{a}-beta{b}" for a in (3, 5, 10) for b in (0.3, 0.5)]
    assert suite_order("table1") == ["no_memory", "amem", "langmem", "reme_fixed", "reme_dynamic"]
    # what `reme view` is handed: a suite directory's runs in its suite's order
    assert suite_dir_order(Path("runs/ablate/topk-bfcl_v3-qwen3-8b-released")) == TOPK_SUITE


def test_bars_rows_and_csv_follow_the_topk_suite_not_string_order(tmp_path, figures):
    labels = ["k10", "k3", "k1", "k0"]  # loaded in any order
    units, runs = _topk_runs(labels, TOPK_SUITE)
    write_report(tmp_path, units, runs, suite="topk")
    expected = ["k0", "k1", "k3", "k10"]  # a string sort gives k0, k1, k10, k3
    assert _bar_labels(figures["scores.png"]) == expected
    csv = pd.read_csv(tmp_path / "metrics.csv")
    assert list(csv["run_id"]) == expected
    assert SUITE_RANK not in csv.columns
    overview = (tmp_path / "report.md").read_text().split("## Runs")[1]
    assert [overview.index(f"| {r} |") for r in expected] == sorted(overview.index(f"| {r} |") for r in expected)


def test_a_suite_listing_its_variants_backwards_is_shown_backwards(tmp_path, figures):
    backwards = ["k10", "k3", "k1", "k0"]
    units, runs = _topk_runs(["k0", "k1", "k3", "k10"], backwards)
    metrics = run_metrics(units, runs)
    assert list(build_table("topk", metrics, runs)["K"]) == ["K=10", "K=3", "K=1", "K=0"]
    plots.plot_bars(metrics, runs, tmp_path / "scores.png", "scores")
    assert _bar_labels(figures["scores.png"]) == backwards


def test_runs_no_suite_lists_come_after_in_natural_order(tmp_path, figures):
    units, runs = _topk_runs(["k7", "k10", "k2", "k1"], ["k7"])
    plots.plot_bars(run_metrics(units, runs), runs, tmp_path / "scores.png", "scores")
    assert _bar_labels(figures["scores.png"]) == ["k7", "k1", "k2", "k10"]


def test_topk_points_are_drawn_along_k(tmp_path, figures):
    units, runs = _topk_runs(["k10", "k3", "k1", "k0"], TOPK_SUITE)
    plots.plot_topk(run_metrics(units, runs), runs, tmp_path / "topk.png")
    avg_line = figures["topk.png"].axes[0].lines[0]
    assert list(avg_line.get_xdata()) == [0, 1, 3, 10]
    assert list(avg_line.get_ydata()) == [0, 100, 100, 0]  # odd K solved its task


# ---------------------------------------------------------------- columns

def test_builtin_methods_keep_their_table1_settings():
    runs = [make_run("n"), make_run("a", memory="amem", mode="fixed"),
            make_run("f", memory="reme", mode="fixed"), make_run("d", memory="reme", mode="dynamic")]
    runs = pd.DataFrame(runs)
    units = pd.concat([make_units(r, {(0, "t1"): [1, 0]}) for r in runs["run_id"]])
    table = build_table("table1", run_metrics(units, runs), runs)
    assert list(table["setting"]) == ["No Memory", "A-Mem", "ReMe (fixed)", "ReMe (dynamic)"]


def test_a_plugin_gets_its_setting_and_ablation_rows_from_its_declaration(plugin):
    plugin("toy", {"setting": "Toy ({mode})", "params": ["memory.top_k"]})
    runs = pd.DataFrame([
        make_run("toy2", memory="toy", mode="dynamic", params={"memory.top_k": 2}),
        make_run("toy4", memory="toy", mode="dynamic", params={"memory.top_k": 4}),
        # A-Mem declares no top-k rows: its memory.top_k does not put it in the K table.
        make_run("amem9", memory="amem", mode="fixed", params={"memory.top_k": 9}),
    ])
    units = pd.concat([make_units(r, {(0, "t1"): [1, 0]}) for r in runs["run_id"]])
    metrics = run_metrics(units, runs)
    assert list(build_table("topk", metrics, runs)["K"]) == ["K=2", "K=4"]
    assert set(build_table("table1", metrics, runs)["setting"]) == {"Toy (dynamic) [toy2]", "Toy (dynamic) [toy4]",
                                                                    "A-Mem"}
    assert choose_tables(runs) == ["table1", "topk"]


def test_an_undeclared_method_is_its_name_without_ablation_rows(plugin):
    plugin("plain", None)
    runs = pd.DataFrame([make_run(r, memory="plain", mode="fixed", params={"memory.top_k": k})
                         for r, k in (("p1", 1), ("p3", 3))])
    units = pd.concat([make_units(r, {(0, "t1"): [1, 0]}) for r in runs["run_id"]])
    metrics = run_metrics(units, runs)
    assert build_table("topk", metrics, runs).empty
    assert set(build_table("table1", metrics, runs)["setting"]) == {"plain [p1]", "plain [p3]"}
    assert method_columns("not_installed_anywhere").setting == "not_installed_anywhere"


def test_a_malformed_declaration_is_one_line(plugin):
    plugin("broken", {"label": "Broken"})
    with pytest.raises(UserError, match="report_columns must be a mapping with 'setting'"):
        method_columns("broken")


def test_series_panels_come_from_the_declared_fields(tmp_path, plugin, figures):
    plugin("toy", {"setting": "Toy", "series": {"notes": "notes kept"}})
    assert series_labels(["reme", "toy"]) == {"pool_size": "pool size (experiences)",
                                              "mean_utility": "mean utility u/f", "notes": "notes kept"}
    runs = pd.DataFrame([make_run("t", memory="toy", mode="dynamic")])
    series = pd.DataFrame({"run_id": ["t"] * 2, "seed": [0, 0], "run": [0, 0], "position": [0, 1],
                           "notes": [1, 4]})
    plots.plot_pool_series(series, tmp_path / "pool_series.png", runs)
    (ax,) = figures["pool_series.png"].axes
    assert ax.get_ylabel() == "notes kept"
    assert list(ax.lines[0].get_ydata()) == [1, 4]


# ---------------------------------------------------------------- from run directories

def _run_dir(root, label, memory, records):
    path = root / label
    path.mkdir(parents=True)
    cfg = {"benchmark": {"name": "bfcl_v3"}, "model": {"name": "local"}, "eval": {"mode": "dynamic", "runs": 1,
                                                                                    "seeds": 1},
           "memory": {"name": memory, "top_k": int(label[1:])}}
    (path / "config.yaml").write_text(yaml.safe_dump(cfg))
    (path / "manifest.json").write_text(json.dumps({"kind": "eval", "status": "complete", "config_hash": "x",
                                                    "task_ids": ["t1", "t2"]}))
    lines = [{"unit": f"s0/r0/t{i}", "task_id": f"t{i}", "seed": 0, "run": 0, "position": i, "success": False,
              "stop_reason": "answered", "method": rec, "schema_version": 2} for i, rec in enumerate(records)]
    (path / "trials.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_run_directories_give_declared_series_and_suite_ranks(tmp_path, plugin):
    plugin("toy", {"setting": "Toy", "series": {"notes": "notes kept"}})
    _run_dir(tmp_path / "runs", "k10", "reme", [{"pool_size": 3, "mean_utility": None}, {"pool_size": 4,
                                                                                          "mean_utility": 0.5}])
    _run_dir(tmp_path / "runs", "k3", "toy", [{"notes": 7, "pool_size": 99}, {}])
    paths = sorted((tmp_path / "runs").iterdir())
    _, runs, series = load_frames([read_run_log(p) for p in paths], TOPK_SUITE)
    assert dict(zip(runs["run_id"], runs[SUITE_RANK])) == {"k10": 5, "k3": 2}
    reme_rows = series[series["run_id"] == "k10"]
    assert list(reme_rows["pool_size"]) == [3, 4] and list(reme_rows["mean_utility"].fillna(-1)) == [-1, 0.5]
    toy_rows = series[series["run_id"] == "k3"]  # only what toy declares, and only where it recorded it
    assert list(toy_rows["notes"]) == [7] and toy_rows["pool_size"].isna().all()
    target, _ = report([tmp_path / "runs"], out=tmp_path / "report", suite="topk", order=TOPK_SUITE)
    assert list(pd.read_csv(target / "metrics.csv")["run_id"]) == ["k3", "k10"]

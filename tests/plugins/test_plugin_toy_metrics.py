"""A benchmark owns its metrics, proven from outside: the toy plug-in's benchmark declares
its own (``reme_toy/bench/metrics.py``: progress per seed, success per target) and nothing in
reme names them, yet `reme eval` writes them to metrics.json and `reme report` shows them,
in its tables and in a table of their own. The model is the scripted server, a TEST DOUBLE
answering like a perfect agent; the interaction limit stops the longest task short, so the
metrics have something to measure."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.plugins.test_plugin_toy import reme, site, toy_server  # noqa: F401 - the fixtures, shared

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

ARGS = ["eval", "benchmark=toy", "benchmark.max_interactions=2", "model=qwen3-8b", "llm.model=toy",
        "model.tool_protocol=toy", "eval.runs=2", "eval.seeds=1", "out_dir=run"]


def test_the_toy_benchmarks_own_metric_reaches_metrics_json_and_the_report(site, toy_server, tmp_path):  # noqa: F811
    proc = reme(site, tmp_path, *ARGS, f"llm.base_url={toy_server.base_url}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    # Two calls per task: targets 1 and 2 are reached, target 3 stops at 2 (2/3 of the way).
    assert metrics["avg@2"]["mean"] == pytest.approx(2 / 3)
    assert metrics["progress"] == {"mean": pytest.approx((1 + 1 + 2 / 3) / 3), "std": 0.0, "n_seeds": 1}
    assert metrics["by_target"] == {"1": 1.0, "2": 1.0, "3": 0.0}
    assert "PROGRESS % 88.89 ± 0.00" in proc.stderr  # the final table's caption

    report = reme(site, tmp_path, "report", "run", "--out", "rep")
    assert report.returncode == 0, report.stderr[-3000:]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "local (135M)" not in md and "Qwen3-8B Toy Avg@2 ours" in md  # the benchmark's own label
    assert "Qwen3-8B Toy progress ours" in md and "Toy: progress is the counter's share" in md
    own = pd.read_csv(tmp_path / "rep" / "table_toy.csv", dtype=str)
    assert list(own.columns) == ["run", "setting", "model", "n", "k", "reached Avg@k", "reached Pass@k",
                                 "progress", "target 1", "target 2", "target 3"]
    assert own.loc[0, ["progress", "target 2", "target 3"]].tolist() == ["88.89 ± 0.00", "100.00", "0.00"]
    assert "## Toy: progress and success per target" in md
    csv = pd.read_csv(tmp_path / "rep" / "metrics.csv")
    assert csv.loc[0, "progress_mean"] == pytest.approx(8 / 9)
    assert csv.loc[0, "by_target"] == "1:1.000000;2:1.000000;3:0.000000"

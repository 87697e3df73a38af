"""The methods table (``reme ablate methods``): each method's cost per task beside its
scores, and other papers' published numbers as context, on hand-made records."""

import pandas as pd
import pytest

from reme_cli.report.metrics import run_metrics
from reme_cli.report.published import load_published
from reme_cli.report.tables import COST_NOTE, FIDELITY, MAX_PROMPT, PUBLISHED, PUBLISHED_NOTE, TOKENS, build_table
from reme_cli.report.write import choose_tables
from tests.report.test_report_pkg import ERR, make_run, make_units, one_row


def _units(run_id: str, tokens: list, longest: list) -> pd.DataFrame:
    units = make_units(run_id, {(0, "t1"): [1, 0], (0, "t2"): [0, ERR]})
    return units.assign(tokens=tokens, max_prompt=longest)


def _frames():
    units = pd.concat([_units("nomem", [1000, 3000, 2000, 9999], [400, 500, 450, 9999]),
                       _units("dyn", [5000, 7000, 6000, None], [2100, 2600, 2400, None])])
    runs = pd.DataFrame([make_run("nomem", benchmark="appworld", tasks=2),
                         make_run("dyn", benchmark="appworld", memory="reme", mode="dynamic", tasks=2)])
    return units, runs


def test_tokens_per_task_leave_out_errored_units():
    units, runs = _frames()
    metrics = run_metrics(units, runs)
    # scored units: the errored one (9999 tokens) does not count
    assert one_row(metrics, "nomem")["tokens_per_unit"] == pytest.approx(2000.0)
    assert one_row(metrics, "nomem")["max_prompt"] == 500
    assert one_row(metrics, "dyn")["tokens_per_unit"] == pytest.approx(6000.0)
    old = units.drop(columns=["tokens", "max_prompt"])  # records from before tokens were kept
    assert pd.isna(one_row(run_metrics(old, runs), "dyn")["tokens_per_unit"])


def test_methods_table_shows_cost_and_published_context():
    units, runs = _frames()
    table = build_table("methods", run_metrics(units, runs), runs).set_index("setting")
    g = "Qwen3-8B AppWorld"
    assert table.loc["No Memory", f"{g} {TOKENS}"] == "2,000" and table.loc["ReMe (dynamic)", f"{g} {TOKENS}"] == "6,000"
    assert table.loc["ReMe (dynamic)", f"{g} {MAX_PROMPT}"] == "2,600"
    # ReAct's AppWorld numbers from the ACE paper, with their model and source; none for ReMe
    assert table.loc["No Memory", PUBLISHED] == ("TGC 63.7 / SGC 42.9 (test_normal), TGC 41.5 / SGC 21.6 "
                                                  "(test_challenge); DeepSeek-V3.1; ACE paper (arXiv 2510.04618), "
                                                  "Table 1: ReAct")
    assert table.loc["ReMe (dynamic)", PUBLISHED] == ""
    assert list(table.columns)[-2:] == [PUBLISHED, FIDELITY]  # every table ends with its fidelity column
    assert COST_NOTE in table.attrs["notes"] and PUBLISHED_NOTE in table.attrs["notes"]
    # the ReMe paper's own Table 1 cell stays beside ours, as in table1
    assert table.loc["ReMe (dynamic)", f"{g} Avg@2 paper"] != ""
    # not a BFCL row: the published AppWorld numbers do not leak into another benchmark
    bfcl = runs.assign(benchmark="bfcl_v3")
    assert PUBLISHED not in build_table("methods", run_metrics(units, bfcl), bfcl).columns


def test_published_numbers_ship_whole():
    published = load_published()
    assert set(published.columns) == {"setting", "source", "model", "benchmark", "split", "metric", "value_pct", "note"}
    assert not published[["setting", "source", "model", "benchmark", "split", "metric", "value_pct"]].isna().any().any()
    # each (setting, split) has its TGC and SGC
    assert all(sorted(rows) == ["SGC", "TGC"] for _, rows in published.groupby(["setting", "split"])["metric"])


def test_methods_table_only_for_the_methods_suite():
    _, runs = _frames()
    assert "methods" not in choose_tables(runs)
    assert choose_tables(runs, suite="methods") == ["methods"]


def test_a_method_with_variants_gets_one_row_per_variant():
    units = pd.concat([make_units(r, {(0, "t1"): [1, 0]}) for r in ("cu", "rs")])
    runs = pd.DataFrame([make_run(r, benchmark="appworld", memory="dc", mode="dynamic", tasks=1,
                                  params={"memory.variant": v})
                         for r, v in (("cu", "cumulative"), ("rs", "retrieval_synthesis"))])
    table = build_table("methods", run_metrics(units, runs), runs).set_index("setting")
    assert list(table.index) == ["DC (cumulative, dynamic)", "DC (retrieval_synthesis, dynamic)"]
    # DC-CU's AppWorld numbers from the ACE paper sit on the cumulative row only
    assert table.loc["DC (cumulative, dynamic)", PUBLISHED].startswith("TGC 65.5 / SGC 58.9 (test_normal)")
    assert table.loc["DC (retrieval_synthesis, dynamic)", PUBLISHED] == ""

"""Tables are data: a suite file's ``table:`` block says the title, rows, their order and the
paper's cells (``reme_cli/report/specs.py``), so a new suite with a new table needs no Python."""

from __future__ import annotations

import pandas as pd
import pytest

from reme_cli.commands.ablate import load_suite
from reme_cli.core.errors import UserError
from reme_cli.report.metrics import run_metrics
from reme_cli.report.specs import table_names, table_spec
from reme_cli.report.tables import build_table
from tests.report.test_report_pkg import _reme, make_units

NEW_SUITE = """\
description: a new sweep, with a table of its own
table:
  title: "K with and without deletion"
  rows:
    header: setting
    keys: [memory.top_k, memory.deletion.enabled]
    flags: [memory.deletion.enabled]
    labels: {"5, on": "paper: K=5, deleting", "5, off": "K=5, keeping all"}
    otherwise: "K={memory.top_k:d}, deletion={memory.deletion.enabled}"
    order: ["K=5, keeping all", "paper: K=5, deleting"]
pools: {p: []}
variants:
  keep: {mode: dynamic, pool: p, overrides: [memory.deletion.enabled=false]}
"""


def test_every_packaged_suite_has_its_table_and_the_paper_tables_come_first():
    names = table_names()
    assert set(names) == {"table1", "table2", "table3", "table4", "table5", "topk", "alpha_beta", "methods"}
    assert [n for n in names if table_spec(n).paper_table] == names[:6]  # table1..5 and methods
    assert table_spec("table3").order[-1] == "+ deletion" and table_spec("topk").numeric


def test_a_new_suite_file_lays_out_its_own_table(tmp_path):
    suite = tmp_path / "deletion.yaml"
    suite.write_text(NEW_SUITE)
    params = {"a": (5, True), "b": (5, False), "c": (3.0, "true")}
    runs = pd.DataFrame([_reme(r, **{"memory.top_k": t, "memory.deletion.enabled": d})
                         for r, (t, d) in params.items()])
    units = pd.concat([make_units(r, {(0, "t1"): [1, 0, 0, 0]}) for r in params])
    table = build_table(str(suite), run_metrics(units, runs), runs)
    assert table.attrs["title"] == "K with and without deletion"
    # listed rows first in the block's order, then any other by its "otherwise" label
    assert list(table["setting"]) == ["K=5, keeping all", "paper: K=5, deleting", "K=3, deletion=on"]
    assert not any("paper" in c for c in table.columns)  # no paper: block, no paper column
    # The methods that do not declare the keys it reads have no row in it (ReMe declares both).
    other = pd.DataFrame([{**_reme("n", **{"memory.top_k": 5, "memory.deletion.enabled": True}), "memory": "none"}])
    assert build_table(str(suite), run_metrics(make_units("n", {(0, "t1"): [1]}), other), other).empty


def test_a_suite_may_reuse_another_suites_table_and_a_bad_block_says_what_to_fix(tmp_path):
    reuse = tmp_path / "mine.yaml"
    reuse.write_text("table: topk\npools: {p: []}\nvariants:\n  k2: {mode: fixed, pool: p}\n")
    assert table_spec(str(reuse)).title == table_spec("topk").title
    bad = tmp_path / "bad.yaml"
    bad.write_text("table: {title: x, rows: {header: y, keys: [memory.top_k], colour: red}}\n")
    with pytest.raises(UserError, match="takes .* rows: .*not"):
        table_spec(str(bad))
    # `reme ablate` checks a suite's table before it runs anything.
    bad.write_text(NEW_SUITE.replace("header: setting", "colour: red"))
    with pytest.raises(UserError, match="rows: "):
        load_suite(str(bad))
    good = tmp_path / "good.yaml"
    good.write_text(NEW_SUITE)
    assert load_suite(str(good))["table"] == str(good.resolve())
    with pytest.raises(UserError, match="unknown table 'nope'; choose one of .*topk"):
        table_spec("nope")

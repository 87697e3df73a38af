"""`reme ablate methods`, every row run end to end through the real CLI on BFCL: the pools of
six methods built from the same training trajectories (ReMe's imported), thirteen runs, and
the methods table. The LLM is a TEST DOUBLE (the scripted server: BFCL ground-truth replay
for the agent, scripted answers for every method's own calls), so the scores are not model
results; what is checked is that each row runs and learns as its method prescribes."""

from __future__ import annotations

import csv
import json

import pytest

from reme_cli.testing.scripted_server import ScriptedServer, make_policy

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

ROWS = {"no_memory": "No Memory", "reme_fixed": "ReMe (fixed)", "reme_dynamic": "ReMe (dynamic)", "amem": "A-Mem",
        "langmem": "LangMem", "ace_offline": "ACE (fixed)", "ace_online": "ACE (dynamic)",
        "dc_cu_fixed": "DC (cumulative, fixed)", "dc_cu_online": "DC (cumulative, dynamic)",
        "dc_rs_fixed": "DC (retrieval_synthesis, fixed)", "dc_rs_online": "DC (retrieval_synthesis, dynamic)",
        "reasoningbank_fixed": "ReasoningBank (fixed)", "reasoningbank_online": "ReasoningBank (dynamic)"}
ONLINE = ("ace_online", "dc_cu_online", "dc_rs_online", "reasoningbank_online")


def test_the_methods_suite_runs_every_row_and_the_online_rows_learn_from_empty(reme):
    with ScriptedServer(make_policy("bfcl-replay+summarizer")) as server:
        # One worker per stream: the second task of an online row runs after the first commits.
        reme("ablate", "methods", "model=qwen3-8b", "embedding=minilm", "benchmark.release=current",
             f"llm.base_url={server.base_url}", "llm.model=replay", "benchmark.limit=2", "eval.runs=1",
             "eval.seeds=1", "build.samples=1", "eval.dynamic_workers=1", check=True, timeout=1200)
    (suite,) = (reme.cwd / "runs" / "ablate").iterdir()
    assert suite.name == "methods-bfcl_v3-qwen3-8b-released"
    assert sorted(p.name for p in (suite / "pools").iterdir()) == [
        "ace", "amem", "dc_cu", "dc_rs", "langmem", "reasoningbank", "reme"]
    units = {}
    for label in ROWS:
        manifest = json.loads((suite / "runs" / label / "manifest.json").read_text())
        assert manifest["status"] == "complete", label
        lines = (suite / "runs" / label / "trials.jsonl").read_text().splitlines()
        units[label] = sorted(map(json.loads, lines), key=lambda u: u["position"])
        assert len(units[label]) == 2 and all(u["error"] is None and u["success"] for u in units[label]), label

    # The online rows start from the method's empty memory (no pool), and the second task
    # is shown what the first one taught.
    for label in ONLINE:
        config = (suite / "runs" / label / "config.yaml").read_text()
        assert "pool: null" in config, label
        first, second = units[label]
        assert first["retrieved_ids"] == [], label
        assert second["guidance"] and second["guidance"] != first["guidance"], label
    assert "Scripted insight for:" in units["ace_online"][1]["guidance"]  # the first task's ADD
    assert "Scripted strategy for:" in units["dc_cu_online"][1]["guidance"]  # the first task's rewrite
    assert units["dc_rs_online"][1]["method"]["retrieved"]  # the first task's pair
    learned = units["reasoningbank_online"][0]["method"]["extracted"]["ids"]
    assert learned and units["reasoningbank_online"][1]["retrieved_ids"] == learned

    # The methods table: one row per run, each with its token cost per task.
    with open(suite / "report" / "table_methods.csv", newline="") as f:
        table = {row["setting"]: row for row in csv.DictReader(f)}
    assert set(table) == set(ROWS.values())
    tokens = next(c for c in next(iter(table.values())) if c.endswith("tokens/task"))
    assert all(int(row[tokens].replace(",", "")) > 0 for row in table.values())

    # `reme view` reads every method's memory through the method's own Memory.describe: each
    # retrieved id of each unit is an item of a state it can read, with its text, and each
    # online row's stream shows what its units added (DC-Cu: rewrote).
    from reme_cli.view.api import answer
    from reme_cli.view.runs import Catalog

    catalog = Catalog([suite])
    index = {row["label"]: row for row in answer(catalog, "index")["runs"]}
    assert set(index) == set(ROWS)
    for label in ROWS:
        row = index[label]
        if label == "no_memory":
            continue
        memory = answer(catalog, f"memory/{row['id']}")
        assert memory["streams"] and "note" not in memory, label
        for unit in units[label]:
            shown = answer(catalog, f"unit/{row['id']}/{unit['unit']}")["retrieved"]
            assert [r["id"] for r in shown] == unit["retrieved_ids"], label
            assert all(r["known"] and r["text"] for r in shown), (label, shown)
        if label in ONLINE:
            (stream,) = memory["streams"]
            changed = stream["timeline"]["updated" if label == "dc_cu_online" else "added"]
            assert sum(changed) >= 2, (label, stream["timeline"])

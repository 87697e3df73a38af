"""Where the paper's tables start and what the fidelity column says: `reme ablate --dry-run`
plans Table 5 on the released pool (nothing to build) and Table 4's 14B / 32B rows; each run's
departures from the authors' setup, in the plan and in the report (with the embedding named
in the table's caption)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml

from reme_cli.commands.ablate import plan, run_fidelity
from reme_cli.core.config import compose, to_dict
from reme_cli.methods.reme.fidelity import EXACT_COUNTS, EXACT_SEARCH, FULL_ADDITION
from reme_cli.report.fidelity import SEED, departures, fidelity_text, flatten, pool_origin
from reme_cli.report.metrics import run_metrics
from reme_cli.report.tables import FIDELITY, build_table

GPU = ["model=qwen3-8b", "embedding=minilm", "llm.base_url=http://127.0.0.1:9/v1"]


@pytest.fixture
def counted(monkeypatch):
    """Plans without counting a split's tasks (a BFCL release switch re-executes the process)."""
    import reme_cli.commands.ablate as ablate

    monkeypatch.setattr(ablate, "_units", lambda cfg, samples=None, notes=None: (2, 2 * cfg.benchmark.max_interactions))


@pytest.mark.slow
def test_table5_dry_run_builds_no_pool_and_rekeys_the_released_one(reme):
    proc = reme("ablate", "table5", *GPU, "--dry-run", check=True, env={"COLUMNS": "250"})
    text = re.sub(r"[\s│┃]+", " ", proc.stderr)
    assert "1 pool(s) to build or import" in text and "import pool reme - official:bfcl/qwen3-8b released - 0 0" in text
    assert "build pool" not in text
    for key in ("task_query", "generalized_query", "keywords", "usage_scenario"):
        assert f"eval {key} fixed reme released" in text
        assert f"{key} embedding: local stand-in (all-MiniLM-L6-v2)" in text  # the fidelity table's row
    assert not (reme.cwd / "runs").exists()


def test_table4_plans_the_14b_and_32b_rows_with_their_own_summarizer_server(counted):
    p = plan("table4", GPU)
    pools = {j.name: j for j in p.pools}
    assert pools["s8b"].source == "official:bfcl/qwen3-8b"
    for size in ("14b", "32b"):
        cfg = pools[f"s{size}"].cfg
        assert pools[f"s{size}"].source is None and cfg.benchmark.split == "train"
        assert (cfg.model.name, cfg.summarizer.name, cfg.summarizer.serve) == ("qwen3-8b", f"qwen3-{size}", f"qwen3-{size}")
        assert cfg.summarizer.base_url is None  # reme starts it (llm/endpoint.py), or the suite shares one
    assert {j.label: j.cfg.summarizer.name for j in p.runs} == {"s8b": "same", "s14b": "qwen3-14b",
                                                                 "s32b": "qwen3-32b"}
    assert run_fidelity(p, p.runs[0]) == fidelity_text(["embedding: local stand-in (all-MiniLM-L6-v2)", EXACT_SEARCH,
                                                         SEED])
    built = run_fidelity(p, p.runs[1])
    assert "pool: built here (the authors released none like it)" in built
    # built on the paper release: 2025.7.17's training tasks, not the released pools' older copy
    assert "pool built from the 2025.7.17 training-task wording" in built


def test_the_summarizer_server_plan_puts_it_beside_the_executor(monkeypatch):
    from reme_cli.llm import gpus, vllm_server
    from reme_cli.llm.shared import summarizer_server_cfg

    cfg = compose(["model=qwen3-8b", "summarizer=qwen3-32b"])
    own = summarizer_server_cfg(cfg)
    assert (own.model.name, own.model.hf_id, own.llm.replicas) == ("qwen3-32b", "Qwen/Qwen3-32B", 1)
    assert cfg.model.name == "qwen3-8b"  # the executor's config is untouched
    assert summarizer_server_cfg(compose(["model=qwen3-8b", "summarizer=qwen3-32b",
                                          "summarizer.base_url=http://h:1/v1"])) is None
    four = [gpus.Gpu(i, 81559) for i in range(4)]
    monkeypatch.setattr(gpus, "visible_gpus", lambda: four)
    cfg.llm.replicas = 1
    executor, summarizer = vllm_server.plan_servers([cfg, own])
    assert executor.devices == [[0]] and summarizer.devices == [[1, 2]]  # 32B: two 80 GB GPUs


def test_paper_text_and_local_runs_name_their_departures(counted):
    p = plan("table3", [*GPU, "experiment=paper_text"])
    text = run_fidelity(p, p.runs[0])
    for bit in ("memory.rerank=true (authors: false)", "memory.prompts=reme (authors: authors)",
                "memory.deletion.rule=le (authors: lt)", "memory.judge_threshold=0.3 (authors: 0.5)"):
        assert bit in text
    assert "memory.addition=full (authors" not in text  # what Table 3 varies is not a departure ...
    assert FULL_ADDITION in text  # ... but full addition has no code path in the authors' agents
    local = plan("topk", ["model=local", "suite.start=built"])
    text = run_fidelity(local, local.runs[0])
    assert text.startswith("model: local") and "benchmark.max_interactions=12 (authors: 30)" in text
    assert "pool built with build.samples=2 (authors: 8)" in text and "memory.top_k" not in text


def test_a_baseline_and_no_memory_say_so():
    base = flatten(to_dict(compose(["model=qwen3-8b", "benchmark.release=paper"])))
    assert departures(base) == [SEED]  # every executor request: the seed differs per unit and trial
    amem = flatten(to_dict(compose(["model=qwen3-8b", "memory=amem", "eval.mode=fixed", "benchmark.release=paper"])))
    assert departures(amem) == ["amem: its settings in the authors' runs were never published", SEED]


def _run(tmp_path, name: str, overrides: list[str], pool_start, pool_params=None):
    cfg = to_dict(compose(["model=qwen3-8b", "embedding=minilm", "benchmark.release=paper", *overrides]))
    return {"run_id": name, "path": str(tmp_path / name), "benchmark": "bfcl_v3", "model": "qwen3-8b",
            "mode": cfg["eval"]["mode"], "memory": cfg["memory"]["name"] if cfg["eval"]["mode"] != "none" else "none",
            "k": 1, "seeds": 1, "tasks": 1, "status": "complete", "variant": name, "params": flatten(cfg),
            "pool_start": pool_start, "pool_params": pool_params}


def test_the_report_has_a_fidelity_column_and_names_the_embedding(tmp_path):
    built = flatten(to_dict(compose(["model=qwen3-8b", "memory=reme", "memory.granularity=trajectory",
                                     "benchmark.split=train"])))
    runs = pd.DataFrame([
        _run(tmp_path, "keypoint", ["memory=reme", "eval.mode=fixed", "memory.granularity=keypoint"], "released"),
        _run(tmp_path, "trajectory", ["memory=reme", "eval.mode=fixed", "memory.granularity=trajectory"], "built",
             built)])
    units = pd.DataFrame([{"run_id": r, "seed": 0, "run": 0, "task_id": "t", "success": True, "first_success": True,
                           "attempts": 1, "error": False, "stop_reason": "answered", "checker_error_type": None,
                           "scenario": None, "difficulty": None, "tokens": None, "max_prompt": None}
                          for r in ("keypoint", "trajectory")])
    table = build_table("table2", run_metrics(units, runs), runs).set_index("granularity")
    assert table.loc["keypoint-level", FIDELITY] == fidelity_text(["embedding: local stand-in (all-MiniLM-L6-v2)",
                                                                    EXACT_SEARCH, SEED])
    trajectory = table.loc["trajectory-level", FIDELITY]
    assert "pool: built here (the authors released none like it)" in trajectory
    assert "trajectory-level prompt never published (nearest public: v0.1.9 simple_summary)" in trajectory
    assert "embedding: all-MiniLM-L6-v2 (384-d, a stand-in for the authors' text-embedding-v4)." in table.attrs["notes"]
    no_memory = pd.DataFrame([_run(tmp_path, "none", [], None)])
    t1 = build_table("table1", run_metrics(units.assign(run_id="none").iloc[:1], no_memory), no_memory)
    assert t1[FIDELITY].tolist() == [SEED]


def test_pool_origin_reads_the_pools_manifest(tmp_path):
    released, built, run = tmp_path / "released" / "pool", tmp_path / "built" / "pool", tmp_path / "built" / "build"
    for d in (released, built, run):
        d.mkdir(parents=True)
    (released / "manifest.json").write_text(json.dumps({"built_by": {"kind": "import_official"}}))
    (built / "manifest.json").write_text(json.dumps({"built_by": {"kind": "build-pool", "run": str(run)}}))
    (run / "config.yaml").write_text(yaml.safe_dump({"build": {"samples": 2}}))
    assert pool_origin({"memory": {"pool": str(tmp_path / "released")}}, "fixed") == {
        "pool_start": "released", "pool_params": None}
    assert pool_origin({"memory": {"pool": str(built)}}, "dynamic") == {
        "pool_start": "built", "pool_params": {"build.samples": 2}}
    assert pool_origin({"memory": {"name": "none"}}, "none")["pool_start"] is None


@pytest.mark.slow
def test_table1_dry_run_names_every_remaining_departure_per_run(reme):
    """The issue's "done when": `reme ablate table1 model=qwen3-8b --dry-run` names, per run,
    what is left between it and the authors' setup."""
    proc = reme("ablate", "table1", "model=qwen3-8b", "--dry-run", check=True, env={"COLUMNS": "400"})
    text = re.sub(r"[\s│┃]+", " ", proc.stderr)
    assert "fidelity: departures from the authors' setup (docs/fidelity.md)" in text and "README" not in text
    fidelity = proc.stderr.split("fidelity: departures from the authors' setup", 1)[1]
    rows = {name: re.search(rf"│ {name} +│ (.*?) +│", fidelity).group(1) for name in
            ("no_memory", "amem", "langmem", "reme_fixed", "reme_dynamic")}
    stand_in = "embedding: local stand-in (Qwen/Qwen3-Embedding-0.6B)"
    assert rows["no_memory"] == SEED
    assert rows["reme_fixed"] == fidelity_text([stand_in, EXACT_SEARCH, SEED])
    assert rows["reme_dynamic"] == fidelity_text([stand_in, EXACT_SEARCH, EXACT_COUNTS, SEED])
    for baseline in ("amem", "langmem"):
        assert rows[baseline] == f"{baseline}: its settings in the authors' runs were never published; {SEED}"


def test_table5_names_the_retrieval_the_authors_never_published(counted):
    p = plan("table5", GPU)
    texts = {j.label: run_fidelity(p, j) for j in p.runs}
    assert "retrieval by" not in texts["usage_scenario"]
    for key in ("task_query", "generalized_query", "keywords"):
        assert f"retrieval by {key}: how the authors retrieved by it was never published" in texts[key]


def test_dedup_switches_and_appworlds_schedule_are_departures_where_they_differ(counted):
    dynamic = flatten(to_dict(compose(["model=qwen3-8b", "memory=reme", "eval.mode=dynamic", "benchmark.release=paper",
                                       "memory.dedup_at_commit=true", "eval.dynamic_batches=true"])))
    found = departures(dynamic)
    assert "memory.dedup_at_commit=true (authors: false)" in found
    assert "eval.dynamic_batches=true (authors: false)" in found
    appworld = flatten(to_dict(compose(["model=qwen3-8b", "memory=reme", "eval.mode=dynamic", "benchmark=appworld",
                                        "eval.dynamic_batches=false"])))
    assert "eval.dynamic_batches=false (authors: true)" in departures(appworld)
    built = flatten(to_dict(compose(["model=qwen3-8b", "memory=reme", "benchmark.split=train",
                                     "memory.build_dedup=true"])))
    fixed = flatten(to_dict(compose(["model=qwen3-8b", "memory=reme", "eval.mode=fixed", "benchmark.release=paper"])))
    assert "pool built with memory.build_dedup=true (authors: false)" in departures(fixed, pool="built",
                                                                                     pool_params=built)


def test_a_baselines_built_pool_is_not_held_to_remes_keys():
    """A method's keys are compared with its own defaults, not ReMe's: ACE's built playbook at
    its own dedup threshold (0.90) departs in nothing of ReMe's (whose threshold is 0.5); its
    summarizer and sampling still count, as for every built pool."""
    built = flatten(to_dict(compose(["model=qwen3-8b", "memory=ace", "benchmark.split=train", "build.samples=2"])))
    run = flatten(to_dict(compose(["model=qwen3-8b", "memory=ace", "eval.mode=fixed", "benchmark.release=paper"])))
    assert departures(run, pool="built", pool_params=built) == [
        "ace: its settings in the authors' runs were never published",
        "pool built with build.samples=2 (authors: 8)", SEED]


# ------------------------------------------------------------- how far a departure goes, counted

def test_each_departure_carries_its_level():
    from reme_cli.core.departure import is_clean, level_of
    from reme_cli.methods.reme.fidelity import BUILT_UNRELEASED, KEY_NEVER_PUBLISHED

    base = flatten(to_dict(compose(["model=qwen3-8b", "benchmark.release=paper"])))
    assert [level_of(d) for d in departures(base)] == ["low"] and is_clean(departures(base))  # the seed
    amem = flatten(to_dict(compose(["model=qwen3-8b", "memory=amem", "eval.mode=fixed", "benchmark.release=paper"])))
    assert [level_of(d) for d in departures(amem)] == ["high", "low"]  # never published; the seed
    fixed = ["model=qwen3-8b", "memory=reme", "eval.mode=fixed", "benchmark.release=paper"]
    found = departures(flatten(to_dict(compose([*fixed, "embedding=minilm"]))))
    assert {d: level_of(d) for d in found} == {"embedding: local stand-in (all-MiniLM-L6-v2)": "medium",
                                               EXACT_SEARCH: "low", SEED: "low"}
    assert is_clean(departures(flatten(to_dict(compose([*fixed, "embedding=text-embedding-v4"])))))
    assert level_of(KEY_NEVER_PUBLISHED.format(key="keywords")) == "high" and level_of(BUILT_UNRELEASED) == "low"
    assert level_of("a plug-in's note with no level") == "medium"
    # A key off the authors' value is medium, but tool_choice auto, what the servers apply to a
    # request naming none, and a summarizer seed are low.
    for change, level in (("model.sampling.temperature=0.7", "medium"), ("model.tool_choice=auto", "low"),
                          ("model.tool_choice=required", "medium")):
        (key,) = [d for d in departures(flatten(to_dict(compose(["model=qwen3-8b", change])))) if d != SEED]
        assert level_of(key) == level, change
    built = flatten(to_dict(compose(["model=qwen3-8b", "memory=reme", "benchmark.split=train", "summarizer.seed=42"])))
    (seed,) = [d for d in departures(flatten(to_dict(compose(fixed))), pool="built", pool_params=built)
               if "summarizer.seed" in d]
    assert seed == "pool built with summarizer.seed=42 (authors: null)" and level_of(seed) == "low"


def test_a_served_context_short_of_the_authors_is_a_medium_departure():
    """AppWorld's episodes went past 32k in the authors' runs: a vLLM server at 32,768 departs,
    one at benchmark.context's 131,072 does not; a hosted provider applies its own (theirs)."""
    from reme_cli.core.departure import level_of

    def context(*overrides: str) -> list[str]:
        run = flatten(to_dict(compose(["model=qwen3-8b", "benchmark=appworld", *overrides])))
        return [d for d in departures(run) if d.startswith("context:")]

    (short,) = context("benchmark.context=null")
    assert short.startswith("context: 32,768 tokens") and level_of(short) == "medium"
    assert context() == [] and context("model.max_model_len=131072", "benchmark.context=null") == []
    assert context("model=qwen3-8b-dashscope", "benchmark.context=null") == []
    bfcl = flatten(to_dict(compose(["model=qwen3-8b", "benchmark.release=paper"])))
    assert not [d for d in departures(bfcl) if d.startswith("context:")]  # BFCL's stay native


def _count_rows(table) -> list[list[str]]:
    return [[str(c._cells[i]) for c in table.columns] for i in range(table.row_count)]


def test_the_dry_runs_count_is_the_column_measured_by_table(counted):
    from reme_cli.commands.fidelity_count import fidelity_count

    # Table 3 on the GPU path with a stand-in embedding: every run departs (medium).
    gpu = plan("table3", GPU)
    rows = _count_rows(fidelity_count("table3", GPU, gpu))
    assert rows == [["table3", "this plan (qwen3-8b, bfcl_v3)", "0 of 8 cells free of medium/high departures"],
                    ["table3_components", "the paper's table at this provider (qwen3-8b; bfcl_v3)",
                     "0 of 8 cells free of medium/high departures"]]
    # On the hosted path only full addition departs (high): no code path in the authors' agents.
    hosted = ["model=qwen3-8b-dashscope"]
    rows = _count_rows(fidelity_count("table3", hosted, plan("table3", hosted)))
    assert [r[2] for r in rows] == ["6 of 8 cells free of medium/high departures"] * 2
    # Table 2 on the paper's two models at the provider: the trajectory rows are high.
    rows = _count_rows(fidelity_count("table2", hosted, plan("table2", hosted)))
    assert rows[1][1:] == ["the paper's table at this provider (qwen3-8b-dashscope, qwen3-14b-dashscope; bfcl_v3)",
                           "4 of 8 cells free of medium/high departures"]
    # No paper table (topk): this plan's cells only.
    rows = _count_rows(fidelity_count("topk", hosted, plan("topk", hosted)))
    assert rows == [["topk", "this plan (qwen3-8b-dashscope, bfcl_v3)", "12 of 12 cells free of medium/high departures"]]


def test_table4_under_a_hosted_model_is_summarized_at_its_provider(counted):
    from reme_cli.commands.ablate import summarizer_of
    from reme_cli.report.paper import served_model_label
    from reme_cli.report.specs import table_spec

    p = plan("table4", ["model=qwen3-8b-dashscope"])
    pools = {j.name: j for j in p.pools}
    for size in ("14b", "32b"):
        cfg = pools[f"s{size}"].cfg
        assert (cfg.summarizer.name, cfg.summarizer.serve, cfg.summarizer.model) == (
            f"qwen3-{size}-dashscope", f"qwen3-{size}-dashscope", f"qwen3-{size}")
        assert cfg.summarizer.base_url == cfg.llm.base_url  # the provider's endpoint: nothing to start
        assert summarizer_of(cfg) == f"qwen3-{size}-dashscope"
    runs = {j.label: j for j in p.runs}
    assert [summarizer_of(runs[r].cfg) for r in ("s8b", "s14b", "s32b")] == [
        "-", "qwen3-14b-dashscope", "qwen3-32b-dashscope"]
    # The report's rows still read the paper's model labels, so the paper's cells are found.
    assert served_model_label("qwen3-14b-dashscope") == "Qwen3-14B"
    spec = table_spec("table4")
    row = {"params": flatten(to_dict(runs["s14b"].cfg)), "memory": "reme", "mode": "fixed",
           "model": "qwen3-8b-dashscope"}
    assert spec.label(row) == "summarizer=Qwen3-14B"
    assert not p.notes or all("no copy" not in n for n in p.notes)
    # A model with no copy at its provider keeps the suite's summarizers, and the plan says so.
    local = plan("table4", ["model=local", "suite.start=built"])
    assert {j.name: j.cfg.summarizer.name for j in local.pools}["s14b"] == "qwen3-14b"
    assert any("summarizer=qwen3-14b has no copy at model=local's provider" in n for n in local.notes)


def test_the_report_counts_its_tables_cells(tmp_path):
    units = pd.DataFrame([{"run_id": r, "seed": 0, "run": 0, "task_id": "t", "success": True, "first_success": True,
                           "attempts": 1, "error": False, "stop_reason": "answered", "checker_error_type": None,
                           "scenario": None, "difficulty": None, "tokens": None, "max_prompt": None}
                          for r in ("none", "fixed")])
    runs = pd.DataFrame([_run(tmp_path, "none", [], None),
                         _run(tmp_path, "fixed", ["memory=reme", "eval.mode=fixed"], "released")])
    table = build_table("table1", run_metrics(units, runs), runs)
    count = table.attrs["clean_cells"]
    assert (count.clean, count.cells) == (2, 4)  # no memory: the seed (low); ReMe: a stand-in embedding
    assert any(n.startswith(f"{FIDELITY} count: 2 of 4 cells free of medium/high departures")
               for n in table.attrs["notes"])


@pytest.mark.slow
def test_the_issues_done_when_dry_runs_print_their_counts(reme):
    """Issue 57: table4 under the hosted model names the hosted 14B and 32B summarizers and
    prints its count; table1 with the authors' embedding prints the paper's 36 of 60 (58 of 106
    over the tables, docs/fidelity.md)."""
    proc = reme("ablate", "table4", "model=qwen3-8b-dashscope", "--dry-run", check=True, env={"COLUMNS": "300"})
    text = re.sub(r"[\s│┃]+", " ", proc.stderr)
    assert "build pool s14b - - built qwen3-14b-dashscope" in text and "eval s32b fixed s32b built qwen3-32b-dashscope" in text
    assert "table4 this plan (qwen3-8b-dashscope, bfcl_v3) 6 of 6 cells free of medium/high departures" in text
    proc = reme("ablate", "table1", "model=qwen3-8b-dashscope", "embedding=text-embedding-v4", "--dry-run", check=True,
                env={"COLUMNS": "300"})
    text = re.sub(r"[\s│┃]+", " ", proc.stderr)
    assert "table1 this plan (qwen3-8b-dashscope, bfcl_v3) 6 of 10 cells free of medium/high departures" in text
    assert ("the paper's table at this provider (qwen3-8b-dashscope, qwen3-14b-dashscope, qwen3-32b-dashscope; "
            "bfcl_v3, appworld) 36 of 60 cells free of medium/high departures") in text

"""`reme ablate` and `reme report` through the real CLI, against the scripted server (a TEST
DOUBLE: it replays BFCL ground truth, so its numbers are not model results)."""

from __future__ import annotations

import json
import re

import pytest

from reme_cli.commands.ablate import plan
from reme_cli.core.config import compose, config_dir
from reme_cli.testing.scripted_server import (
    AgentAndSummarizerPolicy,
    BFCLReplayPolicy,
    ScriptedServer,
    ScriptedSummarizerPolicy,
)

SUITES = sorted(p.stem for p in (config_dir() / "ablation").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))
GPU = ["model=qwen3-8b", "embedding=minilm", "llm.base_url=http://127.0.0.1:9/v1", "benchmark.release=current"]


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())) as srv:
        yield srv


def test_the_paper_suites_are_all_there():
    assert set(SUITES) >= {"table1", "table2", "table3", "table4", "table5", "topk", "alpha_beta"}


@pytest.mark.parametrize("suite", SUITES)
def test_every_suite_composes_and_validates(suite, tmp_path):
    p = plan(suite, [*GPU, f"runs_root={tmp_path}"])
    assert p.runs and all(j.cfg.eval.mode in {"none", "fixed", "dynamic"} for j in p.runs)
    assert len({j.label for j in p.runs}) == len(p.runs)  # one directory per run
    pools = {j.pool for j in p.runs if j.pool}
    assert {j.name for j in p.pools} == pools  # every needed pool built once, none unused
    assert not (tmp_path / "ablate").exists()  # planning writes nothing


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes(experiment):
    assert compose([f"experiment={experiment}"]).experiment == experiment


def test_table3_dry_run_prints_the_exact_plan(reme):
    proc = reme("ablate", "table3", *GPU, "benchmark.limit=3", "eval.runs=2", "eval.seeds=2", "build.samples=2",
                "--dry-run", check=True)
    # pool: 3 train tasks x 2 samples = 6; 4 variants x (3 test tasks x 2 runs x 2 seeds = 12) = 48
    text = re.sub(r"\s+", " ", proc.stderr)
    assert "1 pool(s) to build or import, 4 run(s), 54 units, at most 1620 executor LLM calls" in text  # 54 x 30
    for label in ("full_addition", "selective_addition", "plus_reflection", "plus_deletion"):
        assert label in text
    assert not (reme.cwd / "runs").exists()


def test_a_swept_variant_expands_like_multirun(tmp_path):
    p = plan("alpha_beta", [*GPU, f"runs_root={tmp_path}"])
    got = sorted((j.cfg.memory.deletion.alpha, j.cfg.memory.deletion.beta) for j in p.runs)
    assert got == sorted((a, b) for a in (3, 5, 10) for b in (0.3, 0.5))


def test_a_user_suite_is_just_a_file(reme):
    suite = reme.cwd / "mine.yaml"
    suite.write_text("description: mine\ntable: topk\npools: {p: []}\n"
                     "variants:\n  k2: {mode: fixed, pool: p, overrides: [memory.top_k=2]}\n"
                     "  base: {mode: none}\n")
    proc = reme("ablate", str(suite), *GPU, "benchmark.limit=1", "eval.runs=1", "eval.seeds=1", "--dry-run",
                check=True)
    assert "2 run(s)" in re.sub(r"\s+", " ", proc.stderr)
    bad = reme.cwd / "bad.yaml"
    bad.write_text("variants:\n  x: {mode: fixed}\n")
    proc = reme("ablate", str(bad), "--dry-run")
    assert proc.returncode == 2 and "variant x (mode fixed) needs a pool" in proc.stderr


def test_a_suite_starts_from_the_released_pool_of_its_benchmark_and_model(reme, server):
    suite = reme.cwd / "released.yaml"
    suite.write_text("table: topk\npools: {released: official, named: 'official:bfcl/qwen3-14b'}\n"
                     "variants:\n  fixed: {mode: fixed, pool: released}\n  named: {mode: fixed, pool: named}\n")
    args = ("ablate", str(suite), "model=qwen3-8b", "embedding=minilm", "benchmark.release=current",
            f"llm.base_url={server.base_url}", "llm.model=replay", "benchmark.limit=1", "eval.runs=1", "eval.seeds=1")
    plan_text = re.sub(r"[\s│]+", " ", reme(*args, "--dry-run", check=True, env={"COLUMNS": "200"}).stderr)
    assert "import pool released - official:bfcl/qwen3-8b 0 0" in plan_text
    assert "import pool named - official:bfcl/qwen3-14b 0 0" in plan_text
    suite.write_text("table: topk\npools: {released: official}\nvariants:\n  fixed: {mode: fixed, pool: released}\n")
    reme(*args, check=True)
    root = next((reme.cwd / "runs" / "ablate").iterdir())
    manifest = json.loads((root / "pools" / "released" / "pool" / "manifest.json").read_text())
    assert manifest["built_by"]["source"] == "official:bfcl/qwen3-8b"
    assert len((root / "pools" / "released" / "pool" / "experiences.jsonl").read_text().splitlines()) == 96
    (trial,) = map(json.loads, (root / "runs" / "fixed" / "trials.jsonl").read_text().splitlines())
    released = {e["id"] for e in map(json.loads, (root / "pools" / "released" / "pool" / "experiences.jsonl")
                                     .read_text().splitlines())}
    assert len(trial["retrieved_ids"]) == 5 and set(trial["retrieved_ids"]) <= released
    before = (root / "pools" / "released" / "pool" / "manifest.json").stat().st_mtime_ns
    reme(*args, check=True)  # the rerun keeps the imported pool
    assert (root / "pools" / "released" / "pool" / "manifest.json").stat().st_mtime_ns == before
    proc = reme(*[a if a != "model=qwen3-8b" else "model=local" for a in args], "--dry-run")
    assert proc.returncode == 2 and "released no pool for benchmark bfcl_v3 and model local" in proc.stderr
    bad = reme.cwd / "bad.yaml"
    bad.write_text("pools: {p: 'official:bfcl/qwen3-7b'}\nvariants:\n  x: {mode: fixed, pool: p}\n")
    proc = reme("ablate", str(bad), *GPU, "--dry-run")
    assert proc.returncode == 2 and "no bundled pool named 'official:bfcl/qwen3-7b'" in proc.stderr


def test_ablate_table1_runs_reports_and_resumes(reme, server):
    args = ("ablate", "table1", "model=qwen3-8b", "embedding=minilm", "benchmark.release=current", f"llm.base_url={server.base_url}", "llm.model=replay",
            "benchmark.limit=2", "eval.runs=4", "eval.seeds=1", "build.samples=2")
    reme(*args, check=True)
    suite = next((reme.cwd / "runs" / "ablate").iterdir())
    md = (suite / "report" / "report.md").read_text()
    assert md.startswith("> **Test double:**")  # never passed off as a model result
    rows = {l.split("|")[1].strip(): l for l in md.splitlines() if l.startswith("| ")}
    assert "40.33" in rows["No Memory"] and "59.55" in rows["No Memory"] and "100.00 ± 0.00" in rows["No Memory"]
    # All five of the paper's settings, each beside the paper's Qwen3-8B BFCL values.
    assert "41.22" in rows["A-Mem"] and "62.00" in rows["A-Mem"] and "100.00 ± 0.00" in rows["A-Mem"]
    assert "44.11" in rows["LangMem"] and "65.55" in rows["LangMem"] and "100.00 ± 0.00" in rows["LangMem"]
    assert {"ReMe (fixed)", "ReMe (dynamic)"} <= set(rows)
    assert (suite / "report" / "table_table1.csv").exists() and (suite / "report" / "scores.png").stat().st_size
    assert sorted(p.name for p in (suite / "pools").iterdir()) == ["amem", "langmem", "reme"]
    # The three methods learn from the same training trajectories: the pools built after
    # ReMe's replayed every sampling call from the response cache.
    def sampled(pool: str) -> tuple[dict, list]:
        report = json.loads((suite / "pools" / pool / "build" / "report.json").read_text())
        lines = (suite / "pools" / pool / "build" / "trials.jsonl").read_text().splitlines()
        calls = {t["unit"]: [(c["call"], c["output"]) for turn in t["trajectory"]["turns"] for step in turn
                             for c in step["calls"]] for t in map(json.loads, lines)}
        return report["sampling_llm"], sorted(calls.items())
    reme_llm, reme_trajectories = sampled("reme")
    assert reme_llm["calls"] > 0
    for pool in ("amem", "langmem"):
        llm, trajectories = sampled(pool)
        assert llm["cached_calls"] == llm["calls"] == reme_llm["calls"] and trajectories == reme_trajectories
    before = {p: p.read_text() for p in suite.glob("runs/*/trials.jsonl")}
    assert len(before) == 5
    reme(*args, check=True)  # resumes: every unit already finished
    assert {p: p.read_text() for p in suite.glob("runs/*/trials.jsonl")} == before


def test_report_on_two_runs_prints_table1_beside_the_paper(reme, server):
    common = ["model=qwen3-8b", "embedding=minilm", f"llm.base_url={server.base_url}", "llm.model=replay", "benchmark.limit=2",
              "eval.runs=4", "eval.seeds=2"]
    reme("eval", *common, "out_dir=runs/none", check=True)
    reme("pool", "import", "official:bfcl/qwen3-8b", "--out", "pool", check=True)
    reme("eval", "--mode", "fixed", *common, "memory.pool=pool", "out_dir=runs/fixed", check=True)
    proc = reme("report", "runs", check=True)
    assert proc.stdout.strip().splitlines()[-1] == "runs/report"
    row = next(l for l in proc.stderr.splitlines() if l.startswith("| No Memory |"))
    assert "40.33 ± 0.94" in row and "59.55 ± 0.83" in row
    assert any(l.startswith("| ReMe (fixed) |") and "44.50" in l for l in proc.stderr.splitlines())
    metrics = (reme.cwd / "runs" / "report" / "metrics.csv").read_text()
    assert "none" in metrics and "fixed" in metrics
    empty = reme("report", str(reme.cwd / "pool"))
    assert empty.returncode == 2 and "no `reme eval` run directories" in empty.stderr


@pytest.mark.parametrize("launcher", ["joblib", "submitit-local"])
def test_a_suite_runs_as_separate_jobs_through_a_launcher(reme, server, launcher):
    args = ("ablate", "table1", "model=qwen3-8b", "embedding=minilm", "benchmark.release=current",
            f"llm.base_url={server.base_url}", "llm.model=replay", "benchmark.limit=1", "eval.runs=1",
            "eval.seeds=1", "build.samples=1", "--launcher", launcher, "--jobs", "3",
            "--only", "no_memory", "--only", "reme_fixed", "--only", "reme_dynamic")
    reme(*args, check=True)
    suite = next((reme.cwd / "runs" / "ablate").iterdir())
    logs = sorted(p.name for p in (suite / "logs").glob("*.log"))
    assert logs == ["build-pool-reme.log", "eval-no_memory.log", "eval-reme_dynamic.log", "eval-reme_fixed.log"]
    for run in ("no_memory", "reme_fixed", "reme_dynamic"):
        manifest = json.loads((suite / "runs" / run / "manifest.json").read_text())
        assert manifest["status"] == "complete"
    assert "| No Memory |" in (suite / "report" / "report.md").read_text()

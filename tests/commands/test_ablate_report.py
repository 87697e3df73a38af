"""`reme ablate` and `reme report` through the real CLI, against the scripted server (a TEST
DOUBLE: it replays BFCL ground truth, so its numbers are not model results)."""

from __future__ import annotations

import json
import re

import pytest

from reme_cli.commands.ablate import load_suite, plan
from reme_cli.core.config import compose, config_dir
from reme_cli.core.errors import UserError
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy

SUITES = sorted(p.stem for p in (config_dir() / "ablation").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))
# Every suite starts ReMe from the released pool (the methods suite's ReMe rows are table1's);
# the pools the authors never released are always built (Table 2's trajectory-level pool,
# Table 4's 14B / 32B-summarizer pools).
RELEASED_START = set(SUITES)
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


@pytest.mark.parametrize("suite", SUITES)
def test_the_paper_suites_start_reme_from_the_released_pool_unless_told_to_build(suite, tmp_path):
    if suite not in RELEASED_START:
        assert "start" not in load_suite(suite)
        with pytest.raises(UserError, match=f"suite {suite} has no start to choose"):
            plan(suite, [*GPU, f"runs_root={tmp_path}", "suite.start=built"])
        return
    released = plan(suite, [*GPU, f"runs_root={tmp_path}"])
    built = plan(suite, [*GPU, f"runs_root={tmp_path}", "suite.start=built"])
    two_form = [name for name, spec in load_suite(suite)["pools"].items() if isinstance(spec, dict)]
    assert two_form
    for name in two_form:
        (imported,) = [j for j in released.pools if j.name == name]
        assert (imported.start, imported.source, imported.units) == ("released", "official:bfcl/qwen3-8b", 0)
        (own,) = [j for j in built.pools if j.name == name]
        assert (own.start, own.source) == ("built", None) and own.units > 0 and own.cfg.benchmark.split == "train"
    pool = two_form[0]
    # Two directories: a built pool never resumes runs that started from the released one.
    assert released.path.name.endswith("-released") and built.path.name.endswith("-built")
    assert {j.label for j in released.runs} == {j.label for j in built.runs}
    assert all(str(released.path) in j.cfg.memory.pool for j in released.runs if j.pool == pool)
    assert all(str(built.path) in j.cfg.memory.pool for j in built.runs if j.pool == pool)


def test_a_bad_start_fails_the_plan(tmp_path):
    with pytest.raises(UserError, match=r"suite.start=bogus: choose suite.start=released or suite.start=built"):
        plan("table1", [*GPU, "suite.start=bogus"])
    with pytest.raises(UserError, match=r"suite.begin=built: a suite takes suite.start=\.\.\."):
        plan("table1", [*GPU, "suite.begin=built"])
    two = tmp_path / "two.yaml"
    two.write_text("pools: {p: {released: official, built: []}}\nvariants:\n  x: {mode: fixed, pool: p}\n")
    with pytest.raises(UserError, match="pool p has two forms, so the suite needs start: released | built"):
        plan(str(two), GPU)
    two.write_text("start: built\npools: {p: {released: [], built: []}}\nvariants:\n  x: {mode: fixed, pool: p}\n")
    with pytest.raises(UserError, match="pool p's two forms must be"):
        plan(str(two), GPU)
    two.write_text("start: built\npools: {p: []}\nvariants:\n  x: {mode: fixed, pool: p}\n")
    with pytest.raises(UserError, match="start: 'built' chooses nothing"):
        plan(str(two), GPU)


@pytest.mark.slow
def test_a_model_without_a_released_pool_is_told_to_build_it(reme):
    proc = reme("ablate", "table1", "model=local", "--dry-run")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "released no pool for benchmark bfcl_v3 and model local" in proc.stderr
    assert proc.stderr.strip().endswith("build ReMe's pool here instead: suite.start=built")
    built = reme("ablate", "table1", "model=local", "suite.start=built", "--dry-run", check=True)
    assert built.stdout.strip().endswith("table1-bfcl_v3-local-built")


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes(experiment):
    assert compose([f"experiment={experiment}"]).experiment == experiment


def test_table3_dry_run_prints_the_exact_plan(reme):
    args = ("ablate", "table3", *GPU, "benchmark.limit=3", "eval.runs=2", "eval.seeds=2", "build.samples=2",
            "--dry-run")
    released = re.sub(r"[\s│]+", " ", reme(*args, check=True, env={"COLUMNS": "200"}).stderr)
    built = re.sub(r"[\s│]+", " ", reme(*args, "suite.start=built", check=True, env={"COLUMNS": "200"}).stderr)
    # 4 variants x (3 test tasks x 2 runs x 2 seeds = 12) = 48; the released pool is imported
    # 2 variants without reflection: 12 units x 30; 2 with it: 12 x 3 trials x 30
    assert "1 pool(s) to build or import, 4 run(s), 48 units, at most 2880 executor LLM calls" in released
    assert "start: released (suite.start=built for the other)" in released
    assert "import pool reme - official:bfcl/qwen3-8b released - 0 0" in released
    # ... or built here from 3 train tasks x 2 samples = 6 more (one trial each)
    assert "1 pool(s) to build or import, 4 run(s), 54 units, at most 3060 executor LLM calls" in built
    assert "build pool reme - - built - 6 180" in built
    for label, most in (("full_addition", 360), ("selective_addition", 360), ("plus_reflection", 1080),
                        ("plus_deletion", 1080)):
        assert f"eval {label} dynamic reme released - 12 {most}" in released
        assert f"eval {label} dynamic reme built - 12 {most}" in built
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


@pytest.mark.slow
def test_a_suite_starts_from_the_released_pool_of_its_benchmark_and_model(reme, server):
    suite = reme.cwd / "released.yaml"
    suite.write_text("table: topk\npools: {released: official, named: 'official:bfcl/qwen3-14b'}\n"
                     "variants:\n  fixed: {mode: fixed, pool: released}\n  named: {mode: fixed, pool: named}\n")
    args = ("ablate", str(suite), "model=qwen3-8b", "embedding=minilm", "benchmark.release=current",
            f"llm.base_url={server.base_url}", "llm.model=replay", "benchmark.limit=1", "eval.runs=1", "eval.seeds=1")
    plan_text = re.sub(r"[\s│]+", " ", reme(*args, "--dry-run", check=True, env={"COLUMNS": "200"}).stderr)
    assert "import pool released - official:bfcl/qwen3-8b released - 0 0" in plan_text
    assert "import pool named - official:bfcl/qwen3-14b released - 0 0" in plan_text
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


@pytest.mark.slow
def test_ablate_table1_built_here_runs_reports_and_resumes(reme, server):
    args = ("ablate", "table1", "model=qwen3-8b", "embedding=minilm", "benchmark.release=current",
            f"llm.base_url={server.base_url}", "llm.model=replay", "benchmark.limit=2", "eval.runs=4",
            "eval.seeds=1", "build.samples=2", "suite.start=built")
    reme(*args, check=True)
    (suite,) = (reme.cwd / "runs" / "ablate").iterdir()
    assert suite.name == "table1-bfcl_v3-qwen3-8b-built"
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


@pytest.mark.slow
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
@pytest.mark.slow
def test_a_suite_runs_as_separate_jobs_through_a_launcher(reme, server, launcher):
    args = ("ablate", "table1", "model=qwen3-8b", "embedding=minilm", "benchmark.release=current",
            f"llm.base_url={server.base_url}", "llm.model=replay", "benchmark.limit=1", "eval.runs=1",
            "eval.seeds=1", "build.samples=1", "--launcher", launcher, "--jobs", "3",
            "--only", "no_memory", "--only", "reme_fixed", "--only", "reme_dynamic")
    reme(*args, check=True)
    (suite,) = (reme.cwd / "runs" / "ablate").iterdir()
    assert suite.name == "table1-bfcl_v3-qwen3-8b-released"
    # ReMe starts from the released pool (the default): imported by the suite, no build job.
    logs = sorted(p.name for p in (suite / "logs").glob("*.log"))
    assert logs == ["eval-no_memory.log", "eval-reme_dynamic.log", "eval-reme_fixed.log"]
    pool = suite / "pools" / "reme" / "pool"
    assert json.loads((pool / "manifest.json").read_text())["built_by"]["source"] == "official:bfcl/qwen3-8b"
    released = {e["id"] for e in map(json.loads, (pool / "experiences.jsonl").read_text().splitlines())}
    assert len(released) == 96
    for run in ("no_memory", "reme_fixed", "reme_dynamic"):
        manifest = json.loads((suite / "runs" / run / "manifest.json").read_text())
        assert manifest["status"] == "complete"
    (fixed,) = map(json.loads, (suite / "runs" / "reme_fixed" / "trials.jsonl").read_text().splitlines())
    assert fixed["retrieved_ids"] and set(fixed["retrieved_ids"]) <= released
    assert "| No Memory |" in (suite / "report" / "report.md").read_text()


def test_the_methods_suite_plans_every_method_and_starts_online_ones_empty(tmp_path):
    p = plan("methods", [*GPU, f"runs_root={tmp_path}"])
    runs = {j.label: (j.cfg.memory.name, j.cfg.eval.mode, j.pool) for j in p.runs}
    assert runs == {
        "no_memory": ("none", "none", None),
        "reme_fixed": ("reme", "fixed", "reme"), "reme_dynamic": ("reme", "dynamic", "reme"),
        "amem": ("amem", "fixed", "amem"), "langmem": ("langmem", "fixed", "langmem"),
        "ace_offline": ("ace", "fixed", "ace"), "ace_online": ("ace", "dynamic", None),
        "dc_cu_fixed": ("dc", "fixed", "dc_cu"), "dc_cu_online": ("dc", "dynamic", None),
        "dc_rs_fixed": ("dc", "fixed", "dc_rs"), "dc_rs_online": ("dc", "dynamic", None),
        "reasoningbank_fixed": ("reasoningbank", "fixed", "reasoningbank"),
        "reasoningbank_online": ("reasoningbank", "dynamic", None),
    }
    by_label = {j.label: j.cfg for j in p.runs}
    assert all(by_label[l].memory.pool is None for l in ("ace_online", "dc_cu_online", "reasoningbank_online"))
    assert by_label["dc_rs_online"].memory.variant == by_label["dc_rs_fixed"].memory.variant == "retrieval_synthesis"
    pools = {j.name: j for j in p.pools}
    assert pools["reme"].source == "official:bfcl/qwen3-8b"  # imported, as in table1
    assert {n: j.cfg.memory.name for n, j in pools.items() if n != "reme"} == {
        "amem": "amem", "langmem": "langmem", "ace": "ace", "dc_cu": "dc", "dc_rs": "dc",
        "reasoningbank": "reasoningbank"}


def test_a_pool_less_variant_must_be_dynamic_and_name_its_method(reme):
    bad = reme.cwd / "bad.yaml"
    bad.write_text("variants:\n  x: {mode: fixed, memory: ace}\n")
    proc = reme("ablate", str(bad), *GPU, "--dry-run")
    assert proc.returncode == 2 and "variant x (mode fixed) needs a pool" in proc.stderr
    bad.write_text("pools: {p: []}\nvariants:\n  x: {mode: dynamic, pool: p, memory: ace}\n")
    proc = reme("ablate", str(bad), *GPU, "--dry-run")
    assert proc.returncode == 2 and "memory: names the method of a dynamic run with no pool" in proc.stderr

"""Every shipped config composes and validates; bad input is one line and writes nothing."""

from pathlib import Path

import pytest

from reme_cli.core.config import compose, config_dir, config_hash
from reme_cli.core.errors import UserError

EXPERIMENTS = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))
MODELS = sorted(p.stem for p in (config_dir() / "model").glob("*.yaml"))


def test_there_are_experiments():
    assert "quickstart" in EXPERIMENTS


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes(name):
    text = (config_dir() / "experiment" / f"{name}.yaml").read_text()
    assert text.startswith("# @package _global_"), "experiment files must be global packages"
    cfg = compose([f"experiment={name}"])
    assert cfg.experiment == name


@pytest.mark.parametrize("name", MODELS)
def test_every_model_composes(name):
    cfg = compose([f"model={name}"])
    assert cfg.model.name == name
    assert cfg.model.sampling.temperature == 0.9  # the paper's executor temperature


def test_qwen3_models_think_on_bfcl_and_use_hermes():
    cfg = compose(["model=qwen3-8b"])
    assert cfg.model.thinking is True
    assert "hermes" in cfg.model.serve_args


def test_benchmark_dependent_defaults_are_settled_per_benchmark():
    """What the authors' scripts ran differs by benchmark (workers sharing a pool, deletion
    cadence); the resolved value, not None, reaches config.yaml and the run hash."""
    bfcl = compose(["model=qwen3-8b", "memory=reme"])
    appworld = compose(["model=qwen3-8b", "memory=reme", "benchmark=appworld"])
    assert (bfcl.eval.dynamic_workers, bfcl.memory.deletion.every) == (4, 5)
    assert (appworld.eval.dynamic_workers, appworld.memory.deletion.every) == (8, 1)
    assert compose(["memory=reme", "eval.dynamic_workers=2", "memory.deletion.every=3"]).eval.dynamic_workers == 2
    # Workers change nothing outside dynamic mode: a fixed run's hash ignores them.
    fixed = ["memory=reme", "eval.mode=fixed", "memory.pool=x"]
    assert config_hash(compose(fixed)) == config_hash(compose([*fixed, "eval.dynamic_workers=1"]))
    dynamic = ["memory=reme", "eval.mode=dynamic", "memory.pool=x"]
    assert config_hash(compose(dynamic)) != config_hash(compose([*dynamic, "eval.dynamic_workers=1"]))


def test_the_cpu_model_is_the_default_and_sized_for_two_cores():
    cfg = compose([])
    assert cfg.model.name == "local" and cfg.model.tool_protocol == "json"
    assert cfg.benchmark.max_interactions == 12 and cfg.llm.concurrency == 2
    # The command line still wins over what model=local sets.
    assert compose(["benchmark.max_interactions=30"]).benchmark.max_interactions == 30


def test_hash_ignores_execution_knobs_but_not_results_knobs():
    base = config_hash(compose([]))
    assert config_hash(compose(["llm.concurrency=64"])) == base
    assert config_hash(compose(["out_dir=/tmp/x"])) == base
    assert config_hash(compose(["eval.runs=2"])) != base
    assert config_hash(compose(["model.sampling.temperature=0.5"])) != base


@pytest.mark.parametrize("overrides, fragment", [
    (["eval.runs=-1"], "eval.runs=-1 must be >= 1"),
    (["eval.seeds=0"], "eval.seeds=0 must be >= 1"),
    (["model=nope"], "model=nope does not exist"),
    (["eval.bogus=1"], "unknown key 'eval.bogus'"),
    (["bogus=1"], "unknown key 'bogus'"),
    (["eval.runs=abc"], "eval.runs"),
    (["benchmark.split=dev"], "benchmark.split='dev' is not allowed"),
    (["llm.base_url=localhost:8000"], "must start with http"),
    (["experiment=nope"], "experiment=nope does not exist"),
])
def test_bad_config_is_a_user_error(overrides, fragment):
    with pytest.raises(UserError) as err:
        compose(overrides)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("args", [
    ["eval", "eval.runs=-1"],
    ["eval", "model=nope"],
    ["eval", "eval.bogus=1"],
    ["eval", "benchmark.task_ids=[multi_turn_base_99999]"],
    # Nothing listens on port 9 (discard): an unreachable server.
    ["eval", "model=qwen3-8b", "llm.base_url=http://127.0.0.1:9/v1"],
    ["eval", "--mode", "fixed"],  # no memory.pool
    ["eval", "--mode", "dynamic", "memory.pool=/nonexistent"],
    ["build-pool", "embedding.dim=7"],
    ["pool", "import", "/nonexistent.jsonl", "--out", "run"],
    ["pool", "stats", "/nonexistent"],
])
@pytest.mark.slow
def test_cli_bad_input_one_line_no_traceback_no_run_dir(reme, args):
    proc = reme(*args, *(["out_dir=run"] if args[0] != "pool" else []))
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error:")
    assert "Traceback" not in proc.stderr
    assert not (Path(reme.cwd) / "run").exists()
    assert proc.stdout == ""

"""Every shipped config composes and validates; bad input is one line and writes nothing."""

import dataclasses
import re
from pathlib import Path

import pytest

from reme_cli.commands.optuna_sweep import parse, study_name
from reme_cli.core.config import Config, compose, config_dir, config_hash
from reme_cli.core.errors import UserError
from reme_cli.core.registry import BENCHMARKS, METHODS

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


# A key that names a place: a folder, a file, an installation, a server.
PLACE = re.compile(r"(_dir|root|path|pool|venv|uri|url|file)$")
# The places that name WHAT a run uses, in the hash by value; every other place says only
# WHERE something lives and is out of it (core/config.py, _WHERE_KEYS).
WHAT = {"memory.pool": "which pool the run starts from",
        "embedding.base_url": "which provider computes the vectors (its host; a port is WHERE)"}


def _keys(cls: type, prefix: str = "") -> list[str]:
    out = []
    for f in dataclasses.fields(cls):
        kind = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out += _keys(type(kind), f"{prefix}{f.name}.") if dataclasses.is_dataclass(kind) else [prefix + f.name]
    return out


def place_keys() -> list[tuple[str, tuple[str, ...]]]:
    """Every place key of the schema and of each registered plug-in's section, with the
    overrides that select that plug-in."""
    found = [(k, ()) for k in _keys(Config) if k.split(".")[0] not in ("benchmark", "memory")]
    for section, registry in (("benchmark", BENCHMARKS), ("memory", METHODS)):
        for name in registry.names():
            found += [(f"{section}.{k}", (f"{section}={name}",)) for k in _keys(registry.get(name).config_class)]
    return [(k, sel) for k, sel in found if PLACE.search(k)]


def _two_places(key: str) -> tuple[str, str]:
    if key.endswith("url") or key == "tracker.uri":
        return "http://10.0.0.1:8000/v1", "http://10.0.0.2:9000/v1"
    return "/srv/reme/one", "elsewhere/two"


def test_the_schema_has_place_keys_of_both_kinds():
    keys = {k for k, _ in place_keys()}
    assert {"embedding.cache_dir", "llm.cache_dir", "runs_root", "benchmark.data_dir", "memory.pool"} <= keys
    assert set(WHAT) <= keys


@pytest.mark.parametrize("key, select", place_keys(), ids=lambda v: v if isinstance(v, str) else "-".join(v))
def test_a_key_that_says_where_something_lives_is_out_of_the_run_hash(key, select):
    """The same command from another folder, shell or machine resumes its run: a place key
    changes the hash only where it names what the run uses (WHAT), never where it lives."""
    base = ["memory=reme", "eval.mode=fixed", *select]  # a mode that reads memory.pool
    one, two = _two_places(key)
    a, b = config_hash(compose([*base, f"{key}={one}"])), config_hash(compose([*base, f"{key}={two}"]))
    if key in WHAT:
        assert a != b, f"{key} names {WHAT[key]}: two of them are two runs"
    else:
        assert a == b == config_hash(compose(base)), f"{key} says only where something lives: out of the hash"


def test_the_embedding_endpoints_host_is_hashed_its_port_is_not():
    at = lambda url: config_hash(compose(["embedding=minilm", "embedding.kind=openai", f"embedding.base_url={url}"]))
    assert at("http://10.0.0.1:8000/v1") == at("http://10.0.0.1:9000/other") != at("http://10.0.0.2:8000/v1")


def test_reme_cache_dir_changes_neither_the_run_hash_nor_the_optuna_study(monkeypatch):
    """$REME_CACHE_DIR moves the caches (embedding.cache_dir is resolved from it): the same
    command in a shell that sets it continues the same run and the same study."""
    sweep = parse(["eval.mode=fixed", "memory=reme", "memory.pool=pool",
                   "memory.top_k=choice(1,3)", "hydra/sweeper=optuna"])
    monkeypatch.delenv("REME_CACHE_DIR", raising=False)
    plain = compose(sweep.fixed)
    monkeypatch.setenv("REME_CACHE_DIR", "/mnt/scratch/reme-cache")
    moved = compose(sweep.fixed)
    assert moved.embedding.cache_dir == "/mnt/scratch/reme-cache/embeddings" != plain.embedding.cache_dir
    assert config_hash(moved) == config_hash(plain)
    assert study_name(sweep, moved) == study_name(sweep, plain)


def test_a_run_made_with_the_default_cache_keeps_its_hash():
    """embedding.cache_dir left the hash after runs were made: it is hashed at the value those
    runs had by default, so their directories (named by the hash) still resume."""
    from reme_cli.core.config import hashed_part, to_dict

    data = to_dict(compose([]))
    data["embedding"]["cache_dir"] = "/anywhere/embeddings"
    assert hashed_part(data)["embedding"]["cache_dir"] == ".reme_cache/embeddings"


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

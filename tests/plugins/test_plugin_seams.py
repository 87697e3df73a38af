"""The plug-in seams are typed: a benchmark or memory method subclasses its seam's base class
(``bench.base.Benchmark``, ``methods.base.Memory``), where every optional hook has its default
once; the registry holds a plug-in to its seam when it loads it, so one that lacks a required
hook is refused in one line naming it (exit 2, no traceback), not half-way through a run."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from reme_cli.bench.base import Benchmark, BenchmarkConfig
from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Section
from reme_cli.core.registry import Registry
from reme_cli.methods.base import Memory
from reme_cli.methods.hooks import SavedState
from reme_cli.methods.pool_dirs import is_pool
from tests.conftest import REPO, reme_process


def _added(registry: Registry, name: str, plugin):
    """``plugin`` registered as ``name`` for a moment, as a test adds one: held to the seam."""
    with registry.temporarily(name, plugin):
        return registry.get(name)


def benchmarks() -> Registry:
    return Registry("benchmark", "reme.tests_benchmarks", seam="reme_cli.bench.base:Benchmark")


def methods() -> Registry:
    return Registry("memory method", "reme.tests_methods", seam="reme_cli.methods.base:Memory")


@dataclass
class NoOpenConfig(BenchmarkConfig):
    name: str = "no_open"


class NoOpen(Benchmark):
    name, config_class = "no_open", NoOpenConfig

    @classmethod
    def from_config(cls, cfg):
        return cls()

    def task_ids(self):
        return ["t"]

    def load(self, task_id):
        raise NotImplementedError


def test_a_benchmark_without_a_required_hook_is_refused_naming_it():
    with pytest.raises(UserError, match=r"benchmark 'x' \(.*NoOpen\) has no open \(required by "
                                        r"reme_cli\.bench\.base\.Benchmark\)") as err:
        _added(benchmarks(), "x", NoOpen)
    assert "\n" not in str(err.value)


def test_a_plugin_that_does_not_subclass_its_seam_is_refused():
    class Duck:
        name, config_class = "duck", NoOpenConfig

    with pytest.raises(UserError, match=r"is not a subclass of reme_cli\.bench\.base\.Benchmark"):
        _added(benchmarks(), "duck", Duck)
    with pytest.raises(UserError, match=r"is not a subclass of reme_cli\.methods\.base\.Memory"):
        _added(methods(), "duck", Duck)


def test_a_method_needs_a_config_class_that_is_a_section():
    class Bare(Memory):
        pass

    @dataclass
    class Plain:
        name: str = "plain"

    class PlainConfig(Memory):
        config_class = Plain

    with pytest.raises(UserError, match=r"has no config_class"):
        _added(methods(), "bare", Bare)
    with pytest.raises(UserError, match=r"config_class .* is not a subclass of reme_cli\.core\.plugin\.Section"):
        _added(methods(), "plain", PlainConfig)

    @dataclass
    class Fine(Section):
        name: str = "fine"

    class Good(Memory):
        config_class = Fine

    assert _added(methods(), "good", Good) is Good


@pytest.mark.slow
def test_the_cli_refuses_a_benchmark_missing_a_hook_in_one_line(tmp_path):
    (tmp_path / "half_bench.py").write_text(
        "from dataclasses import dataclass\n"
        "from reme_cli.bench.base import Benchmark, BenchmarkConfig\n"
        "@dataclass\n"
        "class HalfConfig(BenchmarkConfig):\n"
        "    name: str = 'half_bench:Half'\n"
        "class Half(Benchmark):\n"
        "    name, config_class = 'half', HalfConfig\n"
        "    @classmethod\n"
        "    def from_config(cls, cfg): return cls()\n"
        "    def load(self, task_id): ...\n"
        "    async def open(self, task, key): ...\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
           "REME_CACHE_DIR": str(tmp_path / "cache")}
    proc = reme_process(["eval", "benchmark.name=half_bench:Half", f"out_dir={tmp_path / 'run'}"], cwd=tmp_path,
                        env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no task_ids" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


@dataclass
class JarConfig(Section):
    name: str = "jar"
    pool: str | None = None


class Jar(Memory):
    """A method that declares its files: ``describe`` and ``preflight`` come from ``saved``."""

    config_class = JarConfig
    saved = SavedState("jar", lambda folder: ([], {"jar": True}, "text"), lambda unit, seq, events: None,
                       starts_empty="an empty jar")
    checked: list[str] = []

    @classmethod
    def check_pool(cls, cfg):
        cls.checked.append(cfg.memory.pool)


def _cfg(mode: str, pool: str | None):
    return SimpleNamespace(eval=SimpleNamespace(mode=mode), memory=JarConfig(pool=pool))


def test_preflight_and_describe_are_written_once_from_what_a_method_saves(tmp_path):
    Jar.preflight(_cfg("dynamic", None))  # may start from an empty jar
    with pytest.raises(UserError) as err:
        Jar.preflight(_cfg("fixed", None))
    assert str(err.value) == ("--mode fixed memory=jar needs memory.pool=DIR (build one with `reme build-pool "
                              "memory=jar`); --mode dynamic may start from an empty jar")
    Jar.preflight(_cfg("fixed", "p"))
    assert Jar.checked == ["p"]
    assert Jar.describe(tmp_path) is None  # no manifest naming jar, no commit log
    (tmp_path / "pool").mkdir()
    (tmp_path / "pool" / "manifest.json").write_text(json.dumps({"method": "jar"}))
    view = Jar.describe(tmp_path)
    assert (view.method, view.summary, view.text, view.changes) == ("jar", {"jar": True}, "text", None)


def test_build_pool_replaces_only_a_pool_reme_wrote(tmp_path):
    """A manifest of a reme format is a pool; one naming only its method is one if the method
    says it wrote such manifests (A-Mem's first ones); anything else is the user's."""
    for name, manifest in (("format", {"format": "reme-dc-pool"}), ("amem", {"method": "amem"}),
                           ("rb", {"method": "reasoningbank"}), ("other", {"method": "mine"})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps(manifest))
    assert [is_pool(tmp_path / n) for n in ("format", "amem", "rb", "other")] == [True, True, False, False]

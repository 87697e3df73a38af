"""One contract, run over every registered memory method and benchmark: reme's own, and any
installed distribution's (the toy plug-in's, when tests/plugins/reme_toy is installed:
``test_the_contract_holds_for_an_installed_distribution`` runs this file with it). A new
plug-in is held to it by being registered; nothing here names one.

The contract: the plug-in holds to its seam; its config section is its own dataclass, named
apart so that validating a config loads only it (a light module); a config group option
selects it; the report and the viewer can ask it what they ask every plug-in; it brings its
answers on the scripted server (a TEST DOUBLE); and one of reme's own brings its manual page.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from reme_cli.core.config import compose, group_files
from reme_cli.core.plugin import Section
from reme_cli.core.registry import BENCHMARKS, METHODS, REPLAY_POLICIES, SCRIPTED, Registry
from reme_cli.report.columns import method_columns
from tests.conftest import REPO, script_module
from tests.plugins.test_plugin_toy import site  # noqa: F401 (the toy installed with pip, once per session)

GROUPS = {"memory": METHODS, "benchmark": BENCHMARKS}


def module_of(registry: Registry, name: str) -> str:
    return registry.targets()[name].split(":")[0]


def from_reme(registry: Registry, name: str) -> bool:
    """Declared by reme's own distribution (pyproject.toml), not an outside one."""
    point = next(ep for ep in metadata.entry_points(group=registry.group) if ep.name == name)
    return point.dist is not None and point.dist.metadata["Name"] == "reme-harness"


def is_seam_default(registry: Registry, name: str) -> bool:
    """Defined in the seam's own module (memory=none: the agent without a memory), not in a
    plug-in package of its own."""
    return module_of(registry, name) == (registry.seam or "").split(":")[0]


def beside(targets: dict[str, str], module: str) -> list[str]:
    """The registered names whose module sits in a package ``module`` belongs to."""
    return [name for name, target in targets.items()
            if module.startswith(target.split(":")[0].rpartition(".")[0] + ".")]


def option_of(group: str, name: str) -> str | None:
    """The config group option whose ``name:`` selects the plug-in."""
    for option, path in group_files(group).items():
        if (yaml.safe_load(path.read_text()) or {}).get("name") == name:
            return option
    return None


ALL = [(group, name) for group, registry in GROUPS.items() for name in registry.names()]


def _id(p: tuple[str, str]) -> str:
    return f"{p[0]}={p[1]}"


@pytest.fixture(params=ALL, ids=_id)
def plugin(request):
    return request.param


# The clauses that apply to some plug-ins only are run over those, not skipped for the rest.
ASKS = [(g, n) for g, n in ALL if g == "benchmark" or GROUPS[g].get(n).needs_summarizer]  # memory=none asks none
# An outside plug-in's page is its own business; the seam's default is the overview's.
OWN_PAGED = [(g, n) for g, n in ALL if from_reme(GROUPS[g], n) and not is_seam_default(GROUPS[g], n)]


def test_it_holds_to_its_seam_and_its_section_is_its_own(plugin):
    group, name = plugin
    registry = GROUPS[group]
    cls, section = registry.get(name), registry.section(name)
    assert cls.config_class is section
    assert dataclasses.is_dataclass(section) and issubclass(section, Section)
    assert section().name == name  # the section's own default names the plug-in


def test_a_config_option_selects_it_and_validates(plugin):
    group, name = plugin
    option = option_of(group, name)
    assert option is not None, f"no {group}/*.yaml names {name}: add one to the plug-in's configs (reme.configs)"
    cfg = compose([f"{group}={option}"])
    assert isinstance(getattr(cfg, group), GROUPS[group].section(name))


@pytest.mark.parametrize("plugin", ASKS, ids=_id)
def test_it_brings_its_answers_on_the_scripted_server(plugin):
    """A method that asks a summarizer scripts its answers; a benchmark replays its ground
    truth. Both from its own package (TEST DOUBLES: the end-to-end tests run on them)."""
    group, name = plugin
    registry = GROUPS[group]
    if group == "memory":
        assert beside(SCRIPTED.targets(), module_of(registry, name)), f"memory={name}: no reme.scripted beside it"
    else:
        assert beside(REPLAY_POLICIES.targets(), module_of(registry, name)), \
            f"benchmark={name}: no reme.replay_policies beside it"


@pytest.mark.parametrize("plugin", OWN_PAGED, ids=_id)
def test_reme_own_plugins_bring_their_manual_page(plugin):
    group, name = plugin
    registry = GROUPS[group]
    pages = script_module("gen_reference.py").plugin_pages()
    package = Path(importlib.import_module(module_of(registry, name)).__file__ or "").parent
    assert any(package.is_relative_to(page.parent) for page in pages.values()), \
        f"{group}={name}: no manual.md in its package"


def test_a_method_answers_what_the_report_and_the_viewer_ask(tmp_path):
    for name in METHODS.names():
        method_columns(name)  # a malformed declaration is a UserError here
        assert METHODS.get(name).describe(tmp_path) is None  # an empty folder holds no state of it


# ---------------------------------------------------------------- in a process of its own

HEAVY = ("openai", "pandas", "numpy", "optuna", "mlflow", "wandb", "torch", "sentence_transformers", "faiss")
SECTIONS = f"""
import json, sys
from reme_cli.core.registry import BENCHMARKS, METHODS
found = {{}}
for kind, registry in (("benchmark", BENCHMARKS), ("memory", METHODS)):
    for name in registry.names():
        registry.section(name)
        found[f"{{kind}}={{name}}"] = sorted(m for m in {HEAVY!r} if m in sys.modules)
print(json.dumps(found))
"""


@pytest.mark.slow
def test_every_section_loads_without_the_libraries_a_run_needs():
    """Validating a config loads each plug-in's section alone: none imports an LLM client,
    pandas, numpy, faiss, torch or a tracker (the first section that did would be named)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", SECTIONS], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    assert set(found) == {f"{group}={name}" for group, registry in GROUPS.items() for name in registry.names()}
    assert {plugin: heavy for plugin, heavy in found.items() if heavy} == {}


@pytest.mark.slow
def test_the_contract_holds_for_an_installed_distribution(site, tmp_path):  # noqa: F811 (the toy's pip install)
    """This file again, in a pytest of its own with the toy plug-in installed as its own
    distribution (tests/plugins/reme_toy, pip-installed by ``site``): its method and its
    benchmark are held to the same contract as reme's, by nothing but being registered."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    proc = subprocess.run([sys.executable, "-m", "pytest", __file__, "-v", "-n", "0", "-m", "not slow",
                           "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "inner")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    toy = [line for line in proc.stdout.splitlines() if line.startswith("tests/") and "=toy]" in line]
    assert {"[memory=toy]", "[benchmark=toy]"} <= {line[line.index("["):line.index("]") + 1] for line in toy}
    assert toy and all(line.split()[1] in ("PASSED", "SKIPPED") for line in toy), "\n".join(toy)

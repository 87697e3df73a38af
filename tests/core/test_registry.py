"""The registries (reme_cli/core/registry.py): every plug-in is an installed entry point, read
once and then frozen; a benchmark's or method's section is loaded without the plug-in; a test
adds a plug-in for the length of a ``with`` block only. The distributions here are real ones,
made on disk (a dist-info folder with its entry points) and found through sys.path."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from reme_cli.core import registry as core_registry
from reme_cli.core.config import compose
from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Section
from reme_cli.core.registry import METHODS, Registry, forget_installed
from reme_cli.methods.base import Memory

HEAVY_MODULE = """
import sys
sys.modules[__name__].IMPORTED = True
from reme_cli.methods.base import Memory
from {package}.light import LightConfig, OtherConfig

class Heavy(Memory):
    config_class = LightConfig

class Mismatched(Memory):
    config_class = OtherConfig
"""
LIGHT_MODULE = """
from dataclasses import dataclass
from reme_cli.core.plugin import Section

@dataclass
class LightConfig(Section):
    name: str = "light_{package}"
    top_k: int = 1

    def check(self):
        from reme_cli.core.config import check_choices
        check_choices("memory", self, {{}}, {{"top_k": 0}})

@dataclass
class OtherConfig(Section):
    name: str = "mismatched_{package}"
"""


def distribution(root: Path, package: str, points: dict[str, dict[str, str]]) -> None:
    """An installed distribution named ``package``: its modules and a dist-info declaring
    ``points`` (group -> name -> target), as pip leaves one."""
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "heavy.py").write_text(HEAVY_MODULE.format(package=package))
    (root / package / "light.py").write_text(LIGHT_MODULE.format(package=package))
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in names.items()) + "\n"
        for group, names in points.items()))


def installed_methods() -> Registry:
    """A registry of memory methods as reme's own (METHODS), with nothing loaded yet."""
    return Registry("memory method", "reme.methods", seam="reme_cli.methods.base:Memory",
                    sections="reme.method_sections")


@pytest.fixture
def fresh_discovery():
    """The entry points read anew for the test, and again after it (what a new process does)."""
    forget_installed()
    yield forget_installed
    forget_installed()


def test_a_section_named_apart_is_validated_without_the_plugin(tmp_path, monkeypatch, fresh_discovery):
    distribution(tmp_path, "rx_light", {"reme.methods": {"light_rx_light": "rx_light.heavy:Heavy"},
                                        "reme.method_sections": {"light_rx_light": "rx_light.light:LightConfig"}})
    monkeypatch.syspath_prepend(str(tmp_path))
    methods = installed_methods()
    monkeypatch.setattr(core_registry, "METHODS", methods)
    monkeypatch.setattr("reme_cli.core.config.METHODS", methods)
    assert "light_rx_light" in methods.names()
    cfg = compose(["memory.name=light_rx_light", "memory.top_k=3"])
    assert type(cfg.memory).__name__ == "LightConfig" and cfg.memory.top_k == 3
    with pytest.raises(UserError, match="memory.top_k=-1 must be >= 0"):
        compose(["memory.name=light_rx_light", "memory.top_k=-1"])
    assert "rx_light.heavy" not in sys.modules  # validated twice, the plug-in never imported
    assert methods.get("light_rx_light").config_class is methods.section("light_rx_light")
    assert "rx_light.heavy" in sys.modules


def test_a_section_that_is_not_the_plugins_config_class_is_refused(tmp_path, monkeypatch, fresh_discovery):
    distribution(tmp_path, "rx_split", {"reme.methods": {"split": "rx_split.heavy:Mismatched"},
                                        "reme.method_sections": {"split": "rx_split.light:LightConfig"}})
    monkeypatch.syspath_prepend(str(tmp_path))
    methods = installed_methods()
    with pytest.raises(UserError, match=r"memory method 'split' declares its section rx_split\.light:LightConfig "
                                        r"under reme\.method_sections, but its config_class is .*OtherConfig"):
        methods.get("split")


def test_the_registry_is_frozen_once_it_has_read_the_entry_points(tmp_path, monkeypatch, fresh_discovery):
    """A package installed after discovery is not seen by this process (what is installed when
    a run starts is what it has); a new process sees it."""
    methods = installed_methods()
    before = methods.names()
    distribution(tmp_path, "rx_late", {"reme.methods": {"late": "rx_late.heavy:Heavy"}})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert methods.names() == before and not methods.has("late")
    fresh_discovery()  # as a new process would
    assert methods.names() == sorted([*before, "late"])


def test_two_distributions_registering_one_name_are_refused_naming_both(tmp_path, monkeypatch, fresh_discovery):
    distribution(tmp_path, "rx_one", {"reme.methods": {"twice": "rx_one.heavy:Heavy"}})
    distribution(tmp_path, "rx_two", {"reme.methods": {"twice": "rx_two.heavy:Heavy"}})
    monkeypatch.syspath_prepend(str(tmp_path))
    methods = installed_methods()
    with pytest.raises(UserError) as err:
        methods.names()
    assert str(err.value).startswith("two installed packages register 'twice' under reme.methods: ")
    assert "rx_one" in str(err.value) and "rx_two" in str(err.value) and str(err.value).endswith("uninstall one")


@dataclass
class JotConfig(Section):
    name: str = "jot"


class Jot(Memory):
    config_class = JotConfig


def test_a_test_adds_a_plugin_for_a_while_and_only_a_name_of_its_own():
    assert not METHODS.has("jot")
    with METHODS.temporarily("jot", Jot):
        assert "jot" in METHODS.names() and METHODS.get("jot") is Jot and METHODS.section("jot") is JotConfig
    assert not METHODS.has("jot") and "jot" not in METHODS.names()
    with pytest.raises(RuntimeError), METHODS.temporarily("jot", Jot):  # gone after a failure too
        raise RuntimeError("the test failed")
    assert not METHODS.has("jot")
    with pytest.raises(ValueError, match="'none' is registered already"), METHODS.temporarily("none", Jot):
        pass
    with pytest.raises(UserError, match="is not a subclass of reme_cli.methods.base.Memory"), \
            METHODS.temporarily("plain", JotConfig):  # held to the seam as an installed one
        pass
    assert not METHODS.has("plain")


def test_a_checkout_whose_plugins_are_not_registered_says_how_to_install_it(monkeypatch, fresh_discovery):
    """Run from a checkout never installed, or installed before its plug-ins were entry
    points: one line naming the install command, not 'choose one of []'."""
    monkeypatch.setattr(core_registry.metadata, "entry_points", lambda: metadata.EntryPoints([]))
    with pytest.raises(UserError, match=r"reme's own plug-ins are not registered here .*pip install -e \."):
        compose([])
    with pytest.raises(UserError, match=r"unknown memory method 'reme': reme's own plug-ins are not registered"):
        installed_methods().get("reme")

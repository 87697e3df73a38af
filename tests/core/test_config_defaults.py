"""Each default is written once: in a dataclass (the schema in reme_cli/core/config.py, a
plug-in's ``config_class``). A file under configs/ holds only what its option changes; a value
equal to the default it sets again is a second copy that can drift, and fails here."""

from __future__ import annotations

import importlib.resources
import shutil
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from reme_cli.bench.base import BenchmarkConfig
from reme_cli.core.config import PLUGIN_SECTIONS, Config, compose, config_dir, group_files, plugin_config_dirs
from reme_cli.core.errors import UserError
from reme_cli.core.registry import BENCHMARKS, METHODS

NOT_GROUPS = ("suite", "ablation")  # suite files, read by `reme ablate`, not composed
ABSENT = object()


def _defaults(schema: Any) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(schema), resolve=False)  # type: ignore[return-value]


def _leaves(tree: dict[str, Any], prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _lookup(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return ABSENT
        tree = tree[part]
    return tree


def _plugins(group: str | None, data: dict[str, Any]) -> dict[str, Any]:
    """The dataclass each plug-in section of a file is checked against: the option a group
    file is, the option a global file switches to, else the fields every benchmark has."""
    chosen = {"benchmark": BenchmarkConfig, "memory": None}
    for item in data.get("defaults") or []:
        for key, name in (item.items() if isinstance(item, dict) else []):
            section = key.removeprefix("override /")
            if section in PLUGIN_SECTIONS:
                chosen[section] = (BENCHMARKS if section == "benchmark" else METHODS).get(name).config_class
    if group in PLUGIN_SECTIONS:
        registry = BENCHMARKS if group == "benchmark" else METHODS
        chosen[group] = registry.get(data["name"]).config_class
    return chosen


def repeated_defaults(root: Path) -> list[str]:
    """``file: key = value`` for every value a file under ``root`` writes that equals the
    default it would set."""
    schema = _defaults(Config)
    found = []
    for path in sorted(root.rglob("*.yaml")):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_GROUPS:
            continue
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
        group = rel.parts[0] if len(rel.parts) > 1 else None
        is_global = path.read_text().startswith("# @package _global_")
        plugins = _plugins(group, data)
        tree = {k: v for k, v in data.items() if k != "defaults"}
        if group is not None and not is_global:
            tree = {group: tree}
        for key, value in _leaves(tree):
            section, _, rest = key.partition(".")
            if section in PLUGIN_SECTIONS:
                if rest == "name" and section == group:
                    continue  # the option's name selects its plug-in: not a default
                default = _lookup(_defaults(plugins[section]), rest) if plugins[section] else ABSENT
            else:
                default = _lookup(schema, key)
            if default is not ABSENT and value == default:
                found.append(f"{rel}: {key} = {value!r}")
    return found


def config_roots() -> list[Path]:
    """reme's configs/ and the config groups of every installed plug-in (reme.configs)."""
    return [config_dir(), *(Path(str(importlib.resources.files(source.removeprefix("pkg://"))))
                            for source in plugin_config_dirs())]


def test_no_config_file_repeats_a_default():
    assert len(config_roots()) > 1  # the plug-ins' groups are read too
    assert [found for root in config_roots() for found in repeated_defaults(root)] == []


def test_the_check_sees_planted_repeats(tmp_path):
    """The test above can fail: defaults written again in a copy of configs/ are found."""
    copy = tmp_path / "configs"
    shutil.copytree(config_dir(), copy)
    shutil.copytree(Path(str(group_files("benchmark")["bfcl_v3"])).parent, copy / "benchmark")  # BFCL's own group
    with (copy / "benchmark" / "bfcl_v3.yaml").open("a") as fh:
        fh.write("split: test\n")
    qwen = copy / "model" / "qwen3-8b.yaml"
    qwen.write_text(qwen.read_text().replace("  sampling:\n", "  sampling:\n    temperature: 0.9\n"))
    with (copy / "config.yaml").open("a") as fh:
        fh.write("eval:\n  runs: 4\n")
    assert repeated_defaults(copy) == ["benchmark/bfcl_v3.yaml: benchmark.split = 'test'",
                                       "config.yaml: eval.runs = 4",
                                       "model/qwen3-8b.yaml: model.sampling.temperature = 0.9"]


def test_a_plugin_key_its_group_file_does_not_write_is_still_set_and_checked():
    cfg = compose(["benchmark.limit=2", "memory=reme", "eval.mode=fixed", "memory.deletion.alpha=3"])
    assert cfg.benchmark.limit == 2 and cfg.benchmark.release == "paper"
    assert cfg.memory.deletion.alpha == 3 and cfg.memory.deletion.beta == 0.5
    with pytest.raises(UserError, match="unknown key 'benchmark.colour'"):
        compose(["benchmark.colour=red"])


def test_appworld_defaults_come_from_its_dataclass():
    cfg = compose(["benchmark=appworld"])
    assert (cfg.benchmark.tool_protocol, cfg.benchmark.thinking, cfg.benchmark.split) == ("code", False, "test_normal")


def test_cache_directories_follow_reme_cache_dir(monkeypatch):
    monkeypatch.delenv("REME_CACHE_DIR", raising=False)
    cfg = compose([])
    assert (cfg.llm.cache_dir, cfg.embedding.cache_dir) == (".reme_cache/llm", ".reme_cache/embeddings")
    monkeypatch.setenv("REME_CACHE_DIR", "elsewhere")
    cfg = compose(["embedding=qwen3-embedding-0.6b"])
    assert (cfg.llm.cache_dir, cfg.embedding.cache_dir) == ("elsewhere/llm", "elsewhere/embeddings")

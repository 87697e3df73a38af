"""The package layers import downward only: no cycle between packages, ever.

Every import statement of every module under reme_cli/ counts, module-level or inside a
function (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.conftest import REPO

# Lowest first. A package may import its own modules and any package before it.
LAYERS = ["core", "llm", "bench", "agent", "methods", "run", "report", "commands", "testing", "cli"]


def package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "reme_cli" or len(parts) < 2:
        return None
    return parts[1]


def import_edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    root = REPO / "reme_cli"
    for path in root.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        module = ".".join(rel.parts)
        source = package_of(module if rel.name != "__init__" else module + ".x")
        if source is None:  # reme_cli/__init__.py
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                target = package_of(name)
                if target is not None and target != source:
                    edges[(source, target)].append(f"{path.relative_to(REPO)}:{node.lineno}")
    return edges


def test_every_package_is_in_a_layer():
    packages = {p.stem if p.is_file() else p.name for p in (REPO / "reme_cli").iterdir()
                if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert packages <= set(LAYERS), f"place {sorted(packages - set(LAYERS))} in LAYERS"


def test_imports_go_downward_only():
    upward = [f"{src} -> {dst} ({', '.join(where[:3])})" for (src, dst), where in import_edges().items()
              if LAYERS.index(dst) > LAYERS.index(src)]
    assert upward == []


def test_the_check_sees_a_planted_cycle(tmp_path, monkeypatch):
    """The test above can fail: an upward import in a copy of the tree is found."""
    import shutil

    import tests.test_architecture as me

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "reme_cli", copy / "reme_cli", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "reme_cli" / "core" / "oops.py").write_text("from reme_cli.run.records import RunDir\n")
    monkeypatch.setattr(me, "REPO", copy)
    edges = me.import_edges()
    assert ("core", "run") in edges

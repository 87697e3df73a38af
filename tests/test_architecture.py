"""The package layers import downward only: no cycle between packages, ever.

Every import statement of every module under reme_cli/ counts, module-level or inside a
function (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict

from tests.conftest import REPO

# Lowest first. A package may import its own modules and any package before it.
# view sits under commands: the viewer reads runs through core/run_log.py as the report does,
# and is handed what it needs of a command (a suite's order) by the CLI.
LAYERS = ["core", "llm", "bench", "agent", "methods", "run", "report", "track", "view", "commands", "testing", "cli"]


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


# ---------------------------------------------------------------- plug-ins and files

PLUGINS_DIR = ("reme_cli", "methods")  # each sub-package is one method plug-in


def module_imports(root) -> dict[str, set[str]]:
    """Module -> the reme_cli modules it imports (``from pkg import module`` counts as
    importing that module; a package's own ``__init__`` is not an edge)."""
    modules = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
               for p in (root / "reme_cli").rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            else:
                continue
            graph[module] |= {t for t in targets if t in modules and t != module}
    return graph


def plugin_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == list(PLUGINS_DIR) and len(parts) > 3 else None


def plugin_crossings(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one method plug-in into another, or from the seam into any plug-in."""
    bad = []
    for src, targets in graph.items():
        for dst in targets:
            a, b = plugin_of(src), plugin_of(dst)
            seam = src.split(".")[:2] == list(PLUGINS_DIR) and a is None
            if b is not None and (a != b if a is not None else seam):
                bad.append(f"{src} -> {dst}")
    return sorted(bad)


def file_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every circle of imports between files, each as 'a -> b -> a' (empty: none)."""
    from graphlib import CycleError, TopologicalSorter

    found, left = [], {m: set(t) for m, t in graph.items()}
    while True:
        try:
            TopologicalSorter(left).prepare()
            return found
        except CycleError as exc:
            circle = exc.args[1]
            found.append(" -> ".join(circle))
            left[circle[-2]].discard(circle[-1])  # break this circle, look for the next


def test_no_plugin_imports_another_and_the_seam_imports_none():
    assert plugin_crossings(module_imports(REPO)) == []


def test_no_circle_of_files():
    assert file_cycles(module_imports(REPO)) == []


def test_the_checks_see_a_planted_crossing_and_a_planted_circle(tmp_path):
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "reme_cli", copy / "reme_cli", ignore=shutil.ignore_patterns("__pycache__"))
    methods = copy / "reme_cli" / "methods"
    (methods / "amem" / "oops.py").write_text("from reme_cli.methods.reme.pool import Pool\n")
    (methods / "oops_seam.py").write_text("import reme_cli.methods.langmem.config\n")
    (copy / "reme_cli" / "core" / "ring_a.py").write_text("from reme_cli.core import ring_b\n")
    (copy / "reme_cli" / "core" / "ring_b.py").write_text("def f():\n    from reme_cli.core.ring_a import x\n")
    graph = module_imports(copy)
    assert plugin_crossings(graph) == ["reme_cli.methods.amem.oops -> reme_cli.methods.reme.pool",
                                       "reme_cli.methods.oops_seam -> reme_cli.methods.langmem.config"]
    circles = file_cycles(graph)
    assert len(circles) == 1 and set(circles[0].split(" -> ")) == {"reme_cli.core.ring_a", "reme_cli.core.ring_b"}


# ---------------------------------------------------------------- plug-ins reached through the registry

# Imports of a plug-in from outside it that cannot go yet, each with why (keep this tiny).
# An entry that no longer occurs is harmless; delete it when its branch lands.
OUTSIDE_IMPORTS_ALLOWED: set[str] = set()


def benchmark_plugins() -> set[str]:
    """The built-in benchmarks' module stems under reme_cli/bench (``bfcl``, ``appworld``):
    a benchmark plug-in is ``bench/<stem>.py`` and every ``bench/<stem>_*`` module or package."""
    from reme_cli.core.registry import BENCHMARKS

    modules = [target.partition(":")[0].split(".") for target in BENCHMARKS.builtins().values()]
    return {parts[2] for parts in modules if parts[:2] == ["reme_cli", "bench"] and len(parts) == 3}


def owner_plugin(module: str, benches: set[str]) -> str | None:
    """``methods.<name>`` or ``bench.<stem>`` for a module inside a plug-in; None for shared rooms."""
    parts = module.split(".")
    if parts[:2] == list(PLUGINS_DIR) and len(parts) > 3:
        return f"methods.{parts[2]}"
    if parts[:2] == ["reme_cli", "bench"] and len(parts) > 2:
        stem = next((b for b in benches if parts[2] == b or parts[2].startswith(b + "_")), None)
        return f"bench.{stem}" if stem else None
    return None


def outside_imports(graph: dict[str, set[str]], benches: set[str]) -> list[str]:
    """Imports of a plug-in's module from outside that plug-in (shared rooms and other
    plug-ins alike): a plug-in is reached only through core/registry, by name."""
    return sorted(f"{src} -> {dst}" for src, targets in graph.items() for dst in targets
                  if owner_plugin(dst, benches) not in (None, owner_plugin(src, benches)))


def test_outside_a_plugin_only_the_registry_reaches_it():
    assert benchmark_plugins() == {"bfcl", "appworld"}
    assert [e for e in outside_imports(module_imports(REPO), benchmark_plugins())
            if e not in OUTSIDE_IMPORTS_ALLOWED] == []


def test_the_plugin_rule_sees_a_shared_room_importing_a_method_or_a_benchmark(tmp_path):
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "reme_cli", copy / "reme_cli", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "reme_cli" / "commands" / "oops.py").write_text(
        "def f():\n    from reme_cli.methods.amem.notes import Note\n")
    (copy / "reme_cli" / "testing" / "oops.py").write_text("import reme_cli.bench.appworld_setup\n")
    (copy / "reme_cli" / "bench" / "oops.py").write_text("from reme_cli.bench import bfcl\n")
    (copy / "reme_cli" / "bench" / "bfcl_oops.py").write_text("from reme_cli.bench.bfcl import BFCLBenchmark\n")
    found = outside_imports(module_imports(copy), benchmark_plugins())
    assert "reme_cli.commands.oops -> reme_cli.methods.amem.notes" in found
    assert "reme_cli.testing.oops -> reme_cli.bench.appworld_setup" in found
    assert "reme_cli.bench.oops -> reme_cli.bench.bfcl" in found  # a shared bench module is not the plug-in
    assert not any(e.startswith("reme_cli.bench.bfcl_oops") for e in found)  # inside its own plug-in


# ---------------------------------------------------------------- no shared room names a benchmark

# A benchmark is a plug-in like any other: what is particular to it (its metrics and labels,
# its scripted answers, its commands) lives in bench/ and its configs, and the shared rooms
# iterate what it declares. An identifier, an import or a string (docstrings and comments may
# cite a source) that names one is knowledge in the wrong room.
BENCHMARK_WORDS = re.compile(r"appworld|bfcl", re.IGNORECASE)
SHARED_ROOMS = ("core", "llm", "agent", "methods", "run", "report", "track", "commands", "view", "testing")
NAMES_A_BENCHMARK_BY_NEED = {
    # The registry is where built-ins are named, by where they live, so nothing else need be.
    "reme_cli/core/registry.py": "registers the built-in benchmarks",
    # Distribution names whose versions every manifest records (provenance, not behaviour).
    "reme_cli/run/records.py": "the pinned packages a manifest records",
    # `reme --help` says what reme reproduces (BFCL-v3 and AppWorld) and `pool import`'s help
    # gives a released pool's name as its example.
    "reme_cli/cli.py": "help text: what reme reproduces, an example pool name",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _names(node: ast.AST, docstrings: set[int]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names] + [a.asname or "" for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] + [a.name for a in node.names] + [a.asname or "" for a in node.names]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg or ""]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
        return [node.value]
    return []


def shared_files(root) -> list:
    """The shared rooms' modules: whole packages, the method seam's own files (not the
    method plug-ins below it), and the CLI."""
    base = root / "reme_cli"
    files = [p for room in SHARED_ROOMS if room != "methods" for p in (base / room).rglob("*.py")]
    return sorted([*files, *(base / "methods").glob("*.py"), base / "cli.py"])


def benchmark_names_in_shared_rooms(root) -> list[str]:
    hits = []
    for path in shared_files(root):
        rel = path.relative_to(root).as_posix()
        if rel in NAMES_A_BENCHMARK_BY_NEED:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = _docstrings(tree)
        hits += [f"{rel}:{node.lineno}: {name[:60]!r}" for node in ast.walk(tree)
                 for name in _names(node, docstrings) if BENCHMARK_WORDS.search(name)]
    return sorted(set(hits))


def test_no_shared_room_names_a_benchmark():
    assert benchmark_names_in_shared_rooms(REPO) == []


def test_the_check_sees_a_planted_benchmark_name(tmp_path):
    """The rule can fail: an import, an identifier and a string naming a benchmark in a copy
    of the tree are found; the same words in a docstring are not."""
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "reme_cli", copy / "reme_cli", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "reme_cli" / "report" / "oops.py").write_text(
        '"""Cites AppWorld\'s paper: allowed."""\n'
        "from reme_cli.bench.appworld_metrics import SGC\n"
        "def bfcl_only(run):\n"
        "    return run['benchmark'] == 'bfcl_v3'\n")
    hits = benchmark_names_in_shared_rooms(copy)
    assert hits == ["reme_cli/report/oops.py:2: 'reme_cli.bench.appworld_metrics'",
                    "reme_cli/report/oops.py:3: 'bfcl_only'", "reme_cli/report/oops.py:4: 'bfcl_v3'"]

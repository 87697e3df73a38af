"""The package layers import downward only: no cycle between packages, ever.

Every import statement of every module under reme_cli/ counts, module-level or inside a
function (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from pathlib import Path

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

# Each sub-package of these floors is one plug-in: a memory method (methods/<name>/) or a
# benchmark (bench/<name>/). The floor's own modules are the seam every plug-in shares.
PLUGIN_FLOORS = ("methods", "bench")


def plugin_packages(root) -> set[str]:
    """Every plug-in of the tree, as ``floor.name`` (``methods.amem``, ``bench.bfcl``)."""
    return {f"{floor}.{p.name}" for floor in PLUGIN_FLOORS for p in (root / "reme_cli" / floor).iterdir()
            if (p / "__init__.py").is_file()}


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


def plugin_of(module: str, plugins: set[str]) -> str | None:
    """The plug-in a module belongs to (``methods.amem``, ``bench.bfcl``: the package itself
    or anything under it); None for the shared rooms, the seams included."""
    parts = module.split(".")
    key = ".".join(parts[1:3])
    return key if parts[0] == "reme_cli" and len(parts) >= 3 and key in plugins else None


def plugin_crossings(graph: dict[str, set[str]], plugins: set[str]) -> list[str]:
    """Imports from one plug-in into another, or from a seam (a plug-in floor's own modules)
    into any plug-in."""
    bad = []
    for src, targets in graph.items():
        for dst in targets:
            a, b = plugin_of(src, plugins), plugin_of(dst, plugins)
            seam = src.split(".")[1:2] in ([floor] for floor in PLUGIN_FLOORS) and a is None
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
            # Each node of the circle imports the one after it (graphlib lists predecessors
            # first): drop the last import of the circle, then look for the next circle.
            left[circle[-1]].discard(circle[-2])


def test_no_plugin_imports_another_and_the_seam_imports_none():
    assert plugin_crossings(module_imports(REPO), plugin_packages(REPO)) == []


def test_no_circle_of_files():
    assert file_cycles(module_imports(REPO)) == []


def test_the_checks_see_a_planted_crossing_and_a_planted_circle(tmp_path):
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "reme_cli", copy / "reme_cli", ignore=shutil.ignore_patterns("__pycache__"))
    methods, bench = copy / "reme_cli" / "methods", copy / "reme_cli" / "bench"
    (methods / "amem" / "oops.py").write_text("from reme_cli.methods.reme.pool import Pool\n")
    (methods / "oops_seam.py").write_text("import reme_cli.methods.langmem.config\n")
    (bench / "appworld" / "oops.py").write_text("from reme_cli.bench.bfcl.calls import canonical_call\n")
    (bench / "oops_seam.py").write_text("import reme_cli.bench.appworld\n")
    (copy / "reme_cli" / "core" / "ring_a.py").write_text("from reme_cli.core import ring_b\n")
    (copy / "reme_cli" / "core" / "ring_b.py").write_text("import reme_cli.core.ring_c\n")
    (copy / "reme_cli" / "core" / "ring_c.py").write_text("def f():\n    from reme_cli.core.ring_a import x\n")
    graph = module_imports(copy)
    assert plugin_crossings(graph, plugin_packages(copy)) == [
        "reme_cli.bench.appworld.oops -> reme_cli.bench.bfcl.calls",
        "reme_cli.bench.oops_seam -> reme_cli.bench.appworld",
        "reme_cli.methods.amem.oops -> reme_cli.methods.reme.pool",
        "reme_cli.methods.oops_seam -> reme_cli.methods.langmem.config"]
    circles = file_cycles(graph)
    assert len(circles) == 1 and set(circles[0].split(" -> ")) == {f"reme_cli.core.ring_{x}" for x in "abc"}


# ---------------------------------------------------------------- plug-ins reached through the registry

# Imports of a plug-in from outside it that cannot go yet, each with why (keep this tiny).
# An entry that no longer occurs is harmless; delete it when its branch lands.
OUTSIDE_IMPORTS_ALLOWED: set[str] = set()


def outside_imports(graph: dict[str, set[str]], plugins: set[str]) -> list[str]:
    """Imports of a plug-in's module from outside that plug-in (shared rooms and other
    plug-ins alike): a plug-in is reached only through core/registry, by name."""
    return sorted(f"{src} -> {dst}" for src, targets in graph.items() for dst in targets
                  if plugin_of(dst, plugins) not in (None, plugin_of(src, plugins)))


def declared_entry_points(root=REPO) -> dict[str, dict[str, str]]:
    """reme's own plug-ins as pyproject.toml declares them: group -> name -> ``module:attribute``."""
    data = tomllib.loads((root / "pyproject.toml").read_text())
    return {group: dict(points) for group, points in data["project"].get("entry-points", {}).items()
            if group.startswith("reme.")}


def registered_targets(root=REPO) -> dict[str, str]:
    """Every plug-in reme declares, ``"GROUP name" -> "module:attribute"``."""
    return {f"{group} {name}": target for group, points in declared_entry_points(root).items()
            for name, target in points.items()}


# What lives in a plug-in floor's own modules although a registry names it: the seam's default
# (memory=none: the agent without a memory, and its section).
SEAM_DEFAULTS = {"reme.methods none", "reme.method_sections none"}


def test_every_plugin_is_a_package_and_everything_it_registers_lives_in_it():
    """A benchmark is a package bench/<name>/ (its benchmark, section, configs, replay policy,
    commands: one package), as a method is methods/<name>/; the floor's own modules are what
    every plug-in of it shares, so nothing a registry names lives there but the seam's
    default; and every plug-in package registers a benchmark or a method."""
    plugins = plugin_packages(REPO)
    owners = {key: plugin_of(target.split(":")[0], plugins) for key, target in registered_targets().items()
              if target.split(".")[1] in PLUGIN_FLOORS}
    assert [key for key, owner in owners.items() if owner is None and key not in SEAM_DEFAULTS] == []
    seated = {owner for key, owner in owners.items()
              if owner is not None and key.split()[0] in ("reme.benchmarks", "reme.methods")}
    assert plugins - seated == set(), "a plug-in package that registers no benchmark or method"
    assert {p.split(".")[0] for p in seated} == set(PLUGIN_FLOORS)  # the check read both floors


def test_core_registry_declares_no_plugin():
    """The registries hold the seams and the default method only: every plug-in, reme's own
    too, is an entry point of pyproject.toml, as an outside distribution's."""
    import reme_cli.core.registry as registry

    source = (REPO / "reme_cli" / "core" / "registry.py").read_text()
    named = [*registered_targets().values(), *(f"reme_cli.{p}" for p in plugin_packages(REPO))]
    assert [where for where in named if where in source] == []
    groups = {reg.group for reg in vars(registry).values() if isinstance(reg, registry.Registry)}
    groups |= {reg.sections for reg in vars(registry).values() if isinstance(reg, registry.Registry) and reg.sections}
    assert set(declared_entry_points()) <= groups, "pyproject declares a group no registry reads"
    for group, points in declared_entry_points().items():
        assert points, group


def test_only_tests_add_a_plugin_for_a_while_or_read_the_installed_ones_again():
    """``Registry.temporarily`` is the tests' way in, ``forget_installed`` the fork server's
    (a forked process with another sys.path); reme's own code calls neither: what was
    installed when a command started is what it has."""
    hits = [f"{p.relative_to(REPO)}" for p in (REPO / "reme_cli").rglob("*.py") if p.name != "registry.py"
            and (".temporarily(" in p.read_text() or "forget_installed(" in p.read_text())]
    assert hits == []


# ---------------------------------------------------------------- no plug-in names another

# A plug-in that names another plug-in knows it. ACE once chose its prompts by
# ``cfg.benchmark.name == "appworld"``: the next benchmark with code actions would have had the
# wrong prompts and no error. A plug-in asks a seam instead (the run's protocol:
# ``agent.protocols.acts_with_code``; the benchmark's hooks). A name written as data (a table
# keyed by benchmark) is such knowledge too; it stands only where a plug-in records what its
# authors ran on another plug-in, each file below with why. The program's name is the paper's
# method's too: outside a comparison it names the program (a folder, a client's label).
# Importing another plug-in is refused above (``plugin_crossings``).
NAMES_ANOTHER_PLUGIN_BY_NEED = {
    "reme_cli/methods/reme/config.py": "the deletion period the authors' agents ran on each benchmark",
    "reme_cli/methods/reme/official.py": "the file names of the pools the authors released, per benchmark",
    "reme_cli/methods/reme/step_sequence.py": "what the authors' agent on each benchmark kept in what it summarized",
}


def plugin_names(root) -> dict[str, str]:
    """Every name a plug-in goes by -> the plug-in (``floor.package``): what it registers
    under (``bfcl_v3``, ``langmem_prompt``) and its package's own name (``bfcl``)."""
    plugins = plugin_packages(root)
    names = {p.split(".", 1)[1]: p for p in plugins}
    for key, target in registered_targets(root if (root / "pyproject.toml").is_file() else REPO).items():
        owner = plugin_of(target.partition(":")[0], plugins)
        if owner is not None and key.split(" ", 1)[0] in ("reme.benchmarks", "reme.methods"):
            names[key.split(" ", 1)[1]] = owner
    return names


def _compared_strings(node: ast.Compare) -> list[str]:
    """The string constants a comparison holds, inside a literal tuple, list or set too
    (``name in ("a", "b")``)."""
    found = []
    for side in (node.left, *node.comparators):
        items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        found += [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return found


def plugins_naming_another(root) -> list[str]:
    """Each place a plug-in's module names another plug-in: its name compared with (anywhere),
    or its name as a string (outside docstrings, the files above, and the program's name)."""
    from reme_cli import PROGRAM

    names, plugins, hits = plugin_names(root), plugin_packages(root), []
    for path in sorted((root / "reme_cli").rglob("*.py")):
        own = plugin_of(".".join(path.relative_to(root).with_suffix("").parts), plugins)
        if own is None:
            continue
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        docstrings, compared = _docstrings(tree), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                found = [text for text in _compared_strings(node) if names.get(text, own) != own]
                compared |= {id(n) for n in ast.walk(node)}
                hits += [f"{rel}:{node.lineno}: {text!r} ({names[text]})" for text in found]
        if rel in NAMES_ANOTHER_PLUGIN_BY_NEED:
            continue
        hits += [f"{rel}:{node.lineno}: {node.value!r} ({names[node.value]})" for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in compared
                 and id(node) not in docstrings and node.value != PROGRAM and names.get(node.value, own) != own]
    return sorted(set(hits))


def test_no_plugin_names_another():
    assert plugins_naming_another(REPO) == []


def test_the_check_sees_a_plugin_naming_or_importing_another(tmp_path):
    """The rule can fail: a method comparing the benchmark's name to a benchmark's, keeping a
    table keyed by one, a benchmark testing the method's name, and a method importing a
    benchmark are found; a plug-in naming itself, the program's name as data and a name in a
    docstring are not."""
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "reme_cli", copy / "reme_cli", ignore=shutil.ignore_patterns("__pycache__"))
    methods, bench = copy / "reme_cli" / "methods", copy / "reme_cli" / "bench"
    (methods / "amem" / "oops.py").write_text(
        '"""Tried on appworld."""\n'
        "def code(cfg):\n    return cfg.benchmark.name == 'appworld'\n"
        "def calls(cfg):\n    return cfg.benchmark.name not in ('x', 'bfcl_v3')\n"
        "def own(cfg):\n    return cfg.memory.name == 'amem'\n"
        "PERIOD = {'appworld': 1}\n")
    (bench / "bfcl" / "oops.py").write_text("def plain(cfg):\n    return 'reme' != cfg.memory.name\n"
                                           "SHARE = ('share', 'reme')\n")
    (methods / "dc" / "oops.py").write_text("from reme_cli.bench.appworld.agent import AGENTS\n")
    assert plugins_naming_another(copy) == [
        "reme_cli/bench/bfcl/oops.py:2: 'reme' (methods.reme)",
        "reme_cli/methods/amem/oops.py:3: 'appworld' (bench.appworld)",
        "reme_cli/methods/amem/oops.py:5: 'bfcl_v3' (bench.bfcl)",
        "reme_cli/methods/amem/oops.py:8: 'appworld' (bench.appworld)"]
    assert "reme_cli.methods.dc.oops -> reme_cli.bench.appworld.agent" in plugin_crossings(
        module_imports(copy), plugin_packages(copy))


def test_outside_a_plugin_only_the_registry_reaches_it():
    assert [e for e in outside_imports(module_imports(REPO), plugin_packages(REPO))
            if e not in OUTSIDE_IMPORTS_ALLOWED] == []


def test_the_plugin_rule_sees_a_shared_room_importing_a_method_or_a_benchmark(tmp_path):
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "reme_cli", copy / "reme_cli", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "reme_cli" / "commands" / "oops.py").write_text(
        "def f():\n    from reme_cli.methods.amem.notes import Note\n")
    (copy / "reme_cli" / "testing" / "oops.py").write_text("import reme_cli.bench.appworld.venv\n")
    (copy / "reme_cli" / "bench" / "oops.py").write_text("from reme_cli.bench import bfcl\n")
    # A flat module named like a benchmark is a shared room too: ownership is the package.
    (copy / "reme_cli" / "bench" / "bfcl_oops.py").write_text("from reme_cli.bench.bfcl.benchmark import BFCLBenchmark\n")
    (copy / "reme_cli" / "bench" / "bfcl" / "oops.py").write_text("from reme_cli.bench.bfcl.release import RELEASES\n")
    found = outside_imports(module_imports(copy), plugin_packages(copy))
    assert "reme_cli.commands.oops -> reme_cli.methods.amem.notes" in found
    assert "reme_cli.testing.oops -> reme_cli.bench.appworld.venv" in found
    assert "reme_cli.bench.oops -> reme_cli.bench.bfcl" in found  # a shared bench module is not the plug-in
    assert "reme_cli.bench.bfcl_oops -> reme_cli.bench.bfcl.benchmark" in found
    assert not any(e.startswith("reme_cli.bench.bfcl.oops") for e in found)  # inside its own plug-in


# ---------------------------------------------------------------- no shared room names a benchmark

# A benchmark is a plug-in like any other: what is particular to it (its metrics and labels,
# its scripted answers, its commands) lives in its package bench/<name>/ and its configs, and
# the shared rooms (bench/'s own modules among them) iterate what it declares. An identifier, an import or a string (docstrings and comments may
# cite a source) that names one is knowledge in the wrong room.
SHARED_ROOMS = ("core", "llm", "agent", "methods", "run", "report", "track", "commands", "view", "testing")
NAMES_A_BENCHMARK_BY_NEED = {
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
    """The shared rooms' modules: whole packages, the seams' own files (methods/*.py and
    bench/*.py, not the plug-ins below them), and the CLI."""
    base = root / "reme_cli"
    files = [p for room in SHARED_ROOMS if room != "methods" for p in (base / room).rglob("*.py")]
    return sorted([*files, *(base / "methods").glob("*.py"), *(base / "bench").glob("*.py"), base / "cli.py"])


def benchmark_words() -> re.Pattern[str]:
    """What names a benchmark reme declares: its registered name and its package's
    (``bfcl_v3``, ``bfcl``, ``appworld``), in any case and inside a longer word."""
    words = {w for name, target in declared_entry_points()["reme.benchmarks"].items()
             for w in (name, target.split(":")[0].split(".")[2])}
    return re.compile("|".join(sorted(map(re.escape, words), key=len, reverse=True)), re.IGNORECASE)


def benchmark_names_in_shared_rooms(root) -> list[str]:
    hits, words = [], benchmark_words()
    for path in shared_files(root):
        rel = path.relative_to(root).as_posix()
        if rel in NAMES_A_BENCHMARK_BY_NEED:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = _docstrings(tree)
        hits += [f"{rel}:{node.lineno}: {name[:60]!r}" for node in ast.walk(tree)
                 for name in _names(node, docstrings) if words.search(name)]
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
        "from reme_cli.bench.appworld.metrics import SGC\n"
        "def bfcl_only(run):\n"
        "    return run['benchmark'] == 'bfcl_v3'\n")
    # bench/'s own modules are shared rooms too; a benchmark's package is not.
    (copy / "reme_cli" / "bench" / "oops.py").write_text("VENV = 'appworld-venv'\n")
    (copy / "reme_cli" / "bench" / "bfcl" / "oops.py").write_text("NAME = 'bfcl_v3'\n")
    hits = benchmark_names_in_shared_rooms(copy)
    assert hits == ["reme_cli/bench/oops.py:1: 'appworld-venv'",
                    "reme_cli/report/oops.py:2: 'reme_cli.bench.appworld.metrics'",
                    "reme_cli/report/oops.py:3: 'bfcl_only'", "reme_cli/report/oops.py:4: 'bfcl_v3'"]


# ---------------------------------------------------------------- no shared room names a method

# A memory method is a plug-in like any other: its cost formula, its fidelity ledger keys, its
# pool formats, its keys left out of the run hash live in methods/<name>/, and the shared rooms
# ask its hooks (``reme_cli.methods.base.Memory``). A shared room is every module outside a
# method package and outside a benchmark plug-in: the seam's own files, every other package,
# bench/'s shared modules and the CLI. There an identifier (whole, or one of its words), an
# import, or a string (docstrings and comments may cite a method) that names a registered
# method is knowledge in the wrong room: a string equal to a name, or holding ``memory=NAME``
# or a method's module path.
# Each file below may name a method only in the value it assigns to the name given.
NAMES_A_METHOD_BY_NEED = {
    # The method a command runs when none is named: the paper's, named once, beside the seams.
    "reme_cli/core/registry.py": "DEFAULT_METHOD",
    # The program's name, which the paper's method shares.
    "reme_cli/__init__.py": "PROGRAM",
}


def method_names() -> set[str]:
    """The methods reme declares (pyproject.toml), the agent without one aside."""
    return set(declared_entry_points()["reme.methods"]) - {"none"}


def _assigned_to(tree: ast.AST, name: str | None) -> set[int]:
    """The nodes of the value assigned to ``name`` (``DEFAULT_METHOD = "reme"``)."""
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            for n in ast.walk(node)}


def _words(identifier: str) -> set[str]:
    """An identifier whole and its words, lower case: ``_named_reme`` -> reme, ``AMemStats``
    -> amemstats (whole), ``ReMe`` -> reme. The package's own name ``reme_cli`` is none."""
    if identifier == "reme_cli" or identifier.startswith("reme_cli."):
        return set()
    parts = re.split(r"_+|(?<=[a-z0-9])(?=[A-Z])", identifier)
    return {identifier.lower(), *(p.lower() for p in parts if p)}


def _in_text(names: set[str]) -> re.Pattern[str]:
    """``memory=NAME`` (or ``memory.name=NAME``) and a module path ``methods.NAME`` / ``methods/NAME``."""
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    return re.compile(rf"memory(\.name)?=({alternatives})\b|methods[./]({alternatives})\b")


def _names_a_method(node: ast.AST, docstrings: set[int], names: set[str], in_text: re.Pattern[str]) -> list[str]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [m for m in _names(node, docstrings) if m and in_text.search(m)]
    if isinstance(node, ast.Constant):
        text = node.value if isinstance(node.value, str) and id(node) not in docstrings else None
        return [text] if text is not None and (text in names or in_text.search(text)) else []
    return [n for n in _names(node, docstrings) if n and _words(n) & names]


def method_rooms(root) -> list:
    """The modules where no method may be named: the shared rooms, bench/'s shared modules
    (not a benchmark plug-in's), and the package's root."""
    bench, plugins = root / "reme_cli" / "bench", plugin_packages(root)
    shared_bench = [p for p in bench.rglob("*.py")
                    if plugin_of(".".join(p.relative_to(root).with_suffix("").parts), plugins) is None]
    return sorted({*shared_files(root), *shared_bench, root / "reme_cli" / "__init__.py"})


def method_names_in_shared_rooms(root) -> list[str]:
    names, hits = method_names(), []
    in_text = _in_text(names)
    for path in method_rooms(root):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        docstrings, allowed = _docstrings(tree), _assigned_to(tree, NAMES_A_METHOD_BY_NEED.get(rel))
        hits += [f"{rel}:{node.lineno}: {name[:60]!r}" for node in ast.walk(tree) if id(node) not in allowed
                 for name in _names_a_method(node, docstrings, names, in_text)]
    return sorted(set(hits))


def test_no_shared_room_names_a_method():
    from reme_cli.core.registry import DEFAULT_METHOD

    assert DEFAULT_METHOD in method_names()  # the check reads the declared methods
    assert method_names_in_shared_rooms(REPO) == []


def test_the_check_sees_a_planted_method_name(tmp_path):
    """The rule can fail: a string, an identifier, ``memory=NAME``, an import and a module path
    naming a method in a copy of the tree are found, in a shared room, in bench/'s shared
    modules and in the registry beside its default; the same names in a docstring, the
    package's name, the default method and a benchmark plug-in's own module are not."""
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "reme_cli", copy / "reme_cli", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "reme_cli" / "run" / "oops.py").write_text(
        '"""Counts what A-Mem and ReMe call: a docstring may cite them."""\n'
        "import reme_cli.core.io\n"
        "from reme_cli.methods.dc.pool import check\n"
        "def calls(cfg):\n"
        "    if cfg.memory.name == 'amem':\n"
        "        return _named_reme(cfg)\n"
        "    return ['memory=langmem_prompt', 'reme_cli.methods.reasoningbank.method:ReasoningBank']\n"
        "class AceStats:\n"
        "    pass\n")
    (copy / "reme_cli" / "bench" / "oops.py").write_text("NAME = 'ace'\n")
    plugin = copy / Path(registered_targets()["reme.benchmarks bfcl_v3"].partition(":")[0].replace(".", "/")).parent
    (plugin / "oops.py").write_text("SHARE = 'reme'\n")  # inside the benchmark plug-in's package
    registry = copy / "reme_cli" / "core" / "registry.py"  # its default method may be named, no other
    registry.write_text(registry.read_text() + "OTHER = 'dc'\n")
    last = len(registry.read_text().splitlines())
    assert method_names_in_shared_rooms(copy) == [
        "reme_cli/bench/oops.py:1: 'ace'",
        f"reme_cli/core/registry.py:{last}: 'dc'",
        "reme_cli/run/oops.py:3: 'reme_cli.methods.dc.pool'",
        "reme_cli/run/oops.py:5: 'amem'",
        "reme_cli/run/oops.py:6: '_named_reme'",
        "reme_cli/run/oops.py:7: 'memory=langmem_prompt'",
        "reme_cli/run/oops.py:7: 'reme_cli.methods.reasoningbank.method:ReasoningBank'",
        "reme_cli/run/oops.py:8: 'AceStats'",
    ]

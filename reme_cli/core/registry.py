"""Name -> plug-in registries: benchmarks, memory methods, tool protocols, embedders, ...

Every plug-in, reme's own included, is a Python entry point (``pyproject.toml``'s
``[project.entry-points."reme.methods"]`` and the other groups below), as pytest and
lm-evaluation-harness find theirs: reme's built-ins are declared there exactly as an outside
distribution declares its own (docs/extending.md), and this module names none of them. A
name is looked up

- among the entry points of the registry's group, read once per process for every group at
  once (one scan of the installed distributions); after that the registry is frozen: what is
  installed is what there is;
- as a dotted path given directly (``benchmark.name=my_pkg.bench:MyBenchmark``), the way
  Hydra's ``_target_`` names a class.

An unknown name is a ``UserError`` that lists the valid ones. A plug-in is held to its seam
when it is loaded (``core/plugin.py``): one that does not subclass the seam's base class, or
lacks a hook the seam requires, is a ``UserError`` naming what is missing.

A benchmark or method also names its config section apart (``reme.benchmark_sections``,
``reme.method_sections``): validating a config loads only that light dataclass, never the
plug-in's module with the libraries its runs need. Tests add a throwaway plug-in for the
length of a ``with`` block (``Registry.temporarily``); nothing else adds a name.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType, ModuleType
from typing import Any, Generic, TypeVar, cast

from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Plugin, Section, breach, missing_hooks
from reme_cli.core.seams import EmbedderKind, ReplayPolicy, ScriptedAnswers, ToolCalls, Tracking, hooks_of

T = TypeVar("T")

# What a command says when not even reme's own plug-ins are registered: a checkout run without
# being installed, or installed before its plug-ins were entry points (an editable install reads
# pyproject.toml's entry points when it is made, not when reme runs).
NOT_INSTALLED = ("reme's own plug-ins are not registered here (reme is not installed, or was installed before they "
                 "were entry points): run `pip install -e .` in the checkout, or bash scripts/install.sh")


def load_object(target: str) -> Any:
    """``"pkg.module:attr"`` or ``"pkg.module.attr"`` -> the object; ``"pkg.module"`` whose
    last part is a module -> that module (a plug-in contributing a module of hooks)."""
    module, sep, attr = target.partition(":")
    if not sep:
        module, _, attr = target.rpartition(".")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if not hasattr(obj, "__path__"):  # not a package: no submodule to import either
                raise
            obj = importlib.import_module(f"{obj.__name__}.{part}")
    return obj


@functools.cache
def _every_entry_point() -> Any:
    """Every installed entry point: one scan of the distributions' metadata for all the
    registries (a scan reads every installed package's, ~0.1 s)."""
    return metadata.entry_points()


@functools.cache
def _declared_in(group: str) -> Mapping[str, metadata.EntryPoint]:
    """The entry points of ``group`` by name; two distributions registering one name is a
    one-line UserError (which of them would win depends on the order packages were found)."""
    found: dict[str, metadata.EntryPoint] = {}
    for ep in _every_entry_point().select(group=group):
        if ep.name in found and found[ep.name].value != ep.value:
            raise UserError(f"two installed packages register {ep.name!r} under {group}: "
                            f"{_owner(found[ep.name])} ({found[ep.name].value}) and {_owner(ep)} ({ep.value}); "
                            "uninstall one")
        found[ep.name] = ep
    return MappingProxyType(found)


def forget_installed() -> None:
    """Read the installed entry points again on next use, as a new process does. For a
    process forked from a warmed interpreter and given another ``sys.path`` (the tests' fork
    server, tests/forkserver.py), which is a new process to everything but its imports; a
    running command never calls it (its plug-ins are what was installed when it started)."""
    _every_entry_point.cache_clear()
    _declared_in.cache_clear()


def _owner(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.metadata["Name"] if dist is not None else "?"


class Registry(Generic[T]):
    """The plug-ins of one seam, by name.

    ``group``: the entry-point group they are declared under. ``seam``: where the base class
    every plug-in subclasses lives (``"module:Class"``, loaded on first check, so the core
    imports no floor above it); its ``required_hooks`` are checked. ``shape``: for plug-ins
    that subclass nothing (a module, a protocol's class), the protocol whose members each must
    have (``core/seams.py``). ``sections``: the group naming each plug-in's config section
    (benchmarks, methods)."""

    def __init__(self, kind: str, group: str, seam: str | None = None, shape: type | None = None,
                 sections: str | None = None):
        self.kind = kind  # for messages: "benchmark", "memory method", ...
        self.group = group
        self.seam = seam
        self.hooks = hooks_of(shape) if shape is not None else ()
        self.sections = sections
        self._trial: dict[str, T] = {}  # a test's throwaway plug-ins (``temporarily``)
        self._loaded: dict[str, T] = {}
        self._section: dict[str, type[Section]] = {}

    # ------------------------------------------------------------------ what is there

    def _declared(self) -> Mapping[str, metadata.EntryPoint]:
        return _declared_in(self.group)

    def _declared_section(self, name: str) -> metadata.EntryPoint | None:
        return _declared_in(self.sections).get(name) if self.sections else None

    def targets(self) -> dict[str, str]:
        """Every installed plug-in by name, as where it lives (``"module:attribute"``), none
        imported."""
        return {name: ep.value for name, ep in sorted(self._declared().items())}

    def names(self) -> list[str]:
        return sorted({*self._declared(), *self._trial})

    def has(self, name: str) -> bool:
        return name in self._trial or name in self._declared() or ":" in name

    # ------------------------------------------------------------------ loading

    def get(self, name: str) -> T:
        if name in self._trial:
            return self._trial[name]
        if name in self._loaded:
            return self._loaded[name]
        obj = cast(T, self._load(name, self._declared().get(name), self.group))
        self._loaded[name] = self._held_to_seam(name, obj)
        self._same_section(name, obj)
        return obj

    def find(self, name: Any) -> T | None:
        """The plug-in registered as ``name``, or None where it is not registered or cannot be
        loaded here (a run of a plug-in not installed still reports, with what every run has)."""
        if not isinstance(name, str) or not self.has(name):
            return None
        try:
            return self.get(name)
        except UserError:
            return None

    def section(self, name: str) -> type[Section]:
        """The config class of the plug-in ``name`` (``benchmark.*`` / ``memory.*``): the one
        its ``sections`` entry point names, loaded without the plug-in's own module (which
        may import an LLM client, numpy, faiss); else the plug-in's ``config_class``."""
        if name in self._section:
            return self._section[name]
        declared = self._declared_section(name) if name not in self._trial else None
        if declared is None:
            config = getattr(self.get(name), "config_class", None)  # the seam's check refused None
        else:
            config = self._load(name, declared, self.sections or "")
            if not (isinstance(config, type) and issubclass(config, Section)):
                raise UserError(f"{self.kind} {name!r} declares its section {declared.value} under {self.sections}, "
                                "which is not a subclass of reme_cli.core.plugin.Section")
        self._section[name] = config
        return config

    def _load(self, name: str, declared: metadata.EntryPoint | None, group: str) -> Any:
        try:
            if declared is not None:
                return declared.load()
            if ":" in name:
                return load_object(name)
        except (ImportError, AttributeError) as exc:
            raise UserError(f"{self.kind} {name!r} cannot be loaded: {exc}") from None
        if not self.names():
            raise UserError(f"unknown {self.kind} {name!r}: {NOT_INSTALLED}")
        raise UserError(f"unknown {self.kind} {name!r}; choose one of {self.names()} "
                        f"(or a 'module:Class' path, or a package registering under '{group}')")

    def _held_to_seam(self, name: str, obj: T) -> T:
        """``obj`` if it stands for the seam; else a one-line UserError naming what it lacks."""
        problem = None
        if self.seam is not None:
            base = load_object(self.seam)
            problem = breach(obj, base, base.required_hooks)
        elif missing := missing_hooks(obj, self.hooks):
            problem = f"has no {', '.join(missing)}"
        if problem:
            where = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(obj))
            raise UserError(f"{self.kind} {name!r} ({getattr(obj, '__module__', '?')}.{where}) {problem}; "
                            "write it against that seam (docs/extending.md)")
        return obj

    def _same_section(self, name: str, obj: Any) -> None:
        """A plug-in whose declared section is not its ``config_class`` would be validated by
        one class and built from another: refused in one line."""
        declared = self._declared_section(name)
        if declared is not None and self.section(name) is not getattr(obj, "config_class", None):
            raise UserError(f"{self.kind} {name!r} declares its section {declared.value} under {self.sections}, "
                            f"but its config_class is {getattr(obj, 'config_class', None)!r}: make them one class")

    # ------------------------------------------------------------------ tests

    @contextmanager
    def temporarily(self, name: str, obj: T) -> Iterator[T]:
        """A throwaway plug-in for a test, registered as ``name`` inside the ``with`` block
        only. It is held to the seam as an installed one is, refused where ``name`` is taken
        (a test never shadows an installed plug-in), and gone when the block ends, whatever
        happened in it. Only tests call this (``tests/test_architecture.py``): outside them,
        the plug-ins are the installed entry points."""
        if name in self._trial or name in self._declared():
            raise ValueError(f"{self.kind} {name!r} is registered already; give the test's plug-in a name of its own")
        self._trial[name] = self._held_to_seam(name, obj)
        try:
            yield obj
        finally:
            del self._trial[name]
            self._section.pop(name, None)


@dataclass
class CommandGroup:
    """What a plug-in adds to the command line under one name (``COMMANDS``): ``reme NAME SUB``
    for each of ``commands``. A plain function registered instead is ``reme NAME`` itself.

    A command is a function whose parameters are Typer options and arguments and whose
    docstring is its help; it raises ``UserError`` for bad input (the CLI makes that one line
    and exit 2) and prints what a script reads on stdout. The module holding it should be
    light: it is imported whenever ``reme`` starts, so keep heavy imports inside the body."""

    help: str
    commands: dict[str, Callable[..., Any]] = field(default_factory=dict)


# The seams. Benchmarks and methods subclass their seam's base class (its optional hooks defined
# there once; the core reads only what ``Plugin`` declares, and each floor narrows the type:
# ``bench.registry``, ``methods.base.method_class``). The others are structural: a plug-in
# subclasses nothing and has the members of its shape (``core/seams.py``).
BENCHMARKS: Registry[type[Plugin]] = Registry("benchmark", "reme.benchmarks", seam="reme_cli.bench.base:Benchmark",
                                              sections="reme.benchmark_sections")
METHODS: Registry[type[Plugin]] = Registry("memory method", "reme.methods", seam="reme_cli.methods.base:Memory",
                                           sections="reme.method_sections")
# The method a command runs when it needs one and none is named (`reme eval --mode fixed`,
# `reme build-pool`, a suite's pools): the paper's, whose authors' released pools a suite's
# ``official`` names.
DEFAULT_METHOD = "reme"

PROTOCOLS: Registry[type[ToolCalls]] = Registry("tool-call protocol", "reme.protocols", shape=ToolCalls)
EMBEDDERS: Registry[EmbedderKind] = Registry("embedder", "reme.embedders", shape=EmbedderKind)
TRACKERS: Registry[type[Tracking]] = Registry("tracker", "reme.trackers", shape=Tracking)
# A package of config groups (``benchmark/NAME.yaml``, ``memory/NAME.yaml``, ...) on Hydra's
# search path, as ``pkg://PACKAGE`` (core/config.py); named by the plug-in it belongs to.
CONFIGS: Registry[ModuleType] = Registry("config groups", "reme.configs")
# A plug-in's own commands (a ``CommandGroup`` or a function).
COMMANDS: Registry[CommandGroup | Callable[..., Any]] = Registry("command", "reme.commands")
# TEST DOUBLES, never results: a method's scripted summarizer answers and a benchmark's
# ground-truth replay on the test server (reme_cli/bench/replay.py; the server asks every
# script, in name order, so it names none).
SCRIPTED: Registry[ScriptedAnswers] = Registry("scripted answers", "reme.scripted", shape=ScriptedAnswers)
REPLAY_POLICIES: Registry[type[ReplayPolicy]] = Registry("replay policy", "reme.replay_policies", shape=ReplayPolicy)

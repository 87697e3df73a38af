"""Name -> implementation registries: benchmarks, memory methods, tool protocols, embedders.

Seams: BENCHMARKS, METHODS, PROTOCOLS, EMBEDDERS (the run's parts), TRACKERS (where runs
are also logged), SCRIPTED (a method's
answers on the test server), REPLAY_POLICIES (a benchmark's ground truth on it) and
COMMANDS (a plug-in's own ``reme`` commands).

Three ways in, in the order they are looked up:
- built-ins, registered lazily as ``"module:attribute"`` strings so that naming one never
  imports the others (bfcl-eval, sentence-transformers and friends are slow to import);
- outside packages, through Python entry points (group ``reme.benchmarks``,
  ``reme.methods``, ``reme.protocols``, ``reme.embedders``), as pytest and
  lm-evaluation-harness find their plug-ins;
- a dotted path given directly (``benchmark.name=my_pkg.bench:MyBenchmark``), the way
  Hydra's ``_target_`` names a class.
An unknown name is a ``UserError`` that lists the valid ones. A plug-in is held to its seam
when it is loaded (``core/plugin.py``): one that does not subclass the seam's base class, or
lacks a hook the seam requires, is a ``UserError`` naming what is missing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Generic, TypeVar

from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Plugin, breach, missing_hooks

T = TypeVar("T")


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


class Registry(Generic[T]):
    """``seam``: where the base class every plug-in subclasses lives (``"module:Class"``, loaded
    on first check, so the core imports no floor above it); its ``required_hooks`` are checked.
    ``hooks``: for plug-ins that subclass nothing (a module, a protocol's class), the hooks
    each must have."""

    def __init__(self, kind: str, group: str, seam: str | None = None, hooks: tuple[str, ...] = ()):
        self.kind = kind  # for messages: "benchmark", "memory method", ...
        self.group = group  # the entry-point group outside packages register under
        self.seam = seam
        self.hooks = hooks
        self._targets: dict[str, str] = {}
        self._loaded: dict[str, T] = {}

    def add(self, name: str, target: str) -> None:
        """Register a built-in by where it lives; it is imported on first use."""
        self._targets[name] = target

    def register(self, name: str):
        """Decorator form, for code that is imported anyway (tests, notebooks)."""
        def wrap(obj: T) -> T:
            self._loaded[name] = self._held_to_seam(name, obj)
            return obj
        return wrap

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

    def builtins(self) -> dict[str, str]:
        """The built-ins by name, each as where it lives (``"module:attribute"``)."""
        return dict(self._targets)

    def _entry_points(self) -> dict[str, metadata.EntryPoint]:
        return {ep.name: ep for ep in metadata.entry_points(group=self.group)}

    def names(self) -> list[str]:
        return sorted(set(self._targets) | set(self._loaded) | set(self._entry_points()))

    def has(self, name: str) -> bool:
        return name in self._loaded or name in self._targets or ":" in name or name in self._entry_points()

    def get(self, name: str) -> T:
        if name in self._loaded:
            return self._loaded[name]
        try:
            if name in self._targets:
                obj = load_object(self._targets[name])
            elif (ep := self._entry_points().get(name)) is not None:
                obj = ep.load()
            elif ":" in name:
                obj = load_object(name)
            else:
                raise UserError(f"unknown {self.kind} {name!r}; choose one of {self.names()} "
                                f"(or a 'module:Class' path, or a package registering under '{self.group}')")
        except (ImportError, AttributeError) as exc:
            raise UserError(f"{self.kind} {name!r} cannot be loaded: {exc}") from None
        self._loaded[name] = self._held_to_seam(name, obj)
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


# The seams. Built-ins are named by where they live, so core imports none of them.
# Benchmarks and methods subclass their seam's base class (its optional hooks defined there once);
# the core reads only what ``Plugin`` declares, each floor narrows the type (``bench.registry``,
# ``methods.base.method_class``).
BENCHMARKS: Registry[type[Plugin]] = Registry("benchmark", "reme.benchmarks", seam="reme_cli.bench.base:Benchmark")
BENCHMARKS.add("bfcl_v3", "reme_cli.bench.bfcl.benchmark:BFCLBenchmark")
BENCHMARKS.add("appworld", "reme_cli.bench.appworld.benchmark:AppWorldBenchmark")

METHODS: Registry[type[Plugin]] = Registry("memory method", "reme.methods", seam="reme_cli.methods.base:Memory")
METHODS.add("none", "reme_cli.methods.base:NoMemory")
METHODS.add("reme", "reme_cli.methods.reme.method:ReMe")
METHODS.add("amem", "reme_cli.methods.amem.method:AMem")
METHODS.add("langmem", "reme_cli.methods.langmem.method:LangMem")
METHODS.add("langmem_prompt", "reme_cli.methods.langmem.prompt.method:LangMemPrompt")
METHODS.add("ace", "reme_cli.methods.ace.method:Ace")
METHODS.add("dc", "reme_cli.methods.dc.method:DynamicCheatsheet")
METHODS.add("reasoningbank", "reme_cli.methods.reasoningbank.method:ReasoningBank")
# The method a command runs when it needs one and none is named (`reme eval --mode fixed`,
# `reme build-pool`, a suite's pools): the paper's, whose authors' released pools a suite's
# ``official`` names. Named here only, with the built-ins.
DEFAULT_METHOD = "reme"

# The others are structural (agent.protocols.ToolProtocol, llm.embed.Embedder, track.base.Tracker, ...):
# a plug-in subclasses nothing and must have the hooks listed.
PROTOCOLS: Registry[Any] = Registry("tool-call protocol", "reme.protocols",
                                    hooks=("name", "system_prompt", "request_kwargs", "read", "result_messages"))
PROTOCOLS.add("openai", "reme_cli.agent.protocols:OpenAIProtocol")
PROTOCOLS.add("json", "reme_cli.agent.protocols:JSONProtocol")
PROTOCOLS.add("code", "reme_cli.agent.protocols:CodeProtocol")

# A method's scripted summarizer answers for the test server (a TEST DOUBLE, never results):
# a module of the plug-in with ``answer(system, user, body, policy) -> dict | None`` and,
# optionally, ``RETRY_MARKS`` (see reme_cli/testing/scripted_server.py, "Plugged-in answers").
# Named by method; the server asks every one, in name order, so it names none.
SCRIPTED: Registry[Any] = Registry("scripted answers", "reme.scripted", hooks=("answer",))
SCRIPTED.add("ace", "reme_cli.methods.ace.scripted")
SCRIPTED.add("amem", "reme_cli.methods.amem.scripted")
SCRIPTED.add("dc", "reme_cli.methods.dc.scripted")
SCRIPTED.add("langmem", "reme_cli.methods.langmem.scripted")
SCRIPTED.add("reasoningbank", "reme_cli.methods.reasoningbank.scripted")
SCRIPTED.add("reme", "reme_cli.methods.reme.scripted")

# Where runs are also logged (reme_cli/track/; the hooks of track/base.py's Tracker).
TRACKERS: Registry[Any] = Registry("tracker", "reme.trackers", hooks=(
    "where", "start", "children", "log_params", "set_tags", "log_metrics", "log_artifact", "end"))
TRACKERS.add("mlflow", "reme_cli.track.mlflow_tracker:MLflowTracker")
TRACKERS.add("wandb", "reme_cli.track.wandb_tracker:WandbTracker")

# A benchmark's ground-truth replay on the test server (a TEST DOUBLE, never results): a policy
# class named by policy name (``--policy NAME`` and ``NAME+summarizer``); see
# reme_cli/bench/replay.py for what it declares.
REPLAY_POLICIES: Registry[Any] = Registry("replay policy", "reme.replay_policies", hooks=("name", "reply"))
REPLAY_POLICIES.add("bfcl-replay", "reme_cli.bench.bfcl.scripted:BFCLReplayPolicy")
REPLAY_POLICIES.add("appworld-gold", "reme_cli.bench.appworld.scripted:AppWorldGoldPolicy")

EMBEDDERS: Registry[Any] = Registry("embedder", "reme.embedders", hooks=("from_config",))
EMBEDDERS.add("sentence_transformers", "reme_cli.llm.embed:SentenceTransformerEmbedder")
EMBEDDERS.add("openai", "reme_cli.llm.embed:OpenAIEmbedder")

# A plug-in's own commands (a ``CommandGroup`` or a function; entry-point group ``reme.commands``).
COMMANDS: Registry[Any] = Registry("command", "reme.commands")
COMMANDS.add("appworld", "reme_cli.bench.appworld.venv:COMMANDS")
COMMANDS.add("bfcl-diff", "reme_cli.bench.bfcl.release:diff_command")

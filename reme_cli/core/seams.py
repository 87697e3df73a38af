"""The structural seams, as the registries hold them (``core/registry.py``): what a tool-call
protocol, an embedder kind, an experiment tracker, a method's scripted answers and a
benchmark's replay policy must have.

A plug-in of one of these subclasses nothing: it has the members its shape declares, and the
registry checks that it has them when it loads it (``hooks_of``). The shapes say no more than
core can: a floor that types a seam closely extends its shape with its own types
(``agent.protocols.ToolProtocol``, ``track.base.Tracker``), and core imports no floor above it.
Benchmarks and methods are not structural: they subclass their seam's base class
(``core.plugin.Plugin``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class ToolCalls(Protocol):
    """``PROTOCOLS``: how the agent's model is offered tools and how its calls are read back."""

    name: str

    def system_prompt(self, base: Any, tools: Any) -> Any: ...

    def request_kwargs(self, tools: Any) -> Any: ...

    def read(self, result: Any) -> Any: ...

    def result_messages(self, calls: Any, outputs: Any) -> Any: ...


class EmbedderKind(Protocol):
    """``EMBEDDERS``: an embedder class, built from the ``embedding`` settings."""

    def from_config(self, cfg: Mapping[str, Any]) -> Any: ...


class Tracking(Protocol):
    """``TRACKERS``: where runs are also logged (a class built with the ``tracker`` settings)."""

    def where(self) -> str: ...

    def start(self, name: str, run_id: Any, parent: Any, kind: str) -> str: ...

    def children(self, run_id: str, name: str) -> str: ...

    def log_params(self, params: Any) -> None: ...

    def set_tags(self, tags: Any, labels: Any) -> None: ...

    def log_metrics(self, metrics: Any, step: Any = None) -> None: ...

    def log_artifact(self, path: Any, folder: str = "") -> None: ...

    def end(self, status: str) -> None: ...


class ScriptedAnswers(Protocol):
    """``SCRIPTED`` (a TEST DOUBLE): a method's answers to its own summarizer prompts on the
    scripted server, a module with ``answer`` (``bench/replay.py`` says what it returns) and,
    optionally, ``RETRY_MARKS``."""

    def answer(self, system: str, user: str, body: Any = None, policy: Any = None) -> Any: ...


class ReplayPolicy(Protocol):
    """``REPLAY_POLICIES`` (a TEST DOUBLE): a benchmark's ground truth on the scripted server,
    a class whose instances answer a chat request (``bench/replay.py``: its optional
    ``add_arguments`` and ``from_options``)."""

    name: str

    def reply(self, body: Any, headers: Any) -> Any: ...


def hooks_of(shape: type) -> tuple[str, ...]:
    """The members a shape declares (its attributes and methods), in order: what the registry
    checks a plug-in of it has."""
    return tuple(dict.fromkeys(n for n in (*getattr(shape, "__annotations__", {}), *vars(shape))
                               if not n.startswith("_")))

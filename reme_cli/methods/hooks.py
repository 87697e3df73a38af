"""What a memory method answers the shared rooms, beside running: the types of ``Memory``'s
hooks for the dry-run's cost (``run/cost.py``), the fidelity column (``report/fidelity.py``)
and the files it saves (``describe``, ``preflight``).

The shared rooms ask these hooks and name no method; a method's formulas, ledger keys and
file formats live in its own package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reme_cli.methods.state_view import StateChange, StateItem

# ------------------------------------------------------------------------------ cost


@dataclass(frozen=True)
class Guess:
    """An outcome-dependent number a method's cost formula assumes (``Memory.cost_guesses``),
    overridable as ``cost.NAME=VALUE``; ``label`` completes "N ..." in the dry-run's caption."""

    default: float
    label: str


@dataclass(frozen=True)
class CostGuess:
    """What a cost formula may assume: the share of trials that succeed and the method's own
    guesses (its ``cost_guesses``, as given on the command line or by default)."""

    success_rate: float
    own: Mapping[str, float] = field(default_factory=dict)


def expected_attempts(max_attempts: int, success_rate: float) -> float:
    """Attempts a unit makes when each retry follows a failure, at most ``max_attempts``."""
    q = 1.0 - success_rate
    return sum(q ** i for i in range(max_attempts))


# ------------------------------------------------------------------------------ fidelity

AUTHORS_EMBEDDING = "text-embedding-v4"  # FAQ:14, issue #57: DashScope's, 1024-d
# What every built pool's build config departs in (docs/fidelity.md, "Other knobs"), whatever
# the method: its summarizer and its sampling.
SUMMARIZER_KEYS = ("summarizer.name", "summarizer.temperature", "summarizer.max_tokens", "summarizer.thinking",
                   "summarizer.seed")
BUILD_KEYS = ("build.samples", "build.temperature")


@dataclass(frozen=True)
class RunFacts:
    """A run as the fidelity column sees it: its flattened resolved config, its mode, where its
    pool came from (``released``, ``built``, None) and a built pool's flattened build config."""

    params: Mapping[str, Any]
    mode: str
    pool: str | None = None
    pool_params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return str(self.params.get("memory.name"))

    @property
    def paper_model(self) -> str:
        """The paper's model a run's config serves (``model.same_as``: a hosted copy's)."""
        return str(self.params.get("model.same_as") or self.params.get("model.name"))


@dataclass
class Fidelity:
    """Where a run of a method stands against the authors' setup (``Memory.fidelity``).

    ``keys``: ledger keys of the run compared with the authors' values (beside every run's);
    ``notes``: what it departs in that no key says, named before the keys' departures;
    ``pool_keys``: the keys of a built pool's build config compared the same way; ``pool_notes``:
    named after them. A note is a ``core.departure.Departure`` (its text and level); a plain
    string counts as a medium departure."""

    keys: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    pool_keys: tuple[str, ...] = SUMMARIZER_KEYS + BUILD_KEYS
    pool_notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------ saved state


@dataclass(frozen=True)
class SavedState:
    """How a method keeps its state in files (``Memory.saved``), from which ``Memory``
    writes ``describe`` and ``preflight`` once.

    ``method``: what its pool's manifest.json records as ``method``; ``read``: a pool folder
    -> (items, summary, whole text or None); ``change``: a commit-log line (unit, seq,
    events) -> what it changed; ``stream_dirs``: where a dynamic stream saves its state;
    ``starts_empty``: what ``--mode dynamic`` starts from without ``memory.pool`` (None: every
    run needs a pool); ``locate``: where under a folder its state is, when not where a
    manifest naming ``method`` is (``state_view.method_dir``)."""

    method: str
    read: Callable[[Path], tuple[list[StateItem], dict[str, Any], str | None]]
    change: Callable[[str, int, list[dict[str, Any]]], StateChange]
    stream_dirs: tuple[str, ...] = ()
    starts_empty: str | None = None
    locate: Callable[[Path], Path | None] | None = None

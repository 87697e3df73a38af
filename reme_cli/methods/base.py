"""The seam between the runner and a memory method.

A method is a ``Memory`` subclass that supplies only what is its own: load its start
state, retrieve for a task, learn from a finished unit (as *events*: what the unit
would change), apply events, replay logged events, save, and optionally learn from
training trajectories (``reme build-pool``). Everything a method's state needs beyond
that belongs to the seam (``methods/streams.py``): the start state loaded once per run,
one copy per dynamic stream (shared by that stream's workers), the commit log of finished
units and its replay on resume, forgetting a unit that errored, fixed vs dynamic.

Learning never changes the state: ``learn`` proposes events and the seam applies them
when the unit commits, in commit order. So a failed unit leaves nothing behind, and
several workers can share one state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from reme_cli.agent.trajectory import Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.core.departure import Departure
from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Plugin, Section
from reme_cli.core.registry import METHODS
from reme_cli.methods.hooks import CostGuess, Fidelity, Guess, RunFacts, SavedState
from reme_cli.methods.state_view import StateView, describe_folder


@dataclass
class Retrieval:
    guidance: str | None = None  # the exact text appended to the first user message
    ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    # More the method records about it; in fixed mode this is the unit's `method` record.
    details: dict[str, Any] = field(default_factory=dict)
    latency_s: float | None = None  # set by the seam: how long ``retrieve`` took


@dataclass
class Attempt:
    trajectory: Trajectory
    outcome: Outcome


class Episode(Protocol):
    """Run the agent once on the unit's task; ``attempt`` numbers retries (0 first)."""

    async def __call__(self, guidance: str | None, attempt: int) -> Attempt: ...


@dataclass
class Tried:
    """The attempts a method made at a task, and what it records about them (e.g. lessons).

    ``carry``: what ``attempt`` hands its own ``learn`` (live objects; never recorded)."""

    attempts: list[Attempt]
    record: dict[str, Any] = field(default_factory=dict)
    carry: Any = None


@dataclass
class Learned:
    """What a finished unit taught: its record, and the events that change the state.

    ``events`` may hold live objects: they only reach the commit log as ``apply`` returns
    them (JSON-ready)."""

    record: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Applied:
    """What applying a unit's events did: the events as they happened (logged, replayable)
    and fields to add to the unit's record (e.g. what a de-duplication kept)."""

    events: list[dict[str, Any]]
    record: dict[str, Any] = field(default_factory=dict)


@dataclass
class Solved:
    """What a method reports about a unit, beside the attempts the runner saw."""

    retrieval: Retrieval = field(default_factory=Retrieval)
    record: dict[str, Any] = field(default_factory=dict)  # the method's own fields, recorded as `method`


@dataclass
class MethodContext:
    """What a method may use to build itself; nothing here is benchmark-specific."""

    cfg: Any  # the validated Config
    llm: Any  # the executor's LLM client
    summarizer: Any  # reme_cli.methods.summarizer.SummarizerSettings, or None
    run_path: Path  # the run directory: the seam keeps per-stream state under it
    finished_units: set[str]  # units already recorded (for resuming a stream's state)


class Method(Protocol):
    """What the runner drives: one per stream (shared by the stream's workers)."""

    async def solve(self, task: Task, episode: Episode, unit: str) -> Solved: ...

    async def commit(self, unit: str, worker: int = 0) -> dict[str, Any]:
        """Make the unit's changes durable (before its record is written); returns fields
        for the unit's `method` record. ``worker``: which of the stream's workers ran it."""

    def discard(self, unit: str) -> None:
        """Forget the pending changes of a unit that failed."""

    def finish(self) -> None:
        """A worker of the stream is done (the last one writes its final state)."""


MethodFactory = Callable[[tuple[int, int]], Method]  # (seed, run) -> the method for that stream


@dataclass
class BuildContext:
    """What `reme build-pool` hands a method once the training trajectories are sampled.

    A method writes its own resumable intermediate files under ``work`` (the build run
    directory) and fills ``staging``, which replaces the pool directory whole afterwards."""

    cfg: Any  # the validated Config
    summarizer: Any  # SummarizerSettings: the LLM (and its sampling) that learns from trajectories
    embedder: Any  # the run's Embedder
    bench: Any  # the Benchmark (tasks are loaded from it)
    task_ids: list[str]  # the training tasks, in split order
    attempts: dict[str, list[tuple[Trajectory, Outcome]]]  # sampled trajectories per task (finished ones)
    work: Path


@dataclass
class BuildResult:
    report: dict[str, Any]  # merged into build/report.json
    rows: list[tuple[str, str]]  # what the console table shows, beside the sampling rows


@runtime_checkable
class PoolBuilder(Protocol):
    """A method with a pool to build from training trajectories (``reme build-pool memory=NAME``):
    ``isinstance(plugin_class, PoolBuilder)`` says whether the class has both phases."""

    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """The LLM phase: resumable, its results in files under ``ctx.work``."""

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        """Write the pool into the empty ``staging`` dir from ``ctx.work``'s files (no LLM)."""


@runtime_checkable
class Releases(Protocol):
    """Pools a method's authors released, bundled with the plug-in (``Memory.releases``):
    what ``reme pool import NAME|FILE --out DIR`` and a suite's released pools read. A
    bundled pool is named ``prefix + NAME`` (ReMe: ``official:bfcl/qwen3-8b``)."""

    prefix: str

    def name_for(self, benchmark: str, model: str) -> str:
        """The bundled pool of a benchmark and model (``prefix + NAME``); a UserError if none."""

    def source(self, spec: str) -> Path:
        """The file behind a bundled name or a path; a UserError naming what to fix if none."""

    def list(self, console: Any) -> None:
        """Print the bundled pools (``reme pool import --list``)."""

    def import_into(self, source: str, staging: Path, cfg: Any) -> str:
        """Write the native pool of ``source`` into the empty ``staging`` dir (it replaces
        ``--out`` whole afterwards); returns one line saying what was imported."""


class Memory(Plugin):
    """A memory method's own part. Subclass it and override what the method has: every hook
    has its default here (``config_class`` alone is required), and the shared rooms ask the
    hooks instead of naming a method.

    One object is one *state*: the start state (``load``; read-only, shared by every unit
    in fixed mode) or a dynamic stream's copy (``fork``). ``learning`` says which.
    ``guard`` serializes reads of the state with the seam's commits when several workers
    share it: hold it around reads of the state made from a thread or across an await."""

    needs_summarizer: ClassVar[bool] = False
    # What the report shows of the method (reme_cli/report/columns.py): its Table 1 setting
    # ("{mode}" is the run's mode), the config keys its ablation rows read, and the fields of
    # its unit records to plot along a dynamic stream. None: its name, no rows, no series.
    report_columns: ClassVar[dict[str, Any] | None] = None
    # How it keeps its state in files: ``describe`` and ``preflight`` below read it. None: it
    # saves nothing a reader or a run starts from (or it overrides both).
    saved: ClassVar[SavedState | None] = None

    learning: bool = False
    guard: threading.RLock

    # ------------------------------------------------------------------ cost
    # Numbers its cost formula assumes beyond the success rate, by name (``cost.NAME=VALUE``).
    cost_guesses: ClassVar[Mapping[str, Guess]] = {}

    @classmethod
    def max_attempts(cls, cfg: Any) -> int:
        """The trials one evaluation unit may run (each after a failed one): the executor's
        bound in ``reme ablate --dry-run`` (ReMe's dynamic retries)."""
        return 1

    @classmethod
    def expected_summarizer_calls(cls, cfg: Any, guess: CostGuess, build: bool = False) -> float:
        """For ``reme ablate --dry-run``'s cost estimate: the summarizer calls the method is
        expected to make per evaluation unit, or (``build``) per training task of
        ``reme build-pool``, under ``guess`` (a trajectory succeeds with probability
        ``guess.success_rate``)."""
        return 0.0

    @classmethod
    def build_in_order(cls, cfg: Any) -> float:
        """The share of a build's summarizer calls that run one after another across the
        training tasks (a chain: methods that fold them into one memory, 1) rather than at
        ``llm.concurrency`` (0)."""
        return 1.0

    # ------------------------------------------------------------------ fidelity
    @classmethod
    def fidelity(cls, run: RunFacts) -> Fidelity:
        """Where a run of the method stands against the authors' setup (``report/fidelity.py``):
        the ledger keys that matter to it and the departures no key says. By default the
        authors never published the method's settings."""
        return Fidelity(notes=[Departure(f"{run.method}: its settings in the authors' runs were never published",
                                         "high")])

    # ------------------------------------------------------------------ build-pool
    @classmethod
    def adapts_on_training(cls, cfg: Any) -> bool:
        """Whether ``reme build-pool`` runs the method itself over the training tasks (one
        stream in split order, its units through the seam, e.g. ACE's offline adaptation
        with live retries) instead of sampling ``build.samples`` trajectories per task
        without memory for ``learn_from_training``."""
        return False

    @classmethod
    def load_for_training(cls, ctx: MethodContext) -> Memory:
        """The start state of an adaptation over the training tasks (``adapts_on_training``)."""
        return cls.load(ctx)

    @classmethod
    def build_episodes(cls, cfg: Any, success_rate: float) -> tuple[int, float, int]:
        """For the dry-run's cost: per training task, the build's units, the episodes they are
        expected to run (a trajectory succeeds with probability ``success_rate``), and at most."""
        return cfg.build.samples, float(cfg.build.samples), cfg.build.samples

    # ------------------------------------------------------------------ what it holds
    @classmethod
    def describe(cls, where: Path) -> StateView | None:
        """The saved state at ``where`` told for readers (``reme view``; ``reme pool stats|show``):
        its items, summary statistics, its whole text if it is one, and, when ``where`` is a
        dynamic stream's folder (``streams/sN_rM/``, holding the commit log), what each
        committed unit changed (``reme_cli/methods/state_view.py``). ``where`` is a pool (or
        the ``reme build-pool`` directory holding it) or a stream's folder. None: nothing
        of this method's is there (or the method does not say)."""
        s = cls.saved
        return None if s is None else describe_folder(where, s.method, s.stream_dirs, s.change, s.read, s.locate)

    @classmethod
    def query_saved(cls, where: Path, query: str, limit: int, cfg: Any) -> list[tuple[str, float]] | None:
        """What ``query`` retrieves from the saved pool at ``where`` (``reme pool show --query``):
        up to ``limit`` (item id, score) pairs, best first, ids as ``describe`` names them.
        None: the method does not search a saved pool outside a run."""
        return None

    @classmethod
    def releases(cls) -> Releases | None:
        """The pools the method's authors released, bundled with it (``Releases``), for
        ``reme pool import`` and suites' released pools; None: it has none."""
        return None

    @classmethod
    def wrote_pool(cls, manifest: Mapping[str, Any]) -> bool:
        """Whether a pool manifest that names this method (``method``) but no reme format
        (``format: reme-...``) is still one reme wrote, which ``reme build-pool`` may replace:
        for methods whose first manifests named only the method."""
        return False

    # ------------------------------------------------------------------ state
    @classmethod
    def preflight(cls, cfg: Any) -> None:
        """Refuse bad input (a missing or damaged pool) before the run writes anything: with
        ``saved``, ``memory.pool`` is required (unless ``--mode dynamic`` may start empty) and
        ``check_pool`` reads it; first, what it needs installed (``check_installed``)."""
        cls.check_installed()
        if cls.saved is None:
            return
        if cfg.memory.pool:
            cls.check_pool(cfg)
        elif cfg.eval.mode != "dynamic" or cls.saved.starts_empty is None:
            cls.require_pool(cfg)

    @classmethod
    def check_installed(cls) -> None:
        """Refuse in one line when a package the method runs on is missing (an extra)."""

    @classmethod
    def check_pool(cls, cfg: Any) -> None:
        """Refuse ``memory.pool`` in one line when it is not a whole pool of this method."""

    @classmethod
    def require_pool(cls, cfg: Any) -> str:
        """``memory.pool``; a one-line refusal saying how to make one when it is unset."""
        if cfg.memory.pool:
            return cfg.memory.pool
        name = cfg.memory.name
        imports = ", or `reme pool import NAME|FILE --out DIR`" if cls.releases() is not None else ""
        empty = cls.saved.starts_empty if cls.saved is not None else None
        raise UserError(f"--mode {cfg.eval.mode} memory={name} needs memory.pool=DIR (build one with "
                        f"`reme build-pool memory={name}`{imports})"
                        + (f"; --mode dynamic may start from {empty}" if empty else ""))

    @classmethod
    def load(cls, ctx: MethodContext) -> Memory:
        """The start state, loaded once per run."""
        return cls()

    def fork(self, where: Path) -> Memory:
        """A private copy of this state to evolve, keeping any files under ``where``."""
        return type(self)()

    def apply(self, events: list[dict[str, Any]], committed: int, worker: int = 0) -> Applied:
        """Apply a committing unit's events (``committed`` units came before it; ``worker``
        of the stream's workers ran it, for methods whose authors kept per-worker counters)."""
        self.replay(events)
        return Applied(events)

    def replay(self, events: list[dict[str, Any]]) -> None:
        """Bring the state forward by events logged by ``apply`` (resume, restore)."""

    def save(self, where: Path) -> None:
        """Write a dynamic stream's final state under ``where``."""

    # ------------------------------------------------------------------ a unit
    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        return Retrieval()

    async def attempt(self, task: Task, episode: Episode, retrieval: Retrieval) -> Tried:
        """Run the agent: one episode with the retrieved guidance."""
        return Tried([await episode(retrieval.guidance, 0)])

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        """(Dynamic mode) what the unit teaches, without changing the state."""
        return Learned()


@dataclass
class NoMemoryConfig(Section):
    name: str = "none"


class NoMemory(Memory):
    """``memory=none``: the agent runs without experiences."""

    config_class = NoMemoryConfig
    report_columns = {"setting": "No Memory"}

    @classmethod
    def fidelity(cls, run: RunFacts) -> Fidelity:
        return Fidelity()  # nothing of a method to depart in


def method_class(name: str) -> type[Memory]:
    """The ``Memory`` subclass registered as ``memory=name`` (the registry holds every plug-in
    to this seam when it loads it; a bad or unknown name is a one-line UserError)."""
    return cast("type[Memory]", METHODS.get(name))


def find_method(name: Any) -> type[Memory] | None:
    """``method_class``, or None where ``name`` is not registered or cannot be loaded here (a
    run of a plug-in not installed still reports what every run has)."""
    return cast("type[Memory] | None", METHODS.find(name))

"""The seam between the agent and a benchmark: tasks, environments, outcomes.

Everything the agent knows about a benchmark goes through these types, so a new
benchmark plugs in without touching the agent or the runner: a package holding a
``Benchmark`` subclass and its ``BenchmarkConfig`` section, each an entry point (see
``reme_cli.core.registry``), and its ``configs/benchmark/NAME.yaml``. Environments are async:
an environment that lives in another process (``reme_cli.bench.worker``) must never stall
the other episodes.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Protocol

from omegaconf import MISSING

from reme_cli.bench.users import FixedTurns, User, UserModelCfg
from reme_cli.core.plugin import Plugin, Section

if TYPE_CHECKING:  # the client module imports the OpenAI SDK; a benchmark's class is loaded to validate a config
    from reme_cli.llm.client import LLM


@dataclass
class BenchmarkConfig(Section):
    """What every benchmark accepts under ``benchmark.``; a benchmark extends it."""

    name: str = MISSING  # the benchmark plug-in (its option benchmark=NAME, or a "module:Class" path)
    split: str = "test"  # which task list: the benchmark's own names (BFCL: train | test)
    limit: Optional[int] = None  # first N ids of the split
    task_ids: Optional[list[str]] = None  # explicit ids: override split and limit
    max_interactions: int = 30  # model calls per task (paper: 30)
    system_prompt: Optional[str] = None  # the agent's system message; null: the task's own, else the protocol's
    # How the benchmark wants actions and thinking, over the model's own settings when set
    # (AppWorld: code actions, thinking off as in the official runs).
    tool_protocol: Optional[str] = None
    thinking: Optional[bool] = None  # null: the model's own setting (model.thinking)
    # The context (tokens) a vLLM server reme starts serves the benchmark's episodes (its
    # --max-model-len; above Qwen3's native 32,768 with YaRN, as Qwen's model card documents);
    # model.max_model_len wins when set. null: the model's own (its serve_args).
    context: Optional[int] = None
    # The model's reasoning in the history it sees (tool-call protocols; code actions keep
    # only the code): drop | reasoning_content (the authors' BFCL agent) | reasoning.
    history_reasoning: str = "reasoning_content"

    # The workers that share one dynamic stream's memory when ``eval.dynamic_workers`` is unset,
    # i.e. how many tasks at once the paper's scripts ran against one pool on this benchmark,
    # and whether they ran them in batches with a barrier between (``eval.dynamic_batches``).
    dynamic_workers: ClassVar[int] = 1
    dynamic_batches: ClassVar[bool] = False

    def settle(self, cfg: Any) -> None:
        if cfg.eval.dynamic_workers is None:
            cfg.eval.dynamic_workers = self.dynamic_workers
        if cfg.eval.dynamic_batches is None:
            cfg.eval.dynamic_batches = bool(self.dynamic_batches)


@dataclass(frozen=True)
class ToolDialect:
    """How a benchmark writes its tool schemas, where that departs from JSON Schema and
    plain descriptions. Protocols that turn the schemas into a grammar or a compact prompt
    (``json``) read it; protocols that pass the schemas on as they are do not."""

    # The benchmark's own type names -> JSON Schema's (None: the type constrains nothing).
    types: Mapping[str, Optional[str]] = field(default_factory=dict)
    # Descriptions start with prose shared by many tools; the tool's own words follow this.
    description_marker: Optional[str] = None


PLAIN_TOOLS = ToolDialect()


# The summarizer's words for tool-call benchmarks (reme_cli/methods/reme/prompts/families.toml).
DEFAULT_PROMPT_FAMILY = "function_calls"


@dataclass(frozen=True)
class Task:
    """One benchmark task. ``turns`` holds the user message(s) of each turn (what the default
    user, ``FixedTurns``, hands over; a simulated user writes its own: ``Benchmark.user``)."""

    id: str
    turns: list[list[dict[str, str]]]
    query: str  # what memory retrieval keys on (BFCL: the first user message)
    meta: dict[str, Any] = field(default_factory=dict)
    # Carried by the task, not the benchmark, because every memory step (build-pool's too)
    # already receives the task: a code-action benchmark names its own family here.
    prompt_family: str = DEFAULT_PROMPT_FAMILY


@dataclass
class ToolResult:
    """What one action returned to the model; ``call`` is its canonical text."""

    call: str
    output: str
    error: bool = False
    done: bool = False  # the task is over (AppWorld: the agent called complete_task, or a bound ended it)
    # A resource bound this action hit (reme_cli.agent.trajectory.LIMIT_STOPS names them): with
    # done, it ended the episode; without, it was only cut (an output past its cap).
    limit: Optional[str] = None
    detail: Optional[str] = None  # what the episode did to hit it, in words (recorded with the limit)


@dataclass
class Outcome:
    """The official verdict on an episode."""

    success: bool
    reward: float
    details: dict[str, Any] = field(default_factory=dict)


class Env(Protocol):
    """One isolated episode of one task. Never shared between episodes."""

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-style tool schemas (``{"type": "function", "function": {...}}``) offered
        now; asked again at every new user turn, so they may change between turns."""

    async def execute(self, name: str, arguments: Any) -> ToolResult:
        """Run one call the model asked for. Unknown names or bad arguments give an
        error result for the model to read, never an exception and never eval/exec."""

    async def end_step(self) -> None:
        """Mark the end of one model step (the calls of one assistant message)."""

    async def end_turn(self) -> None:
        """Mark the end of one user turn."""

    async def evaluate(self) -> Outcome:
        """Score the episode with the benchmark's official checker."""

    async def close(self) -> None:
        """Release every resource of the episode (idempotent)."""


class Benchmark(Plugin):
    """A benchmark plug-in: subclass it and register the class (``reme_cli.core.registry``).

    Required (``required_hooks``; a plug-in without one is refused when it is loaded):
    ``name``, ``config_class`` (a ``BenchmarkConfig``), ``from_config``, ``task_ids``,
    ``load`` and ``open``. Everything else has its default here, once; override what the
    benchmark has."""

    required_hooks: ClassVar[tuple[str, ...]] = ("name", "config_class", "from_config", "task_ids", "load", "open")

    name: ClassVar[str]
    config_class: ClassVar[type[BenchmarkConfig] | None] = None  # type: ignore[assignment]
    config_base = BenchmarkConfig
    # Model calls per user turn before the episode is cut (None: no per-turn limit).
    max_steps_per_turn: Optional[int] = None
    # Its own system prompt, used when ``benchmark.system_prompt`` is unset (None: the task's
    # own, else the protocol's).
    system_prompt: Optional[str] = None
    tool_dialect: ToolDialect = PLAIN_TOOLS  # how its tool schemas are written
    # The distributions whose versions its runs' manifests record beside reme's own (its
    # official checker, its environment's package): what its results depend on.
    packages: ClassVar[tuple[str, ...]] = ()
    # Where model-written code runs, for the manifest (None: it runs none), and its details.
    sandbox: Optional[str] = None
    sandbox_detail: Optional[dict[str, Any]] = None
    # What it scores beside Avg@k and Pass@k, and what tables call it (``reme_cli.bench.scoring``:
    # reducers and ``Labels``); None: Avg@k and Pass@k, under its name.
    metrics: ClassVar[Optional[tuple[Any, ...]]] = None
    labels: ClassVar[Any] = None

    @classmethod
    def built_pool_notes(cls, build_params: Mapping[str, Any]) -> list[str]:
        """Where a pool built on it (its build config, flattened) departs from the pools the
        authors released in what no key says, for the fidelity column (BFCL: the training
        tasks' wording)."""
        return []

    @classmethod
    @abstractmethod
    def from_config(cls, cfg: Any) -> Benchmark:
        """Build from the validated ``benchmark`` section (an instance of ``config_class``)."""

    @abstractmethod
    def task_ids(self) -> list[str]:
        """The ids selected by the benchmark config (split, limit, explicit ids)."""

    @abstractmethod
    def load(self, task_id: str) -> Task: ...

    @abstractmethod
    async def open(self, task: Task, episode_key: str) -> Env:
        """A fresh environment; ``episode_key`` is unique per episode."""

    def user(self, task: Task, llm: Optional[LLM]) -> User:
        """Who writes the user turns of one episode of ``task`` (``bench/users.py``): by
        default the task's fixed ``turns``. A simulated user writes each from the conversation
        so far; ``llm`` is the handle ``user_model`` asked for (None when it asks for none)."""
        return FixedTurns(task.turns)

    def user_model(self) -> Optional[UserModelCfg]:
        """The LLM its simulated user speaks with (usually a section of its config), served
        as the summarizer is (``run/user_model.py``); None: its user needs none."""
        return None

    def prepare(self) -> None:
        """Check what running episodes needs (AppWorld: its venv, data, sandbox); called by the
        commands that run episodes before they write anything, never by plans."""

    def plan_size(self) -> Optional[tuple[int, Optional[str]]]:
        """(tasks, note or None): the task count for a plan made where the data is not
        (AppWorld: its official split sizes); None: plans count ``task_ids()``."""
        return None

    async def aclose(self) -> None:
        """Stop the benchmark's processes at the end of a run, in the run's event loop."""


class SyncEnv(Protocol):
    """The synchronous form of ``Env``, for environments that run in this process."""

    def tools(self) -> list[dict[str, Any]]: ...
    def execute(self, name: str, arguments: Any) -> ToolResult: ...
    def end_step(self) -> None: ...
    def end_turn(self) -> None: ...
    def evaluate(self) -> Outcome: ...
    def close(self) -> None: ...


class InProcessEnv:
    """An ``Env`` over a ``SyncEnv`` whose every call is quick, pure Python (BFCL's
    backends): called directly on the event loop, since a thread hop per call would cost
    more than the call. Anything slow or crash-prone belongs in a worker process instead
    (``reme_cli.bench.worker``)."""

    def __init__(self, env: SyncEnv):
        self.sync = env

    def tools(self) -> list[dict[str, Any]]:
        return self.sync.tools()

    async def execute(self, name: str, arguments: Any) -> ToolResult:
        return self.sync.execute(name, arguments)

    async def end_step(self) -> None:
        self.sync.end_step()

    async def end_turn(self) -> None:
        self.sync.end_turn()

    async def evaluate(self) -> Outcome:
        return self.sync.evaluate()

    async def close(self) -> None:
        self.sync.close()

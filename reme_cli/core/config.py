"""Configuration: Hydra composes the YAML groups, a typed schema validates the result.

The dataclasses below (and each plug-in's ``config_class``) hold every key, its type and its
default, once; composition (``configs/``) picks group options, and a group file holds only
what its option changes (``tests/core/test_config_defaults.py`` keeps it so). Any mistake
becomes a ``UserError`` with one line that says what to fix.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import json
import shlex
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from reme_cli import PROGRAM
from reme_cli.core.errors import UserError
from reme_cli.core.registry import (BENCHMARKS, CONFIGS, DEFAULT_METHOD, EMBEDDERS, METHODS, NOT_INSTALLED, PROTOCOLS,
                                     TRACKERS, Registry)


@dataclass
class SamplingCfg:
    """What the executor's requests send (and the summarizer's, except temperature and
    max_tokens). null: not sent, so the server's default applies (vLLM >= 0.8: the model's
    generation_config.json; llama-cpp-python: its own). The defaults here send every
    parameter, top_k and min_p off; the Qwen3 model configs send none but the temperature,
    as the authors' agents did (results/authors_setup_evidence.md section 9)."""

    temperature: float = 0.9  # the executor's sampling temperature (paper: 0.9)
    top_p: Optional[float] = 1.0  # nucleus sampling; null: not sent
    top_k: Optional[int] = 0  # 0: off (vLLM, llama.cpp and llama-cpp-python all read 0 so)
    min_p: Optional[float] = 0.0  # null: not sent
    max_tokens: Optional[int] = 4096  # null: no cap (the server's context is the limit)
    # Penalty on tokens among the last 64 (llama.cpp's and llama-cpp-python's repeat_penalty,
    # vLLM's repetition_penalty, sent under the server's name); None: not sent.
    repeat_penalty: Optional[float] = None
    # The seed every executor request sends. null: one per unit and trial, derived from
    # eval.seed_base (reme's default: a server that honours seeds, as vLLM does, would otherwise
    # answer the k runs of a task alike). A number: that seed on every call, as the authors'
    # agents sent seed=0 (the hosted configs); the response cache still keeps each unit's
    # answers apart, so a resume replays them and the k runs are asked k times.
    seed: Optional[int] = None


@dataclass
class PriceCfg:
    """A hosted model's token prices, per million tokens in ``currency``: the dry run's cost
    column, a run's recorded spend and ``llm.budget_usd`` use them. null: not known (the cost
    shows ?). An embedding's (``embedding.price``) has an input price only."""

    input: Optional[float] = None  # per 1M prompt tokens
    output: Optional[float] = None  # per 1M completion tokens of a reply that did not think
    # Per 1M completion tokens of a reply that thought (priced apart by providers that bill
    # thinking mode's output higher); null: as output.
    thinking_output: Optional[float] = None
    # Per 1M prompt tokens the provider served from its context cache (the answer's
    # usage.prompt_tokens_details.cached_tokens); null: as input.
    cached_input: Optional[float] = None
    # The price list's currency (ISO 4217: USD, CNY): the cost column and the spend are in it,
    # unless usd_rate converts them.
    currency: str = "USD"
    # USD for one unit of currency, as you set it (reme ships no exchange rate): costs and
    # spend are then shown in USD, and llm.budget_usd can hold a list in another currency.
    usd_rate: Optional[float] = None
    source: Optional[str] = None  # where the prices were read (a URL)
    date: Optional[str] = None  # when they were read (YYYY-MM-DD)


@dataclass
class ModelCfg:
    name: str = MISSING  # the model config's name (configs/model/NAME.yaml)
    # local: the embedded CPU model; vllm: a vLLM server (reme starts it without llm.base_url);
    # openai: a hosted OpenAI-compatible provider at llm.base_url (reme starts nothing, and
    # asks it nothing before the first request: providers need not list their models).
    kind: str = "vllm"
    # The paper's model config this one serves under another provider (qwen3-8b-dashscope:
    # qwen3-8b): its released pools, its rows of the paper's tables. null: model.name itself.
    same_as: Optional[str] = None
    served_name: Optional[str] = None  # the name its server serves it under (llm.model's default)
    hf_id: Optional[str] = None  # the Hugging Face repository a managed vLLM server loads
    tool_protocol: str = "openai"  # openai | json
    thinking: bool = False  # Qwen3's thinking switch (how it is sent: model.thinking_switch)
    # How the server takes the switch: chat_template_kwargs (vLLM, SGLang:
    # {"chat_template_kwargs": {"enable_thinking": B}}), enable_thinking (DashScope's
    # compatible mode: a top-level field, as the authors' agents sent it in extra_body), or
    # none (a provider that takes neither: no switch is sent).
    thinking_switch: str = "chat_template_kwargs"
    # Sent with the tools of an executor request when set: the authors' BFCL agent sent
    # parallel_tool_calls=true (bfcl_agent.py:258), and DashScope returns one call per reply
    # without it. null: not sent (vLLM returns every call it parses either way).
    parallel_tool_calls: Optional[bool] = None
    # Sent with the tools of an executor request when set (auto | none | required, or a named
    # function as a mapping, which vLLM honours and llama.cpp's server reads as auto). null:
    # none sent, as the authors' agents sent none (bfcl_agent.py:250-259); vLLM and llama.cpp's
    # server then apply auto (docs/fidelity.md).
    tool_choice: Any = None
    # Context length in tokens: the embedded server's, what a hosted provider is budgeted at,
    # and what memory budgets against (a vLLM server's: model.max_model_len, context_length()).
    n_ctx: int = 8192
    # A managed vLLM server's context length (--max-model-len). Above Qwen3's native 32,768
    # tokens reme adds YaRN rope scaling with factor max_model_len / 32768 (Qwen's model card:
    # factor 4 for 131,072), so a GPU run can have a hosted provider's context. null: the
    # benchmark's (benchmark.context), else the serve_args' own --max-model-len.
    max_model_len: Optional[int] = None
    # A cap on tool steps per user turn for models that rarely stop calling tools (the
    # 135M CPU model); the benchmark's own limit applies too.
    max_steps_per_turn: Optional[int] = None
    sampling: SamplingCfg = field(default_factory=SamplingCfg)
    serve_args: list[str] = field(default_factory=list)  # extra arguments of a managed `vllm serve`
    # Parameters in billions: sizes tensor parallelism for a managed vLLM server.
    params_b: Optional[float] = None
    # GPUs per managed vLLM server: auto (the fewest, a power of two, whose memory holds the
    # bf16 weights plus KV cache room) or a number.
    tensor_parallel: Any = "auto"
    price: PriceCfg = field(default_factory=PriceCfg)


def context_length(kind: str, n_ctx: int, max_model_len: Optional[int], wanted: Optional[int]) -> int:
    """The context (tokens) a run's executor gets: a vLLM server's --max-model-len
    (``model.max_model_len``, else the benchmark's ``benchmark.context``, else the serve_args'
    own, which the Qwen3 configs keep at ``model.n_ctx``); the embedded server's and a hosted
    provider's ``model.n_ctx``."""
    if kind == "vllm":
        return max_model_len or wanted or n_ctx
    return n_ctx


# Caches live under $REME_CACHE_DIR when set (resolved when the config is composed).
DEFAULT_CACHE_ROOT = ".reme_cache"
CACHE_ROOT = f"${{oc.env:REME_CACHE_DIR,{DEFAULT_CACHE_ROOT}}}"


@dataclass
class LLMCfg:
    # An OpenAI-compatible server, or a list of replicas of one (least outstanding requests
    # first, with failover). None: reme starts the model's server itself.
    base_url: Any = None
    model: Optional[str] = None  # the model name that server serves (default: model.served_name)
    # Sent as the bearer token: a local server's placeholder (EMPTY, none, dummy, ...). A real
    # key is refused here: it would be written to the run's config.yaml; use llm.api_key_env.
    api_key: str = "EMPTY"
    # The name of the environment variable holding the key (DASHSCOPE_API_KEY for the hosted
    # configs). The key itself is never written: not to config.yaml, the manifest, a log, a
    # cache key or an export.
    api_key_env: Optional[str] = None
    # never: whole answers (a vLLM or llama.cpp server gives the same either way); auto: a
    # request that turns thinking on streams, as the authors' BFCL agent did; always (the
    # hosted configs: DashScope refuses thinking without a stream, and the authors' memory
    # service streamed every call). A streamed answer is assembled, recorded and cached whole:
    # the records are the same whichever is chosen.
    stream: str = "never"
    # A provider's limits (requests, tokens per minute): the executor's and the summarizer's
    # requests of a run are paced together to stay under them. null: no pacing.
    rpm: Optional[int] = None  # requests per minute, all of the run's clients together
    tpm: Optional[int] = None  # tokens (prompt + generated) per minute, all of them together
    # Stop the run (exit 4, resumable) once its spend at model.price reaches this many USD.
    budget_usd: Optional[float] = None
    # Requests in flight at once, across every episode of the run: a number (never more), or
    # null: adaptive (the hosted configs), raised while the answers come back and RPM/TPM have
    # room, halved on a 429, at most 256 (reme_cli/llm/inflight.py).
    concurrency: Optional[int] = 8
    timeout: float = 600.0  # seconds per request
    max_retries: int = 6  # on connection errors, timeouts, 429 and 5xx
    startup_timeout: float = 1800.0  # seconds for a server reme starts to answer (a 32B load)
    # Consecutive requests that cannot reach the server before the run stops (exit 4).
    breaker_threshold: int = 5
    cache: bool = True  # replay identical requests from disk
    # Managed vLLM servers of the model (no base_url), each on its own GPUs: a number, or
    # auto (as many as the visible GPUs hold at model.tensor_parallel).
    replicas: Any = 1
    cache_dir: str = f"{CACHE_ROOT}/llm"  # the response cache


@dataclass
class SummarizerCfg:
    """The memory service's LLM, as the authors ran it (results/authors_setup_evidence.md
    section 3): the agent's own model, and no temperature, max_tokens or thinking switch sent
    (the FAQ's service config sets no temperature; the endpoint's defaults decide)."""

    name: str = "same"  # same: the executor model summarizes
    base_url: Optional[str] = None  # a server you run for it; null: the executor's, or summarizer.serve's
    model: Optional[str] = None  # the model name that server serves
    # None: not sent, the endpoint's default applies. The FAQ's service (65971baf
    # reme/config/service.yaml:177-182) sets none; v0.1.9's default.yaml:139-144 said 0.6.
    temperature: Optional[float] = None
    max_tokens: Optional[int] = None  # None: no cap (the model's context is the limit)
    # None: send no thinking switch; true/false: Qwen3's enable_thinking, as for the executor.
    thinking: Optional[bool] = None
    # The seed of the authors' summarizer's calls (memory.prompts=authors). None: none sent, as
    # the FAQ's service sent none (65971baf reme/core/llm/openai_llm.py:55-62 sends only what its
    # config holds, and service.yaml:177-182 holds none); 42 sends flowllm 0.1.9's (base_llm.py:26).
    seed: Optional[int] = None
    # How the summarizer's calls travel (llm.stream's values); None: as llm.stream. The hosted
    # configs stream every one, as the FAQ's service did (openai_llm.py:59, stream=True).
    stream: Optional[str] = None
    # A model config (configs/model/NAME.yaml) whose vLLM server reme starts for the
    # summarizer, beside the executor's, when summarizer.base_url is unset
    # (summarizer=qwen3-14b / qwen3-32b: Table 4's rows); None: no server of its own.
    serve: Optional[str] = None
    # The command exits 3 (after writing everything) when more than this share of one role's
    # answers were invalid or truncated (judged from 5 answers of the role on).
    max_failed_share: float = 0.2


@dataclass
class EmbeddingCfg:
    """The default is embedding=minilm: all-MiniLM-L6-v2 (384-d), loaded offline."""

    kind: str = "sentence_transformers"  # sentence_transformers | openai
    model: str = "all-MiniLM-L6-v2"  # a sentence-transformers model, or the endpoint's model name
    base_url: Optional[str] = None  # kind=openai: the endpoint (only its host is in the run hash)
    dim: int = 384  # the vectors' size
    # kind=openai: sent as `dimensions` on every request when set (the authors' client sends
    # dimensions=1024 to text-embedding-v4); dim must then equal it.
    dimensions: Optional[int] = None
    # kind=openai: the name of the environment variable holding the API key. The key itself
    # is never written to a config or manifest. None: no key (a local server).
    api_key_env: Optional[str] = None
    # Texts per request (kind=openai; DashScope's text-embedding-v4 takes at most 10) or per
    # forward pass (sentence-transformers). None: 256 / 32.
    batch_size: Optional[int] = None
    # Where sentence-transformers runs: auto (a GPU when torch sees one, else the CPU) | cpu
    # | cuda | cuda:N. Out of the run hash: the vectors agree across devices to float
    # rounding, far below anything retrieval or dedup thresholds can tell apart.
    device: str = "auto"
    cache_dir: str = f"{CACHE_ROOT}/embeddings"  # the vector cache
    # A hosted embedding's price (input only: per 1M tokens embedded, in price.currency).
    price: PriceCfg = field(default_factory=PriceCfg)


@dataclass
class BuildCfg:
    """`reme build-pool`: how the training trajectories are sampled (any method)."""

    samples: int = 8  # trajectories per training task (paper: N=8)
    temperature: float = 0.9  # their sampling temperature (paper: 0.9)


@dataclass
class EnvCfg:
    # Environments open at once (processes or servers for out-of-process benchmarks);
    # None: as many as episodes in flight (llm.concurrency bounds those).
    concurrency: Optional[int] = None


@dataclass
class EvalCfg:
    mode: str = "none"  # none | fixed | dynamic
    # Dynamic mode: each (seed, run) evolves its own pool copy (stream), or the runs of a
    # seed share one pool in order (experiment, as the official scripts do).
    scope: str = "stream"
    runs: int = 4  # k of Avg@k / Pass@k
    seeds: int = 3  # independent repetitions (mean ± std)
    seed_base: int = 0  # added to every seed: each unit's sampling seed and shuffle derive from it
    # Dynamic mode: workers walking each stream at once, sharing its memory. None: the
    # benchmark's own number, what the authors' scripts ran (BFCL 4, AppWorld 8); 1 runs
    # a stream's tasks one after another (the paper's text describes no concurrency).
    dynamic_workers: Optional[int] = None
    # Dynamic mode: true runs each stream's tasks in batches of dynamic_workers consecutive
    # tasks, a batch starting when the one before it has ended (the authors' run_appworld.py);
    # false lets each worker go on at its own pace (run_bfcl.py's task_ids[i::4]). None: the
    # benchmark's own (AppWorld true, BFCL false).
    dynamic_batches: Optional[bool] = None
    # Dynamic mode: the order each stream walks the tasks. file: the split's order, worker i
    # taking tasks i, i+W, ... (the authors' run_bfcl.py); shuffle: a permutation per seed.
    task_order: str = "file"
    # Longest string a unit record stores (a reply, an argument, an output); longer ones are
    # cut in the middle and the record says so. What the environment receives is not cut.
    max_stored_chars: int = 20_000


@dataclass
class TrackerCfg:
    """Where each run is also logged (tracker=mlflow|wandb; reme_cli/track/). Out of the run
    hash: a tracker records a run, it changes nothing the run computes. A tracker that fails
    costs one warning; the run directory stays the record."""

    name: str = "none"  # none | mlflow | wandb, or a plug-in registered under reme.trackers
    project: str = PROGRAM  # the MLflow experiment / W&B project the runs go to
    # MLflow: the tracking URI (tracker=mlflow sets sqlite:///<runs_root>/mlflow.db, a local database).
    uri: Optional[str] = None
    # W&B: offline (written under tracker.dir, uploaded later with `wandb sync`) | online.
    mode: str = "offline"
    dir: Optional[str] = None  # W&B: the folder its run files go to (tracker=wandb sets <runs_root>/.wandb)
    # Set by `reme ablate` and sweeps: the suite's or study's tracker run each run belongs to
    # (MLflow: the parent run's id; W&B: the group).
    parent: Optional[str] = None
    timeout: float = 10.0  # seconds a tracker's server may take to answer (then: one warning, no tracker)


@dataclass
class Config:
    experiment: str = "default"  # the preset's name (experiment=NAME sets it); a folder of runs_root
    out_dir: Optional[str] = None  # the run directory; null: runs_root/<experiment>/<benchmark>-<model>-<mode>-<hash>/
    runs_root: str = "runs"  # where run directories go unless out_dir names one
    model: ModelCfg = field(default_factory=ModelCfg)
    llm: LLMCfg = field(default_factory=LLMCfg)
    summarizer: SummarizerCfg = field(default_factory=SummarizerCfg)
    embedding: EmbeddingCfg = field(default_factory=EmbeddingCfg)
    # Owned by the plug-in named in `name` (chosen in config.yaml's defaults list): the
    # benchmark's and the memory method's own dataclasses hold their keys and defaults and
    # validate them (see `validate`).
    benchmark: Any = field(default_factory=dict)
    memory: Any = field(default_factory=dict)
    build: BuildCfg = field(default_factory=BuildCfg)
    env: EnvCfg = field(default_factory=EnvCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    tracker: TrackerCfg = field(default_factory=TrackerCfg)


PLUGIN_SECTIONS = ("benchmark", "memory")

# How the model's own reasoning goes back to it in the history (benchmark.history_reasoning,
# read by reme_cli.agent.loop): dropped, or kept on its assistant message under this key
# (the authors' BFCL agent: ``reasoning_content``; vLLM's chat-message parser reads ``reasoning``).
HISTORY_REASONING = ("drop", "reasoning_content", "reasoning")

TOOL_CHOICES = ("auto", "none", "required")  # OpenAI's strings (llama.cpp's server takes only these)
_CHOICES = {
    "model.kind": {"local", "vllm", "openai"},
    "model.thinking_switch": {"chat_template_kwargs", "enable_thinking", "none"},
    "llm.stream": {"auto", "always", "never"},
    "eval.mode": {"none", "fixed", "dynamic"},
    "eval.scope": {"stream", "experiment"},
    "eval.task_order": {"file", "shuffle"},
    "tracker.mode": {"offline", "online"},
}

_AT_LEAST = {
    "eval.runs": 1,
    "eval.seeds": 1,
    "eval.seed_base": 0,
    "eval.dynamic_workers": 1,
    "eval.max_stored_chars": 1000,
    "llm.concurrency": 1,
    "llm.max_retries": 0,
    "llm.breaker_threshold": 1,
    "llm.rpm": 1,
    "llm.tpm": 1,
    "llm.budget_usd": 0.0,
    "model.max_model_len": 1,
    "benchmark.context": 1,
    "model.price.input": 0.0,
    "model.price.output": 0.0,
    "model.price.thinking_output": 0.0,
    "model.price.cached_input": 0.0,
    "model.price.usd_rate": 0.0,
    "embedding.price.input": 0.0,
    "embedding.price.usd_rate": 0.0,
    "env.concurrency": 1,
    "build.samples": 1,
    "embedding.dim": 1,
    "embedding.dimensions": 1,
    "embedding.batch_size": 1,
    "model.sampling.max_tokens": 1,
    "model.sampling.top_k": 0,
    "model.sampling.top_p": 0.0,
    "model.sampling.min_p": 0.0,
    "model.sampling.repeat_penalty": 0.0,
    "model.max_steps_per_turn": 1,
    "summarizer.max_tokens": 1,
    "summarizer.temperature": 0.0,
    "summarizer.max_failed_share": 0.0,
    "tracker.timeout": 0.1,
}
_AT_MOST = {"summarizer.max_failed_share": 1.0, "summarizer.temperature": 2.0, "model.sampling.top_p": 1.0,
            "model.sampling.min_p": 1.0,
            # Far past any experiment (the paper: 4 runs x 3 seeds, 8 samples); a typo's extra
            # zeros would otherwise plan billions of units before anything is said.
            "eval.runs": 1000, "eval.seeds": 1000, "build.samples": 1000}

# Keys that change how fast a run goes (or how much of it is stored), not what it computes:
# excluded from the run hash, so a resume with more concurrency continues the same run.
_EXECUTION_KEYS = ("out_dir", "runs_root", "llm.concurrency", "llm.timeout", "llm.max_retries",
                   "eval.max_stored_chars", "llm.breaker_threshold", "llm.startup_timeout", "env.concurrency",
                   "llm.cache", "llm.cache_dir", "llm.api_key", "llm.base_url", "summarizer.max_failed_share",
                   # Where the summarizer is served, as llm.base_url: its name, model and
                   # summarizer.serve say what it is.
                   "summarizer.base_url",
                   "embedding.device", "embedding.batch_size", "embedding.api_key_env",
                   # How requests travel and are paid for, not what they ask.
                   "llm.api_key_env", "llm.stream", "summarizer.stream", "llm.rpm", "llm.tpm", "llm.budget_usd",
                   "model.price", "embedding.price",
                   # Where a managed server runs, not what it computes.
                   "model.params_b", "model.tensor_parallel", "llm.replicas",
                   # Where the run is also logged (an experiment tracker).
                   "tracker")

# What is in the hash, and what is not, for a key that names a place (a folder, a file, a
# server): a key that says only WHERE something lives is out of it, or the same command in
# another shell ($REME_CACHE_DIR set), folder or machine would hash otherwise and silently
# start over instead of resuming. out_dir, runs_root, llm.cache_dir, llm.base_url,
# summarizer.base_url and tracker.* were left out from the start (_EXECUTION_KEYS); the keys
# below left it later, so each is hashed at one fixed value whatever it holds: the value runs
# had by default while it was hashed, so their hashes stay as they were. A plug-in's section
# declares its own (``Plugin.where_keys``: AppWorld's data_dir and venv). A key that names
# WHAT a run uses stays in by its value: memory.pool (which pool the run starts from: its
# path is the only name of that pool the config holds, so a pool moved elsewhere is another
# run's), embedding.base_url's host (which provider computes the vectors; the port and path
# only say how to reach it). tests/core/test_config.py walks every path-like key of the schema and
# the plug-ins and holds each to one side.
_WHERE_KEYS = {"embedding.cache_dir": f"{DEFAULT_CACHE_ROOT}/embeddings"}


def config_dir() -> Path:
    """The configs shipped in the wheel, or the repo's ``configs/`` in a checkout."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "configs", package.parent / "configs"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise UserError("cannot find reme's configs/ directory: reinstall reme")


def experiment_memory(name: str) -> str | None:
    """The memory method an experiment preset selects (its defaults list's
    ``override /memory: NAME``, as ``experiment=paper_text`` selects the method whose paper's
    words it holds); None when it selects none or there is no such preset."""
    import yaml

    try:
        data = yaml.safe_load((config_dir() / "experiment" / f"{name}.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    for entry in data.get("defaults") or [] if isinstance(data, dict) else []:
        if isinstance(entry, dict) and "override /memory" in entry:
            return str(entry["override /memory"])
    return None


def plugin_config_dirs() -> list[str]:
    """Config groups of installed plug-ins, reme's own included: each ``reme.configs`` entry
    point names a package holding ``benchmark/NAME.yaml``, ``memory/NAME.yaml``, ...
    (Hydra ``pkg://``), in name order."""
    return [f"pkg://{package}" for package in CONFIGS.targets().values()]


def group_files(group: str) -> dict[str, Any]:
    """Every option of a config group, by name -> its file (a ``Traversable``), as Hydra's
    search path finds them: reme's own ``configs/GROUP/`` first, then each plug-in's."""
    import importlib.resources

    folders: list[Any] = [config_dir() / group]
    for source in plugin_config_dirs():
        try:
            folders.append(importlib.resources.files(source.removeprefix("pkg://")) / group)
        except ModuleNotFoundError:
            continue
    found: dict[str, Any] = {}
    for folder in folders:
        if folder.is_dir():
            for f in sorted(folder.iterdir(), key=lambda f: f.name):
                if f.name.endswith(".yaml"):
                    found.setdefault(f.name[:-5], f)
    return found


def compose(overrides: list[str], config_name: str = "config") -> Config:
    """Compose ``configs/`` with Hydra overrides and validate against the schema."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    _store_schema()
    GlobalHydra.instance().clear()
    for o in overrides:
        _refuse_outside_the_schema(o)
    given = list(overrides)
    overrides = [_plugin_key_override(o) for o in overrides]
    plugin_dirs = plugin_config_dirs()
    if not plugin_dirs:  # reme's own benchmarks and methods bring their config groups
        raise UserError(NOT_INSTALLED)
    if not any(o.startswith("hydra.searchpath") for o in overrides):
        overrides.append(f"hydra.searchpath=[{','.join(plugin_dirs)}]")
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            raw = hydra_compose(config_name=config_name, overrides=overrides)
    except Exception as exc:  # Hydra raises many types; all mean "fix your overrides"
        raise UserError(quoting_hint(given) or f"bad override or config: {_first_line(exc)}") from None
    finally:
        GlobalHydra.instance().clear()
    return validate(raw)


# What Hydra's override grammar reads in an unquoted value besides letters, digits and spaces
# (its lexer's UNQUOTED_CHAR, ':' and ','); anything else needs the value quoted.
_UNQUOTED = frozenset("_/-\\+.$%*@?|:,")


def quoting_hint(overrides: list[str]) -> str | None:
    """For the first override whose value Hydra's lexer cannot read unquoted (a path with
    non-ASCII letters, a quote, #, &, ...), one line saying how to quote it; None if none."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for override in overrides:
        key, eq, value = override.partition("=")
        odd = _odd(value)
        if not eq or odd is None or value[:1] in "'\"[{" or "(" in value:  # quoted, a list, a function: as is
            continue
        try:
            parser.parse_overrides([override])
        except Exception:  # noqa: BLE001 (Hydra's grammar errors have no common type worth naming)
            # Each comma-separated value on its own (a sweep's values stay a sweep).
            inner = ",".join((f'"{v}"' if '"' not in v else f"'{v}'") if _odd(v) else v for v in value.split(","))
            what = "non-ASCII letters" if not odd.isascii() else f"the character {odd!r}"
            return (f"{override}: Hydra cannot read a value with {what} unquoted; quote it, as the shell "
                    f"passes it: {shlex.quote(f'{key}={inner}')}")
    return None


def _odd(value: str) -> str | None:
    """The first character of ``value`` that Hydra's grammar reads only quoted."""
    return next((c for c in value if not (c.isascii() and (c.isalnum() or c.isspace())) and c not in _UNQUOTED),
                None)


@functools.cache
def _store_schema() -> None:
    """The schema as the base of config.yaml's defaults list: every key it declares can be
    overridden even where a group file does not mention it (memory=none, ...). Stored once
    per process: Hydra's config store keeps it, and storing converts the dataclass again."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="reme_schema", node=Config)


@functools.cache
def _structured(schema: type) -> DictConfig:
    """``OmegaConf.structured(schema)``, built once per class: a merge copies its first
    config, never changes it, and copying is ~6x cheaper than converting the dataclass."""
    return OmegaConf.structured(schema)


def _refuse_outside_the_schema(override: str) -> None:
    """What Hydra would accept but reme's schema does not hold: a key added with ``+``
    (``+foo.bar=1`` lands in the config unread; a group, ``+experiment=x``, is fine) and
    Hydra's own settings (reme makes no Hydra run directory; ``hydra.searchpath`` finds
    plug-ins' configs)."""
    key = override.lstrip("+~").split("=", 1)[0]
    if override.startswith("+") and ("." in key or not group_files(key)):
        raise UserError(f"{override}: reme's config has no key {key} to add (every key is in the schema; see "
                        "`reme eval --help`): set an existing key without the +")
    if key.startswith("hydra.") and not key.startswith("hydra.searchpath"):
        raise UserError(f"{override}: reme does not use Hydra's {key}; runs go to out_dir (or runs_root)")


def _plugin_key_override(override: str) -> str:
    """``benchmark.K=V`` / ``memory.K=V`` as ``++benchmark.K=V``: a plug-in section's keys
    and defaults live in its dataclass, not in its group file, so Hydra must add a key the
    file does not write. The dataclass still refuses an unknown one (``_plugin_section``)."""
    key = override.split("=", 1)[0]
    if "=" in override and key.split(".", 1)[0] in PLUGIN_SECTIONS and "." in key:
        return "++" + override
    return override


def validate(raw: DictConfig | dict) -> Config:
    raw = raw if isinstance(raw, DictConfig) else OmegaConf.create(raw)
    try:
        merged = OmegaConf.merge(_structured(Config), raw)
        OmegaConf.resolve(merged)
        cfg: Config = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except OmegaConfBaseException as exc:
        raise UserError(f"invalid config: {_omegaconf_message(exc)}") from None
    # The named plug-ins validate their own sections as strictly as the schema above.
    cfg.benchmark = _plugin_section("benchmark", cfg.benchmark, BENCHMARKS)
    cfg.memory = _plugin_section("memory", cfg.memory, METHODS)
    _check_finite(cfg)
    _check_task_ids(cfg.benchmark.task_ids)
    # Keys left unset (None) whose value depends on the benchmark get it here, so the run's
    # config.yaml and hash hold the value the run used: the benchmark's, then the method's.
    cfg.benchmark.settle(cfg)
    cfg.memory.settle(cfg)
    check_choices("", cfg, _CHOICES, _AT_LEAST, _AT_MOST)
    for key, registry in (("model.tool_protocol", PROTOCOLS), ("embedding.kind", EMBEDDERS),
                          ("benchmark.tool_protocol", PROTOCOLS)):
        if _get(cfg, key) is not None and not registry.has(_get(cfg, key)):
            raise UserError(f"{key}={_get(cfg, key)!r} is not allowed; choose one of {registry.names()}")
    if cfg.tracker.name != "none" and not TRACKERS.has(cfg.tracker.name):
        raise UserError(f"tracker.name={cfg.tracker.name!r} is not allowed; choose none or one of {TRACKERS.names()}")
    if not 0.0 <= cfg.model.sampling.temperature <= 2.0:
        raise UserError("model.sampling.temperature must be between 0 and 2")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", str(cfg.embedding.device)):
        raise UserError(f"embedding.device={cfg.embedding.device!r} is not allowed; choose auto, cpu, cuda or cuda:N")
    _check_embedding(cfg.embedding)
    _check_llm_key(cfg.llm)
    if cfg.summarizer.stream is not None and cfg.summarizer.stream not in _CHOICES["llm.stream"]:
        raise UserError(f"summarizer.stream={cfg.summarizer.stream!r} is not allowed; choose null (as llm.stream) "
                        f"or one of {sorted(_CHOICES['llm.stream'])}")
    choice = cfg.model.tool_choice
    if not (choice is None or choice in TOOL_CHOICES or isinstance(choice, dict)):
        raise UserError(f"model.tool_choice={choice!r} is not allowed; choose null (none sent), "
                        f"{', '.join(TOOL_CHOICES)} or a named function ({{type: function, function: {{name: N}}}})")
    history = cfg.benchmark.history_reasoning
    if history not in HISTORY_REASONING:
        raise UserError(f"benchmark.history_reasoning={history!r} is not allowed; choose one of {list(HISTORY_REASONING)}")
    urls = [cfg.llm.base_url] if isinstance(cfg.llm.base_url, str) else cfg.llm.base_url or []
    if not isinstance(urls, list) or not all(isinstance(u, str) and u.startswith(("http://", "https://"))
                                             for u in urls):
        raise UserError(f"llm.base_url={cfg.llm.base_url!r} must start with http:// or https:// "
                        "(one URL, or a list of them)")
    if cfg.model.kind == "openai" and not urls:
        raise UserError(f"model={cfg.model.name} is a hosted provider (model.kind=openai): set llm.base_url=URL")
    for key in ("model.tensor_parallel", "llm.replicas"):
        value = _get(cfg, key)
        if value != "auto" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise UserError(f"{key}={value!r}: give auto or a whole number >= 1")
    serve = cfg.summarizer.serve
    if serve is not None and serve not in (known := group_files("model")):
        raise UserError(f"summarizer.serve={serve!r} names no model config; choose one of {sorted(known)}")
    if cfg.benchmark.task_ids == []:
        raise UserError("benchmark.task_ids=[] selects no task: name at least one, or drop it to use the split")
    if cfg.eval.mode != "none" and cfg.memory.name == "none":
        raise UserError(f"--mode {cfg.eval.mode} needs a memory: add memory={DEFAULT_METHOD}")
    return cfg


# Bearer tokens that are no secret: what local servers are sent (vLLM's docs use EMPTY,
# llama.cpp's sk-no-key-required).
LOCAL_KEY_PLACEHOLDERS = {"", "EMPTY", "empty", "none", "None", "dummy", "x", "sk-no-key-required", "no-key"}
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_llm_key(llm: LLMCfg) -> None:
    """A key never reaches a file: a literal one is refused (config.yaml would hold it)."""
    if llm.api_key not in LOCAL_KEY_PLACEHOLDERS:
        raise UserError("llm.api_key takes no real key (the run's config.yaml would hold it): export it and name "
                        "its variable with llm.api_key_env=NAME (e.g. DASHSCOPE_API_KEY)")
    if llm.api_key_env is not None and not ENV_NAME.fullmatch(llm.api_key_env):
        raise UserError("llm.api_key_env takes the name of an environment variable (e.g. DASHSCOPE_API_KEY), "
                        "not the key itself")


def _check_embedding(e: EmbeddingCfg) -> None:
    if e.kind == "sentence_transformers":
        for key in ("dimensions", "api_key_env"):
            if getattr(e, key) is not None:
                raise UserError(f"embedding.{key} is for an endpoint (embedding.kind=openai), not a local "
                                f"sentence-transformers model: drop it")
    if e.dimensions is not None and e.dimensions != e.dim:
        raise UserError(f"embedding.dimensions={e.dimensions} asks the endpoint for {e.dimensions}-d vectors but "
                        f"embedding.dim={e.dim}: set both to the same number")
    if e.api_key_env is not None and not ENV_NAME.fullmatch(e.api_key_env):
        # A key pasted here would be written to the run's config.yaml.
        raise UserError("embedding.api_key_env takes the name of an environment variable (e.g. DASHSCOPE_API_KEY), "
                        "not the key itself")
    if e.base_url is not None and not e.base_url.startswith(("http://", "https://")):
        raise UserError(f"embedding.base_url={e.base_url!r} must start with http:// or https://")


def _check_finite(node: Any, prefix: str = "") -> None:
    """No NaN or infinity anywhere: a timeout of ``inf`` or ``nan`` passes every ``>=``
    check and then makes every unit fail."""
    for f in fields(node):
        value, key = getattr(node, f.name), f"{prefix}{f.name}"
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{key}={value}: give a finite number")
        if is_dataclass(value):
            _check_finite(value, key + ".")


def _check_task_ids(task_ids: Any) -> None:
    """Task ids name tasks, never paths, and each at most once (two units with one id would
    run side by side and record under one key)."""
    if task_ids is None:
        return
    seen: set[str] = set()
    for task_id in task_ids:
        text = str(task_id)
        if not text or text in (".", "..") or any(c in text for c in "/\\\0") or text.startswith("."):
            raise UserError(f"benchmark.task_ids: {text!r} is not a task id (no paths: name a task of the split)")
        if text in seen:
            raise UserError(f"benchmark.task_ids names {text} twice; name each task once (eval.runs repeats them)")
        seen.add(text)


def _plugin_section(section: str, value: Any, registry: Registry) -> Any:
    """``benchmark`` / ``memory``: validated by the dataclass of the plug-in it names (its
    section alone is loaded, not the plug-in: core.registry.Registry.section)."""
    data = value if isinstance(value, dict) else {}
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise UserError(f"{section}.name is missing: choose one of {registry.names()}")
    if not registry.has(name):
        raise UserError(f"{section}.name={name!r} is not allowed; choose one of {registry.names()}")
    schema = registry.section(name)
    try:
        node = OmegaConf.merge(_structured(schema), data)
        section_cfg = OmegaConf.to_object(node)
    except OmegaConfBaseException as exc:
        raise UserError(f"invalid config: {_omegaconf_message(exc, prefix=section)}") from None
    section_cfg.check()  # the plug-in's own rules (choices, bounds): UserError with one line
    return section_cfg


def to_dict(cfg: Config) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)  # type: ignore[return-value]


# Keys added after runs were made, with the value that behaves as before they existed: at
# that value they stay out of the hash, so an earlier run directory still resumes. A plug-in's
# section declares its own (``Plugin.hash_neutral``).
_NEUTRAL_WHEN = {"eval.dynamic_workers": 1, "eval.dynamic_batches": False, "embedding.dimensions": None, "model.sampling.repeat_penalty": None, "summarizer.serve": None,
                 # The hosted provider's keys (issue 46): at these values a run is what it was.
                 "model.sampling.seed": None, "model.thinking_switch": "chat_template_kwargs", "model.same_as": None,
                 "model.max_model_len": None, "model.parallel_tool_calls": None,
                 # Issue 57. Runs before it sent tool_choice "auto", what every server applies to a
                 # request with tools that names none, and the summarizer's seed 42, which fixes
                 # sampling only for a prompt sent twice (docs/fidelity.md: low departures): at
                 # none sent they are the same runs, and resume.
                 "model.tool_choice": None, "summarizer.seed": None, "benchmark.context": None}
# Keys that change nothing outside one mode: out of the hash in the others.
_ONLY_IN_MODE = {"eval.dynamic_workers": "dynamic", "eval.dynamic_batches": "dynamic", "eval.task_order": "dynamic"}


def hashed_part(data: dict[str, Any]) -> dict[str, Any]:
    """The part of a resolved config (as ``to_dict`` gives it, or a run's config.yaml) that
    determines a run's results: what ``config_hash`` hashes."""
    data = json.loads(json.dumps(data))
    mode = (data.get("eval") or {}).get("mode")
    for dotted, fixed in {**_WHERE_KEYS, **_plugins_hooked(data, "where_keys")}.items():
        parent, _, leaf = dotted.rpartition(".")
        node = _dig(data, parent) if parent else data
        if isinstance(node, dict) and leaf in node:
            node[leaf] = fixed
    neutral = {**_NEUTRAL_WHEN, **_plugins_hooked(data, "hash_neutral")}
    for dotted in (*_EXECUTION_KEYS, *(k for k, v in neutral.items() if _dig(data, k) == v),
                   *(k for k, only in _ONLY_IN_MODE.items() if mode != only)):
        parent, _, leaf = dotted.rpartition(".")
        node = data
        for part in filter(None, parent.split(".")):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    # Which provider computes the vectors is the host; a port or path only says how to reach it.
    embedding = data.get("embedding") or {}
    if embedding.get("base_url"):
        embedding["base_url"] = urlsplit(embedding["base_url"]).hostname
    return data


def _plugins_hooked(data: dict[str, Any], hook: str) -> dict[str, Any]:
    """The ``hash_neutral`` or ``where_keys`` keys of the benchmark and method a config names,
    dotted (none for a plug-in that cannot be loaded here: its runs hash as they always did)."""
    out: dict[str, Any] = {}
    for section, registry in (("benchmark", BENCHMARKS), ("memory", METHODS)):
        plugin = registry.find((data.get(section) or {}).get("name"))
        if plugin is not None:
            out |= {f"{section}.{key}": value for key, value in getattr(plugin, hook).items()}
    return out


def config_hash(cfg: Config) -> str:
    """A short hash of everything that determines a run's results."""
    blob = json.dumps(hashed_part(to_dict(cfg)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def first_difference(stored: Any, current: Any, prefix: str = "") -> tuple[str, Any, Any] | None:
    """The first key (dotted) both configs hold with different values, or None: what a
    hand edit of a run's config.yaml changed. Keys only one side has (added or retired
    since the run was made) are not differences."""
    if isinstance(stored, dict) and isinstance(current, dict):
        for key in stored:
            if key in current:
                found = first_difference(stored[key], current[key], f"{prefix}{key}.")
                if found:
                    return found
        return None
    return None if stored == current else (prefix.rstrip("."), stored, current)


def _dig(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


_MISSING = object()


def _get(cfg: Any, dotted: str, default: Any = _MISSING) -> Any:
    """The value at ``dotted``; ``default`` where a plug-in section has no such key."""
    for part in dotted.split("."):
        if default is not _MISSING and not hasattr(cfg, part):
            return default
        cfg = getattr(cfg, part)
    return cfg


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc.__cause__, OmegaConfBaseException):  # the schema's verdict
        return _omegaconf_message(exc.__cause__)
    cause = str(exc.__cause__ or "")
    unknown = re.match(r"Could not override '([^']+)'", text)
    if unknown and "not in struct" in cause:
        return f"unknown key '{unknown.group(1)}' (check the spelling, or see `reme eval --help`)"
    missing = re.search(r"Could not find '([^/']+)/([^']+)'", text)
    if missing:
        group = missing.group(1)
        options = sorted(group_files(group))
        return f"{group}={missing.group(2)} does not exist; choose one of {options}"
    # Otherwise the useful line is the last one Hydra chained (e.g. a parse error).
    if cause.strip():
        text = cause.strip()
    return text.splitlines()[0]


def _omegaconf_message(exc: OmegaConfBaseException, prefix: str = "") -> str:
    key = getattr(exc, "full_key", None)
    if key and prefix:
        key = f"{prefix}.{key}"
    msg = str(exc).splitlines()[0]
    if msg.startswith("Key") and " not in " in msg and key:
        return f"unknown key '{key}' (check the spelling, or see `reme eval --help`)"
    return f"{key}: {msg}" if key and key not in msg else msg


def check_choices(section: str, cfg: Any, choices: dict[str, set[str]],
                  at_least: dict[str, float] = {}, at_most: dict[str, float] = {}) -> None:  # noqa: B006 - read only
    """One-line errors for a value outside its choices or bounds (reme's own keys, and a
    plug-in's ``check()`` for its section)."""
    prefix = f"{section}." if section else ""
    for key, allowed in choices.items():
        value = _get(cfg, key)
        if value not in allowed:
            raise UserError(f"{prefix}{key}={value!r} is not allowed; choose one of {sorted(allowed)}")
    for key, low in at_least.items():
        value = _get(cfg, key)
        if value is not None and value < low:
            raise UserError(f"{prefix}{key}={value} must be >= {low}")
    for key, high in at_most.items():
        value = _get(cfg, key)
        if value is not None and value > high:
            raise UserError(f"{prefix}{key}={value} must be <= {high}")

"""Configuration: Hydra composes the YAML groups, a typed schema validates the result.

Composition (``configs/``) decides *which* values; the dataclasses below decide *what is
allowed*. Any mistake becomes a ``UserError`` with one line that says what to fix.
"""

from __future__ import annotations

import hashlib
import re
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from reme_cli.errors import UserError


@dataclass
class SamplingCfg:
    temperature: float = 0.9
    top_p: float = 1.0
    max_tokens: int = 4096


@dataclass
class ModelCfg:
    name: str = MISSING
    kind: str = "vllm"  # local | vllm | openai
    served_name: Optional[str] = None
    hf_id: Optional[str] = None
    tool_protocol: str = "openai"  # openai | json
    thinking: bool = False
    n_ctx: int = 8192
    sampling: SamplingCfg = field(default_factory=SamplingCfg)
    serve_args: list[str] = field(default_factory=list)


@dataclass
class LLMCfg:
    base_url: Optional[str] = None
    model: Optional[str] = None
    api_key: str = "EMPTY"
    concurrency: int = 8
    timeout: float = 600.0
    max_retries: int = 6
    # Consecutive requests that cannot reach the server before the run stops (exit 4).
    breaker_threshold: int = 5
    cache: bool = True
    cache_dir: str = ".reme_cache/llm"


@dataclass
class SummarizerCfg:
    name: str = "same"
    base_url: Optional[str] = None
    model: Optional[str] = None
    temperature: float = 0.0
    max_tokens: int = 2048


@dataclass
class EmbeddingCfg:
    kind: str = "sentence_transformers"  # sentence_transformers | openai
    model: str = "all-MiniLM-L6-v2"
    base_url: Optional[str] = None
    dim: int = 384
    cache_dir: str = ".reme_cache/embeddings"


@dataclass
class BenchmarkCfg:
    name: str = "bfcl_v3"
    split: str = "test"
    limit: Optional[int] = None
    task_ids: Optional[list[str]] = None
    max_interactions: int = 30
    max_steps_per_turn: int = 20
    system_prompt: Optional[str] = None


@dataclass
class ReflectionCfg:
    enabled: bool = True
    max_retries: int = 3


@dataclass
class DeletionCfg:
    enabled: bool = True
    alpha: int = 5
    beta: float = 0.5
    rule: str = "le"  # le: u/f <= beta (paper) | lt: u/f < beta (official code)


@dataclass
class MemoryCfg:
    name: str = "none"  # none | reme
    pool: Optional[str] = None
    top_k: int = 5
    retrieval_key: str = "usage_scenario"  # usage_scenario | task_query | generalized_query | keywords
    rerank: bool = False
    rewrite: bool = False
    addition: str = "selective"  # selective | full
    granularity: str = "keypoint"  # keypoint | trajectory
    judge_threshold: float = 0.3  # paper 0.3, official code 0.5
    dedup_threshold: float = 0.85  # paper 0.85, official code 0.5
    build_samples: int = 8
    build_temperature: float = 0.9
    reflection: ReflectionCfg = field(default_factory=ReflectionCfg)
    deletion: DeletionCfg = field(default_factory=DeletionCfg)


@dataclass
class EvalCfg:
    mode: str = "none"  # none | fixed | dynamic
    runs: int = 4
    seeds: int = 3
    seed_base: int = 0


@dataclass
class Config:
    experiment: str = "default"
    out_dir: Optional[str] = None
    runs_root: str = "runs"
    model: ModelCfg = field(default_factory=ModelCfg)
    llm: LLMCfg = field(default_factory=LLMCfg)
    summarizer: SummarizerCfg = field(default_factory=SummarizerCfg)
    embedding: EmbeddingCfg = field(default_factory=EmbeddingCfg)
    benchmark: BenchmarkCfg = field(default_factory=BenchmarkCfg)
    memory: MemoryCfg = field(default_factory=MemoryCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)


_CHOICES = {
    "model.kind": {"local", "vllm", "openai"},
    "model.tool_protocol": {"openai", "json"},
    "embedding.kind": {"sentence_transformers", "openai"},
    "benchmark.name": {"bfcl_v3"},
    "benchmark.split": {"train", "test"},
    "memory.name": {"none", "reme"},
    "memory.retrieval_key": {"usage_scenario", "task_query", "generalized_query", "keywords"},
    "memory.addition": {"selective", "full"},
    "memory.granularity": {"keypoint", "trajectory"},
    "memory.deletion.rule": {"le", "lt"},
    "eval.mode": {"none", "fixed", "dynamic"},
}

_AT_LEAST = {
    "eval.runs": 1,
    "eval.seeds": 1,
    "eval.seed_base": 0,
    "llm.concurrency": 1,
    "llm.max_retries": 0,
    "llm.breaker_threshold": 1,
    "benchmark.limit": 1,
    "benchmark.max_interactions": 1,
    "benchmark.max_steps_per_turn": 1,
    "memory.top_k": 0,
    "memory.build_samples": 1,
    "memory.reflection.max_retries": 0,
    "memory.deletion.alpha": 1,
    "model.sampling.max_tokens": 1,
}

# Keys that change how fast a run goes, not what it computes: excluded from the run hash,
# so a resume with more concurrency continues the same run.
_EXECUTION_KEYS = ("out_dir", "runs_root", "llm.concurrency", "llm.timeout", "llm.max_retries",
                   "llm.breaker_threshold",
                   "llm.cache", "llm.cache_dir", "llm.api_key", "llm.base_url")


def config_dir() -> Path:
    """The configs shipped in the wheel, or the repo's ``configs/`` in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "configs", here.parent / "configs"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise UserError("cannot find reme's configs/ directory: reinstall reme")


def compose(overrides: list[str], config_name: str = "config") -> Config:
    """Compose ``configs/`` with Hydra overrides and validate against the schema."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from hydra.core.config_store import ConfigStore

    # The schema is the base of config.yaml's defaults list: every key it declares can be
    # overridden even where a group file does not mention it (memory=none, ...).
    ConfigStore.instance().store(name="reme_schema", node=Config)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            raw = hydra_compose(config_name=config_name, overrides=list(overrides))
    except Exception as exc:  # Hydra raises many types; all mean "fix your overrides"
        raise UserError(f"bad override or config: {_first_line(exc)}") from None
    finally:
        GlobalHydra.instance().clear()
    return validate(raw)


def validate(raw: DictConfig | dict) -> Config:
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), raw)
        OmegaConf.resolve(merged)
        cfg: Config = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except OmegaConfBaseException as exc:
        raise UserError(f"invalid config: {_omegaconf_message(exc)}") from None
    for key, allowed in _CHOICES.items():
        value = _get(cfg, key)
        if value not in allowed:
            raise UserError(f"{key}={value!r} is not allowed; choose one of {sorted(allowed)}")
    for key, low in _AT_LEAST.items():
        value = _get(cfg, key)
        if value is not None and value < low:
            raise UserError(f"{key}={value} must be >= {low}")
    if not 0.0 <= cfg.model.sampling.temperature <= 2.0:
        raise UserError("model.sampling.temperature must be between 0 and 2")
    if cfg.llm.base_url is not None and not cfg.llm.base_url.startswith(("http://", "https://")):
        raise UserError(f"llm.base_url={cfg.llm.base_url!r} must start with http:// or https://")
    if cfg.eval.mode != "none" and cfg.memory.name == "none":
        raise UserError(f"--mode {cfg.eval.mode} needs a memory: add memory=reme")
    return cfg


def to_dict(cfg: Config) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)  # type: ignore[return-value]


def config_hash(cfg: Config) -> str:
    """A short hash of everything that determines a run's results."""
    data = to_dict(cfg)
    for dotted in _EXECUTION_KEYS:
        parent, _, leaf = dotted.rpartition(".")
        node = data
        for part in filter(None, parent.split(".")):
            node = node[part]
        node.pop(leaf, None)
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _get(cfg: Any, dotted: str) -> Any:
    for part in dotted.split("."):
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
        options = sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))
        return f"{group}={missing.group(2)} does not exist; choose one of {options}"
    # Otherwise the useful line is the last one Hydra chained (e.g. a parse error).
    if cause.strip():
        text = cause.strip()
    return text.splitlines()[0]


def _omegaconf_message(exc: OmegaConfBaseException) -> str:
    key = getattr(exc, "full_key", None)
    msg = str(exc).splitlines()[0]
    if msg.startswith("Key") and " not in " in msg and key:
        return f"unknown key '{key}' (check the spelling, or see `reme eval --help`)"
    return f"{key}: {msg}" if key and key not in msg else msg

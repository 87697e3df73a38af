"""One experience E = <ω, e, κ, c, τ> plus the bookkeeping ReMe's refinement needs.

Plain data with a strict reader: pools are files people edit by hand and other tools
write, so `from_dict` names the offending field instead of failing somewhere downstream.
"""

from __future__ import annotations

import hashlib

import copy
import uuid
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Literal, get_args

Source = Literal["success", "failure", "comparative", "reflection", "trajectory"]
SOURCES: tuple[str, ...] = get_args(Source)

# What text of an experience is embedded for retrieval (paper ablation, Table 4).
RetrievalKey = Literal["usage_scenario", "task_query", "generalized_query", "keywords"]
RETRIEVAL_KEYS: tuple[str, ...] = get_args(RetrievalKey)


def new_id() -> str:
    return uuid.uuid4().hex


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(kw_only=True)
class Experience:
    when_to_use: str  # ω: the usage scenario, the default retrieval key
    content: str  # e: the actionable lesson itself
    source: Source
    id: str = field(default_factory=new_id)
    keywords: list[str] = field(default_factory=list)  # κ
    # c. Neutral default: records that never had one (e.g. the official pools) should
    # not be ranked or filtered down for it.
    confidence: float = 1.0
    tools_used: list[str] = field(default_factory=list)  # τ
    task_query: str = ""
    generalized_query: str = ""
    f: int = 0  # times retrieved
    u: int = 0  # times retrieved by a task that then succeeded
    origin_task: str | None = None
    author: str = ""
    created_at: str = field(default_factory=now_iso)
    updated_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at
        _validate(asdict(self))
        self.confidence = float(self.confidence)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Experience:
        if not isinstance(data, dict):
            raise ValueError(f"experience must be a JSON object, got {type(data).__name__}")
        for name in _REQUIRED:
            if name not in data:
                raise ValueError(f"experience field {name!r} is missing")
        known = {f.name for f in fields(cls)}
        kwargs = {k: copy.deepcopy(v) for k, v in data.items() if k in known}
        unknown = {k: v for k, v in data.items() if k not in known}
        if unknown:
            # Written by a newer or foreign tool: keep it rather than lose it on the next save.
            extra = kwargs.get("extra", {})
            if not isinstance(extra, dict):
                raise ValueError("experience field 'extra' must be dict")
            kwargs["extra"] = {**copy.deepcopy(unknown), **extra}
        _validate(kwargs)
        return cls(**kwargs)

    def retrieval_text(self, key: str) -> str:
        if key == "usage_scenario":
            return self.when_to_use
        if key == "task_query":
            return self.task_query
        if key == "generalized_query":
            return self.generalized_query
        if key == "keywords":
            return ", ".join(self.keywords)
        raise ValueError(f"unknown retrieval key {key!r}; choose one of {', '.join(RETRIEVAL_KEYS)}")


_REQUIRED = ("id", "when_to_use", "content", "source")

_STR_FIELDS = (
    "id",
    "when_to_use",
    "content",
    "task_query",
    "generalized_query",
    "author",
    "created_at",
    "updated_at",
)


def _validate(d: dict[str, Any]) -> None:
    """Type-check whatever fields are present; absent optional ones get dataclass defaults."""
    for name in _STR_FIELDS:
        if name in d and not isinstance(d[name], str):
            raise ValueError(f"experience field {name!r} must be str, got {type(d[name]).__name__}")
    if "id" in d and not d["id"]:
        raise ValueError("experience field 'id' must not be empty")
    if "source" in d and d["source"] not in SOURCES:
        raise ValueError(f"experience field 'source' must be one of {', '.join(SOURCES)}, got {d['source']!r}")
    for name in ("keywords", "tools_used"):
        if name in d and not (isinstance(d[name], list) and all(isinstance(x, str) for x in d[name])):
            raise ValueError(f"experience field {name!r} must be a list of str")
    if "confidence" in d:
        c = d["confidence"]
        # bool is an int subclass; a True confidence is a bug, not 1.0.
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c <= 1.0:
            raise ValueError(f"experience field 'confidence' must be a number in [0, 1], got {c!r}")
    for name in ("f", "u"):
        if name in d:
            v = d[name]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"experience field {name!r} must be a non-negative int, got {v!r}")
    if "origin_task" in d and d["origin_task"] is not None and not isinstance(d["origin_task"], str):
        raise ValueError("experience field 'origin_task' must be str or null")
    if "extra" in d and not isinstance(d["extra"], dict):
        raise ValueError("experience field 'extra' must be dict")


def assign_stable_ids(experiences: list[Experience], namespace: str) -> None:
    """Ids from where an experience came from and what it says, not uuid4: the same cached
    responses then give the same pool, ids included."""
    for i, exp in enumerate(experiences):
        blob = f"{namespace}|{i}|{exp.source}|{exp.when_to_use}|{exp.content}"
        exp.id = hashlib.sha256(blob.encode()).hexdigest()[:32]

"""The typed record of one finished unit (a line of a run's ``trials.jsonl``) and its reader.

It sits at the bottom floor, with the rest of a run's log (``core/run_log.py``: ``RunLog.trials``
reads them through ``read_trials``), so that every layer reads run records the same way:
``run/`` writes them, a method reads the units of the run that built its pool, the report
reads them all. Old records (schema 1) are upgraded on load.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from reme_cli.core.errors import UserError
from reme_cli.core.reading import JsonFile, required_of, shape_of, wrong_key
from reme_cli.core.text import middle_cut

TRIALS_FILE = "trials.jsonl"

SCHEMA_VERSION = 2  # 1: the untyped records of reme 0.1 (read, upgraded on load)


@dataclass
class UnitRecord:
    """One finished unit (seed, run, task): the line ``trials.jsonl`` holds for it."""

    unit: str
    task_id: str
    seed: int
    run: int
    position: int = 0  # index within its stream (dynamic mode)
    success: bool = False  # the benchmark's verdict on the final attempt
    first_success: bool = False  # ... on the first (they differ when a method retries)
    reward: float = 0.0
    stop_reason: str = "error"  # reme_cli.agent.trajectory.STOP_REASONS
    error: str | None = None  # set: the unit failed and is retried on resume
    traceback: str | None = None
    checker: dict[str, Any] = field(default_factory=dict)  # the official checker's details
    trajectory: dict[str, Any] | None = None  # the final attempt
    attempts: int = 0
    earlier_attempts: list[dict[str, Any]] = field(default_factory=list)  # success, checker, trajectory
    retrieved_ids: list[str] = field(default_factory=list)
    retrieval_scores: list[float] = field(default_factory=list)
    retrieval_s: float | None = None  # how long the method's retrieval took (None: before it was recorded)
    guidance: str | None = None  # the exact text injected into the first user message
    method: dict[str, Any] = field(default_factory=dict)  # what the memory method records
    # The method's summarizer answers by role: {role: {calls, invalid, truncated, failed}}
    # (llm.answer_health); empty without a summarizer, and in records made before it existed.
    summarizer_answers: dict[str, dict[str, int]] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)  # prompt, completion, max_prompt
    llm_latency_s: float = 0.0
    interactions: int = 0
    started_at: str = ""
    finished_at: str = ""
    wall_s: float = 0.0
    # Set when strings longer than eval.max_stored_chars were cut before storing (model and
    # environment output is untrusted: one 10 MB argument must not make a 100 MB record).
    truncated: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def cap_stored(self, max_chars: int, whole: tuple[str, ...] = ()) -> None:
        """Cut every stored string longer than ``max_chars`` in the middle (and a call's
        non-string arguments whose JSON is longer), noting what was cut in ``truncated``;
        the fields named in ``whole`` are kept as they are."""
        cuts: list[tuple[str, int]] = []
        for name in _CAPPED_FIELDS:
            if name not in whole:
                setattr(self, name, _cap(getattr(self, name), max_chars, name, cuts))
        if cuts:
            self.truncated = {"max_chars": max_chars, "fields": len(cuts),
                              "chars_cut": sum(n for _, n in cuts), "paths": [p for p, _ in cuts[:20]]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnitRecord:
        data = dict(data)
        if data.get("schema_version", 1) < 2:  # reme 0.1: method fields at the top level
            method = dict(data.pop("memory", None) or {})
            if "lessons" in data:
                method["lessons"] = data.pop("lessons")
            data["method"] = method
            if "stop_reason" not in data:
                trajectory = data.get("trajectory")
                stop = trajectory.get("stop_reason") if isinstance(trajectory, dict) else None
                data["stop_reason"] = "error" if data.get("error") else _V1_STOPS.get(stop, stop or "answered")
            data["schema_version"] = SCHEMA_VERSION
        # Written before first-trial success was recorded: every unit then ran one trial.
        data.setdefault("first_success", data.get("success", False))
        wrong = wrong_key(data, _SHAPE, _REQUIRED)
        if wrong:  # a hand edit: said here, not as a TypeError wherever the field is used
            raise ValueError(wrong)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_SHAPE = shape_of(UnitRecord)
_REQUIRED = required_of(UnitRecord)
# A line that names no unit is no record (left out with a warning); one that does is checked
# whole by ``UnitRecord.from_dict`` (refused: its unit would silently run again).
TRIALS = JsonFile("a run's trials.jsonl", lines=True, shape={"unit": str}, required=("unit",),
                  fix="move that line out of the file (its unit then runs again)")

_V1_STOPS = {"completed": "answered", "max_interactions": "interaction_limit"}


_CAPPED_FIELDS = ("error", "traceback", "checker", "trajectory", "earlier_attempts", "guidance", "method")
TRAJECTORY_FIELDS = ("trajectory", "earlier_attempts")  # what a summarizer reads back (build-pool)


def _cap(value: Any, limit: int, path: str, cuts: list[tuple[str, int]]) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        short = middle_cut(value, limit)
        cuts.append((path, len(value) - len(short)))
        return short
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "arguments" and not isinstance(item, str):
                # Arguments as parsed (a dict): a huge list of small values is cut as its JSON text.
                text = json.dumps(item, ensure_ascii=False, default=str)
                if len(text) > limit:
                    item = text
            out[key] = _cap(item, limit, f"{path}.{key}", cuts)
        return out
    if isinstance(value, list):
        return [_cap(item, limit, f"{path}.{i}", cuts) for i, item in enumerate(value)]
    return value


def read_trials(run_dir: str | Path) -> list[UnitRecord]:
    """Every finished unit of the run in ``run_dir`` (errored ones included: check ``ok``);
    a unit recorded twice (retried after an error) keeps its last record. A line that is not
    JSON (random bytes, a line cut short) is left out with a warning; one that names a unit
    but is not a unit record is refused in one line naming it."""
    seen: dict[str, UnitRecord] = {}
    path = Path(run_dir) / TRIALS_FILE
    for number, rec in TRIALS.numbered(path):
        try:
            seen[rec["unit"]] = UnitRecord.from_dict(rec)
        except (TypeError, ValueError) as exc:  # a hand-edited or foreign line
            raise UserError(f"{path} line {number} is not a unit record ({_first_line(exc)}); {TRIALS.fix}") from None
    return list(seen.values())


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]

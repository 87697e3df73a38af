"""How the summarizer's answers went, per role: calls, invalid, truncated.

Every bad summarizer answer is skipped where it is read (no experience, a fallback to the
plain guidance, no lesson), so a summarizer that systematically fails -- e.g. a thinking
model whose token budget ends inside ``<think>`` -- would otherwise only show up as weak
results. Each call site reports its answer with ``note(role, result, valid=...)``; the
counts go to the tallies open in the current context (``contextvars``: a unit's tally in
``run_unit``, a training task's in build-pool's distill phase, the whole learn phase of
build-pool), each of which also adds into the tally it was opened inside.

- ``invalid``: the answer held nothing usable (no parsable JSON of the asked shape);
- ``truncated``: the server stopped it at ``max_tokens`` (``finish_reason == "length"``) or
  its content ends inside an unterminated ``<think>`` block;
- ``errors``: the call raised (a context overflow, retries run out) and there was no answer;
- ``failed``: invalid, truncated or an error (one answer counts once).

``SUMMARY`` is a role of its own: one row per summary a memory method asked for (a trial's, or
a training task's in build-pool), ``errors`` where it raised and the method went on without it
(ReMe: the trial keeps its reward and adds nothing, as the authors' agents did). Its calls are
summaries, not answers, so the answer totals leave it out and say it apart.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Iterator

from reme_cli.llm.client import ChatResult
from reme_cli.llm.json_reply import unterminated_think

FIELDS = ("calls", "invalid", "truncated", "errors", "failed")
SUMMARY = "summary"  # a whole summary (several calls), counted per summary: see the module docstring
# Below this many answers a role's failure share is shown but not judged: with a healthy
# failure rate of 5% per answer, 2 failures in 5 answers (the least that exceeds 0.2 here)
# happen about 2% of the time; 1 in 2 or 3 happens 10-14% of the time.
MIN_JUDGED_CALLS = 5

Counts = dict[str, dict[str, int]]  # role -> {calls, invalid, truncated, failed}


class Tally:
    def __init__(self, parent: Tally | None = None):
        self.parent = parent
        self.counts: Counts = {}

    def add(self, role: str, *, invalid: bool, truncated: bool, error: bool = False) -> None:
        tally: Tally | None = self
        while tally is not None:
            row = tally.counts.setdefault(role, dict.fromkeys(FIELDS, 0))
            row["calls"] += 1
            row["invalid"] += invalid
            row["truncated"] += truncated
            row["errors"] += error
            row["failed"] += invalid or truncated or error
            tally = tally.parent

    def to_dict(self) -> Counts:
        return {role: dict(row) for role, row in sorted(self.counts.items())}


_CURRENT: ContextVar[Tally | None] = ContextVar("summarizer_answers", default=None)


@contextlib.contextmanager
def answer_tally() -> Iterator[Tally]:
    """A tally of the answers noted inside the block (and in the tasks it starts)."""
    tally = Tally(parent=_CURRENT.get())
    token = _CURRENT.set(tally)
    try:
        yield tally
    finally:
        _CURRENT.reset(token)


def is_truncated(result: ChatResult) -> bool:
    return result.finish_reason == "length" or unterminated_think(result.content or "")


def note(role: str, result: ChatResult | None, *, valid: bool, truncated: bool | None = None) -> None:
    """Count one summarizer answer in ``role`` (distill, judge, rerank, rewrite, reflection,
    amem_note, ace_reflector, ace_curator, dc_curator, dc_synthesis, reasoningbank_judge,
    reasoningbank_extract, ...). ``truncated`` defaults to what ``result`` says."""
    tally = _CURRENT.get()
    if tally is None:
        return
    cut = truncated if truncated is not None else (result is not None and is_truncated(result))
    tally.add(role, invalid=not valid, truncated=bool(cut))


def note_summary(error: BaseException | None) -> None:
    """Count one summary a method asked for (``SUMMARY``): an error if it raised."""
    tally = _CURRENT.get()
    if tally is not None:
        tally.add(SUMMARY, invalid=False, truncated=False, error=error is not None)


def summary_failures(counts: Counts | None) -> dict[str, int]:
    """How many summaries were asked for and how many of them failed (raised)."""
    row = (counts or {}).get(SUMMARY) or {}
    return {"summaries": int(row.get("calls", 0) or 0), "failed": int(row.get("errors", 0) or 0)}


def merge(*parts: Counts | None) -> Counts:
    """The sum of several counts (records of units, lines of tasks); tolerates None and
    rows missing a field (written by another version)."""
    out: Counts = {}
    for part in parts:
        for role, row in (part or {}).items():
            into = out.setdefault(role, dict.fromkeys(FIELDS, 0))
            for k in FIELDS:
                into[k] += int(row.get(k, 0) or 0)
    return {role: out[role] for role in sorted(out)}


def total(counts: Counts) -> dict[str, int]:
    """The answers' totals (summaries are not answers: ``summary_failures`` counts them)."""
    return {k: sum(row.get(k, 0) for role, row in counts.items() if role != SUMMARY) for k in FIELDS}


def failing_roles(counts: Counts, max_share: float) -> list[str]:
    """The roles whose failed share exceeds ``max_share`` (judged from MIN_JUDGED_CALLS
    answers on), worst first."""
    bad = [(row["failed"] / row["calls"], role) for role, row in counts.items()
           if row["calls"] >= MIN_JUDGED_CALLS and row["failed"] > max_share * row["calls"]]
    return [role for _, role in sorted(bad, reverse=True)]


def failure_message(counts: Counts, max_share: float) -> str | None:
    """One line for the command's exit 3, or None when the summarizer's answers are healthy."""
    roles = failing_roles(counts, max_share)
    if not roles:
        return None
    parts = [f"{role} {counts[role]['failed']} of {counts[role]['calls']} "
             + (f"({counts[role].get('errors', 0)} raised)" if role == SUMMARY else
                f"({counts[role]['truncated']} truncated, {counts[role]['invalid']} invalid)") for role in roles]
    truncated = sum(counts[r]["truncated"] for r in roles)
    errors = sum(counts[r].get("errors", 0) for r in roles)
    invalid_only = sum(counts[r]["failed"] for r in roles) - truncated - errors
    fix = []
    if errors:
        fix.append("summaries that raised (the trials kept their reward and added nothing; each error is in "
                   "its unit's method.trials, or build/distill.jsonl): a context overflow needs a longer "
                   "context for the summarizer, retries run out a healthy server")
    if truncated:
        fix.append("truncated answers: raise summarizer.max_tokens (null: no cap) or summarizer.thinking=false, "
                   "and check that the server's reasoning parser keeps <think> out of the content")
    if invalid_only:
        fix.append("invalid answers: the summarizer does not answer the JSON its prompts ask for "
                   "(check summarizer.name / summarizer.model)")
    return (f"summarizer answers failed: {'; '.join(parts)}, more than summarizer.max_failed_share="
            f"{max_share:g}; {'; '.join(fix)} (counts per role in the result file)")


def summary_line(counts: Counts) -> str | None:
    """A compact line for the final table: the totals, and each role with failures."""
    if not counts:
        return None
    t = total(counts)
    line = f"summarizer answers: {t['calls']} (invalid {t['invalid']}, truncated {t['truncated']})"
    bad = [f"{role} {row['failed']}/{row['calls']}" for role, row in counts.items()
           if row["failed"] and role != SUMMARY]
    line += f"; failed by role: {', '.join(bad)}" if bad else ""
    if SUMMARY in counts:
        s = summary_failures(counts)
        line += f"; summaries failed: {s['failed']} of {s['summaries']}"
    return line


"""ReMe's summarizer calls, as ``reme ablate --dry-run``'s cost estimate counts them
(``Memory.expected_summarizer_calls``): one distill call per summarized trajectory, one judge
call per candidate it proposes, rerank/rewrite per retrieval; build-pool's success, failure and
comparative analyses per task. How many candidates a summary proposes is a guess
(``cost.candidates_per_summary``)."""

from __future__ import annotations

from typing import Any

from reme_cli.methods.hooks import CostGuess, Guess

CANDIDATES = "candidates_per_summary"
GUESSES = {CANDIDATES: Guess(2.0, "candidates per summary")}  # experiences one distill call proposes


def retries(cfg: Any) -> int:
    """Dynamic mode's reflection retries after a failed trial (0 elsewhere)."""
    m = cfg.memory
    if cfg.eval.mode != "dynamic" or not m.reflection.enabled:
        return 0
    return m.reflection.max_retries


def unit_calls(cfg: Any, guess: CostGuess) -> float:
    """Expected summarizer calls of one evaluation unit."""
    m, p, r = cfg.memory, guess.success_rate, retries(cfg)
    q = 1.0 - p
    per_retrieval = (m.rerank and m.top_k > 1) + m.rewrite if m.top_k > 0 else 0
    calls = float(per_retrieval)  # the unit's first retrieval (a retry that has a summary retrieves none)
    if cfg.eval.mode != "dynamic":
        return calls
    # The authors' trajectory-level flow validates nothing.
    judge_per_job = 0.0 if (m.prompts == "authors" and m.granularity == "trajectory") else guess.own[CANDIDATES]
    if m.reflection.style == "lesson":
        reflections = sum(q ** (i + 1) for i in range(r))  # a failed trial before the last
        first, later, failed = p, q - q ** (r + 1), q ** (r + 1)
        # One attempt: its success (or, with addition=full, failure) analysis; a success
        # after failures: success, failure and comparative analyses.
        jobs = first + 3 * later + (failed if m.addition == "full" else 0.0)
        lesson_judged = later if (m.reflection.judge and r > 0) else 0.0
        return calls + reflections + jobs * (1 + judge_per_job) + lesson_judged
    # summary style: every trial is summarized (one distill call on one trajectory), except
    # a last failed one unless addition=full.
    summarized = sum(q ** i for i in range(r)) + q ** r * (p + (q if m.addition == "full" else 0.0))
    return calls + summarized * (1 + judge_per_job)


def build_calls(cfg: Any, guess: CostGuess) -> float:
    """Expected summarizer calls per training task of a pool build."""
    n, p, candidates = cfg.build.samples, guess.success_rate, guess.own[CANDIDATES]
    any_success, any_failure = 1 - (1 - p) ** n, 1 - p ** n
    if cfg.memory.prompts == "authors":
        # Two trajectories posted (first-lowest, last-highest): an analysis of each, and a
        # comparative one when one succeeded and the other failed; a validation per candidate.
        posted = min(n, 2)
        if cfg.memory.granularity == "trajectory":  # one simple summary each, not validated
            return float(posted)
        mixed = any_success + any_failure - 1 if n >= 2 else 0.0
        return (posted + mixed) * (1 + candidates)
    if cfg.memory.granularity == "trajectory":
        jobs = 1.0
    else:  # success if one succeeded, failure if one failed, comparative if rewards differ
        jobs = any_success + any_failure + (any_success + any_failure - 1)
    return jobs * (1 + candidates)

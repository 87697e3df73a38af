"""TEST DOUBLE: the scripted summarizer's answers to ReMe's prompts (the paper-text prompts in
``prompts/`` and the authors' in ``authors_prompts/``), found by the test server through the
registry (``reme_cli.core.registry.SCRIPTED``). Never used for results.

Distillation returns one experience naming the task's first words (so retrieval has
something to find), the judge scores the policy's ``judge_score``, reflection returns a fixed
lesson, rerank keeps the order and rewrite echoes. A reply is the fields of the server's
``Reply`` as a dict (``content``, ``tool_calls``, ``raw``): this module imports nothing of
the test server, which sits above the methods.
"""

from __future__ import annotations

import json
from typing import Any

from reme_cli.methods.reme.method import LESSONS_HEADER

LESSON = "Re-check every argument against the task text before calling a tool."
FAILURE_LESSON = "Scripted FAILED lesson"  # what a failure analysis of this script says
# A retry whose first user message carries one of these was guided by a lesson: the replay
# policy's ``heal_on_retry`` answers it correctly.
RETRY_MARKS = (LESSONS_HEADER, FAILURE_LESSON)

# How the authors' prompts (authors_prompts/) tell their kind.
AUTHORS_KINDS = {"reviewing successful step sequences": "SUCCESSFUL", "reviewing failed step sequences": "FAILED",
                 "comparing higher-scoring and lower-scoring": "comparative"}


def _lesson(kind: str, words: str, **extra: Any) -> dict[str, Any]:
    return {"when_to_use": f"When a task says: {words}",
            "experience": f"Scripted {kind} lesson: check the state before each call.",  # FAILURE_LESSON
            "tags": ["scripted"], "confidence": 0.9, **extra, "tools_used": []}


def _authors(user: str, judge_score: float) -> dict[str, Any] | None:
    """Answers in the authors' formats: a ```json block, as their prompts show it."""
    def block(value: Any) -> dict[str, Any]:
        return {"content": "```json\n" + json.dumps(value, indent=2) + "\n```"}

    if "validating the quality and usefulness of extracted step-level task memories" in user:
        return block({"is_valid": True, "score": judge_score, "feedback": "scripted", "recommendations": ""})
    # The task's words: the first user step of the (first) step sequence.
    first = user.split("role=user content=\n", 1)[-1].split("\n\n# Tools", 1)[0].split("\n###", 1)[0]
    words = " ".join(first.split()[:40])[-160:]
    if user.startswith("# Execution Process"):  # simple_summary: trajectory-level
        return block([{"when_to_use": f"When a task says: {words}",
                       "memory": "Scripted trajectory lesson: check the state before each call."}])
    kind = next((k for mark, k in AUTHORS_KINDS.items() if mark in user), None)
    if kind is None:
        return None
    return block([_lesson(kind, words, step_type="action")])


def answer(system: str, user: str, body: Any = None, policy: Any = None) -> dict[str, Any] | None:
    """The reply to a ReMe prompt, or None for any other prompt."""
    judge_score = getattr(policy, "judge_score", 0.8)
    authors = _authors(user, judge_score)  # the authors' prompts: one user message
    if authors is not None:
        return authors
    if "strict reviewer of experiences" in system:
        return {"content": json.dumps({"score": judge_score, "reason": "scripted"})}
    if "FAILED. It will retry" in system:
        return {"content": json.dumps({"guidance": LESSON})}
    if "Rank the candidates" in system:
        return {"content": json.dumps({"ranked_indices": []})}
    if "Rewrite them into short guidance" in system:
        return {"content": json.dumps({"rewritten_context": "Scripted guidance."})}
    for kind in ("SUCCESSFUL", "FAILED", "two attempts", "ONE reusable"):
        if kind in system:
            words = " ".join(user.split()[:40])
            return {"content": json.dumps([_lesson(kind, words[-160:])])}
    return None

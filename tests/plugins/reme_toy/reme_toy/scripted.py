"""TEST DOUBLE: the toy method's scripted summarizer answer, found by reme's scripted server
through the ``reme.scripted`` entry point (the server names no method)."""

from __future__ import annotations

from typing import Any

PROMPT = "Summarize the toy counter episode:"
RETRY_MARKS = ("Toy lesson:",)


def answer(system: str, user: str, body: Any = None, policy: Any = None) -> dict[str, Any] | None:
    if not user.startswith(PROMPT):
        return None
    return {"content": f"Toy lesson: count to {user.split()[-1]} one increment at a time.", "raw": True}

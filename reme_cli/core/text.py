"""Cutting long text for prompts, the same way wherever a trajectory is shown to an LLM."""

from __future__ import annotations


def clip(text: str, limit: int) -> str:
    """The first ``limit`` characters, saying how many were cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit] + f" ...[{len(text) - limit} chars cut]"


def middle_cut(text: str, max_chars: int) -> str:
    """At most ``max_chars``: the opening and the ending kept, the middle said to be omitted
    (a task's opening and its outcome matter more than the steps between)."""
    if len(text) <= max_chars:
        return text
    marker = "\n...[{} chars omitted]...\n"
    room = max(max_chars - len(marker.format(len(text))), 0)
    head = room // 2
    tail = room - head
    omitted = len(text) - head - tail
    return text[:head] + marker.format(omitted) + (text[len(text) - tail:] if tail else "")

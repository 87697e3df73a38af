"""TEST DOUBLE: scripted answers to Dynamic Cheatsheet's two curator prompts, found by the
test server through the registry (``reme_cli.core.registry.SCRIPTED``). A reply is the
server's ``Reply`` fields as a dict.

- DC-Cu's curator keeps every memory item of the previous cheatsheet and appends one that
  names the current input's first words, so each rewrite is visible and checkable;
- DC-RS's curator writes one item per retrieved pair (its number and similarity) and one
  for the next input.
"""

from __future__ import annotations

import re
from typing import Any

CUMULATIVE = "# CHEATSHEET REFRENCE CURATOR"  # the authors' spelling
SYNTHESIS = "# CHEATSHEET CURATOR"
_ITEM = re.compile(r"<memory_item>.*?</memory_item>\n\*\* Count: \d+", re.DOTALL)


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _words(text: str, n: int = 8) -> str:
    return " ".join(text.split()[:n])


def _item(description: str, example: str) -> str:
    return (f"<memory_item>\n<description>\n{description}\n</description>\n<example>\n{example}\n</example>\n"
            f"</memory_item>\n** Count: 1")


def _sheet(items: list[str]) -> str:
    body = "\n\n".join(items)
    return f"NEW CHEATSHEET:\n```\n<cheatsheet>\nVersion: {len(items)}\n\n{body}\n</cheatsheet>\n```"


def answer(system: str, user: str, body: Any = None, policy: Any = None) -> dict[str, Any] | None:
    if user.startswith(CUMULATIVE):
        previous = _between(user, "## PREVIOUS CHEATSHEET\n\n", "\n\n-----\n-----\n\n## CURRENT INPUT")
        question = _between(user, "## CURRENT INPUT\n\n", "\n\n-----\n-----\n\n## MODEL ANSWER")
        items = _ITEM.findall(previous) + [_item(f"Scripted strategy for: {_words(question)}",
                                                 "Check the state before each call.")]
        return {"content": _sheet(items), "raw": True}
    if user.startswith(SYNTHESIS):
        notes = _between(user, "## NOTES FOR CHEATSHEET\n\n", "\n\n-----\n-----\n\nMake sure")
        next_input = user.split("## NEXT INPUT:\n\n", 1)[1]
        retrieved = re.findall(r"#### Previous Input #(\d+) \(Similarity: ([0-9.-]+)\):\n\n(.*)", notes)
        items = [_item(f"Scripted lesson from pair #{i} (similarity {s}): {_words(text)}", "Reuse its calls.")
                 for i, s, text in retrieved]
        items.append(_item(f"Scripted plan for: {_words(next_input)}", "Start from the closest pair."))
        return {"content": _sheet(items), "raw": True}
    return None

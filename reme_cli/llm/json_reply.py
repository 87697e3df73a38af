"""Read one JSON value out of free LLM text.

Models wrap JSON in ```json fences, put <think> blocks or prose around it, or answer with
nothing usable at all. `parse_json` tries, in order: each fenced block, then the whole
text, then every JSON value embedded in the text (the longest one of the wanted type
wins, so a stray "[1]" in the prose does not beat the real answer). It returns None
instead of raising: callers count bad outputs, they never crash on them.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def _split_reasoning(text: str) -> tuple[str, bool]:
    """(the text outside reasoning, whether a <think> was left open)."""
    text = _THINK_BLOCK.sub("", text)
    low = text.lower()
    end = low.rfind("</think>")
    if end >= 0:
        text = text[end + len("</think>"):]
        low = text.lower()
    start = low.find("<think>")
    if start >= 0:
        return text[:start].strip(), True
    return text.strip(), False


def strip_reasoning(text: str) -> str:
    """Drop <think>...</think> blocks, a dangling </think> (the server ate the opening tag)
    and an unclosed <think> (the answer was cut off while still reasoning): reasoning
    never reaches the JSON reader, whatever the server's reasoning parser did."""
    return _split_reasoning(text)[0]


def unterminated_think(text: str) -> bool:
    """The text ends inside a <think> block: the model was cut off while reasoning."""
    return _split_reasoning(text)[1]


def parse_json(text: Any, expect: type | tuple[type, ...] | None = None) -> Any:
    """The JSON value in `text` (of type `expect` if given: list, dict, or a tuple), or None."""
    if not isinstance(text, str):
        return None
    body = strip_reasoning(text)
    for lang, block in _FENCE.findall(body):
        if lang.lower() not in ("", "json", "jsonc", "json5"):
            continue
        value = _decode(block, expect)
        if value is not None:
            return value
    return _decode(body, expect)


def _wanted(value: Any, expect: type | tuple[type, ...] | None) -> bool:
    if expect is None:
        return isinstance(value, (dict, list))
    return isinstance(value, expect)


def _decode(s: str, expect: type | tuple[type, ...] | None) -> Any:
    s = s.strip()
    if not s:
        return None
    try:
        value = json.loads(s)
    except ValueError:
        pass
    else:
        return value if _wanted(value, expect) else None
    # Embedded in prose: scan each top-level '{' / '[' and keep the longest value of the
    # wanted type. Outputs are a few KB, so the quadratic worst case does not matter.
    best: Any = None
    best_len = -1
    i = 0
    n = len(s)
    while i < n:
        j = _next_open(s, i)
        if j < 0:
            break
        try:
            value, end = _DECODER.raw_decode(s, j)
        except ValueError:
            i = j + 1
            continue
        if _wanted(value, expect) and end - j > best_len:
            best, best_len = value, end - j
        i = end
    return best


def _next_open(s: str, i: int) -> int:
    a = s.find("{", i)
    b = s.find("[", i)
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)

"""Dynamic Cheatsheet's texts: the prompts, the cheatsheet as state (its version), reading a
curator's answer, the retrieved pairs as the authors render them, and the guidance the
agent sees (cut by the context guard at item boundaries)."""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import re
from dataclasses import dataclass
from typing import Any

from reme_cli.llm.json_reply import strip_reasoning
from reme_cli.methods.context_guard import Fitted, estimate_tokens, fit_items

EMPTY = "(empty)"  # the authors' cheatsheet before anything is learned (run_benchmark.py)

# dynamic_cheatsheet/language_model.py (1cf258c, the DynamicCheatsheet_RetrievalSynthesis
# branch), verbatim: how the retrieved input/output pairs are written for the curator.
PAIRS_START = (
    "### PREVIOUS SOLUTIONS (START)\n\nNote: The input-output pairs listed below are taken from previous test "
    "cases and are meant to assist you in understanding potential solution strategies or tool usages. While "
    "they can offer insight and inspiration, they should not be blindly copied, as they may contain errors or "
    "may not fit your specific use case. Approach them with a critical mindset—analyze their logic, verify "
    "their correctness, and adapt them as needed. Your goal should be to develop a well-reasoned solution that "
    "best addresses the problem at hand.\n\n")
PAIRS_END = "\n\n#### PREVIOUS SOLUTIONS (END)"

# Where a cheatsheet may be cut: before a memory item (the curator prompts' unit) or a
# retrieved pair; a text with neither is cut between paragraphs.
_ITEM_START = re.compile(r"(?m)(?=^[ \t]*(?:<memory_item>|#### Previous Input))")
_PARAGRAPH = re.compile(r"(?<=\n\n)(?=\S)")


@functools.cache
def prompt(name: str) -> str:
    """``prompts/<name>.txt`` without its provenance comment (never sent)."""
    text = (importlib.resources.files(__package__) / "prompts" / f"{name}.txt").read_text(encoding="utf-8")
    return re.sub(r"\A<!-- provenance.*?-->\n", "", text, count=1, flags=re.DOTALL)


def fill(template: str, **values: str) -> str:
    """The authors' ``str.replace`` of ``[[NAME]]`` placeholders, in the order given."""
    for key, value in values.items():
        template = template.replace(f"[[{key}]]", value)
    return template


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Cheatsheet:
    """DC-Cu's state: the text, and how many curator answers rewrote it."""

    text: str = EMPTY
    rewrites: int = 0

    def version(self) -> dict[str, Any]:
        return {"rewrites": self.rewrites, "sha256": digest(self.text)}


@dataclass
class Curated:
    """What one curator answer gave: the cheatsheet to use, and whether the answer held one."""

    text: str
    usable: bool
    closed: bool  # the block ended with </cheatsheet> (an answer cut by max_tokens may not)


def extract_cheatsheet(answer: str | None, old: str) -> Curated:
    """``utils/extractor.py:extract_cheatsheet``: the text after the first ``<cheatsheet>``
    up to ``</cheatsheet>`` (or the end), else ``old``. One change: an empty block also
    keeps ``old`` (the authors' code would wipe the cheatsheet)."""
    text = strip_reasoning(answer or "").strip()
    if "<cheatsheet>" not in text:
        return Curated(old, False, False)
    body = text.split("<cheatsheet>", 1)[1]
    closed = "</cheatsheet>" in body
    body = body.split("</cheatsheet>", 1)[0].strip()
    if not body:
        return Curated(old, False, closed)
    return Curated(body, True, closed)


def render_pairs(pairs: list[tuple[str, str, float]]) -> str:
    """Retrieved (input, output, similarity), most similar first, as the authors write them
    for the curator: least similar first, numbered from 1; ``(empty)`` when none."""
    if not pairs:
        return EMPTY
    text = PAIRS_START
    for i, (inp, out, sim) in enumerate(reversed(pairs)):
        text += (f"#### Previous Input #{i + 1} (Similarity: {sim:.2f}):\n\n{inp}\n\n"
                 f"#### Model Solution to Previous Input  #{i + 1}:\n\n{out}\n---\n---\n\n")
    return text.strip() + PAIRS_END


def split_items(text: str) -> list[str]:
    """The cheatsheet in pieces that join back to it exactly (``"".join``)."""
    pieces = [p for p in _ITEM_START.split(text) if p]
    if len(pieces) > 1:
        return pieces
    return [p for p in _PARAGRAPH.split(text) if p]


def guidance(cheatsheet: str, budget: int) -> tuple[str, Fitted]:
    """The text appended to the task: the generator prompt (adapted, see its provenance)
    with the cheatsheet, whose items are kept from the first while they fit ``budget``
    tokens beside the prompt's own text."""
    frame = prompt("generator_guidance")
    room = max(0, budget - estimate_tokens(fill(frame, CHEATSHEET="")))
    fitted = fit_items(split_items(cheatsheet), room, sep="")
    kept = "".join(fitted.items).rstrip() if fitted.truncated else cheatsheet
    return fill(frame, CHEATSHEET=kept or EMPTY), fitted

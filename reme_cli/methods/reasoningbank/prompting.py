"""ReasoningBank's prompts (``prompts/``), filled for a task's prompt family, and the
readers of their answers: the judge's ``Status:`` line and the extraction's Markdown items."""

from __future__ import annotations

import functools
import importlib.resources
import re
import tomllib
from string import Template
from typing import Any

from reme_cli.bench.base import DEFAULT_PROMPT_FAMILY
from reme_cli.core.errors import UserError
from reme_cli.llm.json_reply import strip_reasoning

_PROVENANCE = re.compile(r"\A\s*<!--(?!\s*user\s*-->).*?-->\s*", re.DOTALL)
_USER_MARK = "<!-- user -->"


def _read(name: str) -> str:
    """A prompt file without its provenance header (the model never sees it)."""
    text = (importlib.resources.files(__package__) / "prompts" / name).read_text(encoding="utf-8")
    return _PROVENANCE.sub("", text, count=1).strip()


@functools.cache
def _words(family: str) -> dict[str, str]:
    families = tomllib.loads((importlib.resources.files(__package__) / "prompts" / "domains.toml")
                             .read_text(encoding="utf-8"))
    if family not in families:
        raise UserError(f"memory=reasoningbank has no prompts for prompt family {family!r}; "
                        f"choose one of {', '.join(families)}")
    return families[family]


@functools.cache
def extraction_system(success: bool, family: str = DEFAULT_PROMPT_FAMILY) -> str:
    """SUCCESSFUL_SI or FAILED_SI with the family's words."""
    return Template(_read("success.txt" if success else "failure.txt")).substitute(_words(family))


def extraction_messages(success: bool, family: str, query: str, trajectory: str) -> list[dict[str, str]]:
    user = Template(_read("trajectory.txt")).substitute(query=query, trajectory=trajectory)
    return [{"role": "system", "content": extraction_system(success, family)}, {"role": "user", "content": user}]


@functools.cache
def _judge_parts(family: str) -> tuple[str, Template]:
    system, user = _read("judge.txt").split(_USER_MARK, 1)
    return Template(system.strip()).substitute(_words(family)), Template(user.strip())


def judge_messages(family: str, intent: str, actions: str, response: str) -> list[dict[str, str]]:
    system, user = _judge_parts(family)
    # As the authors' prompt: an empty response reads "N/A".
    return [{"role": "system", "content": system},
            {"role": "user", "content": user.substitute(intent=intent, actions=actions, response=response or "N/A")}]


@functools.cache
def inject_header() -> str:
    return _read("inject.txt")


# ------------------------------------------------------------------ answers
def read_verdict(answer: Any) -> tuple[str, str | None, bool]:
    """(verdict, thoughts, valid) from the judge's two lines.

    As the authors' ``extract_content`` + ``evaluate_trajectory.process_sample``: the first
    line starting with ``Status:``, quotes dropped, is success iff it says "success"
    (case-insensitive); anything else, no line included, is a failure. ``valid``: the
    status said success or failure (else the answer is counted as invalid)."""
    text = strip_reasoning(answer) if isinstance(answer, str) else ""
    lines = [line.strip() for line in text.splitlines()]

    def after(tag: str) -> str | None:
        return next((line[len(tag):].strip() for line in lines if line.startswith(tag)), None)

    status = (after("Status:") or "").replace('"', "").strip().lower()
    return ("success" if status == "success" else "failure"), after("Thoughts:"), status in ("success", "failure")


_ITEM = re.compile(r"^#\s*Memory Item\b[^\n]*$", re.MULTILINE | re.IGNORECASE)
_FIELD = re.compile(r"^##\s*(Title|Description|Content)\b[ \t:]*", re.MULTILINE | re.IGNORECASE)


def read_items(answer: Any, limit: int) -> list[dict[str, str]]:
    """The memory items of an extraction answer, in the prompt's Markdown format: each
    ``# Memory Item i`` block with its ``## Title``, ``## Description`` and ``## Content``
    (a field's text runs to the next heading; code fences and the reasoning before the first
    item are dropped). An item without a title or a content is skipped; at most ``limit``."""
    text = strip_reasoning(answer) if isinstance(answer, str) else ""
    text = text.replace("```markdown", "").replace("```md", "").replace("```", "")
    starts = [m.start() for m in _ITEM.finditer(text)]
    items = []
    for begin, end in zip(starts, starts[1:] + [len(text)]):
        block = text[begin:end]
        marks = list(_FIELD.finditer(block))
        fields: dict[str, str] = {}
        for mark, nxt in zip(marks, marks[1:] + [None]):
            value = block[mark.end():nxt.start() if nxt else len(block)]
            fields.setdefault(mark.group(1).lower(), " ".join(value.split()))
        if fields.get("title") and fields.get("content"):
            items.append({"title": fields["title"], "description": fields.get("description", ""),
                          "content": fields["content"]})
    return items[:limit]


def render_item(i: int, item: dict[str, str]) -> str:
    """An item as the prompt's output format writes it, numbered in the injected list."""
    return (f"# Memory Item {i}\n## Title {item['title']}\n## Description {item['description']}\n"
            f"## Content {item['content']}")


def guidance(items: list[dict[str, str]]) -> str | None:
    """The injected text: the authors' sentence, a blank line, the items joined by blank lines."""
    if not items:
        return None
    return inject_header() + "\n\n" + "\n\n".join(render_item(i, it) for i, it in enumerate(items, 1))

"""Reuse: how retrieved experiences reach the agent (guidance text, LLM rerank, LLM rewrite).

The default text is the official one, byte for byte (agentscope-ai/ReMe at 65971baf:
the memory service formats item i as ``"Memory {i} :\\n When to use: {w}\\n Content: {c}\\n"``,
joined by ``"\\n"``; benchmark/bfcl/bfcl_agent.py renames "Memory" to "Experience" and sends
``"Task:\\n" + query + "\\n\\nSome Related Experience to help you to complete the task:\\n" + memory``)::

    Task:
    <first user message>

    Some Related Experience to help you to complete the task:
    Experience 1 :
     When to use: <when_to_use>
     Content: <content>

    Experience 2 :
     ...

``format_guidance`` builds everything from the header on; ``agent.trajectory.with_guidance`` adds
``Task:`` and the query. Response caches key on this text: change it only on purpose. The
authors' AppWorld agent labels items ``Experience i:`` (no space): that label is the agent's,
not the memory's, so the AppWorld task names it (``Task.meta["experience_label"]``) and
``agent.loop.run_episode`` relabels this text, whatever method wrote it.

Rerank (over the top K retrieved) and rewrite are part of the paper's reuse stage and ran by
default in the service of the paper's period (v0.1.9, v0.2.0.4); the FAQ's scripts switch
them off, which is reme's default (``experiment=paper_text`` turns them on). Both fall back
to the plain path on any unusable LLM answer.
"""

from __future__ import annotations

from typing import Any

from reme_cli.agent.trajectory import GUIDANCE_HEADER
from reme_cli.llm import answer_health
from reme_cli.llm.client import LLM
from reme_cli.bench.base import DEFAULT_PROMPT_FAMILY
from reme_cli.methods.reme.distill import load_prompt
from reme_cli.methods.reme.experience import Experience
from reme_cli.llm.json_reply import parse_json

__all__ = ["GUIDANCE_HEADER", "format_experiences", "format_guidance", "rerank", "rewrite"]


def format_experiences(experiences: list[Experience]) -> str:
    """The numbered block without the header (also what the rewrite prompt reads)."""
    return "\n".join(
        f"Experience {i} :\n When to use: {e.when_to_use}\n Content: {e.content}\n"
        for i, e in enumerate(experiences, 1)
    )


def format_guidance(experiences: list[Experience]) -> str | None:
    """The official injected text for `experiences`, or None when there are none."""
    if not experiences:
        return None
    return f"{GUIDANCE_HEADER}:\n{format_experiences(experiences)}"


def _sampling(sampling: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    return {"temperature": 0.0, "max_tokens": max_tokens, **sampling}


def _ranking(parsed: Any) -> list[Any] | None:
    """The ranked list of an answer (a list, or one under a ranking key), or None."""
    if isinstance(parsed, dict):
        for key in ("ranked_indices", "ranking", "indices"):
            if key in parsed:
                parsed = parsed[key]
                break
    return parsed if isinstance(parsed, list) else None


def _indices(ranking: list[Any] | None, n: int) -> list[int]:
    if ranking is None:
        return []
    out: list[int] = []
    for x in ranking:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < n or x in out:
            continue
        out.append(x)
    return out


async def rerank(llm: LLM, query: str, candidates: list[Experience], top_k: int, *,
                 family: str = DEFAULT_PROMPT_FAMILY, **sampling: Any) -> list[Experience]:
    """The top_k candidates in the LLM's order of usefulness for `query`.

    As in the official RerankMemoryOp: the indices the LLM ranks come first, the
    candidates it left out follow in their input order, then the list is cut to top_k.
    No usable index in the answer: the input order. `sampling` goes to `llm.chat`
    (temperature 0 and max_tokens 512 unless given); `family` picks the prompt's words
    (the task's ``prompt_family``). No call for 0 or 1 candidates.
    """
    if top_k <= 0 or not candidates:
        return []
    if len(candidates) == 1:
        return list(candidates)
    text = "\n---\n".join(
        f"Candidate {i}:\nWhen to use: {e.when_to_use}\nContent: {e.content}"
        for i, e in enumerate(candidates)
    )
    messages = load_prompt("rerank", family).messages(query=query, candidates=text)
    result = await llm.chat(messages, **_sampling(sampling, 512))
    ranking = _ranking(parse_json(result.content, (dict, list)))
    order = _indices(ranking, len(candidates))
    # An empty ranking is an answer (keep the order); none, or one of no usable index, is not.
    answer_health.note("rerank", result, valid=ranking is not None and (not ranking or bool(order)))
    order += [i for i in range(len(candidates)) if i not in order]
    return [candidates[i] for i in order[:top_k]]


async def rewrite(llm: LLM, query: str, experiences: list[Experience], *, family: str = DEFAULT_PROMPT_FAMILY,
                  **sampling: Any) -> str | None:
    """Task-specific guidance written by the LLM from the retrieved experiences, under the
    same header as `format_guidance`; `format_guidance(experiences)` when the answer has no
    usable "rewritten_context"; None when there is nothing to rewrite."""
    if not experiences:
        return None
    messages = load_prompt("rewrite", family).messages(query=query, experiences=format_experiences(experiences))
    result = await llm.chat(messages, **_sampling(sampling, 1024))
    parsed = parse_json(result.content, dict)
    text = parsed.get("rewritten_context") if isinstance(parsed, dict) else None
    answer_health.note("rewrite", result, valid=isinstance(text, str) and bool(text.strip()))
    if not isinstance(text, str) or not text.strip():
        return format_guidance(experiences)
    return f"{GUIDANCE_HEADER}:\n{text.strip()}"

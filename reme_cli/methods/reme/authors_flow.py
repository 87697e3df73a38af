"""The authors' summarizer: their memory service's ``summary_task_memory`` flow (ReMe v0.1.9),
with their prompts (``authors_prompts/``, verbatim; NOTICE there), fed and read as the service
did (``memory.prompts=authors``, the default).

Flow (v0.1.9 reme_ai/config/default.yaml:25-32; the ops under reme_ai/summary/task/):
trajectories posted as ``{messages, score}`` -> success iff ``score >= 1.0``
(trajectory_preprocess_op.py) -> one success analysis per successful trajectory, one failure
analysis per failed one, and one comparative analysis of the highest- vs the lowest-scoring
trajectory when there are at least two and their scores differ (the "soft" comparison; the
three ops run in parallel) -> one validation call per extracted memory, kept iff ``is_valid``
and ``score >= 0.5``. No de-duplication in that flow (the FAQ's later service adds one, which a
dynamic trial's summary goes through: ``ReMe._summarize``; building only with ``memory.build_dedup``).
``memory.granularity=trajectory`` runs the ``summary_task_memory_simple`` flow instead (the
nearest published counterpart of the paper's trajectory-level experiences): one
``simple_summary`` call per trajectory, no validation.

Every template is filled with ``str.format`` and sent as one user message, no system message
(success_extraction_op.py:46-57,75): ``{query}`` = "" and ``{context}`` = "Query: N/A\\n",
since neither agent posts trajectory metadata; ``{step_sequence}`` is ``step_sequence.py``'s.
The request is the FAQ's service's (65971baf reme/core/llm/openai_llm.py:55-62: the model,
the messages, ``stream=True`` and what its config holds, which is nothing): no temperature
(``summarizer.temperature``), no seed (``summarizer.seed``; flowllm 0.1.9 sent 42,
base_llm.py:26), no max_tokens, top_p null, no top_k, no JSON mode;
the answer's content only is parsed (reasoning is kept apart by the client, and a ``<think>``
block left in the content is dropped first). A constrained embedded summarizer (the 135M model)
keeps a grammar instead, one that makes it answer in the very format the prompt shows (a
```` ```json ```` block), so its answers go through the same reading as any other model's.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.resources
import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from reme_cli.bench.base import Task
from reme_cli.llm import answer_health
from reme_cli.llm.client import ChatResult
from reme_cli.llm.json_reply import strip_reasoning
from reme_cli.methods.reme.distill import DistillStats
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.summarizer import SummarizerSettings

SUCCESS_THRESHOLD = 1.0  # trajectory_preprocess_op.py:33 (the agents post the same)
SIMPLE_SUCCESS_THRESHOLD = 0.9  # simple_summary_op.py:19
QUERY = ""  # trajectory.metadata.get("query", ""): the agents post no metadata
CONTEXT = "Query: N/A\n"  # get_trajectory_context with the whole trajectory as the steps
_JSON_BLOCK = re.compile(r"```json\s*([\s\S]*?)\s*```")  # op_utils.py:17, memory_validation_op.py:69

# The prompt files and the key of each role's template.
PROMPTS = {
    "success": ("success_extraction_prompt.yaml", "success_step_task_memory_prompt"),
    "failure": ("failure_extraction_prompt.yaml", "failure_step_task_memory_prompt"),
    "comparative": ("comparative_extraction_prompt.yaml", "soft_comparative_step_task_memory_prompt"),
    "validation": ("memory_validation_prompt.yaml", "task_memory_validation_prompt"),
    "trajectory": ("simple_summary_prompt.yaml", "summary_prompt"),
}


@functools.cache
def prompt_file(name: str) -> dict[str, str]:
    text = (importlib.resources.files(__package__) / "authors_prompts" / name).read_text(encoding="utf-8")
    return yaml.safe_load(text)


def template(role: str) -> str:
    name, key = PROMPTS[role]
    return prompt_file(name)[key]


# ---------------------------------------------------------------------------- the request
# GBNF grammars for a constrained llama.cpp summarizer: each one the prompt's own answer format,
# bounded so that the 135M model ends well before summarizer.max_tokens.
_TEXT = r'[^"\\\n]'
EXTRACT_GRAMMAR = rf"""root ::= "```json\n[\n" item (",\n" item){{0,2}} "\n]\n```"
item ::= "  {{\"when_to_use\": \"" text "\", \"experience\": \"" text "\", \"tags\": [" word (", " word){{0,3}} "], \"confidence\": " unit ", \"step_type\": \"" kind "\", \"tools_used\": [" (word (", " word){{0,2}})? "]}}"
text ::= {_TEXT}{{1,200}}
word ::= "\"" {_TEXT}{{1,30}} "\""
unit ::= "0." [0-9] | "1.0"
kind ::= "reasoning" | "action" | "observation" | "decision"
"""
VALIDATION_GRAMMAR = rf"""root ::= "```json\n{{\"is_valid\": " ("true" | "false") ", \"score\": " unit ", \"feedback\": \"" {_TEXT}{{1,200}} "\"}}\n```"
unit ::= "0." [0-9] | "1.0"
"""
SIMPLE_GRAMMAR = rf"""root ::= "```json\n[\n" item (",\n" item)? "\n]\n```"
item ::= "  {{\"when_to_use\": \"" text "\", \"memory\": \"" text "\"}}"
text ::= {_TEXT}{{1,200}}
"""
_GRAMMARS = {"success": EXTRACT_GRAMMAR, "failure": EXTRACT_GRAMMAR, "comparative": EXTRACT_GRAMMAR,
             "validation": VALIDATION_GRAMMAR, "trajectory": SIMPLE_GRAMMAR}


def request(summ: SummarizerSettings, role: str) -> dict[str, Any]:
    """The keyword arguments of one call: flowllm's request, or, for a constrained embedded
    summarizer, its grammar and its cap (its sampling filters stay the model's)."""
    out: dict[str, Any] = {"temperature": summ.temperature, "max_tokens": summ.max_tokens, "seed": summ.seed}
    if summ.constrained:
        return {**out, **summ.text_grammar(_GRAMMARS[role])}
    return {**out, "top_p": None, "top_k": None, "min_p": None}


async def _ask(summ: SummarizerSettings, role: str, prompt: str) -> ChatResult:
    return await summ.llm.chat([{"role": "user", "content": prompt}], **request(summ, role))


# ---------------------------------------------------------------------------- reading answers
def experience_items(text: str) -> list[Any]:
    """op_utils.py:14-54 (parse_json_experience_response): the first ```json block's list,
    filtered to items with when_to_use (or condition) and experience, or that block's one such
    object; otherwise the whole answer as JSON, unfiltered; [] if nothing decodes."""
    try:
        blocks = _JSON_BLOCK.findall(text)
        if blocks:
            parsed = json.loads(blocks[0])
            if isinstance(parsed, list):
                return [e for e in parsed if isinstance(e, dict) and _has_keys(e)]
            if isinstance(parsed, dict) and _has_keys(parsed):
                return [parsed]
        parsed = json.loads(text)
        if isinstance(parsed, list):
            return parsed
        if isinstance(parsed, dict):
            return [parsed]
    except json.JSONDecodeError:
        pass
    return []


def _has_keys(item: dict[str, Any]) -> bool:
    return ("when_to_use" in item or "condition" in item) and "experience" in item


def read_validation(text: str, threshold: float) -> dict[str, Any]:
    """memory_validation_op.py:64-99: the first ```json block, or {} if there is none (so an
    answer without one is kept at 0.5); a block that does not decode, or a score that cannot
    be compared, rejects the memory."""
    try:
        blocks = _JSON_BLOCK.findall(text)
        parsed = json.loads(blocks[0]) if blocks else {}
        is_valid = parsed.get("is_valid", True)
        score = parsed.get("score", 0.5)
        ok = is_valid and score >= threshold
        return {"is_valid": bool(ok), "score": score,
                "reason": "" if ok else f"Low validation score ({score:.2f}) or marked as invalid"}
    except Exception as exc:  # noqa: BLE001 - the service catches everything here too
        return {"is_valid": False, "score": 0.0, "reason": f"Parse error: {exc}"}


def simple_items(text: str) -> list[dict[str, str]] | None:
    """simple_summary_op.py:29-52: the text after the first ```, less a leading "json", as a
    JSON list of {when_to_use, memory}; None where the service's parse raised (it then asked
    again, up to 5 times: with a response cache the same request's answer would repeat)."""
    content = text
    try:
        if "```" in content:
            content = content.split("```")[1].strip()
        if content.startswith("json"):
            content = content.strip("json")
        out = []
        for item in json.loads(content):
            when, memory = item.get("when_to_use", "").strip(), item.get("memory", "").strip()
            if when and memory:
                out.append({"when_to_use": when, "memory": memory})
        return out
    except Exception:  # noqa: BLE001 - as the service's callback
        return None


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return [x.strip() for x in value if x.strip()]
    return None


def _unit(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def to_experience(item: Any, source: str, task: Task, author: str, meta: dict[str, Any],
                  content_key: str = "experience") -> Experience | None:
    """One answer item -> Experience, as the service stored it (TaskMemory with the whole item
    as ``metadata``, success_extraction_op.py:63-71): ω = when_to_use or condition, e =
    experience; tags, confidence and tools_used fill κ, c, τ where their types allow (the raw
    item stays in ``extra["metadata"]``, step_type with it). task_query is the task's query:
    the published prompts ask for none (NOTICE in authors_prompts/)."""
    if not isinstance(item, dict):
        return None
    when = item.get("when_to_use", item.get("condition", ""))
    content = item.get(content_key, "")
    if not isinstance(when, str) or not when.strip() or not isinstance(content, str) or not content.strip():
        return None
    kwargs: dict[str, Any] = {}
    if (c := _unit(item.get("confidence"))) is not None:
        kwargs["confidence"] = c
    return Experience(
        when_to_use=when.strip(), content=content.strip(), source=source,  # type: ignore[arg-type]
        keywords=_str_list(item.get("tags")) or [], tools_used=_str_list(item.get("tools_used")) or [],
        task_query=task.query, origin_task=task.id, author=author,
        extra={"metadata": item, "distill": dict(meta)}, **kwargs)


# ---------------------------------------------------------------------------- the flow
@dataclass
class Posted:
    """One trajectory as the agents posted it: its step sequence and its score (the reward).
    ``success``: the checker's verdict, which the service reads as ``score >= 1.0``
    (SUCCESS_THRESHOLD; the same on BFCL and AppWorld, whose success is a full reward)."""

    steps: str
    score: float
    success: bool | None = None

    @property
    def succeeded(self) -> bool:
        return self.score >= SUCCESS_THRESHOLD if self.success is None else self.success


def pool_selection(rewards: list[float]) -> list[int]:
    """init_task_memory_pool.py:75-90: one or two trajectories of a task are all posted; of
    more, a stable sort by reward keeps the first-lowest and the last-highest."""
    if len(rewards) <= 2:
        return list(range(len(rewards)))
    order = sorted(range(len(rewards)), key=lambda i: rewards[i])
    return [order[0], order[-1]]


def _extraction_jobs(posted: list[Posted]) -> list[tuple[str, str]]:
    jobs = []
    for p in posted:
        role = "success" if p.succeeded else "failure"
        jobs.append((role, template(role).format(query=QUERY, step_sequence=p.steps, context=CONTEXT,
                                                 outcome="successful" if role == "success" else "failed")))
    # The success op runs over the successes, then the failure op over the failures.
    jobs.sort(key=lambda job: job[0] != "success")
    if len(posted) >= 2:
        ranked = sorted(posted, key=lambda p: p.score, reverse=True)  # stable, as the op's
        high, low = ranked[0], ranked[-1]
        if high.score > low.score:
            jobs.append(("comparative", template("comparative").format(
                higher_steps=high.steps, lower_steps=low.steps,
                higher_score=f"{high.score:.2f}", lower_score=f"{low.score:.2f}")))
    return jobs


async def summary_task_memory(summ: SummarizerSettings, task: Task, posted: list[Posted], *, threshold: float,
                              meta: dict[str, Any], rejected: list[Experience] | None = None
                              ) -> tuple[list[Experience], DistillStats]:
    """The validated memories of the posted trajectories, in the service's order (success,
    failure, comparative), each with ``extra["judge"]``; ``rejected`` collects the others."""
    stats = DistillStats()
    jobs = _extraction_jobs(posted)
    answers = await asyncio.gather(*(_ask(summ, role, prompt) for role, prompt in jobs))
    stats.llm_calls += len(jobs)
    candidates: list[Experience] = []
    for (role, _), answer in zip(jobs, answers):
        text = strip_reasoning(answer.content or "")
        items = experience_items(text)
        answer_health.note("distill", answer, valid=bool(items))
        if not items:
            stats.invalid_outputs += 1
        for item in items:
            exp = to_experience(item, role, task, summ.author, meta)
            if exp is None:
                stats.invalid_outputs += 1
                continue
            candidates.append(exp)
            stats.candidates[role] = stats.candidates.get(role, 0) + 1
    kept, judged = await validate(summ, candidates, threshold=threshold)
    stats.merge(judged)
    if rejected is not None:
        rejected += [e for e in candidates if not e.extra["judge"]["is_valid"]]
    return kept, stats


async def validate(summ: SummarizerSettings, candidates: list[Experience], *,
                   threshold: float) -> tuple[list[Experience], DistillStats]:
    """memory_validation_op.py: one call per memory, seeing only its condition and content."""
    stats = DistillStats()
    answers = await asyncio.gather(*(
        _ask(summ, "validation", template("validation").format(condition=e.when_to_use, task_memory_content=e.content))
        for e in candidates))
    stats.llm_calls += len(candidates)
    kept = []
    for exp, answer in zip(candidates, answers):
        text = strip_reasoning(answer.content or "")
        verdict = read_validation(text, threshold)
        # Kept either way, as the service keeps it; counted invalid when the judge did not
        # answer in its format, so a summarizer that never does is flagged.
        answer_health.note("judge", answer, valid=bool(_JSON_BLOCK.search(text)) and "Parse error" not in verdict["reason"])
        exp.extra["judge"] = {**verdict, "threshold": threshold}
        if verdict["is_valid"]:
            kept.append(exp)
        else:
            stats.rejected_by_judge += 1
    return kept, stats


async def summary_task_memory_simple(summ: SummarizerSettings, task: Task, posted: list[Posted], *,
                                     meta: dict[str, Any]) -> tuple[list[Experience], DistillStats]:
    """One trajectory-level summary per posted trajectory (simple_summary_op.py), no validation."""
    stats = DistillStats()
    prompts = [template("trajectory").format(
        execution_process=p.steps, execution_result="success" if p.score >= SIMPLE_SUCCESS_THRESHOLD else "fail",
        summary_example=prompt_file(PROMPTS["trajectory"][0])["summary_example"]) for p in posted]
    answers = await asyncio.gather(*(_ask(summ, "trajectory", prompt) for prompt in prompts))
    stats.llm_calls += len(prompts)
    out: list[Experience] = []
    for answer in answers:
        items = simple_items(strip_reasoning(answer.content or ""))
        answer_health.note("distill", answer, valid=items is not None)
        if items is None:
            stats.invalid_outputs += 1
            continue
        for item in items:
            exp = to_experience(item, "trajectory", task, summ.author, meta, content_key="memory")
            if exp is not None:
                out.append(exp)
                stats.candidates["trajectory"] = stats.candidates.get("trajectory", 0) + 1
    return out, stats

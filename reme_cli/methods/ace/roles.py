"""ACE's two LLM roles on a finished trajectory: the Reflector (diagnosis and a tag per
playbook bullet) and the Curator (ADD operations), as ace-appworld 748a9dc
``adaptation_react.py`` runs them (``reflector_call``, ``curator_call``).

- The Reflector's prompt is filled with ``str.replace`` (so its doubled braces stay doubled,
  as the authors send them), the generated code / rationale slots read "See full
  conversation history below", and the trajectory follows under "=== FULL CONVERSATION
  HISTORY ===". With ground truth, ``{{test_report}}`` holds the checker's verdict and its
  feedback (the harness's ground truth; the authors also give AppWorld's solution code,
  which the harness does not hand to methods: ``{{ground_truth_code}}`` says so).
- The Curator's prompt is filled with ``str.format``; its ``guidebook`` is the Reflector's
  whole answer. The answer must be ``{"reasoning": str, "operations": [...]}`` with only ADD
  operations carrying type, section and content, else nothing is applied (the authors'
  strict validation); ADDs to a section outside the whitelist are skipped one by one.

Both answers are free text with JSON in it, read as the authors read it (no JSON mode); only
a constrained summarizer (the small embedded model) is sent each role's schema, so that its
grammar makes the answer parse, with the Curator's 1-3 ADDs limited to the whitelisted sections. Bad
answers are counted per role (``ace_reflector``, ``ace_curator``); transport failures are not
caught (reme's client decides).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reme_cli.agent.render import render_trajectory
from reme_cli.core.counts import Counts
from reme_cli.core.text import clip
from reme_cli.llm import answer_health
from reme_cli.llm.json_reply import parse_json
from reme_cli.methods.ace import texts
from reme_cli.methods.ace.playbook import ALLOWED_SECTIONS, TAGS, section_key

HISTORY = "\n\n=== FULL CONVERSATION HISTORY ===\n"
SEE_BELOW = "See full conversation history below"
NO_GT_CODE = "[Ground truth code not available: the harness gives the checker's verdict and feedback]"

# The answers' schemas, sent only to a constrained (small local) summarizer, whose server's
# grammar holds the answer to them. Every string and list is bounded, as the other methods'
# formats are (dc/curator.py, reme/authors_flow.py): left free, the 135M embedded model writes
# one string until its answer cap cuts the JSON off, and whether it does is a matter of sampling.
REFLECTOR_SCHEMA = {
    "type": "object",
    "properties": {"reasoning": {"type": "string", "maxLength": 300}}
    | {k: {"type": "string", "maxLength": 150} for k in ("error_identification", "root_cause_analysis",
                                                         "correct_approach", "key_insight")}
    | {"bullet_tags": {"type": "array", "maxItems": 5, "items": {"type": "object", "properties": {
        "id": {"type": "string", "maxLength": 20}, "tag": {"type": "string", "enum": list(TAGS)}},
        "required": ["id", "tag"]}}},
    "required": ["reasoning", "key_insight", "bullet_tags"],
}
CURATOR_SCHEMA = {
    "type": "object",
    # 1-3 ADDs: left free, the 135M embedded model always answers none, and its playbook never
    # changes; at most 3, or it repeats ADDs until its answer cap cuts the JSON off.
    "properties": {"reasoning": {"type": "string", "maxLength": 300},
                   "operations": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
        "type": "object", "properties": {"type": {"type": "string", "enum": ["ADD"]},
                                         "section": {"type": "string", "enum": sorted(ALLOWED_SECTIONS)},
                                         "content": {"type": "string", "maxLength": 200}},
        "required": ["type", "section", "content"]}}},
    "required": ["reasoning", "operations"],
}


@dataclass
class AceStats(Counts):
    llm_calls: int = 0
    invalid_reflections: int = 0
    invalid_curations: int = 0
    proposed_adds: int = 0
    skipped_sections: int = 0
    tags: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TAGS, 0))


@dataclass
class Reflection:
    text: str  # the Reflector's whole answer (the Curator's guidebook)
    tags: list[dict[str, str]]  # {"id", "tag"} for bullets of the playbook shown


@dataclass
class Settings:
    summ: Any
    code_actions: bool
    max_chars: int  # the trajectory text's cut


def history(task: Any, trajectory: Any, max_chars: int) -> str:
    """The trajectory as the Reflector and Curator read it (the authors: the agent's
    messages, numbered; here the harness's rendering, without the injected playbook)."""
    return HISTORY + render_trajectory(task, trajectory, None, max_chars=max_chars)


def checker_report(outcome: Any) -> str:
    verdict = "PASSED" if outcome.success else "FAILED"
    details = json.dumps(outcome.details, ensure_ascii=False, default=str, sort_keys=True)
    return f"{verdict} (reward {outcome.reward:g})\n{clip(details, 4000)}"


async def _ask(s: Settings, prompt: str, name: str, schema: dict[str, Any]) -> Any:
    extra = {"response_format": s.summ.schema_format(name, schema)} if s.summ.constrained else {}
    return await s.summ.llm.chat([{"role": "user", "content": prompt}], temperature=s.summ.temperature,
                                 max_tokens=s.summ.max_tokens, **extra)


async def reflect(s: Settings, task: Any, trajectory: Any, outcome: Any, playbook_text: str, shown: set[str],
                  with_gt: bool, stats: AceStats) -> Reflection:
    prompt = texts.reflector(with_gt, s.code_actions)
    for slot, value in (("{{ground_truth_code}}", NO_GT_CODE), ("{{test_report}}", checker_report(outcome)),
                        ("{{generated_code}}", SEE_BELOW), ("{{generated_rationale}}", SEE_BELOW),
                        ("{{spec_or_api_docs}}", SEE_BELOW), ("{{execution_error}}", SEE_BELOW),
                        ("{{playbook}}", playbook_text or "N/A"), ("{{previous_reflection}}", "N/A")):
        prompt = prompt.replace(slot, value)
    prompt += history(task, trajectory, s.max_chars)
    stats.llm_calls += 1
    answer = await _ask(s, prompt, "reflection", REFLECTOR_SCHEMA)
    parsed = parse_json(answer.content, dict)
    tags: list[dict[str, str]] = []
    for t in (parsed or {}).get("bullet_tags") or []:
        bullet = isinstance(t, dict) and str(t.get("id") or t.get("bullet_id") or "").strip()
        if bullet and bullet in shown and t.get("tag") in TAGS and bullet not in {x["id"] for x in tags}:
            tags.append({"id": bullet, "tag": t["tag"]})
            stats.tags[t["tag"]] += 1
    valid = isinstance(parsed, dict) and isinstance(parsed.get("key_insight"), str)
    answer_health.note("ace_reflector", answer, valid=valid)
    stats.invalid_reflections += not valid
    return Reflection(answer.content or "", tags)


def _operations(parsed: Any, stats: AceStats) -> list[dict[str, str]] | None:
    """The ADDs of a valid answer (None: invalid, nothing applies)."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("reasoning"), str) \
            or not isinstance(parsed.get("operations"), list):
        return None
    ops = []
    for op in parsed["operations"]:
        if not isinstance(op, dict) or op.get("type") != "ADD" or not {"section", "content"} <= set(op):
            return None
        if section_key(str(op["section"])) not in ALLOWED_SECTIONS:
            stats.skipped_sections += 1
            continue
        ops.append({"op": "add", "section": str(op["section"]), "content": str(op["content"])})
    return ops


async def curate(s: Settings, task: Any, trajectory: Any, playbook_text: str, reflection: Reflection,
                 stats: AceStats) -> list[dict[str, str]]:
    prompt = texts.curator(s.code_actions).format(
        initial_generated_code=SEE_BELOW, final_generated_code=SEE_BELOW, guidebook=reflection.text,
        current_playbook=playbook_text, question_context=task.query, gt=None)
    prompt += history(task, trajectory, s.max_chars)
    stats.llm_calls += 1
    answer = await _ask(s, prompt, "curation", CURATOR_SCHEMA)
    ops = _operations(parse_json(answer.content, dict), stats)
    answer_health.note("ace_curator", answer, valid=ops is not None)
    if ops is None:
        stats.invalid_curations += 1
        return []
    stats.proposed_adds += len(ops)
    return ops

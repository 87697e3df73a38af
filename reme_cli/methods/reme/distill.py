"""Acquisition: turn sampled trajectories into candidate experiences, judge them, and
reflect on failures (ReMe, arXiv 2512.10696, Sec. 3).

Pure async functions over an `LLM`: no files, no global state beyond the read-only prompt
texts in `prompts/*.md` beside this module. Every bad LLM answer is counted and skipped, never raised;
transport errors from the client do propagate (the client already retried them).

Prompt files may open with a `<!-- provenance -->` comment (where the text came from and how
it differs from the official code's; never sent), then hold a system part, then a
line `<!-- user -->`, then the user part
with `$name` placeholders (`string.Template`), so braces and dollars inside trajectories
cannot break the templating. The system part's only placeholders are a benchmark family's
words (`prompts/families.toml`, picked by `Task.prompt_family`), filled once at load, so the
system prefix stays identical per family for prefix caching.
"""

from __future__ import annotations

import asyncio
import functools
import re
import importlib.resources
import tomllib
from dataclasses import asdict, dataclass, field
from string import Template
from typing import Any

from reme_cli.agent.trajectory import Trajectory
from reme_cli.agent.render import render_trajectory
from reme_cli.bench.base import DEFAULT_PROMPT_FAMILY, Outcome, Task
from reme_cli.core.counts import Counts
from reme_cli.llm import answer_health
from reme_cli.llm.client import LLM, ChatResult
from reme_cli.llm.json_reply import parse_json
from reme_cli.methods.reme.experience import Experience

GRANULARITIES = ("keypoint", "trajectory")
JUDGE_CRITERIA = ("actionable", "accurate", "relevant", "clear", "unique")
_USER_MARK = "<!-- user -->"



# ---------------------------------------------------------------------------- prompts
@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: Template

    def messages(self, **values: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user.substitute(values)},
        ]


def _prompts_dir():
    return importlib.resources.files(__package__) / "prompts"


@functools.cache
def prompt_families() -> dict[str, dict[str, str]]:
    """Each family's words for the system parts (`prompts/families.toml`)."""
    return tomllib.loads((_prompts_dir() / "families.toml").read_text(encoding="utf-8"))


@functools.cache
def load_prompt(name: str, family: str = DEFAULT_PROMPT_FAMILY) -> Prompt:
    """`prompts/<name>.md` (beside this module) split into its system part, with `family`'s
    words filled in, and its user template."""
    families = prompt_families()
    if family not in families:
        raise ValueError(f"unknown prompt family {family!r}; choose one of {', '.join(families)}")
    text = (_prompts_dir() / f"{name}.md").read_text(encoding="utf-8")
    # A leading <!-- ... --> block says where the prompt came from; the model never sees it.
    text = re.sub(r"\A\s*<!--(?!\s*user\s*-->).*?-->\s*", "", text, flags=re.DOTALL)
    if _USER_MARK not in text:
        raise ValueError(f"prompt {name}.md has no '{_USER_MARK}' line")
    system, user = text.split(_USER_MARK, 1)
    try:
        system = Template(system.strip()).substitute(families[family])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"prompt {name}.md: the system part may hold only the words of family {family!r} "
                         f"(no other $placeholder): {exc}") from None
    return Prompt(name, system, Template(user.strip()))


# ---------------------------------------------------------------------------- stats
@dataclass
class DistillStats(Counts):
    """Counters of one acquisition step; the caller sums them across tasks with `merge`."""

    candidates: dict[str, int] = field(default_factory=dict)  # per source
    invalid_outputs: int = 0  # non-JSON answers (once each) + skipped items + unparseable verdicts
    rejected_by_judge: int = 0  # judged, score below threshold
    llm_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------- distillation
async def _ask(llm: LLM, messages: list[dict[str, str]], *, temperature: float, max_tokens: int | None,
               seed: int | None, response_format: dict[str, Any] | None) -> ChatResult:
    kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
    if response_format is not None:
        kwargs["response_format"] = response_format
    return await llm.chat(messages, **kwargs)


def _items_of(parsed: Any) -> list[Any] | None:
    """The list of experience items in a parsed answer, or None if there is none.

    Accepts the asked-for list, a single experience object, and an object wrapping the
    list (what JSON-object mode forces a model to produce)."""
    if isinstance(parsed, list):
        return parsed
    if isinstance(parsed, dict):
        if "when_to_use" in parsed or "experience" in parsed:
            return [parsed]
        for key in ("experiences", "items", "memories", "insights", "results"):
            if isinstance(parsed.get(key), list):
                return parsed[key]
        lists = [v for v in parsed.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
    return None


def _str_list(value: Any) -> list[str] | None:
    """A list of non-empty strings; a comma-separated string is split. None = wrong type."""
    if value is None:
        return []
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return [x.strip() for x in value if x.strip()]
    return None


_ITEM_KEYS = {"when_to_use", "condition", "experience", "content", "tags", "keywords", "confidence",
              "tools_used", "task_query", "generalized_query"}


def _to_experience(item: Any, source: str, task: Task, author: str,
                   meta: dict[str, Any]) -> Experience | None:
    """One LLM item -> Experience, or None if a required field is missing or any field has
    the wrong type (the item is skipped; never half-trusted)."""
    if not isinstance(item, dict):
        return None
    when = item.get("when_to_use", item.get("condition"))
    content = item.get("experience", item.get("content"))
    if not isinstance(when, str) or not when.strip() or not isinstance(content, str) or not content.strip():
        return None
    tags = _str_list(item.get("tags", item.get("keywords")))
    tools = _str_list(item.get("tools_used"))
    if tags is None or tools is None:
        return None
    kwargs: dict[str, Any] = {}
    if "confidence" in item and item["confidence"] is not None:
        c = item["confidence"]
        if isinstance(c, str):
            try:
                c = float(c)
            except ValueError:
                return None
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c <= 1.0:
            return None
        kwargs["confidence"] = float(c)
    task_query = item.get("task_query")
    generalized = item.get("generalized_query")
    if task_query is not None and not isinstance(task_query, str):
        return None
    if generalized is not None and not isinstance(generalized, str):
        return None
    extra: dict[str, Any] = {"distill": dict(meta)}
    rest = {k: v for k, v in item.items() if k not in _ITEM_KEYS}
    if rest:
        extra["llm_fields"] = rest  # e.g. the official code's step_type
    try:
        return Experience(
            when_to_use=when.strip(),
            content=content.strip(),
            source=source,  # type: ignore[arg-type]
            keywords=tags,
            tools_used=tools,
            task_query=(task_query or "").strip() or task.query,
            generalized_query=(generalized or "").strip(),
            origin_task=task.id,
            author=author,
            extra=extra,
            **kwargs,
        )
    except ValueError:
        return None


def _read_experiences(answer: ChatResult, source: str, task: Task, author: str, meta: dict[str, Any],
                      stats: DistillStats) -> list[Experience]:
    items = _items_of(parse_json(answer.content or ""))
    answer_health.note("distill", answer, valid=items is not None)
    if items is None:
        stats.invalid_outputs += 1  # a whole unusable answer counts once
        return []
    out: list[Experience] = []
    for item in items:
        exp = _to_experience(item, source, task, author, meta)
        if exp is None:
            stats.invalid_outputs += 1
            continue
        out.append(exp)
    stats.candidates[source] = stats.candidates.get(source, 0) + len(out)
    return out


async def distill_task(
    llm: LLM,
    task: Task,
    attempts: list[tuple[Trajectory, Outcome]],
    *,
    granularity: str = "keypoint",
    author: str,
    temperature: float = 0.0,
    max_tokens: int | None = 2048,
    seed: int | None = None,
    max_trajectory_chars: int = 12000,
    response_format: dict[str, Any] | None = None,
) -> tuple[list[Experience], DistillStats]:
    """Candidate experiences from the N sampled attempts of one task.

    keypoint: best = first attempt with the max reward, worst = first with the min reward;
    success analysis of best if it succeeded, failure analysis of worst if it failed,
    comparative analysis of the pair if their rewards differ (the calls run concurrently;
    results keep the order success, failure, comparative).
    trajectory: one summary of the best attempt (source "trajectory").
    `max_trajectory_chars` caps each rendered trajectory (a comparative prompt holds two).
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"unknown granularity {granularity!r}; choose one of {', '.join(GRANULARITIES)}")
    stats = DistillStats()
    if not attempts:
        return [], stats
    rewards = [o.reward for _, o in attempts]
    bi = max(range(len(attempts)), key=lambda i: (rewards[i], -i))
    wi = min(range(len(attempts)), key=lambda i: (rewards[i], i))
    best_traj, best_out = attempts[bi]
    worst_traj, worst_out = attempts[wi]
    meta = {"granularity": granularity, "attempts": len(attempts),
            "best_reward": best_out.reward, "worst_reward": worst_out.reward}

    def render(traj: Trajectory, outcome: Outcome) -> str:
        return render_trajectory(task, traj, outcome, max_trajectory_chars)

    jobs: list[tuple[str, list[dict[str, str]]]] = []
    if granularity == "trajectory":
        jobs.append(("trajectory", load_prompt("trajectory", task.prompt_family).messages(
            trajectory=render(best_traj, best_out),
            outcome="successful" if best_out.success else "failed")))
    else:
        if best_out.success:
            jobs.append(("success", load_prompt("success", task.prompt_family).messages(trajectory=render(best_traj, best_out))))
        if not worst_out.success:
            jobs.append(("failure", load_prompt("failure", task.prompt_family).messages(trajectory=render(worst_traj, worst_out))))
        if best_out.reward != worst_out.reward:
            jobs.append(("comparative", load_prompt("comparative", task.prompt_family).messages(
                best=render(best_traj, best_out), worst=render(worst_traj, worst_out),
                best_reward=f"{best_out.reward:g}", worst_reward=f"{worst_out.reward:g}")))

    answers = await asyncio.gather(*(
        _ask(llm, msgs, temperature=temperature, max_tokens=max_tokens, seed=seed,
             response_format=response_format)
        for _, msgs in jobs))
    stats.llm_calls += len(jobs)
    experiences: list[Experience] = []
    for (source, _), answer in zip(jobs, answers):
        experiences += _read_experiences(answer, source, task, author, meta, stats)
    return experiences, stats


# ---------------------------------------------------------------------------- judge
def _unit(value: Any) -> float | None:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if 0.0 <= value <= 1.0 else None


def _read_verdict(text: str) -> dict[str, Any] | None:
    """{"score", "reason", "criteria"} from a judge answer, or None if unusable.

    The overall score is the judge's own "score"; if that is absent, the mean of the five
    criteria (all must be present then). Rounded to 6 places so float noise cannot move a
    score across the threshold."""
    parsed = parse_json(text, dict)
    if not isinstance(parsed, dict):
        return None
    criteria: dict[str, float] = {}
    for k in JUDGE_CRITERIA:
        v = _unit(parsed.get(k))
        if v is not None:
            criteria[k] = v
    score = _unit(parsed.get("score", parsed.get("overall")))
    if score is None:
        if len(criteria) != len(JUDGE_CRITERIA):
            return None
        score = sum(criteria.values()) / len(criteria)
    reason = parsed.get("reason", "")
    return {"score": round(score, 6), "reason": reason if isinstance(reason, str) else str(reason),
            "criteria": criteria}


async def judge(
    llm: LLM,
    task: Task,
    candidates: list[Experience],
    *,
    threshold: float,
    temperature: float = 0.0,
    max_tokens: int | None = 1024,
    seed: int | None = None,
    response_format: dict[str, Any] | None = None,
) -> tuple[list[Experience], DistillStats]:
    """Keep the candidates whose judge score is >= threshold (paper 0.3, official code 0.5).

    One call per candidate, as the official code does: each verdict is independent of the
    other candidates and of their order, one garbled answer loses one candidate rather than
    the batch, and all calls share the system prefix and run concurrently. (Uniqueness
    against the pool is left to the embedding dedup; "unique" here means non-generic.)
    Every candidate gets `extra["judge"] = {score, reason, criteria, threshold}`, or
    `{"error": "unparseable verdict"}`.
    """
    stats = DistillStats()
    if not candidates:
        return [], stats
    prompt = load_prompt("judge", task.prompt_family)
    jobs = [prompt.messages(
        task=task.query,
        source=exp.source,
        when_to_use=exp.when_to_use,
        content=exp.content,
        tags=", ".join(exp.keywords) or "(none)",
        tools_used=", ".join(exp.tools_used) or "(none)",
    ) for exp in candidates]
    answers = await asyncio.gather(*(
        _ask(llm, msgs, temperature=temperature, max_tokens=max_tokens, seed=seed,
             response_format=response_format)
        for msgs in jobs))
    stats.llm_calls += len(jobs)
    kept: list[Experience] = []
    for exp, answer in zip(candidates, answers):
        verdict = _read_verdict(answer.content or "")
        answer_health.note("judge", answer, valid=verdict is not None)
        if verdict is None:
            # An unjudged candidate is not trusted: reject it, and count the bad output.
            exp.extra["judge"] = {"error": "unparseable verdict", "threshold": threshold}
            stats.invalid_outputs += 1
            continue
        exp.extra["judge"] = {**verdict, "threshold": threshold}
        if verdict["score"] >= threshold:
            kept.append(exp)
        else:
            stats.rejected_by_judge += 1
    return kept, stats


# ---------------------------------------------------------------------------- reflection
async def reflect(
    llm: LLM,
    task: Task,
    traj: Trajectory,
    outcome: Outcome,
    previous_lessons: list[str],
    *,
    temperature: float = 0.0,
    max_tokens: int | None = 1024,
    seed: int | None = None,
    max_trajectory_chars: int = 12000,
    response_format: dict[str, Any] | None = None,
) -> str | None:
    """Failure-aware reflection: guidance for the retry of a failed attempt.

    Returns the "guidance" string of the JSON answer, or None when the answer has no
    usable guidance (the caller then retries without a new lesson or stops)."""
    previous = "\n".join(f"- {p.strip()}" for p in previous_lessons if p.strip()) or "(none)"
    messages = load_prompt("reflection", task.prompt_family).messages(
        trajectory=render_trajectory(task, traj, outcome, max_trajectory_chars), previous=previous)
    answer = await _ask(llm, messages, temperature=temperature, max_tokens=max_tokens, seed=seed,
                        response_format=response_format)
    parsed = parse_json(answer.content or "", dict)
    guidance = parsed.get("guidance") if isinstance(parsed, dict) else None
    usable = isinstance(guidance, str) and bool(guidance.strip())
    answer_health.note("reflection", answer, valid=usable)
    return guidance.strip() if usable else None


def reflection_experience(task: Task, lesson: str, author: str) -> Experience:
    """The lesson kept after a retry succeeded (source "reflection")."""
    query = " ".join(task.query.split())
    if len(query) > 300:
        query = query[:300].rstrip() + "..."
    return Experience(
        when_to_use=f"When handling a request like: {query}",
        content=lesson.strip(),
        source="reflection",
        task_query=task.query,
        origin_task=task.id,
        author=author,
    )


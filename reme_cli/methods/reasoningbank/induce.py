"""ReasoningBank's two LLM steps after a trajectory (the authors' autoeval/evaluate_trajectory.py
then induce_memory.py): judge success or failure, then extract up to 3 items with the
success or the failure prompt. Both go to the summarizer; answers are counted per role.

A bad judge answer (no ``Status:`` line) reads as a failure, as the authors' parser reads
it; a bad extraction answer gives no items. Both are counted (``reasoningbank_judge``,
``reasoningbank_extract``). Transport failures are not caught: reme's client decides. A
constrained summarizer (the small embedded model) answers within the prompts' formats
(``JUDGE_GRAMMAR``, ``EXTRACT_GRAMMAR``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reme_cli.agent.trajectory import Trajectory
from reme_cli.agent.render import render_trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.core.counts import Counts
from reme_cli.llm import answer_health
from reme_cli.methods.reasoningbank import prompting
from reme_cli.methods.reasoningbank.items import Record

JUDGE_ROLE, EXTRACT_ROLE = "reasoningbank_judge", "reasoningbank_extract"


@dataclass
class InduceStats(Counts):
    llm_calls: int = 0
    judged: int = 0
    judge_invalid: int = 0
    judge_agrees: int = 0  # judged verdicts equal to the checker's
    success_prompts: int = 0
    failure_prompts: int = 0
    extract_invalid: int = 0  # answers without a single usable item
    items: int = 0


@dataclass
class Induced:
    record: Record | None  # None: the extraction gave no item
    report: dict[str, Any]  # what the unit records: judge vs checker, items extracted


def _response(trajectory: Trajectory) -> str:
    """The agent's last words to the user (the authors: the argument of send_msg_to_user)."""
    texts = [s.text.strip() for turn in trajectory.turns for s in turn if s.text and s.text.strip()]
    return texts[-1] if texts else ""


# For a constrained (small local) summarizer: the answer formats the prompts ask for, the
# judge's two lines and up to 3 Markdown items, short enough to end within its answer cap.
JUDGE_GRAMMAR = r"""root ::= "Thoughts: " [^\n]{1,400} "\nStatus: \"" ("success" | "failure") "\""
"""
EXTRACT_GRAMMAR = r"""root ::= item ("\n\n" item){0,2}
item ::= "# Memory Item " [1-3] "\n## Title " text "\n## Description " text "\n## Content " text
text ::= [^\n#]{1,120}
"""


async def _ask(summ: Any, messages: list[dict[str, str]], grammar: str) -> Any:
    return await summ.llm.chat(messages, temperature=summ.temperature, max_tokens=summ.max_tokens,
                               **summ.text_grammar(grammar))


async def judge(summ: Any, task: Task, text: str, trajectory: Trajectory, stats: InduceStats) -> dict[str, Any]:
    stats.llm_calls += 1
    stats.judged += 1
    answer = await _ask(summ, prompting.judge_messages(task.prompt_family, task.query, text, _response(trajectory)),
                        JUDGE_GRAMMAR)
    verdict, thoughts, valid = prompting.read_verdict(answer.content)
    answer_health.note(JUDGE_ROLE, answer, valid=valid)
    stats.judge_invalid += not valid
    return {"verdict": verdict, "valid": valid, "thoughts": thoughts}


async def induce(summ: Any, cfg: Any, task: Task, trajectory: Trajectory, outcome: Outcome, source: str,
                 stats: InduceStats) -> Induced:
    """Judge (``memory.judge=llm``) or take the checker's verdict (``checker``), then extract."""
    # Neither step sees the checker's verdict: the text is rendered without the outcome.
    text = render_trajectory(task, trajectory, None, max_chars=cfg.trajectory_max_chars)
    checker = "success" if outcome.success else "failure"
    if cfg.judge == "llm":
        judged = await judge(summ, task, text, trajectory, stats)
        stats.judge_agrees += judged["verdict"] == checker
    else:
        judged = {"verdict": checker, "valid": True, "thoughts": None}
    success = judged["verdict"] == "success"
    stats.success_prompts += success
    stats.failure_prompts += not success
    stats.llm_calls += 1
    answer = await _ask(summ, prompting.extraction_messages(success, task.prompt_family, task.query, text),
                        EXTRACT_GRAMMAR)
    items = prompting.read_items(answer.content, cfg.max_items)
    answer_health.note(EXTRACT_ROLE, answer, valid=bool(items))
    stats.extract_invalid += not items
    stats.items += len(items)
    record = Record.new(task.query, source, judged["verdict"], items) if items else None
    report = {"judge": {"mode": cfg.judge, **judged}, "checker": checker,
              "judge_agrees": judged["verdict"] == checker,
              "extracted": {"prompt": judged["verdict"], "count": len(items),
                            "titles": [it["title"] for it in items],
                            "ids": record.item_ids() if record else []}}
    return Induced(record, report)

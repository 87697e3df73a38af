"""What ReMe's summarizer makes of a task's trajectories: candidate experiences, validated.

``memory.prompts`` picks whose summarizer: ``authors`` (default) runs the authors' memory
service's flow with their prompts (``authors_flow.py``, fed ``step_sequence.py``'s text);
``reme`` runs reme's own prompts, written from the paper's text (``distill.py``: best and
worst trajectory, five-criteria judge). Pool building and a dynamic run's per-trial summaries
go through here alike, as the authors' agents post both to the same flow.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from reme_cli.agent.trajectory import Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.core.errors import UserError
from reme_cli.llm import answer_health
from reme_cli.methods.reme.authors_flow import (Posted, pool_selection, summary_task_memory,
                                                summary_task_memory_simple)
from reme_cli.methods.reme.config import ReMeConfig
from reme_cli.methods.reme.distill import DistillStats, distill_task, judge
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.formats import sampling
from reme_cli.methods.reme.step_sequence import DEFAULT_SHAPE, AgentShape, step_sequence
from reme_cli.methods.summarizer import SummarizerSettings

# One attempt to summarize: its trajectory, its outcome, and the guidance it was given.
Attempted = tuple[Trajectory, Outcome, str | None]


async def summarize(summ: SummarizerSettings, cfg: ReMeConfig, task: Task, attempts: list[Attempted], *,
                    shape: AgentShape = DEFAULT_SHAPE, building: bool = False,
                    tools: list[dict[str, Any]] | None = None,
                    rejected: list[Experience] | None = None) -> tuple[list[Experience], DistillStats]:
    """The validated experiences of ``attempts``. ``building``: a pool build's N sampled
    trajectories of a training task (the authors post two of them, with ``tools``, the task's
    tool schemas, appended to the first message); otherwise a run's trials, all posted.
    ``rejected`` collects the candidates the validation turned down (with their verdicts)."""
    if cfg.prompts == "reme":
        pairs = [(t, o) for t, o, _ in attempts]
        candidates, stats = await distill_task(summ.llm, task, pairs, granularity=cfg.granularity,
                                               author=summ.author, **sampling(summ, "distill"))
        kept, judged = await judge(summ.llm, task, candidates, threshold=cfg.judge_threshold,
                                   **sampling(summ, "judge"))
        stats.merge(judged)
        _collect(rejected, candidates, kept)
        return kept, stats
    chosen = pool_selection([o.reward for _, o, _ in attempts]) if building else list(range(len(attempts)))
    posted = [Posted(step_sequence(task, attempts[i][0], guidance=attempts[i][2], shape=shape,
                                   tools=tools if building else None), attempts[i][1].reward,
                     attempts[i][1].success) for i in chosen]
    meta = {"prompts": "authors", "granularity": cfg.granularity, "attempts": len(attempts),
            "posted_rewards": [p.score for p in posted]}
    if cfg.granularity == "trajectory":
        return await summary_task_memory_simple(summ, task, posted, meta=meta)
    return await summary_task_memory(summ, task, posted, threshold=cfg.judge_threshold, meta=meta,
                                     rejected=rejected)


def _collect(into: list[Experience] | None, candidates: list[Experience], kept: list[Experience]) -> None:
    if into is not None:
        ids = {id(e) for e in kept}
        into += [e for e in candidates if id(e) not in ids]


async def summary_or_nothing(summary: Awaitable[list[Experience]]) -> tuple[list[Experience], str | None]:
    """A summary's experiences, or none and the error where making it raised (the summarizer's
    context overflowed, its retries ran out, the embedding failed): the authors' agents took a
    failed summary_task_memory call as an empty list and went on, the trial keeping its reward
    (65971baf bfcl_agent.py:192-211, appworld_react_agent.py:294-314). Each summary is counted
    (``answer_health.SUMMARY``), so ``summarizer.max_failed_share`` still raises the alarm. A
    broken server (``RunAborted``) or bad input stops the run as anywhere else."""
    try:
        found = await summary
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - the authors' service answered any failure with an error status
        answer_health.note_summary(exc)
        return [], f"{type(exc).__name__}: {exc}"
    answer_health.note_summary(None)
    return found, None

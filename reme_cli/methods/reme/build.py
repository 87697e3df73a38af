"""ReMe's acquisition from sampled training trajectories (the second and third phases of
`reme build-pool memory=reme`).

distill: per task, the summarizer's analyses of the sampled trajectories and their
validation (``summarize.py``: the authors' flow by default, which posts the first-lowest and
the last-highest of them with the task's tool schemas; ``build/distill.jsonl``, one line per
finished task);
assemble: the validated candidates in task order into the pool (rebuilt from distill's file
each time, so it is cheap and never half-written); de-duplicated against the growing pool
only with ``memory.build_dedup`` (the flow of the released pools' period had no such step).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from reme_cli.core.config import config_hash
from reme_cli.core.io import append_lines
from reme_cli.core.reading import JsonFile
from reme_cli.llm.answer_health import answer_tally, merge
from reme_cli.llm.inflight import most_in_flight
from reme_cli.methods.base import BuildContext, BuildResult
from reme_cli.methods.reme.distill import DistillStats
from reme_cli.methods.reme.experience import Experience, assign_stable_ids
from reme_cli.methods.reme.pool import Pool
from reme_cli.methods.reme.step_sequence import agent_shape
from reme_cli.methods.reme.summarize import summarize, summary_or_nothing

DISTILL_FILE = "distill.jsonl"
# One line per distilled training task (a resumed build distills the tasks it lacks).
DISTILLED = JsonFile("a ReMe build's distill.jsonl", lines=True, fix="move that line out (its task is distilled again)",
                     shape={"task_id": str, "trajectories": int, "stats": dict, "experiences": list,
                            "summarizer_answers": dict}, required=("task_id", "trajectories", "stats", "experiences"))


async def distill_training(ctx: BuildContext) -> None:
    cfg, summarizer = ctx.cfg, ctx.summarizer
    done = {rec["task_id"] for rec in DISTILLED.records(ctx.work / DISTILL_FILE)}
    slots = asyncio.Semaphore(most_in_flight(cfg.llm.concurrency))

    shape = agent_shape(cfg.benchmark.name)

    async def distill_one(task_id: str) -> None:
        async with slots:
            task = ctx.bench.load(task_id)
            attempts = ctx.attempts[task_id]
            tools = await task_tools(ctx.bench, task) if cfg.memory.prompts == "authors" and shape.tool_block else None
            rejected: list[Experience] = []
            stats = DistillStats()

            async def run() -> list[Experience]:
                found, summarized = await summarize(summarizer, cfg.memory, task, [(t, o, None) for t, o in attempts],
                                                    shape=shape, building=True, tools=tools, rejected=rejected)
                stats.merge(summarized)
                return found

            with answer_tally() as answers:  # kept in the task's line: a resumed build counts them all
                # A summary that raised leaves the task out, as the authors' pool builder skipped
                # a group whose summary_task_memory call failed (init_task_memory_pool.py:122-127,160-174).
                kept, failed = await summary_or_nothing(run())
            assign_stable_ids(kept, task_id)
            await asyncio.to_thread(append_lines, ctx.work / DISTILL_FILE, [{
                "task_id": task_id,
                "trajectories": len(attempts),
                "successes": sum(o.success for _, o in attempts),
                "stats": stats.to_dict(),
                "summarizer_answers": answers.to_dict(),
                "experiences": [e.to_dict() for e in kept],
                # What the validation turned down, with its verdicts: to inspect, never pooled.
                "rejected": [e.to_dict() for e in rejected],
                **({"summary_error": failed} if failed else {}),
            }])

    await asyncio.gather(*(distill_one(t) for t in ctx.task_ids if t not in done and ctx.attempts.get(t)))


async def task_tools(bench, task) -> list[dict]:
    """The tool schemas an episode of ``task`` starts with (its environment's), for the
    authors' pool builder, which appends them to each trajectory's first message."""
    env = await bench.open(task, f"build-tools-{task.id}")
    try:
        return env.tools()
    finally:
        await env.close()


def assemble(ctx: BuildContext, staging: Path) -> BuildResult:
    """The judged candidates into a fresh pool, in the split's task order (de-duplicated
    when ``memory.build_dedup`` asks)."""
    cfg = ctx.cfg
    by_task = {rec["task_id"]: rec for rec in DISTILLED.records(ctx.work / DISTILL_FILE)}
    stats = DistillStats()
    candidates: list[Experience] = []
    for task_id in ctx.task_ids:
        rec = by_task.get(task_id)
        if rec is None:
            continue
        stats.merge(DistillStats(**rec["stats"]))
        candidates += [Experience.from_dict(e) for e in rec["experiences"]]

    pool = Pool.create(staging, ctx.embedder, retrieval_key=cfg.memory.retrieval_key, built_by={
        "kind": "build-pool", "run": str(ctx.work), "config_hash": config_hash(cfg),
        "model": cfg.model.name, "summarizer": cfg.summarizer.name, "prompts": cfg.memory.prompts,
        "granularity": cfg.memory.granularity, "judge_threshold": cfg.memory.judge_threshold,
        "build_dedup": cfg.memory.build_dedup, "dedup_threshold": cfg.memory.dedup_threshold,
        "dedup_text": cfg.memory.dedup_text, "samples": cfg.build.samples})
    added = pool.add(candidates, dedup_threshold=cfg.memory.dedup_threshold if cfg.memory.build_dedup else None,
                     dedup_text=cfg.memory.dedup_text)
    pool.save()

    report = {
        "tasks_distilled": len(by_task),
        "trajectories_per_task": {t: by_task[t]["trajectories"] for t in by_task},
        "candidates_by_source": stats.candidates,
        "invalid_llm_outputs": stats.invalid_outputs,
        "rejected_by_judge": stats.rejected_by_judge,
        # Tasks whose summary raised: their candidates were skipped (the authors' builder too).
        "summary_failures": sorted(t for t, rec in by_task.items() if rec.get("summary_error")),
        "removed_as_duplicates": len(candidates) - len(added),
        "pool_size": len(added),
        "pool_by_source": {s: sum(e.source == s for e in added) for s in sorted({e.source for e in added})},
        "summarizer_llm_calls": stats.llm_calls,
        # Lines written before these counts existed add nothing.
        "summarizer_answers": merge(*(rec.get("summarizer_answers") for rec in by_task.values())),
    }
    rows = [
        ("tasks distilled", str(report["tasks_distilled"])),
        ("candidates by source", ", ".join(f"{k} {v}" for k, v in sorted(stats.candidates.items())) or "0"),
        ("invalid LLM outputs (skipped)", str(stats.invalid_outputs)),
        ("rejected by judge", str(stats.rejected_by_judge)),
        ("tasks whose summary failed (skipped)", str(len(report["summary_failures"]))),
        ("removed as duplicates", str(report["removed_as_duplicates"])),
        ("pool size", str(len(added))),
    ]
    return BuildResult(report, rows)

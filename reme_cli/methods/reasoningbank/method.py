"""`memory=reasoningbank`: ReasoningBank in build-pool (training trajectories are judged and
mined for items), fixed mode (retrieve from a read-only bank) and dynamic mode (judge and
extract after each task, add the items to the stream's bank). See this package's docstring."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reme_cli.core.io import append_lines
from reme_cli.core.reading import JsonFile
from reme_cli.core.staging import replace_dir
from reme_cli.bench.base import Task
from reme_cli.llm.embed import make_embedder_for
from reme_cli.llm.inflight import most_in_flight
from reme_cli.methods.base import Applied, BuildContext, BuildResult, Learned, Memory, MethodContext, Retrieval, Tried
from reme_cli.methods.pool_dirs import find_pool
from reme_cli.methods.hooks import CostGuess, SavedState
from reme_cli.methods.reasoningbank import describe, prompting
from reme_cli.methods.reasoningbank.config import ReasoningBankConfig
from reme_cli.methods.reasoningbank.induce import InduceStats, induce
from reme_cli.methods.reasoningbank.items import METHOD, ItemStore

BUILD_LINES = "reasoningbank_build.jsonl"
# One line per mined training task (a resumed build mines the tasks it lacks).
MINED = JsonFile("a ReasoningBank build's reasoningbank_build.jsonl", lines=True,
                 fix="move that line out (its task is mined again)",
                 shape={"unit": str, "events": list, "reports": list, "stats": dict},
                 required=("unit", "events", "reports", "stats"))


def resolve_store(path: str | Path) -> Path:
    return find_pool(path, METHOD, "a ReasoningBank pool")


@dataclass(eq=False)  # the state and what it is run with (identity, not value, compares)
class ReasoningBank(Memory):
    config_class = ReasoningBankConfig
    report_columns = {"setting": "ReasoningBank ({mode})", "params": ["memory.top_k", "memory.judge"],
                      "series": {"bank_items": "memory items in the bank"}}
    needs_summarizer = True  # judge and extraction go to the summarizer (the executor by default)
    saved = SavedState(METHOD, describe.read, describe.change, ("store",), starts_empty="an empty bank")

    store: ItemStore
    cfg: ReasoningBankConfig
    summ: Any

    # ------------------------------------------------------------------ build-pool
    @classmethod
    def expected_summarizer_calls(cls, cfg: Any, guess: CostGuess, build: bool = False) -> float:
        """Per judged trajectory: the judge (unless ``judge=checker``) and one extraction;
        after every dynamic unit, and per training trajectory mined."""
        per = (1.0 if cfg.memory.judge == "llm" else 0.0) + 1.0
        if not build:
            return per if cfg.eval.mode == "dynamic" else 0.0
        return per * (cfg.build.samples if cfg.memory.build_trajectories == "all" else 1)

    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """Every training task's trajectories judged and mined, concurrently (extraction does
        not read the bank); a task's result is one durable line, so an interrupted build
        resumes after the tasks it finished. The pool takes them in split order."""
        cfg: ReasoningBankConfig = ctx.cfg.memory
        path = ctx.work / BUILD_LINES
        done = {line["unit"] for line in MINED.records(path)}
        todo = [t for t in ctx.task_ids if t not in done and ctx.attempts.get(t)]
        slots = asyncio.Semaphore(most_in_flight(ctx.cfg.llm.concurrency))

        async def mine(task_id: str) -> None:
            async with slots:
                task = ctx.bench.load(task_id)
                picked = ctx.attempts[task_id] if cfg.build_trajectories == "all" else ctx.attempts[task_id][:1]
                stats, events, reports = InduceStats(), [], []
                for i, (trajectory, outcome) in enumerate(picked):
                    got = await induce(ctx.summarizer, cfg, task, trajectory, outcome, f"build/{task_id}#{i}", stats)
                    reports.append(got.report)
                    if got.record:
                        events.append({"unit": task_id, "op": "add", "record": asdict(got.record)})
                await asyncio.to_thread(append_lines, path, [{"unit": task_id, "events": events, "reports": reports,
                                                              "stats": asdict(stats)}])

        await asyncio.gather(*(mine(t) for t in todo))

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        order = {t: i for i, t in enumerate(ctx.task_ids)}
        lines = sorted(MINED.records(ctx.work / BUILD_LINES), key=lambda line: order.get(line["unit"], len(order)))
        store = ItemStore(ctx.embedder, built_by={"kind": "build-pool", "run": str(ctx.work),
                                                  "model": ctx.cfg.model.name, "samples": ctx.cfg.build.samples,
                                                  "judge": ctx.cfg.memory.judge,
                                                  "build_trajectories": ctx.cfg.memory.build_trajectories})
        store.apply([e for line in lines for e in line["events"]])
        store.save(staging)
        stats = InduceStats()
        for line in lines:
            stats.merge(InduceStats(**line["stats"]))
        report = {"pool_size": store.item_count, "records": len(store), "reasoningbank": asdict(stats)}
        rows = [("memory items / records", f"{store.item_count} / {len(store)}"),
                ("judged success / failure", f"{stats.success_prompts} / {stats.failure_prompts}"),
                ("judge agrees with the checker", f"{stats.judge_agrees} of {stats.judged}"),
                ("invalid judge / extraction answers", f"{stats.judge_invalid} / {stats.extract_invalid}")]
        return BuildResult(report, rows)

    # ------------------------------------------------------------------ eval
    @classmethod
    def check_pool(cls, cfg: Any) -> None:
        ItemStore.check(resolve_store(cfg.memory.pool))  # a damaged pool is refused before the run

    @classmethod
    def load(cls, ctx: MethodContext) -> ReasoningBank:
        embedder = make_embedder_for(ctx.cfg)
        # Without a pool, dynamic mode starts from an empty bank, as the authors' test-time runs do.
        store = ItemStore.load(resolve_store(ctx.cfg.memory.pool), embedder) if ctx.cfg.memory.pool \
            else ItemStore(embedder, built_by={"kind": "empty"})
        return cls(store, ctx.cfg.memory, ctx.summarizer)

    def fork(self, where: Path) -> ReasoningBank:
        return ReasoningBank(self.store.copy(), self.cfg, self.summ)

    def apply(self, events: list[dict[str, Any]], committed: int, worker: int = 0) -> Applied:
        self.store.apply(events)
        return Applied(events, {"bank_items": self.store.item_count})

    def replay(self, events: list[dict[str, Any]]) -> None:
        self.store.apply(events)

    def save(self, where: Path) -> None:
        replace_dir(where / "store", self.store.save)  # whole or not at all

    def _search(self, query: str) -> list[Any]:
        with self.guard:
            return self.store.search(query, self.cfg.top_k)

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        hits = await asyncio.to_thread(self._search, task.query)
        items, ids, scores = [], [], []
        for record, score in hits:
            items += record.items
            ids += record.item_ids()
            scores += [score] * len(record.items)
        return Retrieval(prompting.guidance(items), ids, scores,
                         {"retrieved_records": [r.id for r, _ in hits], "record_scores": [s for _, s in hits],
                          "items_injected": len(items)})

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        last = tried.attempts[-1]
        stats = InduceStats()
        got = await induce(self.summ, self.cfg, task, last.trajectory, last.outcome, unit, stats)
        events = [{"unit": unit, "op": "add", "record": asdict(got.record)}] if got.record else []
        return Learned({**retrieval.details, **got.report, "reasoningbank": asdict(stats)}, events)

"""`memory=amem`: A-Mem in build-pool (training trajectories become notes), fixed mode
(retrieve from a read-only store) and dynamic mode (each stream adds its finished tasks as
notes and lets A-Mem evolve its links). See this package's docstring for the algorithm."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reme_cli.agent.trajectory import GUIDANCE_HEADER, Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.core.io import append_lines
from reme_cli.core.reading import JsonFile, shape_of
from reme_cli.core.staging import replace_dir
from reme_cli.llm.inflight import most_in_flight
from reme_cli.methods.amem.agentic import AMemStats, construct, evolve
from reme_cli.methods.amem.config import AMemConfig
from reme_cli.methods.amem.notes import METHOD, Note, NoteStore
from reme_cli.methods.base import BuildContext, BuildResult, Learned, Memory, MethodContext, Retrieval, Tried
from reme_cli.methods.hooks import CostGuess, SavedState
from reme_cli.methods.pool_dirs import find_pool
from reme_cli.agent.render import render_trajectory
from reme_cli.llm.embed import make_embedder_for
from reme_cli.methods.amem import describe

BUILD_EVENTS = "amem_events.jsonl"
STATS_FILE = "amem_stats.jsonl"
# The build's note events, a training task's together (a resumed build goes on after the last task).
BUILD_LOG = JsonFile("an A-Mem build's amem_events.jsonl", lines=True, fix="move that line out",
                     shape={"unit": str, "op": str, "note": dict, "id": str, "ids": list, "context": str, "tags": list},
                     required=("unit", "op"))
# The LLM calls' counts of each build session.
SESSIONS = JsonFile("an A-Mem build's amem_stats.jsonl", lines=True, fix="move that line out",
                    shape=shape_of(AMemStats))


def resolve_store(path: str | Path) -> Path:
    return find_pool(path, METHOD, "an A-Mem pool")


def note_content(task: Task, trajectory: Trajectory, outcome: Outcome, max_chars: int) -> str:
    return render_trajectory(task, trajectory, outcome, max_chars=max_chars)


def format_notes(notes: list[Note]) -> str | None:
    """Retrieved notes in the family of ReMe's injected guidance (same header, numbered)."""
    if not notes:
        return None
    body = "\n".join(
        f"Experience {i} :\n Context: {n.context}\n Keywords: {', '.join(n.keywords)}\n"
        f" Tags: {', '.join(n.tags)}\n Content: {n.content}\n" for i, n in enumerate(notes, 1))
    return f"{GUIDANCE_HEADER}:\n{body}"


def _training_notes(cfg: AMemConfig, attempts: list[tuple[Trajectory, Outcome]]) -> list[tuple[int, Trajectory, Outcome]]:
    """The trajectories of a training task that become notes: successful ones only."""
    good = [(i, t, o) for i, (t, o) in enumerate(attempts) if o.success]
    return good if cfg.build_notes == "all" else good[:1]


@dataclass(eq=False)  # the state and what it is run with (identity, not value, compares)
class AMem(Memory):
    config_class = AMemConfig
    report_columns = {"setting": "A-Mem"}
    needs_summarizer = True  # A-Mem's own LLM calls go to the summarizer (the executor by default)
    saved = SavedState(METHOD, describe.read, describe.change, ("store",))

    store: NoteStore
    cfg: AMemConfig
    summ: Any

    # ------------------------------------------------------------------ build-pool
    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """Notes in split order: analyses run concurrently, evolution one note at a time
        (each sees the notes before it). A task's events are one durable append, so an
        interrupted build resumes after the last finished task."""
        cfg: AMemConfig = ctx.cfg.memory
        path = ctx.work / BUILD_EVENTS
        events = BUILD_LOG.records(path)
        store = NoteStore(ctx.embedder)
        await asyncio.to_thread(store.apply, events)
        done = {e["unit"] for e in events}
        todo = [t for t in ctx.task_ids if t not in done and ctx.attempts.get(t)]
        slots = asyncio.Semaphore(most_in_flight(ctx.cfg.llm.concurrency))
        stats = AMemStats()

        async def analyze(task_id: str) -> list[Note]:
            async with slots:
                task = ctx.bench.load(task_id)
                return [await construct(ctx.summarizer, note_content(task, t, o, cfg.note_max_chars),
                                        f"{task_id}#{i}", f"build/{task_id}", stats)
                        for i, t, o in _training_notes(cfg, ctx.attempts[task_id])]

        analyzed = dict(zip(todo, await asyncio.gather(*(analyze(t) for t in todo))))
        for task_id in todo:
            task_events: list[dict[str, Any]] = []
            for note in analyzed[task_id]:
                new = await evolve(ctx.summarizer, store, note, cfg.neighbors, task_id, stats)
                await asyncio.to_thread(store.apply, new)
                task_events += new
            await asyncio.to_thread(append_lines, path, task_events)
        append_lines(ctx.work / STATS_FILE, [asdict(stats)])

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        events = BUILD_LOG.records(ctx.work / BUILD_EVENTS)
        store = NoteStore(ctx.embedder, built_by={"kind": "build-pool", "run": str(ctx.work),
                                                  "model": ctx.cfg.model.name, "samples": ctx.cfg.build.samples,
                                                  "build_notes": ctx.cfg.memory.build_notes})
        store.apply(events)
        store.save(staging)
        stats = AMemStats()
        for rec in SESSIONS.records(ctx.work / STATS_FILE):
            stats.merge(AMemStats(**rec))
        links = sum(len(n.links) for n in store.notes.values())
        report = {"pool_size": len(store), "links": links, "amem": asdict(stats)}
        rows = [("notes", str(len(store))), ("links", str(links)),
                ("A-Mem LLM calls (this session)", str(stats.llm_calls)),
                ("invalid analyses / evolutions", f"{stats.invalid_analyses} / {stats.invalid_evolutions}"),
                ("neighbours updated", str(stats.neighbors_updated))]
        return BuildResult(report, rows)

    @classmethod
    def wrote_pool(cls, manifest: dict[str, Any]) -> bool:
        return True  # its first manifests named only the method

    @classmethod
    def expected_summarizer_calls(cls, cfg: Any, guess: CostGuess, build: bool = False) -> float:
        """A note costs two calls (construct, evolve), from a successful trajectory only: per
        training task its notes (the first success, or every one with build_notes=all), per
        dynamic unit one if it succeeds."""
        p = guess.success_rate
        if build:
            n = cfg.build.samples
            return 2 * (n * p if cfg.memory.build_notes == "all" else 1 - (1 - p) ** n)
        return p * 2 if cfg.eval.mode == "dynamic" else 0.0

    @classmethod
    def build_in_order(cls, cfg: Any) -> float:
        return 0.5  # evolution takes one note after another; the analyses run concurrently

    # ------------------------------------------------------------------ eval
    @classmethod
    def check_pool(cls, cfg: Any) -> None:
        NoteStore.check(resolve_store(cfg.memory.pool))  # a damaged pool is refused before the run

    @classmethod
    def load(cls, ctx: MethodContext) -> AMem:
        return cls(NoteStore.load(resolve_store(ctx.cfg.memory.pool), make_embedder_for(ctx.cfg)), ctx.cfg.memory,
                   ctx.summarizer)

    def fork(self, where: Path) -> AMem:
        return AMem(self.store.copy(), self.cfg, self.summ)

    def replay(self, events: list[dict[str, Any]]) -> None:
        self.store.apply(events)

    def save(self, where: Path) -> None:
        replace_dir(where / "store", self.store.save)  # whole or not at all

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        hits = await asyncio.to_thread(self._read, self.store.search, task.query, self.cfg.top_k)
        notes = [n for n, _ in hits]
        shown = (self.store.with_links(notes, self.cfg.top_k) if self.cfg.linked else notes)[:self.cfg.top_k]
        return Retrieval(format_notes(shown), [n.id for n in notes], [s for _, s in hits],
                         {"linked": [n.id for n in shown[len(notes):]]})

    def _read(self, fn: Any, *args: Any) -> Any:
        with self.guard:
            return fn(*args)

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        record: dict[str, Any] = dict(retrieval.details)
        retrieved = {"unit": unit, "op": "retrieve", "ids": retrieval.ids}
        success = next((a for a in reversed(tried.attempts) if a.outcome.success), None)
        if success is None:  # the paper adds memory only from a successful trajectory
            record.update(note=None, added=False)
            return Learned(record, [retrieved])
        stats = AMemStats()
        note = await construct(self.summ, note_content(task, success.trajectory, success.outcome,
                                                       self.cfg.note_max_chars), unit, unit, stats)
        events = await evolve(self.summ, self.store, note, self.cfg.neighbors, unit, stats,
                              search=lambda *a: self._read(self.store.search, *a))
        record.update(note=note.id, added=True, links=note.links, keywords=note.keywords,
                      updated_neighbors=[e["id"] for e in events if e["op"] == "update"], amem=asdict(stats))
        return Learned(record, [retrieved, *events])

"""ReMe memory in an evaluation: reuse (fixed and dynamic) and refinement (dynamic).

Fixed mode shares one read-only pool across all units. Dynamic mode gives each (seed, run)
stream its own copy of the starting pool, evolved task by task: utility counts, addition
of distilled experiences (selective or full), failure-aware reflection, utility deletion.
Every change is an event in the stream's log, from which resume rebuilds the pool.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

from reme_cli.bench.base import Task
from reme_cli.core.config import Config
from reme_cli.core.errors import UserError
from reme_cli.methods.base import (Attempt, BuildContext, BuildResult, Episode, MethodContext, MethodFactory,
                                   OneAttempt, Retrieval, Solved, stream_dir)
from reme_cli.methods.reme.config import ReMeConfig
from reme_cli.methods.summarizer import SummarizerSettings
from reme_cli.methods.reme.distill import distill_task, judge, reflect, reflection_experience
from reme_cli.llm.embed import Embedder, make_embedder
from reme_cli.methods.reme.events import EventLog, apply_events
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.pool import Pool
from reme_cli.methods.reme.reuse import format_guidance, rerank, rewrite


def resolve_pool_path(path: str | Path) -> Path:
    """``memory.pool`` may name a pool, or a build-pool output directory holding one."""
    p = Path(path)
    for manifest in (p / "manifest.json", p / "pool" / "manifest.json"):
        other = _other_method(manifest)
        if other:
            raise UserError(f"memory.pool={path} is a pool of memory={other}; run with memory={other}, "
                            "or give a ReMe pool (`reme build-pool`)")
    if (p / "pool" / "manifest.json").exists():
        return p / "pool"
    if (p / "manifest.json").exists() and (p / "experiences.jsonl").exists():
        return p
    raise UserError(f"memory.pool={path} is not a pool: build one with `reme build-pool` "
                    "or import one with `reme pool import FILE --out DIR`")


def _other_method(manifest: Path) -> str | None:
    """The method another memory's pool names in its manifest (ReMe's names none)."""
    try:
        method = json.loads(manifest.read_text()).get("method")
    except (OSError, ValueError):
        return None
    return method if method and method != "reme" else None


def make_embedder_for(cfg: Config) -> Embedder:
    e = cfg.embedding
    return make_embedder({"kind": e.kind, "model": e.model, "base_url": e.base_url, "dim": e.dim,
                          "cache_dir": e.cache_dir})


def require_pool(cfg: Config) -> Path:
    if not cfg.memory.pool:
        raise UserError(f"--mode {cfg.eval.mode} needs memory.pool=DIR (build one with `reme build-pool`, "
                        "or `reme pool import FILE --out DIR`)")
    return resolve_pool_path(cfg.memory.pool)


def load_pool(cfg: Config, embedder: Embedder, workdir: Path) -> Pool:
    """The configured pool; re-keyed into ``workdir`` if the ablation asks for another key,
    or re-embedded there with this run's embedder when ``memory.reembed`` allows it (the
    pool itself is never changed)."""
    source = require_pool(cfg)
    try:
        pool = Pool.load(source, embedder)
    except UserError:
        if not cfg.memory.reembed:
            raise
        items, key = Pool.experiences_at(source)
        pool = _derived(workdir / "pool-reembedded", embedder, key, items, {"reembedded_from": str(source)})
    if pool.retrieval_key == cfg.memory.retrieval_key:
        return pool
    return _derived(workdir / f"pool-{cfg.memory.retrieval_key}", embedder, cfg.memory.retrieval_key, list(pool),
                    {"rekeyed_from": str(pool.path)})


def _derived(path: Path, embedder: Embedder, key: str, items: list[Experience], built_by: dict) -> Pool:
    """A pool made from another one's experiences (once: a rerun loads it)."""
    if path.exists():
        return Pool.load(path, embedder)
    fresh = Pool.create(path, embedder, retrieval_key=key, built_by=built_by)
    fresh.add(items, dedup_threshold=None)
    fresh.save()
    return fresh


def assign_stable_ids(experiences: list[Experience], namespace: str) -> None:
    """Ids from where an experience came from and what it says, not uuid4: the same cached
    responses then give the same pool, ids included."""
    for i, exp in enumerate(experiences):
        blob = f"{namespace}|{i}|{exp.source}|{exp.when_to_use}|{exp.content}"
        exp.id = hashlib.sha256(blob.encode()).hexdigest()[:32]


def deletable(exp: Experience, cfg: ReMeConfig) -> bool:
    """Utility deletion: retrieved at least alpha times and useful too rarely.

    ``rule=le`` is the paper's u/f <= beta; ``lt`` the official code's u/f < beta."""
    d = cfg.deletion
    if not d.enabled or exp.f < d.alpha:
        return False
    ratio = exp.u / exp.f
    return ratio <= d.beta if d.rule == "le" else ratio < d.beta


LESSONS_HEADER = "Lessons from your previous failed attempts at this task:"


def with_lessons(guidance: str | None, lessons: list[str]) -> str | None:
    """A retry sees the retrieved experiences plus what reflection learned so far."""
    if not lessons:
        return guidance
    block = LESSONS_HEADER + "\n" + "\n".join(f"- {lesson}" for lesson in lessons)
    return f"{guidance}\n\n{block}" if guidance else block


class ReMe(OneAttempt):
    """ReMe in an evaluation: reuse (fixed and dynamic), refinement (dynamic)."""

    config_class = ReMeConfig
    needs_summarizer = True

    def __init__(self, pool: Pool, cfg: ReMeConfig, summarizer: SummarizerSettings, *,
                 dynamic: bool, events: EventLog | None = None, restore: Callable[[], Pool] | None = None,
                 tasks_done: int = 0):
        self.pool = pool
        self.cfg = cfg
        self.summ = summarizer
        self.dynamic = dynamic
        self.events = events
        # Rebuilds the pool from the stream's start and its committed events: a unit that
        # fails after changing the pool leaves no trace in it (see discard).
        self._restore = restore
        self.tasks_done = tasks_done  # tasks of this stream finished so far (deletion cadence)
        self.max_retries = cfg.reflection.max_retries if (dynamic and cfg.reflection.enabled) else 0

    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        from reme_cli.methods.reme.build import distill_training

        await distill_training(ctx)

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        from reme_cli.methods.reme.build import assemble

        return assemble(ctx, staging)

    @classmethod
    def preflight(cls, cfg: Config) -> None:
        # A missing or damaged pool is bad input: refused before anything is written.
        Pool.check(require_pool(cfg))

    @classmethod
    def factory(cls, ctx: MethodContext) -> MethodFactory:
        cfg = ctx.cfg
        embedder = make_embedder_for(cfg)
        base = load_pool(cfg, embedder, ctx.run_path)
        if cfg.eval.mode == "fixed":
            shared = cls(base, cfg.memory, ctx.summarizer, dynamic=False)
            return lambda stream: shared

        def for_stream(stream: tuple[int, int]) -> ReMe:
            d = stream_dir(ctx.run_path, stream)
            d.mkdir(parents=True, exist_ok=True)
            events = EventLog(d / "events.jsonl")
            events.keep_only(ctx.finished_units)  # events of units that never finished go

            def restore() -> Pool:
                # Starting pool + the events of finished units = where the stream left off.
                pool = base.copy_to(d / "pool", overwrite=True)
                apply_events(pool, events.read())
                return pool

            prefix = f"s{stream[0]}/" if cfg.eval.scope == "experiment" else f"s{stream[0]}/r{stream[1]}/"
            done = sum(1 for u in ctx.finished_units if u.startswith(prefix))
            return cls(restore(), cfg.memory, ctx.summarizer, dynamic=True, events=events, restore=restore,
                       tasks_done=done)

        return for_stream

    async def solve(self, task: Task, episode: Episode, unit: str) -> Solved:
        """Retrieve, attempt, and in dynamic mode reflect and retry a failed attempt (at
        most ``reflection.max_retries`` times; a retry sees the lessons so far)."""
        retrieval = await self.retrieve(task, unit)
        attempts: list[Attempt] = []
        lessons: list[str] = []
        for i in range(1 + self.max_retries):
            attempts.append(await episode(with_lessons(retrieval.guidance, lessons), i))
            last = attempts[-1]
            if last.outcome.success or i == self.max_retries:
                break
            lesson = await reflect(self.summ.llm, task, last.trajectory, last.outcome, lessons,
                                   **self._sampling("reflection"))
            if lesson is None:
                break
            lessons.append(lesson)
        record = await self.learn(task, attempts, retrieval, unit, lessons)
        if lessons:
            record["lessons"] = lessons
        return Solved(retrieval, record)

    async def retrieve(self, task: Task, unit: str = "") -> Retrieval:
        k = self.cfg.top_k
        if k == 0:
            return Retrieval()
        # The paper reranks the retrieved top K (an earlier version here took 2K).
        hits = await asyncio.to_thread(self.pool.search, task.query, k)
        scores = {e.id: s for e, s in hits}
        exps = [e for e, _ in hits]
        if self.cfg.rerank and len(exps) > 1:
            exps = await rerank(self.summ.llm, task.query, exps, k, family=task.prompt_family,
                                **self._sampling("rerank"))
        exps = exps[:k]
        guidance = (await rewrite(self.summ.llm, task.query, exps, family=task.prompt_family,
                                  **self._sampling("rewrite"))
                    if self.cfg.rewrite else format_guidance(exps))
        retrieval = Retrieval(guidance, [e.id for e in exps], [scores[e.id] for e in exps])
        if self.events is not None:
            self.events.emit(unit, "retrieve", task_id=task.id, ids=retrieval.ids, scores=retrieval.scores)
        return retrieval

    async def learn(self, task: Task, attempts: list[Attempt], retrieval: Retrieval, unit: str = "",
                    lessons: list[str] | None = None) -> dict[str, Any]:
        if not self.dynamic:
            return {}
        lessons = lessons or []
        final = attempts[-1].outcome
        pairs = [(a.trajectory, a.outcome) for a in attempts]
        info: dict[str, Any] = {"added": [], "deleted": [], "distill": None}
        if retrieval.ids:
            # u: the task's final success (paper) or the first attempt's, the one that
            # retrieved; retries retrieve nothing (official code).
            credited = final.success if self.cfg.u_credit == "final" else attempts[0].outcome.success
            await asyncio.to_thread(self.pool.update_counts, retrieval.ids, retrieved=True, success=credited)
            self.events.emit(unit, "use", ids=retrieval.ids, success=credited)

        candidates: list[Experience] = []
        stats = None
        if self.cfg.addition == "full" or final.success:
            usable = pairs if self.cfg.addition == "full" else [p for p in pairs if p[1].success]
            candidates, stats = await distill_task(
                self.summ.llm, task, usable, granularity=self.cfg.granularity, author=self.summ.author,
                **self._sampling("distill"))
            candidates, judged = await judge(self.summ.llm, task, candidates,
                                             threshold=self.cfg.judge_threshold, **self._sampling("judge"))
            stats.merge(judged)
        if final.success and len(attempts) > 1 and lessons:
            # The retry that succeeded was guided by the last lesson: that one is kept, if
            # the judge accepts it like any other experience.
            lesson = [reflection_experience(task, lessons[-1], self.summ.author)]
            if self.cfg.reflection.judge:
                lesson, judged = await judge(self.summ.llm, task, lesson, threshold=self.cfg.judge_threshold,
                                             **self._sampling("judge"))
                if stats is not None:
                    stats.merge(judged)
            candidates += lesson
        if candidates:
            assign_stable_ids(candidates, unit)
            added = await asyncio.to_thread(self.pool.add, candidates, self.cfg.dedup_threshold,
                                            self.cfg.dedup_text)
            for exp in added:
                self.events.emit(unit, "add", source=exp.source, experience=exp.to_dict())
            info["added"] = [e.id for e in added]
        info["distill"] = stats.to_dict() if stats else None

        # Deletion every `deletion.every` tasks of the stream (paper: 1; official BFCL: 5).
        due = (self.tasks_done + 1) % self.cfg.deletion.every == 0
        doomed = [e for e in self.pool if deletable(e, self.cfg)] if due else []
        if doomed:
            await asyncio.to_thread(self.pool.remove, [e.id for e in doomed])
            for e in doomed:
                self.events.emit(unit, "delete", id=e.id, f=e.f, u=e.u)
            info["deleted"] = [e.id for e in doomed]
        info["pool_size"] = len(self.pool)
        used = [e.u / e.f for e in self.pool if e.f > 0]
        info["mean_utility"] = sum(used) / len(used) if used else None  # u/f over retrieved experiences
        return info

    def commit(self) -> None:
        if self.events is not None:
            self.events.flush()
        self.tasks_done += 1

    def discard(self) -> None:
        """The unit failed: forget its events, and undo what it already did to the pool
        (f/u, additions, deletions), so the pool again equals start + committed events."""
        if self.events is not None:
            self.events.discard()
        if self._restore is not None:
            self.pool = self._restore()

    def finish(self) -> None:
        if self.dynamic:
            self.pool.save()

    def _sampling(self, role: str) -> dict[str, Any]:
        out: dict[str, Any] = {"temperature": self.summ.temperature, "max_tokens": self.summ.max_tokens}
        # Only the roles whose answer the summarizer module constrains have a format.
        if self.summ.formats.get(role) is not None:
            out["response_format"] = self.summ.formats[role]
        return out


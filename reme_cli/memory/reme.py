"""ReMe memory in an evaluation: reuse (fixed and dynamic) and refinement (dynamic).

Fixed mode shares one read-only pool across all units. Dynamic mode gives each (seed, run)
stream its own copy of the starting pool, evolved task by task: utility counts, addition
of distilled experiences (selective or full), failure-aware reflection, utility deletion.
Every change is an event in the stream's log, from which resume rebuilds the pool.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from reme_cli.agent.loop import Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.config import Config, MemoryCfg
from reme_cli.errors import UserError
from reme_cli.llm.client import LLM
from reme_cli.memory.base import Memory, Retrieval
from reme_cli.memory.distill import distill_task, judge, reflect, reflection_experience
from reme_cli.memory.embed import Embedder, make_embedder
from reme_cli.memory.events import EventLog, apply_events
from reme_cli.memory.experience import Experience
from reme_cli.memory.pool import Pool
from reme_cli.memory.reuse import format_guidance, rerank, rewrite
from reme_cli.run.records import RunDir

STREAMS_DIR = "streams"


def resolve_pool_path(path: str | Path) -> Path:
    """``memory.pool`` may name a pool, or a build-pool output directory holding one."""
    p = Path(path)
    if (p / "pool" / "manifest.json").exists():
        return p / "pool"
    if (p / "manifest.json").exists() and (p / "experiences.jsonl").exists():
        return p
    raise UserError(f"memory.pool={path} is not a pool: build one with `reme build-pool` "
                    "or import one with `reme pool import FILE --out DIR`")


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
    """The configured pool, re-keyed into ``workdir`` if the ablation asks for another key."""
    pool = Pool.load(require_pool(cfg), embedder)
    if pool.retrieval_key == cfg.memory.retrieval_key:
        return pool
    rekeyed = workdir / f"pool-{cfg.memory.retrieval_key}"
    if rekeyed.exists():
        return Pool.load(rekeyed, embedder)
    fresh = Pool.create(rekeyed, embedder, retrieval_key=cfg.memory.retrieval_key,
                        built_by={"rekeyed_from": str(pool.path)})
    fresh.add(list(pool), dedup_threshold=None)
    fresh.save()
    return fresh


def assign_stable_ids(experiences: list[Experience], namespace: str) -> None:
    """Ids from where an experience came from and what it says, not uuid4: the same cached
    responses then give the same pool, ids included."""
    for i, exp in enumerate(experiences):
        blob = f"{namespace}|{i}|{exp.source}|{exp.when_to_use}|{exp.content}"
        exp.id = hashlib.sha256(blob.encode()).hexdigest()[:32]


def deletable(exp: Experience, cfg: MemoryCfg) -> bool:
    """Utility deletion: retrieved at least alpha times and useful too rarely.

    ``rule=le`` is the paper's u/f <= beta; ``lt`` the official code's u/f < beta."""
    d = cfg.deletion
    if not d.enabled or exp.f < d.alpha:
        return False
    ratio = exp.u / exp.f
    return ratio <= d.beta if d.rule == "le" else ratio < d.beta


@dataclass
class SummarizerSettings:
    llm: LLM
    author: str
    temperature: float
    max_tokens: int
    formats: dict[str, dict[str, Any] | None]  # role -> response_format (constrained small models)


class ReMeMemory:
    def __init__(self, pool: Pool, cfg: MemoryCfg, summarizer: SummarizerSettings, *,
                 dynamic: bool, events: EventLog | None = None):
        self.pool = pool
        self.cfg = cfg
        self.summ = summarizer
        self.dynamic = dynamic
        self.events = events
        self.max_retries = cfg.reflection.max_retries if (dynamic and cfg.reflection.enabled) else 0

    async def retrieve(self, task: Task, unit: str = "") -> Retrieval:
        k = self.cfg.top_k
        if k == 0:
            return Retrieval()
        # Rerank chooses among more candidates than it keeps.
        hits = await asyncio.to_thread(self.pool.search, task.query, 2 * k if self.cfg.rerank else k)
        scores = {e.id: s for e, s in hits}
        exps = [e for e, _ in hits]
        if self.cfg.rerank and len(exps) > 1:
            exps = await rerank(self.summ.llm, task.query, exps, k, **self._sampling("rerank"))
        exps = exps[:k]
        guidance = (await rewrite(self.summ.llm, task.query, exps, **self._sampling("rewrite"))
                    if self.cfg.rewrite else format_guidance(exps))
        retrieval = Retrieval(guidance, [e.id for e in exps], [scores[e.id] for e in exps])
        if self.events is not None:
            self.events.emit(unit, "retrieve", task_id=task.id, ids=retrieval.ids, scores=retrieval.scores)
        return retrieval

    async def reflect(self, task: Task, traj: Trajectory, outcome: Outcome, lessons: list[str]) -> str | None:
        return await reflect(self.summ.llm, task, traj, outcome, lessons, **self._sampling("reflection"))

    async def after_task(self, task: Task, attempts: list[tuple[Trajectory, Outcome]], retrieval: Retrieval,
                         lessons: list[str], unit: str = "") -> dict[str, Any]:
        if not self.dynamic:
            return {}
        final = attempts[-1][1]
        info: dict[str, Any] = {"added": [], "deleted": [], "distill": None}
        if retrieval.ids:
            await asyncio.to_thread(self.pool.update_counts, retrieval.ids, retrieved=True, success=final.success)
            self.events.emit(unit, "use", ids=retrieval.ids, success=final.success)

        candidates: list[Experience] = []
        stats = None
        if self.cfg.addition == "full" or final.success:
            usable = attempts if self.cfg.addition == "full" else [a for a in attempts if a[1].success]
            candidates, stats = await distill_task(
                self.summ.llm, task, usable, granularity=self.cfg.granularity, author=self.summ.author,
                **self._sampling("distill"))
            candidates, judged = await judge(self.summ.llm, task, candidates,
                                             threshold=self.cfg.judge_threshold, **self._sampling("judge"))
            stats.merge(judged)
        if final.success and len(attempts) > 1 and lessons:
            # The retry that succeeded was guided by the last lesson: that one is kept.
            candidates.append(reflection_experience(task, lessons[-1], self.summ.author))
        if candidates:
            assign_stable_ids(candidates, unit)
            added = await asyncio.to_thread(self.pool.add, candidates, self.cfg.dedup_threshold)
            for exp in added:
                self.events.emit(unit, "add", source=exp.source, experience=exp.to_dict())
            info["added"] = [e.id for e in added]
        info["distill"] = stats.to_dict() if stats else None

        doomed = [e for e in self.pool if deletable(e, self.cfg)]
        if doomed:
            await asyncio.to_thread(self.pool.remove, [e.id for e in doomed])
            for e in doomed:
                self.events.emit(unit, "delete", id=e.id, f=e.f, u=e.u)
            info["deleted"] = [e.id for e in doomed]
        info["pool_size"] = len(self.pool)
        return info

    def commit(self) -> None:
        if self.events is not None:
            self.events.flush()

    def discard(self) -> None:
        if self.events is not None:
            self.events.discard()

    def finish(self) -> None:
        if self.dynamic:
            self.pool.save()

    def _sampling(self, role: str) -> dict[str, Any]:
        out: dict[str, Any] = {"temperature": self.summ.temperature, "max_tokens": self.summ.max_tokens}
        # Only the roles whose answer the summarizer module constrains have a format.
        if self.summ.formats.get(role) is not None:
            out["response_format"] = self.summ.formats[role]
        return out


def stream_dir(run_dir: RunDir, stream: tuple[int, int]) -> Path:
    return run_dir.path / STREAMS_DIR / f"s{stream[0]}_r{stream[1]}"


def memory_factory(cfg: Config, run_dir: RunDir, summarizer: SummarizerSettings,
                   finished_units: set[str]) -> Callable[[tuple[int, int]], Memory]:
    embedder = make_embedder_for(cfg)
    base = load_pool(cfg, embedder, run_dir.path)
    if cfg.eval.mode == "fixed":
        shared = ReMeMemory(base, cfg.memory, summarizer, dynamic=False)
        return lambda stream: shared

    def for_stream(stream: tuple[int, int]) -> Memory:
        d = stream_dir(run_dir, stream)
        d.mkdir(parents=True, exist_ok=True)
        events = EventLog(d / "events.jsonl")
        # Starting pool + the events of finished units = where the stream left off.
        pool = base.copy_to(d / "pool", overwrite=True)
        apply_events(pool, events.keep_only(finished_units))
        return ReMeMemory(pool, cfg.memory, summarizer, dynamic=True, events=events)

    return for_stream

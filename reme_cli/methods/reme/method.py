"""ReMe memory in an evaluation: reuse (fixed and dynamic) and refinement (dynamic).

Fixed mode reads the start pool. In dynamic mode each stream's copy of it evolves task by
task: utility counts, addition of distilled experiences (selective or full), failure-aware
reflection, utility deletion. A unit proposes these as events and the seam applies them
when it commits (``methods/streams.py``), which also logs them for resume.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from reme_cli.bench.base import Task
from reme_cli.core.config import Config
from reme_cli.core.errors import UserError
from reme_cli.core.run_log import POOL_HEADER
from reme_cli.methods.base import (Applied, Attempt, BuildContext, BuildResult, Episode, Learned, Memory,
                                   MethodContext, Releases, Retrieval, Tried)
from reme_cli.methods.hooks import CostGuess, Fidelity, RunFacts, SavedState
from reme_cli.methods.reme import cost, describe, fidelity as ledger
from reme_cli.methods.reme.build import assemble, distill_training
from reme_cli.methods.reme.config import ReMeConfig
from reme_cli.methods.summarizer import SummarizerSettings
from reme_cli.methods.reme.distill import DistillStats, judge, reflect, reflection_experience
from reme_cli.llm.embed import Embedder, make_embedder_for
from reme_cli.methods.reme.events import apply_events
from reme_cli.methods.reme.formats import sampling
from reme_cli.methods.reme.experience import Experience, assign_stable_ids
from reme_cli.methods.reme.pool import Pool
from reme_cli.methods.reme.reuse import format_guidance, rerank, rewrite
from reme_cli.methods.reme.step_sequence import DEFAULT_SHAPE, AgentShape, agent_shape
from reme_cli.methods.reme.summarize import summarize, summary_or_nothing


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
    method = (POOL_HEADER.probe(manifest) or {}).get("method")
    return method if isinstance(method, str) and method and method != "reme" else None


def load_pool(cfg: Config, embedder: Embedder, workdir: Path) -> Pool:
    """The configured pool; re-keyed into ``workdir`` if the ablation asks for another key,
    or re-embedded there with this run's embedder when ``memory.reembed`` allows it (the
    pool itself is never changed)."""
    source = resolve_pool_path(ReMe.require_pool(cfg))
    try:
        pool = Pool.load(source, embedder)
    except UserError:
        if not cfg.memory.reembed:
            raise
        items, key = Pool.experiences_at(source)
        pool = _derived(workdir / "pool-reembedded", embedder, key, items, {"reembedded_from": str(source)})
    if pool.retrieval_key == cfg.memory.retrieval_key:
        return pool
    key = cfg.memory.retrieval_key
    if len(pool) and not any(e.retrieval_text(key).strip() for e in pool):
        raise UserError(f"memory.retrieval_key={key}: no experience of the pool {source} has one (a pool built "
                        "with memory.prompts=authors has no generalized_query: the authors' published prompts "
                        "do not ask for it); use the released pool, or build one with memory.prompts=reme")
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


class ReMe(Memory):
    """ReMe in an evaluation: reuse (fixed and dynamic), refinement (dynamic)."""

    config_class = ReMeConfig
    needs_summarizer = True
    report_columns = {
        "setting": "ReMe ({mode})",
        "params": ["memory.granularity", "memory.addition", "memory.reflection.enabled", "memory.deletion.enabled",
                   "summarizer.name", "memory.retrieval_key", "memory.top_k", "memory.deletion.alpha",
                   "memory.deletion.beta"],
        "series": {"pool_size": "pool size (experiences)", "mean_utility": "mean utility u/f"},
    }
    saved = SavedState("reme", describe.read, describe.change, locate=describe.pool_dir)
    # reme's own prompts were the only ones before the authors' became the default; ReMe
    # de-duplicated while building and at every commit before issue 47.
    hash_neutral = {"prompts": "reme", "build_dedup": True, "dedup_at_commit": True}
    cost_guesses = cost.GUESSES

    @classmethod
    def max_attempts(cls, cfg: Config) -> int:
        return 1 + cost.retries(cfg)

    @classmethod
    def expected_summarizer_calls(cls, cfg: Config, guess: CostGuess, build: bool = False) -> float:
        return cost.build_calls(cfg, guess) if build else cost.unit_calls(cfg, guess)

    @classmethod
    def build_in_order(cls, cfg: Config) -> float:
        return 0.0  # training tasks are distilled concurrently

    @classmethod
    def fidelity(cls, run: RunFacts) -> Fidelity:
        return ledger.fidelity(run, cls.releases())

    def __init__(self, pool: Pool, cfg: ReMeConfig, summarizer: SummarizerSettings,
                 shape: AgentShape = DEFAULT_SHAPE):
        self.pool = pool
        self.cfg = cfg
        self.summ = summarizer
        self.shape = shape  # what the authors' agent of the benchmark summarized (step_sequence.py)
        # Trials each worker of the stream has run (the authors' agents count per worker).
        self.trials_by_worker: dict[int, int] = {}

    @property
    def max_retries(self) -> int:
        return self.cfg.reflection.max_retries if (self.learning and self.cfg.reflection.enabled) else 0

    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        await distill_training(ctx)

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        return assemble(ctx, staging)

    @classmethod
    def query_saved(cls, where: Path, query: str, limit: int, cfg: Any) -> list[tuple[str, float]]:
        pool = resolve_pool_path(where)
        Pool.check(pool)  # checked before the embedding model loads
        return [(exp.id, score) for exp, score in Pool.load(pool, make_embedder_for(cfg)).search(query, limit)]

    @classmethod
    def releases(cls) -> Releases:
        from reme_cli.methods.reme.releases import RELEASES  # rich tables and the parser: only when asked

        return RELEASES

    @classmethod
    def check_pool(cls, cfg: Config) -> None:
        Pool.check(resolve_pool_path(cfg.memory.pool))

    # ------------------------------------------------------------------ state
    @classmethod
    def load(cls, ctx: MethodContext) -> ReMe:
        return cls(load_pool(ctx.cfg, make_embedder_for(ctx.cfg), ctx.run_path), ctx.cfg.memory, ctx.summarizer,
                   agent_shape(ctx.cfg.benchmark.name))

    def fork(self, where: Path) -> ReMe:
        return ReMe(self.pool.copy_to(where / "pool", overwrite=True), self.cfg, self.summ, self.shape)

    def replay(self, events: list[dict[str, Any]]) -> None:
        apply_events(self.pool, events)
        for event in events:
            if event["op"] == "trials":
                self._count_trials(event["worker"], event["n"])

    def _count_trials(self, worker: int, n: int) -> tuple[int, int]:
        before = self.trials_by_worker.get(worker, 0)
        self.trials_by_worker[worker] = before + n
        return before, before + n

    def apply(self, events: list[dict[str, Any]], committed: int, worker: int = 0) -> Applied:
        """Counts, then additions (de-duplicated against the pool as it is now only with
        ``dedup_at_commit``), then a deletion pass when one is due."""
        done: list[dict[str, Any]] = []
        added: list[str] = []
        due = False
        for event in events:
            if event["op"] == "use":
                self.pool.update_counts(event["ids"], retrieved=True, success=event["success"])
                done.append(event)
            elif event["op"] == "add":
                # The authors' add_task_memory inserts what the agent posts (its summary was
                # de-duplicated when it was made); ``dedup_at_commit`` checks again here.
                again = self.cfg.dedup_threshold if self.cfg.dedup_at_commit else None
                for exp in self.pool.add(event["candidates"], again, self.cfg.dedup_text):
                    done.append({"op": "add", "source": exp.source, "experience": exp.to_dict()})
                    added.append(exp.id)
            elif event["op"] == "trials":
                due = self._deletion_due(committed, worker, event["n"])
                done.append({"op": "trials", "worker": worker, "n": event["n"]})
            else:
                done.append(event)
        doomed = [e for e in self.pool if deletable(e, self.cfg)] if due else []
        if doomed:
            self.pool.remove([e.id for e in doomed])
            done += [{"op": "delete", "id": e.id, "f": e.f, "u": e.u} for e in doomed]
        used = [e.u / e.f for e in self.pool if e.f > 0]
        return Applied(done, {"added": added, "deleted": [e.id for e in doomed], "pool_size": len(self.pool),
                              "mean_utility": sum(used) / len(used) if used else None})  # u/f over retrieved ones

    def _deletion_due(self, committed: int, worker: int, trials: int) -> bool:
        """Every ``deletion.every`` trials of this worker (the authors' per-worker counter),
        or tasks of the stream (the paper's "after each task")."""
        every = self.cfg.deletion.every or 1
        before, after = self._count_trials(worker, trials)
        if self.cfg.deletion.counts == "tasks":
            return (committed + 1) % every == 0
        return after // every > before // every

    def save(self, where: Path) -> None:
        self.pool.save()

    # ------------------------------------------------------------------ a unit
    async def attempt(self, task: Task, episode: Episode, retrieval: Retrieval) -> Tried:
        """Attempt; in dynamic mode a failed trial is followed by at most
        ``reflection.max_retries`` more, guided as ``reflection.style`` says."""
        if self.cfg.reflection.style == "lesson":
            return await self._attempt_with_lessons(task, episode, retrieval)
        return await self._attempt_with_summaries(task, episode, retrieval)

    async def _attempt_with_summaries(self, task: Task, episode: Episode, retrieval: Retrieval) -> Tried:
        """The authors' trials (65971baf bfcl_agent.py:604-699, appworld_react_agent.py:183-253).

        Each trial is a fresh episode. In dynamic mode it is summarized (success or failure
        analysis, judged, de-duplicated against the pool); the next trial is guided by the
        previous trial's summary instead of a retrieval, or retrieves again if the summary
        came back empty. The last trial run is the one scored."""
        attempts: list[Attempt] = []
        trials: list[dict[str, Any]] = []
        carry: list[tuple[Retrieval | None, list[Experience]]] = []  # per trial: its retrieval, its summary
        stats = DistillStats()
        current: Retrieval | None = retrieval
        guidance = retrieval.guidance
        for i in range(1 + self.max_retries):
            if i > 0:
                previous = carry[-1][1]
                current = None if previous else await self.retrieve(task)
                guidance = format_guidance(previous) if previous else current.guidance
            attempts.append(await episode(guidance, i))
            outcome = attempts[-1].outcome
            last = i == self.max_retries
            # A summary is used by the next trial or added; the authors' agent also
            # summarizes a last failed trial, whose memories nothing then uses.
            wanted = self.learning and (outcome.success or not last or self.cfg.addition == "full")
            summary, failed = await self._summarize(task, attempts[-1], guidance, stats) if wanted else ([], None)
            carry.append((current, summary))
            trials.append({"guided_by": "retrieval" if current is not None else "previous_summary",
                           "retrieved_ids": current.ids if current is not None else [],
                           **(current.details if current is not None else {}),
                           **({"guidance": guidance} if i > 0 else {}),
                           "success": outcome.success, "summarized": len(summary),
                           **({"summary_error": failed} if failed else {})})
            if outcome.success:
                break
        record = {"trials": trials} if self.learning else {}
        if self.learning:
            record["distill"] = stats.to_dict()
        return Tried(attempts, record, carry=carry)

    async def _summarize(self, task: Task, attempt: Attempt, guidance: str | None,
                         stats: DistillStats) -> tuple[list[Experience], str | None]:
        """What the authors' summary_task_memory returns for one trajectory (posted as their
        agent recorded it, ``guidance`` included): its success or failure analysis, validated
        by the judge and de-duplicated against the pool; and the error, if it failed."""

        async def run() -> list[Experience]:
            candidates, summarized = await summarize(self.summ, self.cfg, task,
                                                     [(attempt.trajectory, attempt.outcome, guidance)],
                                                     shape=self.shape)
            stats.merge(summarized)
            return await asyncio.to_thread(self._novel, candidates) if candidates else []

        return await summary_or_nothing(run())

    def _novel(self, candidates: list[Experience]) -> list[Experience]:
        with self.guard:
            return self.pool.novel(candidates, self.cfg.dedup_threshold, self.cfg.dedup_text)

    async def _attempt_with_lessons(self, task: Task, episode: Episode, retrieval: Retrieval) -> Tried:
        """The paper's text: reflect on a failed attempt and retry with the lessons so far
        appended to the retrieved guidance."""
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
        record = dict(retrieval.details) if self.learning else {}  # (fixed mode records them as it is)
        return Tried(attempts, {**record, "lessons": lessons} if lessons else record)

    async def retrieve(self, task: Task, unit: str = "") -> Retrieval:
        k = self.cfg.top_k
        if k == 0:
            return Retrieval()
        # The paper reranks the retrieved top K (an earlier version here took 2K).
        hits = await asyncio.to_thread(self._search, task.query, k)
        scores = {e.id: s for e, s, _ in hits}
        numbers = {e.id: n for e, _, n in hits}
        exps = [e for e, _, _ in hits]
        if self.cfg.rerank and len(exps) > 1:
            exps = await rerank(self.summ.llm, task.query, exps, k, family=task.prompt_family,
                                **self._sampling("rerank"))
        exps = exps[:k]
        guidance = (await rewrite(self.summ.llm, task.query, exps, family=task.prompt_family,
                                  **self._sampling("rewrite"))
                    if self.cfg.rewrite else format_guidance(exps))
        # f and u as the task found them (a dynamic stream's change as other units commit).
        details: dict[str, Any] = {"retrieved_numbers": {e.id: numbers[e.id] for e in exps}}
        if self.cfg.rewrite:  # whether the LLM's rewrite was used (an unusable answer is not)
            details["rewritten"] = guidance != format_guidance(exps)
        return Retrieval(guidance, [e.id for e in exps], [scores[e.id] for e in exps], details)

    def _search(self, query: str, k: int) -> list[tuple[Experience, float, dict[str, int]]]:
        with self.guard:
            return [(e, s, {"f": e.f, "u": e.u}) for e, s in self.pool.search(query, k)]

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        failed = None
        if self.cfg.reflection.style == "lesson":
            events, stats, failed = await self._learn_from_lessons(task, tried, retrieval, unit)
        else:
            events = self._learn_from_summaries(task, tried, unit)
            stats = None  # the summaries' counts are in the attempt's record
        events.append({"op": "trials", "n": len(tried.attempts)})
        # The record's keys in their order; what the commit decides is filled in then.
        record = {"added": [], "deleted": [], "pool_size": None, "mean_utility": None}
        if stats is not None:
            record["distill"] = stats.to_dict()
        if failed:
            record["summary_error"] = failed
        return Learned(record, events)

    def _learn_from_summaries(self, task: Task, tried: Tried, unit: str) -> list[dict[str, Any]]:
        """Credit every trial that retrieved (f + 1, u + 1 on its success: the authors'
        record_task_memory after each trial), then add the summaries of the successful
        trial (selective) or of every trial (full)."""
        final = tried.attempts[-1].outcome.success
        events: list[dict[str, Any]] = []
        candidates: list[Experience] = []
        for attempt, (got, summary) in zip(tried.attempts, tried.carry, strict=True):
            if got is not None and got.ids:
                credited = attempt.outcome.success if self.cfg.u_credit == "trial" else final
                events += [{"op": "retrieve", "task_id": task.id, "ids": got.ids, "scores": got.scores},
                           {"op": "use", "ids": got.ids, "success": credited}]
            if attempt.outcome.success or self.cfg.addition == "full":
                candidates += summary
        if candidates:
            # A summary was de-duplicated against the pool of its trial's time (the commit
            # checks again only with ``dedup_at_commit``).
            assign_stable_ids(candidates, unit)
            events.append({"op": "add", "candidates": candidates})
        return events

    async def _learn_from_lessons(self, task: Task, tried: Tried, retrieval: Retrieval,
                                  unit: str) -> tuple[list[dict[str, Any]], DistillStats | None, str | None]:
        attempts, lessons = tried.attempts, tried.record.get("lessons", [])
        final = attempts[-1].outcome
        pairs = [(a.trajectory, a.outcome) for a in attempts]
        events: list[dict[str, Any]] = []
        if retrieval.ids:
            # Only the first attempt retrieved: u on the task's final success (paper text)
            # or on that attempt's own.
            credited = final.success if self.cfg.u_credit == "final" else attempts[0].outcome.success
            events += [{"op": "retrieve", "task_id": task.id, "ids": retrieval.ids, "scores": retrieval.scores},
                       {"op": "use", "ids": retrieval.ids, "success": credited}]

        candidates: list[Experience] = []
        stats, failed = None, None
        if self.cfg.addition == "full" or final.success:
            # Attempt i saw the retrieved guidance plus the lessons before it.
            guided = [(t, o, with_lessons(retrieval.guidance, lessons[:i])) for i, (t, o) in enumerate(pairs)]
            usable = guided if self.cfg.addition == "full" else [g for g in guided if g[1].success]
            stats = DistillStats()

            async def run() -> list[Experience]:
                found, summarized = await summarize(self.summ, self.cfg, task, usable, shape=self.shape)
                stats.merge(summarized)
                return found

            candidates, failed = await summary_or_nothing(run())
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
            events.append({"op": "add", "candidates": candidates})
        return events, stats, failed

    def _sampling(self, role: str) -> dict[str, Any]:
        return sampling(self.summ, role)

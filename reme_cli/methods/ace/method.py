"""`memory=ace`: ACE's playbook in build-pool (offline adaptation over the training
trajectories), fixed mode (a built playbook, read-only, whole in the prompt) and dynamic
mode (online adaptation: Reflector and Curator after every task). See this package's
docstring for the algorithm and the deviations."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reme_cli.agent.protocols import acts_with_code
from reme_cli.bench.base import Task
from reme_cli.core.io import append_lines
from reme_cli.core.reading import JsonFile
from reme_cli.core.staging import replace_dir
from reme_cli.core.run_log import read_trials
from reme_cli.llm.embed import make_embedder_for
from reme_cli.methods.ace import texts
from reme_cli.methods.ace.config import AceConfig
from reme_cli.methods.ace.playbook import METHOD, Playbook
from reme_cli.methods.ace.roles import AceStats, Settings, curate, reflect
from reme_cli.methods.base import (Applied, BuildContext, BuildResult, Episode, Learned, Memory, MethodContext,
                                   Retrieval, Tried)
from reme_cli.methods.context_guard import estimate_tokens, fit_items, memory_budget
from reme_cli.methods.pool_dirs import find_pool
from reme_cli.methods.streams import stream_dir
from reme_cli.methods.ace import describe
from reme_cli.methods.hooks import CostGuess, SavedState, expected_attempts

BUILD_LOG = "ace_build.jsonl"
# One line per training task applied to the playbook (a resumed build goes on after the last).
BUILT = JsonFile("an ACE build's ace_build.jsonl", lines=True, fix="move that line out (its task is learned again)",
                 shape={"unit": str, "events": list, "attempts": list, "stats": dict},
                 required=("unit", "events", "attempts", "stats"))


def initial(cfg: Any) -> Playbook:
    path = cfg.memory.initial_playbook
    return Playbook.parse(Path(path).read_text() if path else texts.initial_playbook(acts_with_code(cfg)))


def fit_playbook(playbook: Playbook, frame: str, budget: int, show_counts: bool) -> tuple[str, list[str], dict]:
    """``frame`` with the playbook in it, cut at bullet boundaries to ``budget`` tokens
    (headers always kept; the first bullets in playbook order win); the ids shown and the
    guard's record."""
    bullets = playbook.ordered()
    overhead = estimate_tokens(frame.replace("{playbook}", playbook.render(set(), show_counts)))
    fitted = fit_items([b.line(show_counts) for b in bullets], max(0, budget - overhead))
    shown = [b.id for b in bullets[:len(fitted.items)]]
    text = frame.replace("{playbook}", playbook.render(set(shown), show_counts))
    return text, shown, {**fitted.record(), "budget": budget, "bullet_budget": fitted.budget,
                         "prompt_tokens": estimate_tokens(text)}


class Ace(Memory):
    config_class = AceConfig
    needs_summarizer = True  # the Reflector and Curator are the summarizer (the executor by default)
    report_columns = {"setting": "ACE ({mode})", "params": ["memory.max_context_share", "memory.dedup"],
                      "series": {"playbook_bullets": "playbook bullets"}}
    saved = SavedState(METHOD, describe.read, describe.change, ("playbook",), starts_empty="the initial playbook")

    adapting = False  # build-pool's live offline adaptation (load_for_training), not an eval

    def __init__(self, playbook: Playbook, cfg: Any, summ: Any, embedder: Any = None):
        self.playbook = playbook
        self.root = cfg  # the run's Config (the guard's budget reads the model's context)
        self.cfg: AceConfig = cfg.memory
        self.summ = summ
        self.embedder = embedder

    # ------------------------------------------------------------------ shared
    def _budget(self) -> int:
        return memory_budget(self.root, self.cfg.max_context_share)

    def _settings(self) -> Settings:
        return Settings(self.summ, acts_with_code(self.root), self.cfg.trajectory_max_chars)

    def _embed(self) -> Any:
        return None if not self.cfg.dedup else self.embedder.embed

    @staticmethod
    async def _adapt(s: Settings, playbook: Playbook, budget: int, cfg: AceConfig, task: Task, trajectory: Any,
                     outcome: Any, with_gt: bool, stats: AceStats, source: str) -> tuple[list[dict[str, Any]], str]:
        """One Reflector + Curator round on a trajectory: the events it proposes, and the
        Reflector's answer."""
        text, shown, _ = fit_playbook(playbook, "{playbook}", budget, cfg.show_counts)
        reflection = await reflect(s, task, trajectory, outcome, text, set(shown), with_gt, stats)
        ops = await curate(s, task, trajectory, text, reflection, stats)
        return [{"op": "tag", **t} for t in reflection.tags] + [{**op, "source": source} for op in ops], reflection.text

    # ------------------------------------------------------------------ build-pool
    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """``until_success`` / ``all``: training tasks in split order, one at a time (each sees
        the playbook the tasks before it left), their sampled trajectories as attempts; a
        task's applied events are one durable line, so an interrupted build resumes after the
        last finished task. (``live`` adapted while build-pool ran ACE: nothing is left to do.)"""
        cfg: AceConfig = ctx.cfg.memory
        if cfg.offline_attempts == "live":
            return
        path = ctx.work / BUILD_LOG
        done = BUILT.records(path)
        playbook = initial(ctx.cfg)
        for line in done:
            playbook.replay(line["events"])
        finished = {line["unit"] for line in done}
        s = Settings(ctx.summarizer, acts_with_code(ctx.cfg), cfg.trajectory_max_chars)
        budget = memory_budget(ctx.cfg, cfg.max_context_share)
        embed = ctx.embedder.embed if cfg.dedup else None
        for epoch in range(cfg.epochs):
            for task_id in ctx.task_ids:
                unit = f"{epoch}/{task_id}"
                attempts = (ctx.attempts.get(task_id) or [])[:cfg.offline_max_attempts]
                if unit in finished or not attempts:
                    continue
                task = ctx.bench.load(task_id)
                stats, events, used = AceStats(), [], []
                for i, (trajectory, outcome) in enumerate(attempts):
                    proposed, _ = await cls._adapt(s, playbook, budget, cfg, task, trajectory, outcome,
                                                   cfg.offline_ground_truth, stats, f"build/{unit}#{i}")
                    applied = await asyncio.to_thread(playbook.apply, proposed, f"build/{unit}#{i}", embed,
                                                      cfg.dedup_threshold)
                    events += applied
                    used.append({"attempt": i, "success": outcome.success,
                                 "added": [e["id"] for e in applied if e["op"] == "add" and e.get("id")]})
                    if outcome.success and cfg.offline_attempts == "until_success":
                        break
                append_lines(path, [{"unit": unit, "events": events, "attempts": used, "stats": asdict(stats)}])

    @classmethod
    def adapts_on_training(cls, cfg: Any) -> bool:
        return cfg.memory.offline_attempts == "live"

    @classmethod
    def load_for_training(cls, ctx: MethodContext) -> Ace:
        """The authors' initial playbook, adapted task by task with live attempts."""
        state = cls(initial(ctx.cfg), ctx.cfg, ctx.summarizer, make_embedder_for(ctx.cfg) if ctx.cfg.memory.dedup
                    else None)
        state.adapting = True
        return state

    @classmethod
    def _offline_attempts(cls, cfg: Any, success_rate: float) -> tuple[float, int]:
        """Per training task and epoch: the attempts expected (until one succeeds, by default)
        and at most."""
        m: AceConfig = cfg.memory
        n = m.offline_max_attempts if m.offline_attempts == "live" else min(cfg.build.samples, m.offline_max_attempts)
        return (float(n) if m.offline_attempts == "all" else expected_attempts(n, success_rate)), n

    @classmethod
    def build_episodes(cls, cfg: Any, success_rate: float) -> tuple[int, float, int]:
        """Live: one unit per task and epoch, running its attempts; else the shared samples."""
        if not cls.adapts_on_training(cfg):
            return super().build_episodes(cfg, success_rate)
        expected, most = cls._offline_attempts(cfg, success_rate)
        return cfg.memory.epochs, cfg.memory.epochs * expected, cfg.memory.epochs * most

    @classmethod
    def expected_summarizer_calls(cls, cfg: Any, guess: CostGuess, build: bool = False) -> float:
        """A Reflector and a Curator call per adapted trajectory: after every online unit, and
        per offline attempt (until one succeeds, by default) of each epoch."""
        if not build:
            return 2.0 if cfg.eval.mode == "dynamic" else 0.0
        return 2.0 * cls._offline_attempts(cfg, guess.success_rate)[0] * cfg.memory.epochs

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        cfg: AceConfig = ctx.cfg.memory
        if cfg.offline_attempts == "live":
            return cls._assemble_adapted(ctx, staging)
        lines = BUILT.records(ctx.work / BUILD_LOG)
        playbook = initial(ctx.cfg)
        for line in lines:
            playbook.replay(line["events"])
        playbook.built_by = {**cls._built_by(ctx), "samples": ctx.cfg.build.samples}
        playbook.save(staging)
        stats = AceStats()
        for line in lines:
            stats.merge(AceStats(**line["stats"]))
        duplicates = sum(1 for line in lines for e in line["events"] if e.get("duplicate_of"))
        attempts = sum(len(line["attempts"]) for line in lines)
        return cls._built(playbook, stats, len(lines), attempts, duplicates)

    @classmethod
    def _assemble_adapted(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        """The live adaptation's final playbook (its stream's state, which build-pool's run
        saved), with the counts its units recorded."""
        playbook = Playbook.load(stream_dir(ctx.work, (0, 0)) / "playbook")
        playbook.built_by = cls._built_by(ctx)
        playbook.save(staging)
        units = [t.method for t in read_trials(ctx.work) if t.ok]  # build-pool's unit records
        stats = AceStats()
        for m in units:
            stats.merge(AceStats(**m["ace"]))
        attempts = sum(len(m.get("offline_attempts") or []) for m in units)
        duplicates = sum(len(m.get("duplicates") or {}) for m in units)
        return cls._built(playbook, stats, len(units), attempts, duplicates)

    @staticmethod
    def _built_by(ctx: BuildContext) -> dict[str, Any]:
        cfg: AceConfig = ctx.cfg.memory
        return {"kind": "build-pool", "run": str(ctx.work), "model": ctx.cfg.model.name, "epochs": cfg.epochs,
                "offline_attempts": cfg.offline_attempts, "offline_max_attempts": cfg.offline_max_attempts,
                "offline_ground_truth": cfg.offline_ground_truth, "dedup": cfg.dedup}

    @staticmethod
    def _built(playbook: Playbook, stats: AceStats, tasks: int, attempts: int, duplicates: int) -> BuildResult:
        report = {"pool_size": len(playbook.bullets), "playbook": playbook.version(),
                  "ace": {**asdict(stats), "tasks": tasks, "attempts_reflected": attempts,
                          "duplicates_dropped": duplicates}}
        rows = [("playbook bullets", str(len(playbook.bullets))), ("training attempts reflected", str(attempts)),
                ("ACE LLM calls (this session)", str(stats.llm_calls)),
                ("invalid reflections / curations", f"{stats.invalid_reflections} / {stats.invalid_curations}"),
                ("tags helpful / harmful / neutral",
                 f"{stats.tags['helpful']} / {stats.tags['harmful']} / {stats.tags['neutral']}")]
        return BuildResult(report, rows)

    # ------------------------------------------------------------------ eval
    @classmethod
    def check_pool(cls, cfg: Any) -> None:
        Playbook.load(find_pool(cfg.memory.pool, METHOD, "an ACE playbook"))

    @classmethod
    def load(cls, ctx: MethodContext) -> Ace:
        cfg = ctx.cfg
        playbook = Playbook.load(find_pool(cfg.memory.pool, METHOD, "an ACE playbook")) if cfg.memory.pool \
            else initial(cfg)
        return cls(playbook, cfg, ctx.summarizer, make_embedder_for(cfg) if cfg.memory.dedup else None)

    def fork(self, where: Path) -> Ace:
        copy = Ace(self.playbook.copy(), self.root, self.summ, self.embedder)
        copy.adapting = self.adapting
        return copy

    def apply(self, events: list[dict[str, Any]], committed: int, worker: int = 0) -> Applied:
        applied = self.playbook.apply(events, "", self._embed(), self.cfg.dedup_threshold)
        adds = [e for e in applied if e["op"] == "add"]
        return Applied(applied, {"applied": [e["id"] for e in adds if e.get("id")],
                                 "duplicates": {e["content"][:80]: e["duplicate_of"] for e in adds
                                                if e.get("duplicate_of")},
                                 "playbook_after": self.playbook.version(),
                                 "playbook_bullets": len(self.playbook.bullets)})

    def replay(self, events: list[dict[str, Any]]) -> None:
        self.playbook.replay(events)

    def save(self, where: Path) -> None:
        replace_dir(where / "playbook", self.playbook.save)  # whole or not at all

    def _render(self, frame: str) -> tuple[str, list[str], dict, dict]:
        with self.guard:
            return (*fit_playbook(self.playbook, frame, self._budget(), self.cfg.show_counts),
                    self.playbook.version())

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        text, shown, context, version = self._render(texts.generator_frame())
        return Retrieval(text, shown, [], {"playbook": version, "injected": len(shown), "context": context,
                                           "playbook_bullets": version["bullets"]})

    async def attempt(self, task: Task, episode: Episode, retrieval: Retrieval) -> Tried:
        """Offline adaptation (``adapting``): up to ``offline_max_attempts`` live attempts, each
        reflected on with ground truth and curated into a copy of the playbook, stopping at the
        first success; a retry sees that playbook and the failed attempt's reflection
        (``prompts/retry_frame.txt``). One Reflector call per attempt serves the Curator and the
        retry (the authors call it twice, the first time with the previous retry's test report).
        The events already carry their ids: the stream's one worker commits them unchanged."""
        if not self.adapting:
            return await super().attempt(task, episode, retrieval)
        with self.guard:
            local = self.playbook.copy()
        s, budget, stats = self._settings(), self._budget(), AceStats()
        attempts, applied, record = [], [], []
        guidance = retrieval.guidance
        for i in range(self.cfg.offline_max_attempts):
            tried = await episode(guidance, i)
            attempts.append(tried)
            proposed, reflection = await self._adapt(s, local, budget, self.cfg, task, tried.trajectory, tried.outcome,
                                                     self.cfg.offline_ground_truth, stats, f"#{i}")
            applied.append(await asyncio.to_thread(local.apply, proposed, "", self._embed(), self.cfg.dedup_threshold))
            record.append({"attempt": i, "success": tried.outcome.success,
                           "added": [e["id"] for e in applied[-1] if e["op"] == "add" and e.get("id")],
                           **({"guidance": guidance} if i else {})})  # the first one's is the unit's
            if tried.outcome.success:
                break
            text, _, _ = fit_playbook(local, texts.generator_frame(), budget, self.cfg.show_counts)
            guidance = text + texts.retry_frame(acts_with_code(self.root)).replace("{reflection}", reflection)
        return Tried(attempts, {"offline_attempts": record}, carry=(applied, stats))

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        """ACE online: a Reflector and a Curator round after every task (success or not),
        on its last attempt; the tags and ADDs are the unit's events. Offline (``adapting``):
        the events of every attempt, as ``attempt`` applied them."""
        stats = AceStats()
        if self.adapting:
            applied, stats = tried.carry
            events = [{**e, "source": f"{unit}{e['source']}"} if e["op"] == "add" else e
                      for attempt in applied for e in attempt]
        else:
            attempt = tried.attempts[-1]
            with self.guard:
                current = self.playbook.copy()
            events, _ = await self._adapt(self._settings(), current, self._budget(), self.cfg, task,
                                          attempt.trajectory, attempt.outcome, self.cfg.online_ground_truth, stats, unit)
        record = {**retrieval.details, "tags": [e for e in events if e["op"] == "tag"],
                  "proposed": [{"section": e["section"], "content": e["content"]} for e in events if e["op"] == "add"],
                  "ace": asdict(stats)}
        return Learned(record, events)

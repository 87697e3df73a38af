"""`memory=ace`: ACE's playbook in build-pool (offline adaptation over the training
trajectories), fixed mode (a built playbook, read-only, whole in the prompt) and dynamic
mode (online adaptation: Reflector and Curator after every task). See this package's
docstring for the algorithm and the deviations."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from reme_cli.bench.base import Task
from reme_cli.core.config import check_choices
from reme_cli.core.errors import UserError
from reme_cli.core.io import append_lines, read_lines
from reme_cli.core.staging import replace_dir
from reme_cli.llm.embed import make_embedder_for
from reme_cli.methods.ace import texts
from reme_cli.methods.ace.playbook import METHOD, Playbook
from reme_cli.methods.ace.roles import AceStats, Settings, curate, reflect
from reme_cli.methods.base import (Applied, BuildContext, BuildResult, Learned, Memory, MethodContext, Retrieval,
                                   Tried)
from reme_cli.methods.context_guard import estimate_tokens, fit_items, memory_budget
from reme_cli.methods.pool_dirs import find_pool

BUILD_LOG = "ace_build.jsonl"


@dataclass
class AceConfig:
    name: str = "ace"
    # A `reme build-pool memory=ace` output dir (or its pool/). Fixed mode needs one; dynamic
    # mode without one starts from the initial playbook (the paper's "ACE online" setting).
    pool: Optional[str] = None
    initial_playbook: Optional[str] = None  # a playbook file; null: the authors' (see texts.initial_playbook)
    epochs: int = 1  # passes over the training tasks (ace-appworld's adaptation: one)
    # The authors' offline loop retries a training task up to 5 times (StarAgent.num_retries)
    # and stops once its unit tests pass. build-pool has sampled trajectories, not live
    # retries: until_success reads a task's samples in order as its attempts and stops after
    # the first success; all reads every sample.
    offline_attempts: str = "until_success"
    offline_max_attempts: int = 5
    offline_ground_truth: bool = True  # ACE offline "with GT": the Reflector sees the checker's verdict
    online_ground_truth: bool = False  # ACE online (ACE_online_no_GT.jsonnet): it does not
    # Embedding de-duplication of ADDs (ace-agent/ace's BulletpointAnalyzer, off by default there
    # and absent from ace-appworld); 0.90 is its threshold.
    dedup: bool = False
    dedup_threshold: float = 0.90
    max_context_share: float = 0.5  # the playbook's share of the context (methods/context_guard.py)
    show_counts: bool = False  # render "[id] helpful=X harmful=Y :: content" (ace-agent/ace) instead of "[id] content"
    trajectory_max_chars: int = 12000  # the trajectory text the Reflector and Curator read

    def check(self) -> None:
        check_choices("memory", self, {"offline_attempts": {"until_success", "all"}},
                      {"epochs": 1, "offline_max_attempts": 1, "dedup_threshold": 0.0, "max_context_share": 0.01,
                       "trajectory_max_chars": 200}, {"dedup_threshold": 1.0, "max_context_share": 1.0})
        if self.initial_playbook and not Path(self.initial_playbook).is_file():
            raise UserError(f"memory.initial_playbook={self.initial_playbook} is not a file")


def code_actions(cfg: Any) -> bool:
    """Whether the agent acts with code (AppWorld: the authors' own setting) or tool calls."""
    return cfg.benchmark.name == "appworld"


def initial(cfg: Any) -> Playbook:
    path = cfg.memory.initial_playbook
    return Playbook.parse(Path(path).read_text() if path else texts.initial_playbook(code_actions(cfg)))


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
        return Settings(self.summ, code_actions(self.root), self.cfg.trajectory_max_chars)

    def _embed(self) -> Any:
        return None if not self.cfg.dedup else self.embedder.embed

    @staticmethod
    async def _adapt(s: Settings, playbook: Playbook, budget: int, cfg: AceConfig, task: Task, trajectory: Any,
                     outcome: Any, with_gt: bool, stats: AceStats, source: str) -> list[dict[str, Any]]:
        """One Reflector + Curator round on a trajectory: the events it proposes."""
        text, shown, _ = fit_playbook(playbook, "{playbook}", budget, cfg.show_counts)
        reflection = await reflect(s, task, trajectory, outcome, text, set(shown), with_gt, stats)
        ops = await curate(s, task, trajectory, text, reflection, stats)
        return [{"op": "tag", **t} for t in reflection.tags] + [{**op, "source": source} for op in ops]

    # ------------------------------------------------------------------ build-pool
    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """Training tasks in split order, one at a time (each sees the playbook the tasks
        before it left); a task's applied events are one durable line, so an interrupted
        build resumes after the last finished task."""
        cfg: AceConfig = ctx.cfg.memory
        path = ctx.work / BUILD_LOG
        done = read_lines(path)
        playbook = initial(ctx.cfg)
        for line in done:
            playbook.replay(line["events"])
        finished = {line["unit"] for line in done}
        s = Settings(ctx.summarizer, code_actions(ctx.cfg), cfg.trajectory_max_chars)
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
                    proposed = await cls._adapt(s, playbook, budget, cfg, task, trajectory, outcome,
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
    def expected_summarizer_calls(cls, cfg: Any, success_rate: float, build: bool = False) -> float:
        """A Reflector and a Curator call per adapted trajectory: after every online unit, and
        per offline attempt (until one succeeds, by default) of each epoch."""
        if not build:
            return 2.0 if cfg.eval.mode == "dynamic" else 0.0
        m: AceConfig = cfg.memory
        n = min(cfg.build.samples, m.offline_max_attempts)
        q = 1.0 - success_rate
        attempts = sum(q ** i for i in range(n)) if m.offline_attempts == "until_success" else n
        return 2.0 * attempts * m.epochs

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        lines = read_lines(ctx.work / BUILD_LOG)
        playbook = initial(ctx.cfg)
        for line in lines:
            playbook.replay(line["events"])
        cfg: AceConfig = ctx.cfg.memory
        playbook.built_by = {"kind": "build-pool", "run": str(ctx.work), "model": ctx.cfg.model.name,
                             "samples": ctx.cfg.build.samples, "epochs": cfg.epochs,
                             "offline_attempts": cfg.offline_attempts, "offline_max_attempts": cfg.offline_max_attempts,
                             "offline_ground_truth": cfg.offline_ground_truth, "dedup": cfg.dedup}
        playbook.save(staging)
        stats = AceStats()
        for line in lines:
            stats.merge(AceStats(**line["stats"]))
        duplicates = sum(1 for line in lines for e in line["events"] if e.get("duplicate_of"))
        attempts = sum(len(line["attempts"]) for line in lines)
        report = {"pool_size": len(playbook.bullets), "playbook": playbook.version(),
                  "ace": {**asdict(stats), "tasks": len(lines), "attempts_reflected": attempts,
                          "duplicates_dropped": duplicates}}
        rows = [("playbook bullets", str(len(playbook.bullets))), ("training attempts reflected", str(attempts)),
                ("ACE LLM calls (this session)", str(stats.llm_calls)),
                ("invalid reflections / curations", f"{stats.invalid_reflections} / {stats.invalid_curations}"),
                ("tags helpful / harmful / neutral",
                 f"{stats.tags['helpful']} / {stats.tags['harmful']} / {stats.tags['neutral']}")]
        return BuildResult(report, rows)

    # ------------------------------------------------------------------ eval
    @classmethod
    def preflight(cls, cfg: Any) -> None:
        if cfg.memory.pool:
            Playbook.load(find_pool(cfg.memory.pool, METHOD, "an ACE playbook"))
        elif cfg.eval.mode == "fixed":
            raise UserError("--mode fixed memory=ace needs memory.pool=DIR (build one with "
                            "`reme build-pool memory=ace`); dynamic mode may start from the initial playbook")

    @classmethod
    def load(cls, ctx: MethodContext) -> Ace:
        cfg = ctx.cfg
        playbook = Playbook.load(find_pool(cfg.memory.pool, METHOD, "an ACE playbook")) if cfg.memory.pool \
            else initial(cfg)
        return cls(playbook, cfg, ctx.summarizer, make_embedder_for(cfg) if cfg.memory.dedup else None)

    def fork(self, where: Path) -> Ace:
        return Ace(self.playbook.copy(), self.root, self.summ, self.embedder)

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

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        """ACE online: a Reflector and a Curator round after every task (success or not),
        on its last attempt; the tags and ADDs are the unit's events."""
        attempt = tried.attempts[-1]
        stats = AceStats()
        with self.guard:
            current = self.playbook.copy()
        events = await self._adapt(self._settings(), current, self._budget(), self.cfg, task, attempt.trajectory,
                                   attempt.outcome, self.cfg.online_ground_truth, stats, unit)
        record = {**retrieval.details, "tags": [e for e in events if e["op"] == "tag"],
                  "proposed": [{"section": e["section"], "content": e["content"]} for e in events if e["op"] == "add"],
                  "ace": asdict(stats)}
        return Learned(record, events)

"""`memory=dc`: Dynamic Cheatsheet in build-pool, fixed and dynamic mode (the package's
docstring says what the authors do and where this differs)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from reme_cli.agent.trajectory import Trajectory
from reme_cli.agent.render import render_trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.core.io import append_lines
from reme_cli.core.reading import JsonFile
from reme_cli.core.staging import replace_dir
from reme_cli.llm.embed import make_embedder_for
from reme_cli.methods.base import Applied, BuildContext, BuildResult, Learned, Memory, MethodContext, Retrieval, Tried
from reme_cli.methods.context_guard import memory_budget
from reme_cli.methods.dc import curator, describe, pool
from reme_cli.methods.dc.cheatsheet import EMPTY, Cheatsheet, digest, guidance, render_pairs
from reme_cli.methods.dc.config import DCConfig
from reme_cli.methods.dc.pairs import Pair, PairStore
from reme_cli.methods.hooks import CostGuess, SavedState

FOLD_FILE = "dc_curator.jsonl"  # build-pool: one line per training task folded into the cheatsheet
FOLDED = JsonFile("a DC build's dc_curator.jsonl", lines=True, fix="move that line out (its task is folded again)",
                  shape={"unit": str, "cheatsheet": str, "rewrites": int, "usable": bool},
                  required=("unit", "cheatsheet", "rewrites", "usable"))


def answer_text(cfg: DCConfig, task: Task, trajectory: Trajectory, outcome: Outcome) -> str:
    """What DC calls the model's answer: the trajectory as text (with the verdict only if
    ``show_outcome``), cut to ``trajectory_max_chars``."""
    return render_trajectory(task, trajectory, outcome if cfg.show_outcome else None,
                             max_chars=cfg.trajectory_max_chars)


def _training_pairs(ctx: BuildContext) -> list[tuple[str, Task, Trajectory, Outcome]]:
    """Each training task's first sampled trajectory (DC answers an input once, and picks
    no answer by its verdict), in split order."""
    out = []
    for task_id in ctx.task_ids:
        if ctx.attempts.get(task_id):
            trajectory, outcome = ctx.attempts[task_id][0]
            out.append((task_id, ctx.bench.load(task_id), trajectory, outcome))
    return out


class DynamicCheatsheet(Memory):
    config_class = DCConfig
    report_columns = {"setting": "DC ({memory.variant}, {mode})", "params": ["memory.variant", "memory.top_k"],
                      "series": {"cheatsheet_chars": "cheatsheet characters"}}
    needs_summarizer = True  # the curator's calls go to the summarizer (the executor by default)
    saved = SavedState(pool.METHOD, describe.read, describe.change, ("state",), starts_empty="the empty cheatsheet")

    def __init__(self, cfg: DCConfig, summ: Any, budget: int, sheet: Cheatsheet | None,
                 pairs: PairStore | None, last: str = EMPTY):
        self.cfg = cfg
        self.summ = summ
        self.budget = budget
        self.sheet = sheet  # DC-Cu's state
        self.pairs = pairs  # DC-RS's state
        self.last = last  # DC-RS: the cheatsheet synthesized for the stream's previous task
        self._synthesized: dict[str, str] = {}  # DC-RS, dynamic: unit -> its cheatsheet, until learn

    @property
    def cumulative(self) -> bool:
        return self.cfg.variant == "cumulative"

    @classmethod
    def expected_summarizer_calls(cls, cfg: Any, guess: CostGuess, build: bool = False) -> float:
        """DC-Cu: one curator call per task learned from (each training task; each dynamic
        unit). DC-RS: one synthesis call before every unit, fixed or dynamic; none to build."""
        if cfg.memory.variant == "cumulative":
            return 1.0 if build or cfg.eval.mode == "dynamic" else 0.0
        return 0.0 if build else 1.0

    # ------------------------------------------------------------------ build-pool
    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """DC-Cu: the training tasks folded into one cheatsheet in split order, one curator
        call per task, each a line of ``FOLD_FILE`` (a resumed build goes on from the last
        line). DC-RS needs no LLM here: its pool is the pairs (``assemble_pool``)."""
        cfg: DCConfig = ctx.cfg.memory
        if cfg.variant != "cumulative":
            return
        path = ctx.work / FOLD_FILE
        done = FOLDED.records(path)
        sheet = Cheatsheet(done[-1]["cheatsheet"], done[-1]["rewrites"]) if done else Cheatsheet()
        folded = {line["unit"] for line in done}
        for task_id, task, trajectory, outcome in _training_pairs(ctx):
            if task_id in folded:
                continue
            curated, info = await curator.rewrite(ctx.summarizer, sheet.text, task.query,
                                                  answer_text(cfg, task, trajectory, outcome))
            if curated.usable:
                sheet = Cheatsheet(curated.text, sheet.rewrites + 1)
            await asyncio.to_thread(append_lines, path, [{"unit": task_id, **info, "version": sheet.version(),
                                                          "rewrites": sheet.rewrites, "cheatsheet": sheet.text}])

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        cfg: DCConfig = ctx.cfg.memory
        pairs = PairStore(ctx.embedder, [Pair(task_id, task.query, answer_text(cfg, task, t, o))
                                         for task_id, task, t, o in _training_pairs(ctx)])
        lines = FOLDED.records(ctx.work / FOLD_FILE) if cfg.variant == "cumulative" else []
        sheet = None
        if cfg.variant == "cumulative":
            sheet = Cheatsheet(lines[-1]["cheatsheet"], lines[-1]["rewrites"]) if lines else Cheatsheet()
        built_by = {"kind": "build-pool", "run": str(ctx.work), "model": ctx.cfg.model.name,
                    "summarizer": ctx.cfg.summarizer.name, "samples": ctx.cfg.build.samples}
        pool.DCPool(sheet, pairs, built_by).save(staging, cfg.variant)
        unusable = sum(not line["usable"] for line in lines)
        report = {"pool_size": len(pairs), "dc": {"variant": cfg.variant, "pairs": len(pairs),
                                                   "curator_calls": len(lines), "unusable_answers": unusable,
                                                   "cheatsheet": sheet.version() if sheet else None,
                                                   "cheatsheet_chars": len(sheet.text) if sheet else None}}
        rows = [("variant", cfg.variant), ("input/output pairs", str(len(pairs)))]
        if sheet is not None:
            rows += [("curator calls / unusable answers", f"{len(lines)} / {unusable}"),
                     ("cheatsheet", f"{sheet.rewrites} rewrites, {len(sheet.text)} chars, {digest(sheet.text)}")]
        return BuildResult(report, rows)

    # ------------------------------------------------------------------ eval
    @classmethod
    def check_pool(cls, cfg: Any) -> None:
        pool.check(cfg.memory.pool, cfg.memory.variant)

    @classmethod
    def load(cls, ctx: MethodContext) -> DynamicCheatsheet:
        cfg: DCConfig = ctx.cfg.memory
        embedder = None if cfg.variant == "cumulative" else make_embedder_for(ctx.cfg)
        if cfg.pool:
            built = pool.load(cfg.pool, cfg.variant, embedder)
            sheet, pairs = built.cheatsheet, built.pairs
        else:  # dynamic mode from nothing, as the authors start
            sheet, pairs = Cheatsheet(), (PairStore(embedder) if embedder is not None else None)
        return cls(cfg, ctx.summarizer, memory_budget(ctx.cfg, cfg.max_context_share),
                   sheet if cfg.variant == "cumulative" else None, pairs)

    def fork(self, where: Path) -> DynamicCheatsheet:
        sheet = Cheatsheet(self.sheet.text, self.sheet.rewrites) if self.sheet is not None else None
        return DynamicCheatsheet(self.cfg, self.summ, self.budget, sheet,
                                 self.pairs.copy() if self.pairs is not None else None, self.last)

    def replay(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            if event["op"] == "rewrite":
                self.sheet = Cheatsheet(event["text"], self.sheet.rewrites + 1)
            elif event["op"] == "pair":
                self.pairs.add([Pair(event["id"], event["input"], event["output"])])
            elif event["op"] == "synthesized":
                self.last = event["text"]

    def apply(self, events: list[dict[str, Any]], committed: int, worker: int = 0) -> Applied:
        record: dict[str, Any] = {}
        if self.cumulative:
            base = [e["based_on"] for e in events if e["op"] == "rewrite"]
            # Several workers of a stream: a rewrite of an older version replaces newer ones.
            record["stale_rewrite"] = bool(base) and base[0] != self.sheet.version()["sha256"]
        self.replay(events)
        if self.cumulative:
            record["cheatsheet_after"] = self.sheet.version()
        else:
            record["pairs_after"] = len(self.pairs)
        return Applied(events, record)

    def save(self, where: Path) -> None:
        state = pool.DCPool(self.sheet, self.pairs, {"kind": "dynamic stream"})
        replace_dir(where / "state", lambda staging: state.save(staging, self.cfg.variant))
        if not self.cumulative:
            (where / "state" / "last_cheatsheet.txt").write_text(self.last, encoding="utf-8")

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        if self.cumulative:
            with self.guard:
                text, version = self.sheet.text, self.sheet.version()
            return self._guided(text, {"cheatsheet_version": version})
        with self.guard:
            previous = self.last
        hits = await asyncio.to_thread(self._read, self.pairs.search, task.query, self.cfg.top_k)
        pairs_text = render_pairs([(p.input, p.output, s) for p, s in hits])
        curated, info = await curator.synthesize(self.summ, previous, pairs_text, task.query)
        if self.learning:
            self._synthesized[unit] = curated.text
        details = {"retrieved": [{"id": p.id, "similarity": round(s, 6)} for p, s in hits],
                   "previous_cheatsheet": digest(previous), "curator": info,
                   "cheatsheet_version": {"sha256": digest(curated.text)}}
        retrieval = self._guided(curated.text, details)
        retrieval.ids, retrieval.scores = [p.id for p, _ in hits], [s for _, s in hits]
        return retrieval

    def _guided(self, text: str, details: dict[str, Any]) -> Retrieval:
        injected, fitted = guidance(text, self.budget)
        kept = "".join(fitted.items)
        return Retrieval(injected, details={
            "variant": self.cfg.variant, **details, "cheatsheet_chars": len(text),
            "cheatsheet_injected": {"chars": len(kept), "sha256": digest(kept)}, "context": fitted.record()})

    def _read(self, fn: Any, *args: Any) -> Any:
        with self.guard:
            return fn(*args)

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        record: dict[str, Any] = dict(retrieval.details)
        last = tried.attempts[-1]
        answer = answer_text(self.cfg, task, last.trajectory, last.outcome)
        if not self.cumulative:
            synthesized = self._synthesized.pop(unit, EMPTY)
            return Learned(record, [{"op": "pair", "id": unit, "input": task.query, "output": answer},
                                    {"op": "synthesized", "text": synthesized}])
        with self.guard:
            previous, version = self.sheet.text, self.sheet.version()
        curated, info = await curator.rewrite(self.summ, previous, task.query, answer)
        record["rewrite"] = info
        if not curated.usable:  # the authors keep the previous cheatsheet
            return Learned(record)
        return Learned(record, [{"op": "rewrite", "based_on": version["sha256"], "text": curated.text}])

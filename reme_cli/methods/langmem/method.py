"""`memory=langmem`: the LangMem row of the paper's Table 1, as the ReMe authors ran it.

Evidence: "[we] follow this blog (LangMem's guide 'How to Extract Episodic Memories',
section 'With storage') to reproduce LangMem" (agentscope-ai/ReMe issue #67, 2026-01-08).
The guide (langchain-ai/langmem, docs/docs/guides/extract_episodic_memories.md at c4de781)
does, and so does this method:
- an ``Episode`` schema (observation, thoughts, action, result; the guide's docstring and
  field descriptions, verbatim: ``episodes.py``);
- ``create_memory_store_manager(model, namespace=("memories", "episodes"),
  schemas=[Episode], instructions=<the guide's>, enable_inserts=True)`` over a LangGraph
  ``InMemoryStore`` with an embedding index (``store.py``);
- before answering, ``store.search(namespace, query=<the task's query>, limit=K)`` and the
  hits written as "### EPISODIC MEMORY:" / "Episode i: When … Thought … Did … Result …";
- after a task, the manager extracts episodes from the conversation and writes them.

Choices the guide leaves open for an agent benchmark (the authors' changes are not
published), each with its reason:
- where the episodes go: appended to the first user message, where ReMe's guidance goes
  (the guide puts them in a system message of a chat app; here every method injects at
  the same place, so the rows differ by memory only). The text is the guide's, without
  the stray indentation of its f-string;
- K = ``memory.top_k`` = 5, ReMe's K (the guide's example uses limit=1 for a toy store);
- only successful trajectories reach the manager, in build-pool and in dynamic mode: the
  ReMe paper adds memory only when a trajectory succeeds (the guide's comment, "Store this
  interaction if successful", says the same);
- the conversation the manager reads is the trajectory as chat messages (the task's user
  turns, the agent's steps and tool calls, tool outputs clipped; never the injected
  episodes), as LangMem reads a LangChain conversation;
- build-pool: the training trajectories (the same cached samples as the other methods) go
  to the manager one task at a time in split order (each call sees the episodes before it,
  as the guide's loop does); ``memory.build_episodes=best`` gives one call per task (its
  first success), like A-Mem's one note per task; ``all`` one per successful trajectory;
- keys: the manager names new memories with uuid4; they are renamed after the unit and
  content (sha256), so a rerun from cached answers rebuilds the same store, keys included.

Modes. fixed: every task searches the pool's frozen store. dynamic: each (seed, run) stream
starts from the pool's store; after each successful task the manager's writes are the
unit's events (the manager writes to a proposing store that reads the stream's store and
keeps the writes), applied when the unit commits; a resumed stream replays them. LLM calls
go through reme's summarizer client (``chat_model.RemeChatModel``); the store embeds with
reme's embedder. Answers are counted per role as ``langmem_episodes``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reme_cli.bench.base import Task
from reme_cli.core.io import append_lines
from reme_cli.core.reading import JsonFile
from reme_cli.core.staging import replace_dir
from reme_cli.llm import answer_health
from reme_cli.llm.embed import make_embedder_for
from reme_cli.methods.base import BuildContext, BuildResult, Learned, Memory, MethodContext, Retrieval, Tried
from reme_cli.methods.hooks import CostGuess, Guess, SavedState
from reme_cli.methods.langmem import describe, episodes
from reme_cli.methods.langmem.config import LangMemConfig
from reme_cli.methods.langmem.conversation import trajectory_messages
from reme_cli.methods.langmem.install import require
from reme_cli.methods.langmem.store import METHOD, EpisodeStore, proposing_store
from reme_cli.methods.pool_dirs import find_pool

BUILD_EVENTS = "langmem_episodes.jsonl"
# One line per training task's extracted puts (a resumed build goes on after the last).
EXTRACTED = JsonFile("a LangMem build's langmem_episodes.jsonl", lines=True,
                     fix="move that line out (its task is extracted again)",
                     shape={"unit": str, "puts": list, "llm_calls": int, "errors": list},
                     required=("unit", "puts", "llm_calls", "errors"))
# The dry-run's guess (``cost.langmem_calls_per_trajectory=N``): its manager's calls per extraction.
CALLS_PER_TRAJECTORY = "langmem_calls_per_trajectory"
ROLE = "langmem_episodes"
# What LangMem/trustcall raise when a reply does not fit (parse/validation); transport
# errors are re-raised by the chat model (``raise_fault``).
MANAGER_FAILURES = (ValueError, KeyError, IndexError, TypeError, AttributeError)


@dataclass
class Extracted:
    puts: list[dict[str, Any]]
    llm_calls: int
    error: str | None = None


def episode_key(unit: str, value: dict[str, Any]) -> str:
    return hashlib.sha256(f"{unit}|{json.dumps(value, sort_keys=True)}".encode()).hexdigest()[:32]


async def extract(summ: Any, cfg: LangMemConfig, store: EpisodeStore, read: Any, task: Task,
                  trajectory: Any, unit: str) -> Extracted:
    """One ``manager.ainvoke({"messages": ...})`` against ``store`` (read through ``read``);
    its writes, with new keys renamed, as put events. The store is not changed."""
    create = require("langmem", "create_memory_store_manager")
    from langchain_core.messages import convert_to_messages

    from reme_cli.methods.langmem.chat_model import RemeChatModel

    model = RemeChatModel(llm=summ.llm, schema_format=summ.schema_format, temperature=summ.temperature,
                          max_tokens=summ.max_tokens)
    proposing = proposing_store(store, read)
    manager = create(model, namespace=episodes.NAMESPACE, schemas=[episodes.Episode], instructions=cfg.instructions,
                     enable_inserts=True, query_limit=cfg.query_limit, store=proposing)
    _stable_session(manager.memory_manager)
    messages = convert_to_messages(trajectory_messages(task, trajectory))
    try:
        written = await manager.ainvoke({"messages": messages})
    except MANAGER_FAILURES as exc:
        model.raise_fault()
        answer_health.note(ROLE, None, valid=False, truncated=model.truncated > 0)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return Extracted([], model.calls, f"{type(exc).__name__}: {first}")
    model.raise_fault()
    answer_health.note(ROLE, None, valid=True, truncated=model.truncated > 0)
    known = set(read(lambda: {p["key"] for p in store.puts}))
    puts = [{"op": "put", "key": w["key"] if w["key"] in known else episode_key(unit, w["value"]),
             "value": w["value"]} for w in written]
    return Extracted(puts, model.calls)


def _stable_session(memory_manager: Any) -> None:
    """LangMem tags the conversation ``<session_{uuid4}>``: a prompt that changes on every
    run defeats the response cache (reruns must replay exactly). The tag is renamed after
    the conversation's own hash; nothing else of the request changes."""
    prepare = memory_manager._prepare_messages

    def prepared(messages: Any, max_steps: int = 1) -> list[dict]:
        out = prepare(messages, max_steps)
        text = out[-1]["content"]
        tag = re.search(r"<session_([0-9a-f-]{36})>", text)
        if tag:
            digest = hashlib.sha256(text.replace(tag.group(1), "").encode()).hexdigest()[:32]
            out[-1] = {**out[-1], "content": text.replace(tag.group(1), digest)}
        return out

    memory_manager._prepare_messages = prepared


def successes(attempts: list[Any], which: str) -> list[Any]:
    good = [a for a in attempts if a[1].success]
    return good if which == "all" else good[:1]


def resolve_store(path: str | Path) -> Path:
    return find_pool(path, METHOD, "a LangMem episodic pool")


def _direct(fn: Any, *args: Any) -> Any:
    return fn(*args)


@dataclass(eq=False)  # the state and what it is run with (identity, not value, compares)
class LangMem(Memory):
    config_class = LangMemConfig
    report_columns = {"setting": "LangMem"}
    needs_summarizer = True  # the manager's calls go to the summarizer (the executor by default)
    saved = SavedState(METHOD, describe.read, describe.change, ("store",))
    cost_guesses = {CALLS_PER_TRAJECTORY: Guess(2.0, "LangMem manager calls per extraction")}

    store: EpisodeStore
    cfg: LangMemConfig
    summ: Any

    # ------------------------------------------------------------------ build-pool
    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """Tasks in split order, one after another (each call sees the episodes before it);
        a task's puts are one durable line, so an interrupted build resumes after it."""
        cfg: LangMemConfig = ctx.cfg.memory
        path = ctx.work / BUILD_EVENTS
        done = EXTRACTED.records(path)
        store = EpisodeStore(ctx.embedder, [p for line in done for p in line["puts"]])
        finished = {line["unit"] for line in done}
        for task_id in ctx.task_ids:
            picked = successes(ctx.attempts.get(task_id) or [], cfg.build_episodes)
            if task_id in finished or not picked:
                continue
            task = ctx.bench.load(task_id)
            puts, calls, errors = [], 0, []
            for i, (trajectory, _) in enumerate(picked):
                got = await extract(ctx.summarizer, cfg, store, _direct, task, trajectory, f"build/{task_id}#{i}")
                await asyncio.to_thread(store.apply, got.puts)
                puts += got.puts
                calls += got.llm_calls
                errors += [got.error] if got.error else []
            append_lines(path, [{"unit": task_id, "puts": puts, "llm_calls": calls, "errors": errors}])

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        lines = EXTRACTED.records(ctx.work / BUILD_EVENTS)
        store = EpisodeStore(ctx.embedder, [p for line in lines for p in line["puts"]],
                             built_by={"kind": "build-pool", "run": str(ctx.work), "model": ctx.cfg.model.name,
                                       "samples": ctx.cfg.build.samples,
                                       "build_episodes": ctx.cfg.memory.build_episodes})
        store.save(staging)
        calls = sum(line["llm_calls"] for line in lines)
        failed = sum(len(line["errors"]) for line in lines)
        report = {"pool_size": len(store), "langmem": {"tasks": len(lines), "llm_calls": calls,
                                                      "invalid_extractions": failed, "puts": len(store.puts)}}
        rows = [("episodes", str(len(store))), ("tasks given to the manager", str(len(lines))),
                ("manager LLM calls / failed extractions", f"{calls} / {failed}")]
        return BuildResult(report, rows)

    @classmethod
    def expected_summarizer_calls(cls, cfg: Any, guess: CostGuess, build: bool = False) -> float:
        """The manager's calls per successful trajectory extracted: per training task its
        picked ones (the first success, or every one with build_episodes=all), per dynamic
        unit one if it succeeds."""
        p, calls = guess.success_rate, guess.own[CALLS_PER_TRAJECTORY]
        if build:
            n = cfg.build.samples
            return (n * p if cfg.memory.build_episodes == "all" else 1 - (1 - p) ** n) * calls
        return p * calls if cfg.eval.mode == "dynamic" else 0.0

    # ------------------------------------------------------------------ eval
    @classmethod
    def check_installed(cls) -> None:
        require("langmem", "create_memory_store_manager")

    @classmethod
    def check_pool(cls, cfg: Any) -> None:
        resolve_store(cfg.memory.pool)

    @classmethod
    def load(cls, ctx: MethodContext) -> LangMem:
        return cls(EpisodeStore.load(resolve_store(ctx.cfg.memory.pool), make_embedder_for(ctx.cfg)),
                   ctx.cfg.memory, ctx.summarizer)

    def fork(self, where: Path) -> LangMem:
        return LangMem(self.store.copy(), self.cfg, self.summ)

    def replay(self, events: list[dict[str, Any]]) -> None:
        self.store.apply([e for e in events if e.get("op") == "put"])

    def save(self, where: Path) -> None:
        replace_dir(where / "store", self.store.save)  # whole or not at all

    def _read(self, fn: Any, *args: Any) -> Any:
        with self.guard:
            return fn(*args)

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        hits = await asyncio.to_thread(self._read, self.store.search, task.query, self.cfg.top_k)
        return Retrieval(episodes.render([h.value["content"] for h in hits]), [h.key for h in hits],
                         [float(h.score) for h in hits], {"episodes": len(hits)})

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        success = next((a for a in reversed(tried.attempts) if a.outcome.success), None)
        if success is None:  # the paper adds memory only from a successful trajectory
            return Learned({"added": [], "llm_calls": 0})
        got = await extract(self.summ, self.cfg, self.store, self._read, task, success.trajectory, unit)
        return Learned({"added": [p["key"] for p in got.puts], "llm_calls": got.llm_calls,
                        "extraction_error": got.error}, got.puts)

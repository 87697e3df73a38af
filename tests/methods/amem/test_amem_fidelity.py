"""A-Mem as WujiangXu/A-mem-sys runs it (the repository the ReMe authors used, their issue
#67): one search returns at most K notes in total (``search_agentic`` returns
``memories[:k]``), and memory grows from successful trajectories only. No server: a
learn that must not call the LLM gets no LLM."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path

import pytest

from reme_cli.agent.trajectory import Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.llm.embed import make_embedder
from reme_cli.methods.amem.method import AMem, AMemConfig, _training_notes
from reme_cli.methods.amem.notes import Note, NoteStore
from reme_cli.methods.base import Attempt, Retrieval, Tried


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    cache = tmp_path_factory.mktemp("emb")
    return make_embedder({"kind": "sentence_transformers", "model": "all-MiniLM-L6-v2", "cache_dir": str(cache)})


def _linked_store(embedder, n: int) -> NoteStore:
    """n notes, every one linked to every other: links could double a result list."""
    ids = [f"n{i}" for i in range(n)]
    store = NoteStore(embedder)
    store.apply([{"unit": "t", "op": "add", "note": Note(
        id=i, content=f"book flight number {k} from SFO to JFK", links=[j for j in ids if j != i]).__dict__}
        for k, i in enumerate(ids)])
    return store


def _amem(store: NoteStore, **cfg) -> AMem:
    memory = AMem(store, AMemConfig(**cfg), summ=None)
    memory.guard = threading.RLock()
    return memory


@pytest.mark.parametrize("top_k", [1, 2, 3, 5, 8])
def test_a_search_never_returns_more_than_k_notes(embedder, top_k):
    memory = _amem(_linked_store(embedder, 6), top_k=top_k)
    task = Task(id="q", turns=[[{"role": "user", "content": "book a flight"}]], query="book a flight to JFK")
    got = asyncio.run(memory.retrieve(task, "u"))
    shown = len(re.findall(r"^Experience \d+ :$", got.guidance, re.M))
    assert shown == min(top_k, 6) and len(got.ids) == min(top_k, 6)
    # Every note links to every other, yet none is added: search_agentic's memories[:k].
    assert got.details["linked"] == [] and len(set(got.ids)) == len(got.ids)


def _attempt(success: bool) -> tuple[Trajectory, Outcome]:
    return Trajectory(), Outcome(success=success, reward=float(success))


@pytest.mark.parametrize("build_notes", ["best", "all"])
def test_training_notes_come_from_successful_trajectories_only(build_notes):
    cfg = AMemConfig(build_notes=build_notes)
    assert _training_notes(cfg, [_attempt(False), _attempt(False)]) == []
    picked = _training_notes(cfg, [_attempt(False), _attempt(True), _attempt(False), _attempt(True)])
    assert [i for i, _, _ in picked] == ([1] if build_notes == "best" else [1, 3])
    assert all(o.success for _, _, o in picked)


def test_a_failed_task_adds_no_note_and_calls_no_llm(embedder):
    memory = _amem(_linked_store(embedder, 2))  # summ=None: any LLM call would raise
    task = Task(id="t", turns=[[{"role": "user", "content": "x"}]], query="x")
    tried = Tried([Attempt(*_attempt(False)), Attempt(*_attempt(False))])
    learned = asyncio.run(memory.learn(task, tried, Retrieval(ids=["n0"]), "u"))
    assert [e["op"] for e in learned.events] == ["retrieve"]
    assert learned.record["added"] is False and learned.record["note"] is None


# --------------------------------------------------------------------------- through the CLI

FAILS, FAILS_TRAINING = "multi_turn_base_2", "multi_turn_base_5"  # replayed wrong (eval, training)


@pytest.mark.slow
def test_through_the_cli_only_successes_become_notes_and_at_most_k_are_injected(tmp_path):
    import json

    from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
    from reme_cli.testing.scripted_server import (
        AgentAndSummarizerPolicy,
        ScriptedServer,
        ScriptedSummarizerPolicy,
    )
    from tests.conftest import run_reme

    def lines(path: Path) -> list[dict]:
        return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]

    policy = AgentAndSummarizerPolicy(BFCLReplayPolicy(corrupt={FAILS, FAILS_TRAINING}), ScriptedSummarizerPolicy())
    with ScriptedServer(policy) as srv:
        common = ["memory=amem", "model=qwen3-8b", "embedding=minilm", "llm.model=replay", "benchmark.release=current",
                  "eval.dynamic_workers=1", f"llm.base_url={srv.base_url}"]
        run_reme(["build-pool", *common, "benchmark.limit=4", "build.samples=2", "out_dir=built"], tmp_path, check=True)
        run_reme(["eval", "--mode", "dynamic", *common, "memory.pool=built", "memory.top_k=2", "benchmark.limit=3",
                  "eval.runs=1", "eval.seeds=1", "out_dir=dyn"], tmp_path, check=True)
    built = lines(tmp_path / "built" / "build" / "trials.jsonl")
    assert {t["task_id"] for t in built if not t["success"]} == {FAILS_TRAINING}
    pool = lines(tmp_path / "built" / "pool" / "notes.jsonl")
    assert len(pool) == 3 and not any(n["source"].startswith(FAILS_TRAINING) for n in pool)
    trials = sorted(lines(tmp_path / "dyn" / "trials.jsonl"), key=lambda t: t["position"])
    store = lines(tmp_path / "dyn" / "streams" / "s0_r0" / "store" / "notes.jsonl")
    for t in trials:
        assert len(t["retrieved_ids"]) <= 2 and len(re.findall(r"^Experience \d+ :$", t["guidance"], re.M)) <= 2
        if t["task_id"] == FAILS:
            assert not t["success"] and t["method"]["added"] is False and t["method"]["note"] is None
        else:
            assert t["success"] and t["method"]["added"] is True and t["method"]["note"] in {n["id"] for n in store}
    assert len(store) == 3 + 2

"""Agreement with the paper and the official code, in tests that fail on drift.

The ReMe method is driven directly (real MiniLM embeddings, real faiss pool, a scripted
summarizer LLM, episodes whose outcomes the test chooses), so every expected f, u and
deleted id below is computed by hand. The CLI parts run against the scripted server (a TEST
DOUBLE that replays BFCL ground truth)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from reme_cli.agent.trajectory import Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.llm.client import ChatResult
from reme_cli.llm.embed import make_embedder
from reme_cli.methods.base import Attempt
from reme_cli.methods.reme.config import DeletionCfg, ReflectionCfg, ReMeConfig
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.method import ReMe
from reme_cli.methods.streams import StateStream, open_stream
from reme_cli.methods.reme.pool import Pool
from reme_cli.methods.summarizer import SummarizerSettings
from reme_cli.bench.appworld.benchmark import AppWorldBenchmark
from reme_cli.run.metrics import compute_metrics
from reme_cli.run.plan import Unit, plan_streams
from reme_cli.run.records import UnitRecord
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy

QUERIES = {"move": "Move the report into the archive folder.", "buy": "Buy ten shares of the tech company.",
           "mail": "Send a message to my colleague about the meeting."}


class Summarizer:
    """TEST DOUBLE LLM: no distilled experience, a fixed lesson, judge score 0.9; `fail_on`
    makes one prompt kind raise (a summarizer that breaks mid-unit)."""

    model = "scripted"

    def __init__(self, fail_on: str | None = None):
        self.fail_on = fail_on
        self.kinds: list[str] = []

    async def chat(self, messages, **kwargs) -> ChatResult:
        system = messages[0]["content"]  # reme's prompts' system part; the authors' one user message
        kind = ("judge" if "strict reviewer" in system or "validating the quality" in system
                else "reflection" if "FAILED. It will retry" in system else "distill")
        self.kinds.append(kind)
        if kind == self.fail_on:
            raise RuntimeError(f"summarizer broke on {kind}")
        text = {"judge": '{"score": 0.9, "reason": "ok"}', "reflection": '{"guidance": "Check the folder."}',
                "distill": "[]"}[kind]
        return ChatResult(text, [], None, 0, 0, 0.0, False)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    return make_embedder({"kind": "sentence_transformers", "model": "all-MiniLM-L6-v2",
                          "cache_dir": str(tmp_path_factory.mktemp("emb"))})


def make_reme(tmp_path: Path, embedder, llm=None, **cfg_kw) -> StateStream:
    """A dynamic ReMe stream (through the seam) over a fresh three-experience pool;
    ``cfg_kw`` sets ReMeConfig fields."""
    base = Pool.create(tmp_path / "base", embedder)
    base.add([Experience(id=f"e_{name}", when_to_use=q, content=f"how to {name}", source="success")
              for name, q in QUERIES.items()])
    base.save()
    cfg = ReMeConfig(top_k=1, rerank=False, rewrite=False, **cfg_kw)
    start = ReMe(base, cfg, SummarizerSettings(llm or Summarizer(), "scripted", 0.0, 256))
    return open_stream(start, tmp_path / "stream", set())


def episodes(outcomes: list[bool]):
    """An Episode that succeeds or fails as told, attempt by attempt."""
    left = list(outcomes)

    async def episode(guidance, attempt):
        return Attempt(Trajectory(turns=[[]]), Outcome(left.pop(0), 0.0))
    return episode


def solve(reme: StateStream, name: str, outcomes: list[bool], unit: str) -> None:
    task = Task(id=name, turns=[[{"role": "user", "content": QUERIES[name]}]], query=QUERIES[name])
    asyncio.run(reme.solve(task, episodes(outcomes), unit))
    asyncio.run(reme.commit(unit))


def counts(reme: StateStream) -> dict[str, tuple[int, int]]:
    return {e.id: (e.f, e.u) for e in reme.state.pool}


def test_deletion_fires_with_hand_computed_f_and_u(tmp_path, embedder):
    reme = make_reme(tmp_path, embedder, deletion=DeletionCfg(alpha=2, beta=0.5, rule="le"),
                     reflection=ReflectionCfg(enabled=False))
    solve(reme, "move", [False], "u1")  # e_move: f=1 u=0
    solve(reme, "buy", [True], "u2")    # e_buy:  f=1 u=1
    assert counts(reme) == {"e_move": (1, 0), "e_buy": (1, 1), "e_mail": (0, 0)}
    solve(reme, "buy", [True], "u3")    # e_buy: f=2 u=2 -> u/f = 1 > 0.5: kept
    solve(reme, "move", [False], "u4")  # e_move: f=2 u=0 -> f >= alpha, u/f = 0 <= 0.5: deleted
    assert counts(reme) == {"e_buy": (2, 2), "e_mail": (0, 0)}
    deletes = [(line["unit"], e) for line in reme.log.read() for e in line["events"] if e["op"] == "delete"]
    assert deletes == [("u4", {"op": "delete", "id": "e_move", "f": 2, "u": 0})]


def test_deletion_every_n_tasks_waits_for_its_turn(tmp_path, embedder):
    reme = make_reme(tmp_path, embedder, deletion=DeletionCfg(alpha=1, beta=0.5, every=3, counts="tasks"),
                     reflection=ReflectionCfg(enabled=False))
    solve(reme, "move", [False], "u1")  # task 1: e_move f=1 u=0 is deletable, but 1 % 3 != 0
    solve(reme, "buy", [True], "u2")    # task 2: still waiting
    assert "e_move" in counts(reme)
    solve(reme, "mail", [True], "u3")   # task 3: the deletion pass runs
    assert counts(reme) == {"e_buy": (1, 1), "e_mail": (1, 1)}


@pytest.mark.parametrize("style, credit, f_u", [("lesson", "final", (1, 1)), ("lesson", "trial", (1, 0)),
                                                ("summary", "final", (2, 2)), ("summary", "trial", (2, 1))])
def test_u_credit_final_or_per_trial(tmp_path, embedder, style, credit, f_u):
    """move fails, then succeeds. lesson: only the first attempt retrieved. summary: the
    first trial's summary is empty (the scripted distiller finds nothing), so the second
    trial retrieves again and is credited too."""
    reme = make_reme(tmp_path, embedder, u_credit=credit, reflection=ReflectionCfg(judge=False, style=style))
    solve(reme, "move", [False, True], "u1")
    assert counts(reme)["e_move"] == f_u


class Distiller(Summarizer):
    """TEST DOUBLE LLM: every distill call yields one experience, numbered by call, on an
    unrelated topic (so de-duplication keeps it); the judge accepts everything."""

    TOPICS = ["Rotate the telescope mirror before dawn.", "Water the orchids twice a week.",
              "Tune the violin strings with a fork.", "Sharpen the chisel on a whetstone."]

    async def chat(self, messages, **kwargs) -> ChatResult:
        result = await super().chat(messages, **kwargs)
        if self.kinds[-1] != "distill":
            return result
        n = self.kinds.count("distill")
        item = {"when_to_use": f"Astronomy hobby step {n}", "experience": self.TOPICS[n - 1]}
        return ChatResult(json.dumps([item]), [], None, 0, 0, 0.0, False)


def guided_episodes(outcomes: list[bool], seen: list[str | None]):
    """Like ``episodes``, remembering the guidance each trial was given."""
    left = list(outcomes)

    async def episode(guidance, attempt):
        seen.append(guidance)
        return Attempt(Trajectory(turns=[[]]), Outcome(left.pop(0), 0.0))
    return episode


def test_authors_trials_a_failed_trial_summary_guides_the_next_and_only_success_is_kept(tmp_path, embedder):
    """FAQ num_trials=3 and bfcl_agent.py:604-699 (65971baf), computed by hand: trial 1
    retrieves e_move and fails; its summary (call 1) guides trial 2 instead of a retrieval;
    trial 2 fails, its summary (call 2) guides trial 3, which succeeds and is scored. Only
    trial 1 retrieved: e_move f=1, u=0 (its own failure). Only the successful trial's
    summary (call 3) joins the pool."""
    reme = make_reme(tmp_path, embedder, llm=Distiller())
    seen: list[str | None] = []
    task = Task(id="move", turns=[[{"role": "user", "content": QUERIES["move"]}]], query=QUERIES["move"])
    solved = asyncio.run(reme.solve(task, guided_episodes([False, False, True], seen), "u1"))
    record = {**solved.record, **asyncio.run(reme.commit("u1"))}
    assert "how to move" in seen[0]
    assert Distiller.TOPICS[0] in seen[1] and "how to move" not in seen[1]
    assert Distiller.TOPICS[1] in seen[2] and Distiller.TOPICS[0] not in seen[2]
    assert [(t["guided_by"], t["retrieved_ids"], t["success"]) for t in record["trials"]] == [
        ("retrieval", ["e_move"], False), ("previous_summary", [], False), ("previous_summary", [], True)]
    assert counts(reme)["e_move"] == (1, 0)
    added = [e for e in reme.state.pool if e.id not in {"e_move", "e_buy", "e_mail"}]
    assert [(e.content, e.source) for e in added] == [(Distiller.TOPICS[2], "success")]
    assert record["added"] == [added[0].id]


def test_authors_trials_stop_at_three_and_keep_nothing_from_a_failed_task(tmp_path, embedder):
    reme = make_reme(tmp_path, embedder, llm=Distiller())
    seen: list[str | None] = []
    task = Task(id="move", turns=[[{"role": "user", "content": QUERIES["move"]}]], query=QUERIES["move"])
    solved = asyncio.run(reme.solve(task, guided_episodes([False, False, False, True], seen), "u1"))
    asyncio.run(reme.commit("u1"))
    assert len(seen) == 3 and len(solved.record["trials"]) == 3  # the 4th outcome is never asked for
    assert len(reme.state.pool) == 3 and counts(reme)["e_move"] == (1, 0)
    trials = [e for line in reme.log.read() for e in line["events"] if e["op"] == "trials"]
    assert trials == [{"op": "trials", "worker": 0, "n": 3}]


def test_deletion_counts_each_workers_trials_and_resumes_its_counters(tmp_path, embedder):
    """bfcl_agent.py:680-682: each worker asks for a pool-wide deletion after every Nth of its
    own trials. With every=2, two units of different workers trigger nothing; the second
    unit of worker 0 does. A stream reopened from its commit log has the same counters."""
    cfg = dict(deletion=DeletionCfg(alpha=1, beta=0.5, every=2), reflection=ReflectionCfg(enabled=False))
    reme = make_reme(tmp_path, embedder, **cfg)

    def commit(name, ok, unit, worker):
        task = Task(id=name, turns=[[{"role": "user", "content": QUERIES[name]}]], query=QUERIES[name])
        asyncio.run(reme.solve(task, episodes([ok]), unit))
        return asyncio.run(reme.commit(unit, worker))

    commit("move", False, "u1", 0)  # e_move f=1 u=0: deletable, worker 0 has run 1 trial
    assert commit("buy", True, "u2", 1)["deleted"] == []  # 2 trials in the stream, 1 per worker
    assert commit("mail", True, "u3", 0)["deleted"] == ["e_move"]  # worker 0's 2nd trial
    again = open_stream(reme.state.__class__(Pool.load(tmp_path / "base", embedder), reme.state.cfg,
                                             reme.state.summ), tmp_path / "stream", {"u1", "u2", "u3"})
    assert again.state.trials_by_worker == reme.state.trials_by_worker == {0: 2, 1: 1}
    assert counts(again) == counts(reme)


def test_reflection_lessons_go_through_the_judge_when_asked(tmp_path, embedder):
    judged = Summarizer()
    reme = make_reme(tmp_path, embedder, llm=judged, reflection=ReflectionCfg(style="lesson"), dedup_threshold=1.0)
    solve(reme, "move", [False, True], "u1")
    assert judged.kinds == ["reflection", "distill", "judge"]  # the lesson was judged
    assert [e.source for e in reme.state.pool if e.source == "reflection"] == ["reflection"]


def test_a_unit_failing_after_it_retrieved_leaves_no_trace(tmp_path, embedder):
    """The old bug: f/u were applied, a summarizer call then raised, the unit's events were
    dropped but the in-memory counts stayed. Now a unit only proposes; nothing of a unit
    that fails reaches the pool or the commit log. (A reflection that raises fails the unit;
    a summary that raises does not: the next test.)"""
    reme = make_reme(tmp_path, embedder, llm=Summarizer(fail_on="reflection"), addition="full",
                     reflection=ReflectionCfg(style="lesson"))
    before = counts(reme)
    task = Task(id="move", turns=[[{"role": "user", "content": QUERIES["move"]}]], query=QUERIES["move"])
    with pytest.raises(RuntimeError, match="summarizer broke on reflection"):
        asyncio.run(reme.solve(task, episodes([False, True]), "u1"))
    reme.discard("u1")                       # what the runner does with a failed unit
    assert asyncio.run(reme.commit("u1")) == {} and reme.log.read() == []
    assert counts(reme) == before == counts(make_reme(tmp_path / "again", embedder))


@pytest.mark.parametrize("style", ["summary", "lesson"])
def test_a_summary_that_raises_is_no_memory_and_the_trial_keeps_its_reward(tmp_path, embedder, style):
    """65971baf bfcl_agent.py:192-211, appworld_react_agent.py:294-314: a failed
    summary_task_memory call is an empty list; the agent goes on, the reward stands, and the
    retrieval is credited as usual (record_task_memory). Here the summary raises (as a
    context overflow or run-out retries would): the unit succeeds, nothing is added, the
    error is in the record and the summary is counted as failed."""
    from reme_cli.llm.answer_health import answer_tally, summary_failures

    reme = make_reme(tmp_path, embedder, llm=Summarizer(fail_on="distill"),
                     reflection=ReflectionCfg(style=style, judge=False))
    task = Task(id="move", turns=[[{"role": "user", "content": QUERIES["move"]}]], query=QUERIES["move"])
    with answer_tally() as tally:
        solved = asyncio.run(reme.solve(task, episodes([True]), "u1"))
    record = {**solved.record, **asyncio.run(reme.commit("u1"))}
    error = record["trials"][0]["summary_error"] if style == "summary" else record["summary_error"]
    assert error == "RuntimeError: summarizer broke on distill"
    assert record["added"] == [] and len(reme.state.pool) == 3
    assert counts(reme)["e_move"] == (1, 1)  # the successful trial that retrieved is credited
    assert summary_failures(tally.to_dict()) == {"summaries": 1, "failed": 1}


def test_a_failed_trials_summary_that_raises_leaves_the_next_trial_to_retrieve(tmp_path, embedder):
    """bfcl_agent.py:610-616,672: previous_memories = [] after a failed summary, so the next
    trial retrieves again (update_task_history_with_memory with an empty list)."""
    reme = make_reme(tmp_path, embedder, llm=Summarizer(fail_on="distill"))
    seen: list[str | None] = []
    task = Task(id="move", turns=[[{"role": "user", "content": QUERIES["move"]}]], query=QUERIES["move"])
    solved = asyncio.run(reme.solve(task, guided_episodes([False, True], seen), "u1"))
    assert [t["guided_by"] for t in solved.record["trials"]] == ["retrieval", "retrieval"]
    assert all("how to move" in g for g in seen)


def test_a_commit_adds_what_the_trial_summarized_without_a_second_dedup(tmp_path, embedder):
    """The FAQ's add_task_memory is MemoryAddition (65971baf reme/config/service.yaml:88-89,
    memory_addition.py:27-32): it inserts what the agent posts. The summary was de-duplicated
    when it was made (service.yaml:53, MemoryDeduplication); memory.dedup_at_commit checks again."""
    twin = Experience(id="twin", when_to_use=QUERIES["move"], content="how to move", source="success")
    for again, added in ((False, ["twin"]), (True, [])):
        reme = make_reme(tmp_path / str(again), embedder, dedup_at_commit=again)
        applied = reme.state.apply([{"op": "add", "candidates": [twin]}], committed=0)
        assert applied.record["added"] == added


def test_a_built_pool_keeps_every_validated_candidate_unless_asked_to_dedup(tmp_path, embedder):
    """v0.1.9's summary_task_memory (reme_ai/config/default.yaml:25-26: preprocess, extract,
    validate, store) has no de-duplication; memory.build_dedup adds reme's at
    memory.dedup_threshold."""
    from reme_cli.core.config import compose
    from reme_cli.methods.base import BuildContext
    from reme_cli.methods.reme.build import DISTILL_FILE, assemble

    work = tmp_path / "build"
    work.mkdir()
    lines = [{"task_id": t, "trajectories": 1, "successes": 1, "stats": {}, "summarizer_answers": {},
              "experiences": [Experience(id=f"x{t}", when_to_use=QUERIES["move"], content="how to move",
                                         source="success").to_dict()], "rejected": []} for t in ("t1", "t2")]
    (work / DISTILL_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    for dedup, size in (([], 2), (["memory.build_dedup=true"], 1)):
        cfg = compose(["memory=reme", *dedup])
        ctx = BuildContext(cfg, None, embedder, None, ["t1", "t2"], {}, work)
        built = assemble(ctx, tmp_path / f"pool-{size}")
        assert built.report["pool_size"] == size and built.report["removed_as_duplicates"] == 2 - size


def test_dedup_on_key_and_content_keeps_lessons_with_an_empty_key(tmp_path, embedder):
    lessons = [Experience(id=f"r{i}", when_to_use="", content=text, source="reflection")
               for i, text in enumerate(["Log in before sending messages.", "Sell only shares you own."])]
    for dedup_text, kept in (("key", 1), ("key_content", 2)):
        pool = Pool.create(tmp_path / dedup_text, embedder, retrieval_key="generalized_query")
        assert len(pool.add(lessons, dedup_threshold=0.85, dedup_text=dedup_text)) == kept


def test_metrics_by_hand_and_an_errored_unit_is_a_failure():
    def rec(seed, run, task, success, error=None):
        return UnitRecord(unit=f"s{seed}/r{run}/{task}", task_id=task, seed=seed, run=run, success=success,
                          error=error, stop_reason="error" if error else "answered")
    trials = [  # k=2, two seeds
        rec(0, 0, "a", True), rec(0, 1, "a", False), rec(0, 0, "b", False), rec(0, 1, "b", False),
        rec(1, 0, "a", True), rec(1, 1, "a", True), rec(1, 0, "b", True), rec(1, 1, "b", False, "Boom: x"),
    ]
    m = compute_metrics(trials, 2)
    # seed 0: a 0.5, b 0.0 -> avg 0.25, pass 0.5; seed 1: a 1.0, b 0.5 (the errored unit failed, as
    # the authors' get_reward scores it) -> avg 0.75, pass 1.0. Over seeds: avg 0.5, pass 0.75;
    # sample std: |0.75-0.25|/sqrt(2) and |1.0-0.5|/sqrt(2)
    assert m["per_seed"]["0"] == {"avg@2": 0.25, "pass@2": 0.5, "tasks": 2}
    assert m["per_seed"]["1"] == {"avg@2": 0.75, "pass@2": 1.0, "tasks": 2}
    assert m["avg@2"]["mean"] == pytest.approx(0.5) and m["pass@2"]["mean"] == pytest.approx(0.75)
    assert m["avg@2"]["std"] == pytest.approx(0.5 / 2 ** 0.5) and m["pass@2"]["std"] == pytest.approx(0.5 / 2 ** 0.5)
    assert m["errors"] == 1 and m["complete"] is False
    # A task whose every unit errored is a task that failed, not one that vanished.
    only_errors = compute_metrics([rec(0, 0, "a", True), rec(0, 0, "b", None, "Boom: y")], 1)
    assert only_errors["per_seed"]["0"] == {"avg@1": 0.5, "pass@1": 0.5, "tasks": 2}


def test_experiment_scope_shares_one_stream_per_seed():
    streams = plan_streams(["t1", "t2", "t3"], seeds=2, runs=2, seed_base=0, sequential=True, scope="experiment")
    assert len(streams) == 2 and all(len(s) == 6 for s in streams)
    assert [u.position for u in streams[0]] == list(range(6))
    assert [u.run for u in streams[0]] == [0, 0, 0, 1, 1, 1]
    assert [u.task_id for u in streams[0][:3]] == [u.task_id for u in streams[0][3:]]  # the same order each run


def test_dynamic_workers_split_each_stream_as_the_authors_scripts_do():
    """task_ids[i::W] per worker; the workers of a stream keep its (seed, run), so they share
    its memory, and positions stay those of the stream's order."""
    one = plan_streams([f"t{i}" for i in range(5)], seeds=1, runs=2, seed_base=0, sequential=True)
    two = plan_streams([f"t{i}" for i in range(5)], seeds=1, runs=2, seed_base=0, sequential=True, workers=2)
    assert [len(w) for w in two] == [3, 2, 3, 2]
    for stream, workers in zip(one, (two[:2], two[2:])):
        assert [w[0].run for w in workers] == [stream[0].run] * 2
        for i, worker in enumerate(workers):
            assert [(u.key, u.position) for u in worker] == [(u.key, u.position) for u in stream[i::2]]
            assert {u.worker for u in worker} == {i}  # what the authors' per-worker counters count by
    assert plan_streams(["a", "b"], 1, 1, 0, sequential=False, workers=4) == [[Unit(0, 0, "a")], [Unit(0, 0, "b")]]


# ---------------------------------------------------------------- through the CLI


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())) as srv:
        yield srv


@pytest.fixture(scope="module")
def official_pool(tmp_path_factory):
    from tests.conftest import run_reme

    cwd = tmp_path_factory.mktemp("official")
    run_reme(["pool", "import", "official:bfcl/qwen3-8b", "--out", str(cwd / "pool")], cwd, check=True)
    return cwd / "pool"


def _first_user(request: dict) -> str:
    return next(m["content"] for m in request["body"]["messages"] if m["role"] == "user")


@pytest.mark.slow
def test_the_released_pool_by_default_sends_exactly_the_authors_text(reme, server, official_pool):
    n = len(server.requests)
    reme("eval", "--mode", "fixed", "model=qwen3-8b", "embedding=minilm",
         f"llm.base_url={server.base_url}", "llm.model=replay", "benchmark.task_ids=[multi_turn_base_0]",
         "eval.runs=1", "eval.seeds=1", f"memory.pool={official_pool}", "out_dir=run", check=True)
    (trial,) = [json.loads(l) for l in (reme.cwd / "run" / "trials.jsonl").read_text().splitlines()]
    pool = {e["id"]: e for e in map(json.loads, (official_pool / "experiences.jsonl").read_text().splitlines())}
    retrieved = [(pool[i]["when_to_use"], pool[i]["content"]) for i in trial["retrieved_ids"]]
    assert len(retrieved) == 5
    from tests.methods.reme.test_distill import official_first_message

    sent = _first_user(server.requests[n])
    query = sent.split("\n", 1)[1].split("\n\nSome Related Experience", 1)[0]
    assert sent == official_first_message(query, retrieved)
    kinds = [r["body"]["messages"][0]["content"][:40] for r in server.requests[n:]]
    assert not any("Rank the candidates" in k or "Rewrite them" in k for k in kinds)  # rerank/rewrite off


@pytest.mark.slow
def test_paper_text_reranks_and_rewrites_through_the_cli(reme, server, official_pool):
    n = len(server.requests)
    reme("eval", "--mode", "fixed", "experiment=paper_text", "model=qwen3-8b", "embedding=minilm", f"llm.base_url={server.base_url}",
         "llm.model=replay", "benchmark.task_ids=[multi_turn_base_0]", "eval.runs=1", "eval.seeds=1",
         f"memory.pool={official_pool}", "out_dir=run", check=True)
    systems = [r["body"]["messages"][0]["content"] for r in server.requests[n:]]
    assert sum("Rank the candidates" in s for s in systems) == 1  # the rerank prompt, over the top K
    assert sum("Rewrite them into short guidance" in s for s in systems) == 1
    (trial,) = [json.loads(l) for l in (reme.cwd / "run" / "trials.jsonl").read_text().splitlines()]
    assert trial["guidance"] == "Some Related Experience to help you to complete the task:\nScripted guidance."
    agent = [r for r in server.requests[n:] if r["headers"].get("x-reme-task-id")]
    assert _first_user(agent[0]).endswith("\n\n" + trial["guidance"]) and _first_user(agent[0]).startswith("Task:\n")
    rerank_prompt = next(r for r in server.requests[n:] if "Rank the candidates" in r["body"]["messages"][0]["content"])
    assert rerank_prompt["body"]["messages"][-1]["content"].count("Candidate ") == 5  # the top K, not 2K


class HashEmbedder:
    """TEST DOUBLE embedder: another model name and dimension than the pool's."""

    name, dim = "hash-8", 8

    def embed(self, texts):
        import numpy as np

        vecs = np.array([[((hash(t) >> i) & 0xFF) + 1.0 for i in range(0, 64, 8)] for t in texts], dtype=np.float32)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_a_pool_embedded_with_another_model_is_refused_or_reembedded(tmp_path, embedder):
    from reme_cli.core.config import compose
    from reme_cli.core.errors import UserError
    from reme_cli.methods.reme.method import load_pool

    reme = make_reme(tmp_path, embedder)  # writes tmp_path/base with MiniLM
    refuse = compose(["memory=reme", f"memory.pool={tmp_path / 'base'}"])
    with pytest.raises(UserError, match=r"embedded with sentence_transformers:.*\(384-d\).*hash-8 \(8-d\).*memory.reembed=true"):
        load_pool(refuse, HashEmbedder(), tmp_path / "run")
    allow = compose(["memory=reme", f"memory.pool={tmp_path / 'base'}", "memory.reembed=true"])
    pool = load_pool(allow, HashEmbedder(), tmp_path / "run")
    assert pool.embedder.name == "hash-8" and pool.vectors.shape == (3, 8)
    assert sorted(e.id for e in pool) == sorted(e.id for e in reme.state.pool)
    assert Pool.load(tmp_path / "base", embedder).embedder.dim == 384  # the source pool is untouched


def test_scenario_goal_completion_by_hand():
    def rec(seed, run, task, success, difficulty=1):
        return UnitRecord(unit=f"s{seed}/r{run}/{task}", task_id=task, seed=seed, run=run, success=success,
                          stop_reason="answered", checker={"scenario": task.split("_")[0], "difficulty": difficulty})
    trials = [rec(0, 0, "a_1", True), rec(0, 0, "a_2", True), rec(0, 0, "b_1", True), rec(0, 0, "b_2", False, 3),
              rec(0, 1, "a_1", True), rec(0, 1, "a_2", False), rec(0, 1, "b_1", True), rec(0, 1, "b_2", True, 3)]
    m = compute_metrics(trials, 2, metrics=AppWorldBenchmark.metrics)
    # run 0: a passes (both), b fails -> 1/2; run 1: a fails, b passes -> 1/2; SGC = 0.5.
    # TGC Avg@2: a_1 1.0, a_2 0.5, b_1 1.0, b_2 0.5 -> 0.75. Difficulty 1: 5 of 6 units; 3: 1 of 2.
    assert m["sgc"]["mean"] == 0.5 and m["avg@2"]["mean"] == 0.75
    assert m["by_difficulty"] == {"1": pytest.approx(5 / 6), "3": 0.5}
    # Only a benchmark that declares them gets them: the same records as a BFCL run's do not.
    assert "sgc" not in compute_metrics(trials, 2) and "by_difficulty" not in compute_metrics(trials, 2)

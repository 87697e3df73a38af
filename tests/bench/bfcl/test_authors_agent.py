"""BFCL and the dynamic protocol as the authors' agent ran them (agentscope-ai/ReMe 65971baf,
benchmark/bfcl/), each the default and each a switch: the tools offered per turn, no step cap
per turn, a turn without calls dropped before scoring, the split in file order with every
worker chain running at once. The model is the scripted server (a TEST DOUBLE replaying the
ground truth), on the paper release a plain `reme eval` now runs."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time

import pytest
import yaml

from reme_cli.agent.loop import Sampling, run_episode
from reme_cli.agent.trajectory import Trajectory
from reme_cli.bench.bfcl import benchmark as bfcl
from reme_cli.bench.bfcl.benchmark import BFCLBenchmark
from reme_cli.bench.bfcl.tool_notes import pre_processing
from reme_cli.bench.bfcl.release import RELEASES, release_dir
from reme_cli.bench.registry import make_benchmark
from reme_cli.commands.evaluate import batch_size, chains_at_once
from reme_cli.core.config import compose
from reme_cli.llm.client import ChatClient
from reme_cli.run.plan import plan_streams
from reme_cli.run.settings import episode_settings
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.bench.replay import TASK_HEADER, conversation_position
from reme_cli.testing.scripted_server import (
    AgentAndSummarizerPolicy,
    Reply,
    ScriptedServer,
    ScriptedSummarizerPolicy,
)
from tests.conftest import scripted_server_process

NOTE = " Note that the provided function is in Python 3 syntax."
ALL = BFCLBenchmark(split="all")


def trials(path) -> dict[str, dict]:
    return {t["task_id"]: t for t in map(json.loads, (path / "trials.jsonl").read_text().splitlines())}


# ------------------------------------------------------------------- the tools offered


def test_turn_k_offers_the_note_k_times_on_the_same_entry_as_the_authors_compile_tools():
    """A re-creation of their path: preprocess.py annotates the docs once, then every turn
    change runs bfcl's pre-processing again on that same list, in place."""
    task = ALL.load("multi_turn_base_2")  # 5 turns
    docs = [d for cls in task.meta["involved_classes"] for d in bfcl._func_docs(cls)]
    entry = pre_processing()(json.loads(json.dumps(docs)), "multi_turn_base")  # preprocess.py:54
    authors = BFCLBenchmark(split="all", tool_note="per_turn", tool_response="drop").episode(task, "notes")
    bfcl_own = BFCLBenchmark(split="all", tool_note="once", tool_response="keep").episode(task, "once")
    for turn in range(len(task.turns)):
        if turn:
            entry = pre_processing()(entry, "multi_turn_base")  # handle_user_turn -> compile_tools
        tools = authors.tools()
        assert [t["function"]["description"] for t in tools] == [d["description"] for d in entry]
        assert all(t["function"]["description"].count(NOTE) == turn + 1 for t in tools)
        assert not any("response" in t["function"] for t in tools)  # extract_tool_schema
        once = bfcl_own.tools()
        assert all(t["function"]["description"].count(NOTE) == 1 for t in once)
        assert all("response" in t["function"] for t in once)  # bfcl's OpenAI handler keeps it
        authors.end_turn()
        bfcl_own.end_turn()


# ------------------------------------------------------------- turns without calls


def test_a_turn_without_calls_is_dropped_before_scoring_unless_told_to_keep_it():
    task_id = "multi_turn_base_167"  # its fifth ground-truth turn is empty
    gt = ALL.ground_truth_calls(task_id)
    assert [len(turn) for turn in gt][4] == 0
    verdicts = {}
    for mode in ("drop", "keep"):
        bench = BFCLBenchmark(split="all", empty_turns=mode)
        env = bench.episode(bench.load(task_id), f"empty-{mode}")
        for turn in gt:  # the ground truth, as the replay double answers it
            for name, args in turn:
                env.execute(name, args)
            env.end_turn()
        verdicts[mode] = env.evaluate()
    assert verdicts["keep"].success
    drop = verdicts["drop"]
    assert not drop.success and drop.details["error_type"] == "multi_turn:force_terminated"
    assert (drop.details["turns_recorded"], drop.details["turns_scored"], drop.details["turns_expected"]) == (5, 4, 5)


# ----------------------------------------------------------- no per-turn step cap


class CallsPwdForever:
    """Calls pwd() at every step of every turn: only a budget ends the episode."""

    name = "pwd-forever"

    def reply(self, body, headers):
        return Reply(tool_calls=[("pwd", {})])


def _episode(overrides: list[str], url: str):
    cfg = compose(["model=qwen3-8b", "benchmark.release=current", *overrides])
    bench = make_benchmark(cfg.benchmark)
    s = episode_settings(cfg, bench)
    task = bench.load("multi_turn_base_0")

    async def go():
        client = ChatClient(url, "m", cache=None)
        env = await bench.open(task, "cap")
        try:
            sampling = Sampling(s.temperature, s.top_p, s.max_tokens, 0, s.extra_body)
            return await run_episode(client, s.protocol, env, task, sampling, max_interactions=s.max_interactions,
                                     max_steps_per_turn=s.max_steps_per_turn, headers={TASK_HEADER: task.id})
        finally:
            await env.close()
            await client.close()

    return s, asyncio.run(go())


def test_only_the_30_interactions_bound_an_episode_unless_a_turn_cap_is_set():
    with ScriptedServer(CallsPwdForever()) as srv:
        settings, traj = _episode([], srv.base_url)
        assert settings.max_steps_per_turn is None  # the authors' agent: one loop of 30 over all turns
        assert ([len(t) for t in traj.turns], traj.stop_reason) == ([30], "interaction_limit")
        settings, traj = _episode(["benchmark.max_steps_per_turn=20"], srv.base_url)  # bfcl-eval's own runner
        assert ([len(t) for t in traj.turns], traj.stop_reason) == ([20], "turn_step_limit")
    assert episode_settings(compose(["model=local"]), ALL).max_steps_per_turn == 3  # the CPU model keeps its own


class CutsTheFirstTurn:
    """Replays the ground truth, but every reply of the first turn is cut off by max_tokens
    inside its reasoning, with no call (finish_reason "length")."""

    name = "cuts-first-turn"

    def __init__(self):
        self.inner = BFCLReplayPolicy()

    def reply(self, body, headers):
        if conversation_position(body["messages"])[0] == 0:
            return Reply(content="<think>Let me see which folder comes first, and", finish_reason="length")
        return self.inner.reply(body, headers)


def test_a_truncated_reply_without_calls_goes_on_to_the_next_turn():
    """65971baf bfcl_agent.py:350-376: a reply without tool calls is answered with the next
    user turn, whatever ended it; the episode ends only on the conversation's end or a
    budget. Each turn keeps its own stop reason."""
    with ScriptedServer(CutsTheFirstTurn()) as srv:
        _, traj = _episode([], srv.base_url)
    assert traj.turn_stops == ["truncated", "answered", "answered", "answered"]
    assert traj.stop_reason == "answered" and [len(t) for t in traj.turns][0] == 1
    assert Trajectory.from_dict(traj.to_dict()).turn_stops == traj.turn_stops


# ------------------------------------------------- the paper release, through the CLI


@pytest.fixture(scope="module")
def paper_replay():
    env = {**os.environ, "PYTHONPATH": str(release_dir("paper"))}  # ground truth of the paper release
    with scripted_server_process("--policy", "bfcl-replay", env=env) as url:
        yield url


@pytest.mark.slow
def test_a_plain_eval_runs_the_paper_release_as_the_authors_agent_did(reme, paper_replay):
    common = ["model=qwen3-8b", "embedding=minilm", f"llm.base_url={paper_replay}", "llm.model=replay",
              "llm.cache=false", "eval.runs=1", "eval.seeds=1",
              "benchmark.task_ids=[multi_turn_base_0,multi_turn_base_154,multi_turn_base_167,multi_turn_base_180]"]
    reme("eval", *common, "out_dir=authors", check=True)  # no benchmark.* set: the defaults
    reme("eval", *common, "benchmark.empty_turns=keep", "out_dir=keep", check=True)
    manifest = json.loads((reme.cwd / "authors" / "manifest.json").read_text())
    assert manifest["packages"]["bfcl-eval"] == RELEASES["paper"] == "2025.7.17"
    config = yaml.safe_load((reme.cwd / "authors" / "config.yaml").read_text())["benchmark"]
    assert (config["release"], config["tool_note"], config["tool_response"], config["empty_turns"],
            config["max_steps_per_turn"]) == ("paper", "per_turn", "drop", "drop", None)
    authors, keep = trials(reme.cwd / "authors"), trials(reme.cwd / "keep")
    # 154's paper ground truth has 6 turns for 5 questions; 167 and 180 have an empty turn
    assert {t: v["success"] for t, v in authors.items()} == {
        "multi_turn_base_0": True, "multi_turn_base_154": False, "multi_turn_base_167": False,
        "multi_turn_base_180": False}
    assert {t: v["success"] for t, v in keep.items()} == {
        "multi_turn_base_0": True, "multi_turn_base_154": False, "multi_turn_base_167": True,
        "multi_turn_base_180": True}
    assert authors["multi_turn_base_180"]["checker"]["turns_scored"] == 4  # of 6 turns, 2 without calls


@pytest.mark.slow
def test_every_request_carries_the_turns_tools_as_the_authors_agent_sent_them(reme):
    """The tools each request of a plain eval carries: at turn k the note k times, no response."""
    with ScriptedServer(BFCLReplayPolicy()) as srv:  # task 0's ground truth is the same in both releases
        reme("eval", "model=qwen3-8b", "embedding=minilm", f"llm.base_url={srv.base_url}", "llm.model=replay",
             "llm.cache=false", "eval.runs=1", "eval.seeds=1", "benchmark.task_ids=[multi_turn_base_0]",
             "out_dir=run", check=True)
        bodies = [r["body"] for r in srv.requests if r["path"].endswith("/chat/completions")]
    turns_seen = set()
    for body in bodies:
        turn = sum(1 for m in body["messages"] if m["role"] == "user") - 1
        turns_seen.add(turn)
        assert all(t["function"]["description"].count(NOTE) == turn + 1 for t in body["tools"]), turn
        assert not any("response" in t["function"] for t in body["tools"])
    assert turns_seen == {0, 1, 2, 3}
    assert json.loads((reme.cwd / "run" / "trials.jsonl").read_text())["success"] is True


# ------------------------------------------------ task order and worker chains


def test_dynamic_streams_walk_the_split_in_file_order_unless_shuffled():
    ids = [f"t{i}" for i in range(8)]
    authors = plan_streams(ids, seeds=2, runs=1, seed_base=0, sequential=True, workers=2)
    # every stream in file order, worker i taking ids[i::2], the same for every seed
    assert [[u.task_id for u in w] for w in authors] == [ids[0::2], ids[1::2]] * 2
    shuffled = plan_streams(ids, seeds=2, runs=1, seed_base=0, sequential=True, workers=2, order="shuffle")
    orders = [[u.task_id for u in w] for w in shuffled]
    assert sorted(orders[0] + orders[1]) == ids and orders[:2] != orders[2:]  # a permutation per seed
    assert compose(["eval.mode=dynamic", "memory=reme"]).eval.task_order == "file"


@pytest.mark.slow
def test_every_worker_chain_runs_at_once_whatever_llm_concurrency(reme, tmp_path):
    """AppWorld's dynamic suite has 3 seeds x 4 runs x 8 workers = 96 chains against the Qwen3
    configs' 64 requests in flight; each chain runs from the start (the requests queue)."""
    aw = plan_streams([f"x_{i}" for i in range(168)], seeds=3, runs=4, seed_base=0, sequential=True, workers=8)
    cfg = compose(["model=qwen3-8b", "benchmark=appworld", "eval.mode=dynamic", "memory=reme"])
    assert (len(aw), cfg.llm.concurrency, chains_at_once(cfg, aw)) == (96, 64, 96)
    assert chains_at_once(compose(["model=qwen3-8b"]), aw) == 64  # independent units: llm.concurrency

    # Dynamic Cheatsheet: a dynamic method that starts from nothing and embeds nothing (a fast stand-in
    # for any memory here: chains are the runner's, not the method's).
    policy = AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())
    with ScriptedServer(policy, delay=0.05) as srv:
        reme("eval", "--mode", "dynamic", "model=qwen3-8b", "embedding=minilm", "memory=dc",
             f"llm.base_url={srv.base_url}", "llm.model=replay", "llm.cache=false", "benchmark.release=current",
             "benchmark.limit=4", "eval.runs=2", "eval.seeds=1", "eval.dynamic_workers=2", "llm.concurrency=1",
             "out_dir=run", check=True)
        episodes = [r["headers"]["x-reme-episode"] for r in srv.requests if r["headers"].get("x-reme-episode")]
    units = list(dict.fromkeys(re.sub(r"_[0-9a-f]{8}$", "", e) for e in episodes))  # in order of first request
    test = BFCLBenchmark(split="test").task_ids()[:4]
    # 4 chains (2 runs x 2 workers), each starting with its first task in file order: all four
    # asked for the model before any chain went on to its second task
    first = {f"s0_r{r}_{t}" for r in (0, 1) for t in test[:2]}
    assert set(units[:4]) == first, units


class SlowOn:
    """Replies as ``inner`` does, ``delay`` seconds late for the requests of one task."""

    def __init__(self, inner, task_id: str, delay: float):
        self.inner, self.task_id, self.delay = inner, task_id, delay
        self.name = inner.name

    def reply(self, body, headers):
        if headers.get(TASK_HEADER) == self.task_id:
            time.sleep(self.delay)
        return self.inner.reply(body, headers)


@pytest.mark.slow
def test_appworld_runs_its_dynamic_tasks_in_batches_with_a_barrier_and_bfcl_does_not(reme):
    """65971baf run_appworld.py:58-107: batches of 8 consecutive tasks, every task of a batch
    gathered (ray.get) before the next batch starts; run_bfcl.py:51-71: worker i walks
    task_ids[i::4] at its own pace. Here 2 workers over 4 tasks, the first task slow: with
    batches, worker 1 waits for it before its second task; without, it goes on."""
    assert batch_size(compose(["model=qwen3-8b", "benchmark=appworld", "eval.mode=dynamic", "memory=reme"])) == 8
    assert batch_size(compose(["model=qwen3-8b", "eval.mode=dynamic", "memory=reme"])) is None
    test = BFCLBenchmark(split="test").task_ids()[:4]
    for batches in (True, False):
        policy = SlowOn(AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy()), test[0], 0.3)
        with ScriptedServer(policy) as srv:
            reme("eval", "--mode", "dynamic", "model=qwen3-8b", "embedding=minilm", "memory=dc",
                 f"llm.base_url={srv.base_url}", "llm.model=replay", "llm.cache=false", "benchmark.release=current",
                 "benchmark.limit=4", "eval.runs=1", "eval.seeds=1", "eval.dynamic_workers=2",
                 f"eval.dynamic_batches={str(batches).lower()}", f"out_dir=run-{batches}", check=True)
            tasks = [r["headers"].get("x-reme-task-id") for r in srv.requests]
        last_of_slow = max(i for i, t in enumerate(tasks) if t == test[0])
        first_of_next_batch = min(i for i, t in enumerate(tasks) if t in test[2:])
        assert (first_of_next_batch > last_of_slow) == batches, (batches, tasks)

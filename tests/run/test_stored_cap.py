"""What a run stores of a reply is capped; what the model and the environment get is not.

A scripted server (a TEST DOUBLE) answers the first step of a task with a tool call whose
argument is 10 MB; the unit's record stays small and says what was cut.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.bench.replay import TASK_HEADER
from reme_cli.testing.scripted_server import (DONE_TEXT, AgentAndSummarizerPolicy, Reply, ScriptedServer,
                                              ScriptedSummarizerPolicy, conversation_position)

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

HUGE = 10_000_000
REPLAY = ["model=qwen3-8b", "embedding=minilm", "llm.model=huge", "llm.cache=false", "eval.seeds=1",
          "eval.runs=1", "benchmark.task_ids=[multi_turn_base_0]", "benchmark.release=current", "out_dir=run"]


class HugeArgument:
    """TEST DOUBLE: one 10 MB tool argument in the first step of the first turn, then answers."""

    name = "huge-argument"

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        turn, step = conversation_position(body["messages"])
        if (turn, step) == (0, 0):
            return Reply(tool_calls=[("cd", {"folder": "x" * HUGE})])
        return Reply(content=DONE_TEXT)


def _assistant_arguments(request: dict[str, Any]) -> list[int]:
    """Sizes of the assistant's arguments the model was sent back in its history."""
    sizes = []
    for m in request["body"]["messages"]:
        if m.get("role") != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            sizes.append(len(call["function"]["arguments"]))
        if not m.get("tool_calls"):
            sizes.append(len(m.get("content") or ""))
    return sizes


@pytest.mark.parametrize("protocol", ["openai", "json"])
def test_a_10_mb_argument_is_stored_cut_and_marked(reme, protocol):
    with ScriptedServer(HugeArgument()) as srv:
        proc = reme("eval", *REPLAY, f"llm.base_url={srv.base_url}", f"model.tool_protocol={protocol}")
        requests = srv.requests
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = reme.cwd / "run" / "trials.jsonl"
    assert trials.stat().st_size < 100_000  # 10 MB without the cap
    (record,) = [json.loads(line) for line in trials.read_text().splitlines()]
    cut = record["truncated"]
    assert cut["max_chars"] == 20_000 and cut["fields"] >= 1 and cut["chars_cut"] > HUGE - 20_000
    (step,) = record["trajectory"]["turns"][0][:1]
    (call,) = step["calls"]
    stored = call["arguments"]["folder"] if isinstance(call["arguments"], dict) else call["arguments"]
    assert len(stored) <= 20_000 and "chars omitted" in stored
    assert any(p.startswith("trajectory.turns.0.0.calls.0.arguments") for p in cut["paths"])
    # The model got its reply back whole in the next request's history.
    assert max(_assistant_arguments(requests[1])) > HUGE


def test_the_cap_is_a_setting_and_records_within_it_are_not_marked(reme):
    with ScriptedServer(HugeArgument()) as srv:
        reme("eval", *REPLAY, f"llm.base_url={srv.base_url}", "eval.max_stored_chars=5000", check=True)
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        reme("eval", *REPLAY[:-1], "llm.model=replay", f"llm.base_url={srv.base_url}", "out_dir=plain", check=True)
    (cut,) = [json.loads(line) for line in (reme.cwd / "run" / "trials.jsonl").read_text().splitlines()]
    assert cut["truncated"]["max_chars"] == 5000 and (reme.cwd / "run" / "trials.jsonl").stat().st_size < 100_000
    (plain,) = [json.loads(line) for line in (reme.cwd / "plain" / "trials.jsonl").read_text().splitlines()]
    assert plain["truncated"] is None and plain["success"] is True


class LongReasoning:
    """TEST DOUBLE: ground-truth replay whose every agent reply thinks for 30,000 characters
    (past the 20,000 a record stores), ending in a marker; the summarizer script for the rest."""

    name = "long-reasoning"
    TAIL = "...and that is why cd comes first. END-OF-REASONING"

    def __init__(self):
        self.inner = AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        reply = self.inner.reply(body, headers)
        if headers.get(TASK_HEADER):
            return replace(reply, reasoning="r" * 30_000 + self.TAIL)
        return reply


def test_build_pool_summarizes_the_whole_trajectory_not_the_stored_cut(reme):
    """The authors' pool builder posted each trajectory whole (init_task_memory_pool.py:106-113);
    build-pool reads its trajectories back from the records, so it stores them whole."""
    with ScriptedServer(LongReasoning()) as srv:
        reme("build-pool", "model=qwen3-8b", "embedding=minilm", "llm.model=replay", f"llm.base_url={srv.base_url}",
             "llm.cache=false", "benchmark.task_ids=[multi_turn_base_0]", "benchmark.release=current",
             "build.samples=1", "out_dir=built", check=True)
        prompts = [r["body"]["messages"][0]["content"] for r in srv.requests
                   if not r["headers"].get(TASK_HEADER.lower()) and r["path"].endswith("/chat/completions")]
    (record,) = [json.loads(line) for line in (reme.cwd / "built" / "build" / "trials.jsonl").read_text().splitlines()]
    assert record["truncated"] is None
    assert record["trajectory"]["turns"][0][0]["reasoning"].endswith(LongReasoning.TAIL)
    analyses = [p for p in prompts if "END-OF-REASONING" in p]
    assert analyses and all(p.count("r" * 30_000 + LongReasoning.TAIL) >= 1 for p in analyses)

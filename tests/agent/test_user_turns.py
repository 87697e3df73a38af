"""The user-turn seam (``bench/users.py``): the agent loop asks the benchmark's ``User`` for
each turn with the conversation so far, ends the episode when it has no more, and a
benchmark's simulated user gets an LLM handle served as the summarizer's is. In process,
with an in-process scripted LLM double (never a model's answers); the toy benchmark's
simulated user runs end to end through `reme eval` in tests/plugins/test_plugin_toy.py, and BFCL's
and AppWorld's fixed turns are checked unchanged in tests/bench/test_fixed_turns_unchanged.py."""

from __future__ import annotations

import asyncio
from typing import Any

from reme_cli.agent.loop import Sampling, run_episode
from reme_cli.agent.protocols import OpenAIProtocol
from reme_cli.bench.base import Benchmark, InProcessEnv, Outcome, Task, ToolResult
from reme_cli.bench.users import STOP, Conversation, FixedTurns, UserModelCfg
from reme_cli.core.config import compose
from reme_cli.llm.client import ChatResult, ToolCallRequest, UsageTotals
from reme_cli.run.user_model import serve_user_model

SAMPLING = Sampling(temperature=0.0, top_p=None, max_tokens=None, seed=7)


class ScriptedLLM:
    """An in-process LLM double: each call's messages and options are kept; the agent calls
    one tool when the last message is the user's, then answers with the tool's output."""

    model, usage = "double", UsageTotals()

    def __init__(self) -> None:
        self.calls: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.calls.append((list(messages), kwargs))
        if messages[-1]["role"] == "user":
            return ChatResult("", [ToolCallRequest("c1", "bump", "{}")], None, 1, 1, 0.0, False, "tool_calls")
        return ChatResult(f"now {messages[-1]['content']}", [], None, 1, 1, 0.0, False, "stop")


class Counter:
    def __init__(self) -> None:
        self.value = 0

    def tools(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": "bump", "parameters": {"type": "object"}}}]

    def execute(self, name: str, arguments: Any) -> ToolResult:
        self.value += 1
        return ToolResult("bump()", str(self.value))

    def end_step(self) -> None: ...
    def end_turn(self) -> None: ...

    def evaluate(self) -> Outcome:
        return Outcome(True, 1.0)

    def close(self) -> None: ...


class Recorder:
    """A user that asks three times, keeping what it saw each time, then stops."""

    def __init__(self) -> None:
        self.seen: list[Conversation] = []

    async def next_turn(self, conversation: Conversation) -> list[dict[str, str]] | None:
        self.seen.append(conversation)
        return None if conversation.turn == 3 else [{"role": "user", "content": f"bump {conversation.turn}"}]


def episode(task: Task, user: Any = None, llm: ScriptedLLM | None = None):
    return asyncio.run(run_episode(llm or ScriptedLLM(), OpenAIProtocol(), InProcessEnv(Counter()), task, SAMPLING,
                                   guidance="Some Related Experience: count", user=user))


class Plain(Benchmark):
    """A benchmark that declares no user of its own: the seam's defaults."""


TASK = Task("t", turns=[[{"role": "user", "content": "first"}], [{"role": "user", "content": "second"}]], query="q")


def test_a_user_writes_each_turn_from_the_conversation_so_far_and_none_ends_it():
    user = Recorder()
    traj = episode(TASK, user)
    assert traj.user == [["bump 0"], ["bump 1"], ["bump 2"]]  # the task's fixed turns were not asked
    assert [c.turn for c in user.seen] == [0, 1, 2, 3]
    assert user.seen[0].said == () and user.seen[0].answers == () and user.seen[0].messages == ()
    last = user.seen[3]
    assert last.said == (("bump 0",), ("bump 1",), ("bump 2",)) and last.answers == ("now 1", "now 2", "now 3")
    assert last.messages[0]["content"].startswith("Task:\nbump 0\n\nSome Related Experience")  # guidance, once
    assert tuple(last.messages) == tuple(traj.messages)
    assert traj.turn_stops == ["answered"] * 3 and traj.interactions == 6


def test_by_default_the_task_turns_go_out_in_order_and_the_benchmark_says_so():
    traj = episode(TASK)
    assert traj.user == [["first"], ["second"]] and len(traj.turns) == 2
    user = Plain().user(TASK, None)
    assert isinstance(user, FixedTurns) and Plain().user_model() is None
    asked = [asyncio.run(user.next_turn(Conversation(turn, (), (), ()))) for turn in range(3)]
    assert asked == [*TASK.turns, None]


def test_an_empty_turn_still_gives_the_model_a_turn():
    """An empty list is a turn (BFCL's empty turns), not the end: only None ends."""
    traj = episode(Task("t", turns=[[{"role": "user", "content": "go"}], []], query="q"))
    assert traj.user == [["go"], []] and len(traj.turns) == 2 and traj.interactions == 3


def test_a_simulated_users_llm_is_the_executors_with_its_own_sampling_seed_and_headers():
    executor = ScriptedLLM()

    class Simulated(Benchmark):
        def user_model(self) -> UserModelCfg:
            return UserModelCfg(temperature=0.7, max_tokens=64)

    assert serve_user_model(compose([]), Plain(), executor) == (None, None)
    served, own = serve_user_model(compose([]), Simulated(), executor)
    assert own is None and served.llm is executor  # name: same -> the executor's client, nothing to close
    llm = served.for_episode(11, {"X-Reme-Task-Id": "t"})
    asyncio.run(llm.chat([{"role": "user", "content": "hi"}]))
    asyncio.run(llm.chat([{"role": "user", "content": STOP}], temperature=0.0))
    (_, first), (_, second) = executor.calls
    assert first == {"temperature": 0.7, "max_tokens": 64, "top_p": None, "seed": 11,
                     "headers": {"X-Reme-Task-Id": "t"}}
    assert second["temperature"] == 0.0 and second["seed"] == 11  # a call may set its own

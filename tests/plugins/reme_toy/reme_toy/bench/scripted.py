"""TEST DOUBLE for the toy benchmark: answers like a perfect agent (one increment per step
up to the target, then DONE), counting the increments it already sent in the history, and
as its simulated user (``user.py``'s prompt): one increment asked at a time until the agent
reports the goal, then ``###STOP###``. The scripted server finds it by name (``--policy
toy``) through the ``reme.replay_policies`` entry point, as it finds reme's own
(``reme_cli/bench/replay.py`` is the seam)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reme_cli.bench.replay import Reply
from reme_cli.bench.users import STOP
from reme_toy.bench.user import PROMPT

ASK = "Please add one to the counter."
USER_PROMPT = re.compile(re.escape(PROMPT).replace(r"\{target\}", r"(\d+)"))


class ToyPolicy:
    name = "toy"

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        messages = body["messages"]
        if (user := USER_PROMPT.fullmatch(messages[0]["content"])) is not None:
            return Reply(content=self.as_user(int(user.group(1)), messages[-1]["content"]))
        sent = sum(m["content"].count("CALL increment") for m in messages if m["role"] == "assistant")
        task = next(m["content"] for m in messages if m["role"] == "user")
        if (goal := re.search(r"counter to (\d+)", task)) is not None:  # the task's own turn names the target
            target = int(goal.group(1))
            return Reply(content="CALL increment" if sent < target else f"DONE at {target}")
        # A simulated user's turns: one increment for each it asked for.
        asked = sum(m["content"].count(ASK) for m in messages if m["role"] == "user")
        return Reply(content="CALL increment" if sent < asked else f"DONE at {sent}")

    @staticmethod
    def as_user(target: int, agent_said: str) -> str:
        done = re.fullmatch(r"DONE at (\d+)", agent_said.strip())
        return STOP if done is not None and int(done.group(1)) >= target else ASK

"""The toy benchmark's simulated user (``benchmark.user=simulated``), in tau-bench's shape:
an LLM holds the task's goal, never shown to the agent, and writes each user turn from the
conversation so far, one increment at a time, until the agent reports the counter at the
goal; then it writes ``###STOP###`` and the episode ends. It speaks through the handle reme
serves it (``benchmark.user_model``: the executor's server by default)."""

from __future__ import annotations

from typing import Any, Optional

from reme_cli.bench.users import STOP, Conversation

PROMPT = ("You are a user talking to an agent that keeps a counter. Your goal: the counter at {target}. "
          f"Ask for one increment per message; when the agent reports the counter at your goal, write {STOP} alone.")
GREETING = "Hi! How can I help you today?"


class ToyUser:
    def __init__(self, target: int, llm: Any):
        self.target, self.llm = target, llm

    async def next_turn(self, conversation: Conversation) -> Optional[list[dict[str, str]]]:
        # The roles flipped, as tau-bench's user sees them: its own words are the assistant's,
        # the agent's answers the user's.
        messages = [{"role": "system", "content": PROMPT.format(target=self.target)},
                    {"role": "user", "content": GREETING}]
        for said, answer in zip(conversation.said, conversation.answers):
            messages += [{"role": "assistant", "content": "\n".join(said)},
                         {"role": "user", "content": answer or "(no answer)"}]
        reply = (await self.llm.chat(messages)).content.strip()
        return None if STOP in reply else [{"role": "user", "content": reply}]

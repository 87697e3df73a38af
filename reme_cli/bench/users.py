"""Who writes an episode's user turns: the seam between a benchmark and the agent loop's user.

By default a task's own fixed turns (``Task.turns``: BFCL's turns, AppWorld's one instruction),
handed over one after another (``FixedTurns``). A benchmark whose user answers the agent (a
simulated user: tau-bench's ``LLMUserSimulationEnv``, which holds the task's instruction and
writes each message from the conversation until it says ``###STOP###``; inspect_ai's
``user_message`` solver, which writes the next user message from the state) returns its own
``User`` from ``Benchmark.user``: each turn is written from the conversation so far, and
``None`` ends the episode. It may speak through an LLM of its own, asked for with
``Benchmark.user_model`` (a ``UserModelCfg`` in its config) and served as the summarizer is:
by the executor's server, or by an endpoint of its own (``run/user_model.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol

STOP = "###STOP###"  # what a simulated user writes when it is done (tau-bench's word for it)


@dataclass(frozen=True)
class Conversation:
    """What a user sees before it writes turn ``turn`` (0: the first)."""

    turn: int
    # Every message the agent's model was sent and answered so far, as it had them: the system
    # prompt, the user turns (the first with the unit's guidance), its replies and the tool
    # results in its protocol's form.
    messages: Sequence[Mapping[str, Any]]
    said: Sequence[Sequence[str]]  # the user's own messages of each earlier turn
    # The agent's last reply of each earlier turn, as the user would read it (None: the turn
    # ended without one, e.g. in tool calls cut by a limit).
    answers: Sequence[Optional[str]]


class User(Protocol):
    """The user side of one episode (one per episode, never shared)."""

    async def next_turn(self, conversation: Conversation) -> Optional[list[dict[str, str]]]:
        """The next turn's user message(s) (``{"role": "user", "content": ...}``; an empty
        list is a turn the model starts on its own), or None: the conversation is over."""


class FixedTurns:
    """The default user: the task's own turns, in order, whatever the agent said."""

    def __init__(self, turns: Sequence[list[dict[str, str]]]):
        self.turns = turns

    async def next_turn(self, conversation: Conversation) -> Optional[list[dict[str, str]]]:
        return self.turns[conversation.turn] if conversation.turn < len(self.turns) else None


@dataclass
class UserModelCfg:
    """The LLM a benchmark's simulated user speaks with, a section of that benchmark's config
    (``benchmark.user_model.*``), served as the summarizer is: its sampling, the episode's
    seed and its task's headers go with every call, so a rerun replays it from the cache."""

    name: str = "same"  # same: the executor's server answers as the user; else its endpoint's model name
    base_url: Optional[str] = None  # its own server; null: the executor's
    model: Optional[str] = None  # the model that server serves (null: the first it lists)
    temperature: Optional[float] = None  # null: not sent (the endpoint's default)
    max_tokens: Optional[int] = None  # null: no cap

"""An episode as the agent ran it and a unit records it: its steps, turns and user
messages, why each turn stopped, and where the unit's guidance went in its first message.
A memory method reads these (what its summarizer sees of an episode); ``agent/loop.py`` writes
them, and needs the LLM client, which reading them does not.

Every turn ends with a stop reason (``Trajectory.turn_stops``), and the episode with that of
its last turn (``stop_reason``). All but ``error`` are results the checker scores (what was
done so far), as bfcl-eval's own runner does: ``answered`` (the turn ended with an answer),
``truncated`` (a reply hit ``max_tokens`` with no usable call: like an answer, the episode
goes on to the next turn, as the authors' agent hands any reply without calls the next user
turn, 65971baf bfcl_agent.py:350-376), ``turn_step_limit`` (a turn used all its steps: bfcl
force-quits the entry), ``interaction_limit`` (the task's model-call budget ran out),
``context_overflow`` (the server refused the prompt for length), or a bound the environment
put on the model's code (``LIMIT_STOPS``: its time, memory, processes, disk or output;
``crashed``: the code killed its own process); these end the episode. ``error`` is set by the
runner for a unit that failed. Every bound hit, also one that only cut an output, is listed in
the trajectory's ``limits``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from reme_cli.bench.base import Task

GUIDANCE_HEADER = "Some Related Experience to help you to complete the task"
# The environment's bounds (ToolResult.limit) -> the stop reason when one ends the episode.
LIMIT_STOPS = {"time": "time_limit", "memory": "memory_limit", "processes": "process_limit", "disk": "disk_limit",
               "output": "output_limit", "crashed": "crashed"}
STOP_REASONS = ("answered", "turn_step_limit", "interaction_limit", "context_overflow", "truncated",
                *LIMIT_STOPS.values(), "error")
_OLD_STOP_REASONS = {"completed": "answered", "max_interactions": "interaction_limit"}  # records before 0.2
TURN_GOES_ON = ("answered", "truncated")  # a turn that ended so hands over to the next one


@dataclass
class Step:
    """One model reply and what it did: tool calls (BFCL) or code and its output (AppWorld)."""

    text: str
    calls: list[dict[str, Any]]  # name, arguments (raw), call (canonical), output, error
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    code: str | None = None
    code_output: str | None = None
    # The model's reasoning before the reply (a reasoning parser's ``reasoning_content``, or
    # a ``<think>`` block left in the content), for people reading the episode; whether it
    # goes back to the model is ``benchmark.history_reasoning``'s choice.
    reasoning: str | None = None


@dataclass
class Trajectory:
    turns: list[list[Step]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    # Each turn's user messages as its user wrote them (the task's fixed turns, or a simulated
    # user's: bench/users.py); the first one went out followed by the unit's guidance
    # (``with_guidance``), which the unit's record holds as ``guidance``.
    user: list[list[str]] = field(default_factory=list)
    interactions: int = 0
    stop_reason: str = "answered"  # one of STOP_REASONS: the last turn's
    # the server's words for context_overflow; what the episode did, for a bound that ended it
    stop_detail: str | None = None
    turn_stops: list[str] = field(default_factory=list)  # each turn's stop reason (records before 0.3: none)
    limits: list[dict[str, Any]] = field(default_factory=list)  # bounds hit: {limit, interaction}

    @property
    def max_prompt_tokens(self) -> int:
        """The largest prompt sent: how close the episode came to the context limit."""
        return max((s.prompt_tokens for t in self.turns for s in t), default=0)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for t in self.turns for s in t)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for t in self.turns for s in t)

    @property
    def latency_s(self) -> float:
        return sum(s.latency_s for t in self.turns for s in t)

    def to_dict(self) -> dict[str, Any]:
        return {
            "turns": [[asdict(s) for s in turn] for turn in self.turns],
            "user": self.user,
            "interactions": self.interactions,
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "turn_stops": self.turn_stops,
            "limits": self.limits,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Trajectory":
        """A recorded trajectory (messages are not recorded: turns hold what happened)."""
        return cls(
            turns=[[Step(**s) for s in turn] for turn in data.get("turns", [])],
            user=data.get("user") or [],
            interactions=data.get("interactions", 0),
            stop_reason=_OLD_STOP_REASONS.get(data.get("stop_reason"), data.get("stop_reason") or "answered"),
            stop_detail=data.get("stop_detail"),
            turn_stops=list(data.get("turn_stops") or []),
            limits=list(data.get("limits") or []),
        )


def with_guidance(text: str, guidance: str | None) -> str:
    """The first user message with guidance, as the official ReMe agents build it
    (agentscope-ai/ReMe 65971baf, benchmark/bfcl/bfcl_agent.py): ``"Task:\\n" + query +
    "\\n\\n" + guidance``, where guidance starts with its header. Without guidance the query
    goes alone. Experiences come after the task text, so the system prompt and tools stay a
    shared prefix."""
    return f"Task:\n{text}\n\n{guidance}" if guidance else text


_EXPERIENCE_LABEL = re.compile(r"\bExperience\s*(\d+)\s*:")


def relabel(guidance: str, label: str) -> str:
    """Each ``Experience i :`` of `guidance` written as `label` (``{n}``: the number), as the
    authors' AppWorld agent relabels the memory service's items (``re.sub`` on its answer)."""
    return _EXPERIENCE_LABEL.sub(lambda m: label.format(n=m.group(1)), guidance)


def guidance_as_sent(task: Task, guidance: str | None) -> str | None:
    """The guidance text as the first user message carries it: relabelled where the task's
    agent names experiences its own way (AppWorld's authors' agent)."""
    if guidance and task.meta.get("experience_label"):
        return relabel(guidance, task.meta["experience_label"])
    return guidance

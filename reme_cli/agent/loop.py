"""The multi-turn tool-using episode: user turn, then model <-> tools until the model
answers without calls, under per-turn and per-task interaction limits.

Every episode ends with a stop reason. All but ``error`` are results the checker scores
(what was done so far), as bfcl-eval's own runner does: ``answered`` (every turn ended with
an answer), ``turn_step_limit`` (a turn used all its steps: bfcl force-quits the entry),
``interaction_limit`` (the task's model-call budget ran out), ``context_overflow`` (the
server refused the prompt for length), ``truncated`` (a reply hit ``max_tokens`` with no
usable call). ``error`` is set by the runner for a unit that failed.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from reme_cli.agent.protocols import ToolProtocol
from reme_cli.bench.base import Env, Task
from reme_cli.llm.client import LLM, ContextOverflow

GUIDANCE_HEADER = "Some Related Experience to help you to complete the task"
STOP_REASONS = ("answered", "turn_step_limit", "interaction_limit", "context_overflow", "truncated", "error")
_OLD_STOP_REASONS = {"completed": "answered", "max_interactions": "interaction_limit"}  # records before 0.2


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
    reasoning: str | None = None


@dataclass
class Trajectory:
    turns: list[list[Step]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    interactions: int = 0
    stop_reason: str = "answered"  # one of STOP_REASONS
    stop_detail: str | None = None  # the server's words for context_overflow

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
            "interactions": self.interactions,
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Trajectory":
        """A recorded trajectory (messages are not recorded: turns hold what happened)."""
        return cls(
            turns=[[Step(**s) for s in turn] for turn in data.get("turns", [])],
            interactions=data.get("interactions", 0),
            stop_reason=_OLD_STOP_REASONS.get(data.get("stop_reason"), data.get("stop_reason") or "answered"),
            stop_detail=data.get("stop_detail"),
        )


@dataclass
class Sampling:
    temperature: float
    top_p: float
    max_tokens: int
    seed: int | None
    extra_body: dict[str, Any] | None = None
    top_k: int | None = None  # None: not sent (the server's default applies)
    min_p: float | None = None


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


async def run_episode(
    llm: LLM,
    protocol: ToolProtocol,
    env: Env,
    task: Task,
    sampling: Sampling,
    *,
    guidance: str | None = None,
    system_prompt: str | None = None,
    max_interactions: int = 30,
    max_steps_per_turn: int | None = 20,
    headers: dict[str, str] | None = None,
) -> Trajectory:
    tools = env.tools()
    traj = Trajectory()
    # A task may bring its own system message (AppWorld's authors' agent: its supervisor's).
    system = protocol.system_prompt(system_prompt or task.meta.get("system_prompt"), tools)
    guidance = guidance_as_sent(task, guidance)
    if system:
        traj.messages.append({"role": "system", "content": system})
    request_extra = protocol.request_kwargs(tools)

    step_limit = max_steps_per_turn or max_interactions
    for turn_index, user_messages in enumerate(task.turns):
        steps: list[Step] = []
        traj.turns.append(steps)
        for j, msg in enumerate(user_messages):
            content = msg["content"]
            if turn_index == 0 and j == 0:
                content = with_guidance(content, guidance)
            traj.messages.append({"role": msg.get("role", "user"), "content": content})

        for step_index in range(step_limit):
            if traj.interactions >= max_interactions:
                traj.stop_reason = "interaction_limit"
                break
            try:
                result = await llm.chat(
                    traj.messages,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    top_k=sampling.top_k,
                    min_p=sampling.min_p,
                    max_tokens=sampling.max_tokens,
                    seed=sampling.seed,
                    extra_body=sampling.extra_body,
                    headers=headers,
                    **request_extra,
                )
            except ContextOverflow as exc:
                traj.stop_reason, traj.stop_detail = "context_overflow", str(exc)
                break
            traj.interactions += 1
            reply = protocol.read(result)
            traj.messages.append(reply.message)
            calls: list[dict[str, Any]] = []
            outputs: list[str] = []
            done = False
            for call in reply.calls:
                res = await env.execute(call.name, call.arguments)
                outputs.append(res.output)
                done = done or res.done
                calls.append({"name": call.name, "arguments": call.arguments, "call": res.call,
                              "output": res.output, "error": res.error})
            # Code-action protocols record the step as code and its output (AppWorld).
            code = reply.calls[0].arguments["code"] if getattr(protocol, "code_actions", False) and reply.calls else None
            steps.append(Step(reply.text, calls, result.prompt_tokens, result.completion_tokens,
                              result.latency_s, result.cached, code=code, code_output=outputs[0] if code is not None else None,
                              reasoning=result.reasoning))
            if done:  # the environment says the task is over: no further turn or step
                await env.end_step()
                await env.end_turn()
                return traj
            if not reply.calls:
                if result.finish_reason == "length":
                    traj.stop_reason = "truncated"
                break
            await env.end_step()
            traj.messages.extend(protocol.result_messages(reply.calls, outputs))
            if step_index == step_limit - 1 and max_steps_per_turn:
                traj.stop_reason = "turn_step_limit"
        else:
            if not max_steps_per_turn:  # the turn had the whole budget (AppWorld) and used it up
                traj.stop_reason = "interaction_limit"
        await env.end_turn()
        if traj.stop_reason != "answered":
            break
    return traj

"""The multi-turn tool-using episode: user turn, then model <-> tools until the model
answers without calls, under per-turn and per-task interaction limits.

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

from reme_cli.agent.protocols import ToolProtocol
from reme_cli.bench.base import Env, Task
from reme_cli.llm.client import LLM, ContextOverflow

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
    # Each turn's user messages as the task gives them; the first one went out followed by
    # the unit's guidance (``with_guidance``), which the unit's record holds as ``guidance``.
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


@dataclass
class Sampling:
    """What each request sends; None: not sent (the server's default applies)."""

    temperature: float
    top_p: float | None
    max_tokens: int | None
    seed: int | None
    extra_body: dict[str, Any] | None = None
    top_k: int | None = None
    min_p: float | None = None


def with_guidance(text: str, guidance: str | None) -> str:
    """The first user message with guidance, as the official ReMe agents build it
    (agentscope-ai/ReMe 65971baf, benchmark/bfcl/bfcl_agent.py): ``"Task:\\n" + query +
    "\\n\\n" + guidance``, where guidance starts with its header. Without guidance the query
    goes alone. Experiences come after the task text, so the system prompt and tools stay a
    shared prefix."""
    return f"Task:\n{text}\n\n{guidance}" if guidance else text


_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def reasoning_of(reasoning: str | None, content: str | None) -> str | None:
    """What the model thought before replying: the server's separate reasoning, else the
    ``<think>`` blocks of the content (a server without a reasoning parser)."""
    if reasoning:
        return reasoning
    found = [block.strip() for block in _THINK.findall(content or "")]
    return "\n\n".join(b for b in found if b) or None


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
    history_reasoning: str = "drop",
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
        traj.user.append([msg["content"] for msg in user_messages])
        if turn_index:  # an environment may offer its tools differently from turn to turn
            request_extra = protocol.request_kwargs(env.tools())
        for j, msg in enumerate(user_messages):
            content = msg["content"]
            if turn_index == 0 and j == 0:
                content = with_guidance(content, guidance)
            traj.messages.append({"role": msg.get("role", "user"), "content": content})

        turn_stop = "answered"
        for step_index in range(step_limit):
            if traj.interactions >= max_interactions:
                turn_stop = "interaction_limit"
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
                turn_stop, traj.stop_detail = "context_overflow", str(exc)
                break
            traj.interactions += 1
            reply = protocol.read(result)
            if history_reasoning != "drop" and result.reasoning and not getattr(protocol, "code_actions", False):
                reply.message[history_reasoning] = result.reasoning
            traj.messages.append(reply.message)
            calls: list[dict[str, Any]] = []
            outputs: list[str] = []
            done = False
            stopped = None
            for call in reply.calls:
                res = await env.execute(call.name, call.arguments)
                outputs.append(res.output)
                done = done or res.done
                if res.limit:
                    traj.limits.append({"limit": res.limit, "interaction": traj.interactions,
                                        **({"detail": res.detail} if res.detail else {})})
                    if res.done:
                        stopped = LIMIT_STOPS.get(res.limit, res.limit)
                        traj.stop_detail = res.detail or traj.stop_detail
                calls.append({"name": call.name, "arguments": call.arguments, "call": res.call,
                              "output": res.output, "error": res.error})
            # Code-action protocols record the step as code and its output (AppWorld).
            code = reply.calls[0].arguments["code"] if getattr(protocol, "code_actions", False) and reply.calls else None
            steps.append(Step(reply.text, calls, result.prompt_tokens, result.completion_tokens,
                              result.latency_s, result.cached, code=code, code_output=outputs[0] if code is not None else None,
                              reasoning=reasoning_of(result.reasoning, result.content)))
            if done:  # the environment says the task is over: no further turn or step
                traj.stop_reason = stopped or turn_stop
                traj.turn_stops.append(traj.stop_reason)
                await env.end_step()
                await env.end_turn()
                return traj
            if not reply.calls:
                if result.finish_reason == "length":
                    turn_stop = "truncated"
                break
            await env.end_step()
            traj.messages.extend(protocol.result_messages(reply.calls, outputs))
            if step_index == step_limit - 1 and max_steps_per_turn:
                turn_stop = "turn_step_limit"
        else:
            if not max_steps_per_turn:  # the turn had the whole budget (AppWorld) and used it up
                turn_stop = "interaction_limit"
        traj.stop_reason = turn_stop
        traj.turn_stops.append(turn_stop)
        await env.end_turn()
        if turn_stop not in TURN_GOES_ON:
            break
    return traj

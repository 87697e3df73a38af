"""The multi-turn tool-using episode: user turn, then model <-> tools until the model
answers without calls, under per-turn and per-task interaction limits. The user turns come
from the benchmark's ``User`` (``bench/users.py``): the task's fixed turns, or a simulated
user writing each from the conversation so far, until it has no more. What an episode
records, its stop reasons and the guidance's place in it: ``agent/trajectory.py``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from reme_cli.agent.protocols import ToolProtocol
from reme_cli.agent.trajectory import LIMIT_STOPS, TURN_GOES_ON, Step, Trajectory, guidance_as_sent, with_guidance
from reme_cli.bench.base import Env, Task
from reme_cli.bench.users import Conversation, FixedTurns, User
from reme_cli.llm.client import LLM, ContextOverflow


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


_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def reasoning_of(reasoning: str | None, content: str | None) -> str | None:
    """What the model thought before replying: the server's separate reasoning, else the
    ``<think>`` blocks of the content (a server without a reasoning parser)."""
    if reasoning:
        return reasoning
    found = [block.strip() for block in _THINK.findall(content or "")]
    return "\n\n".join(b for b in found if b) or None


def conversation(traj: Trajectory, turn: int) -> Conversation:
    """What the user sees of ``traj`` before it writes turn ``turn``."""
    return Conversation(turn=turn, messages=tuple(traj.messages), said=tuple(map(tuple, traj.user)),
                        answers=tuple(steps[-1].text if steps and not steps[-1].calls else None
                                      for steps in traj.turns))


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
    user: User | None = None,
) -> Trajectory:
    """One episode of ``task`` in ``env``; ``user`` writes its user turns (default: the
    task's fixed turns)."""
    user = user or FixedTurns(task.turns)
    tools = env.tools()
    traj = Trajectory()
    # A task may bring its own system message (AppWorld's authors' agent: its supervisor's).
    system = protocol.system_prompt(system_prompt or task.meta.get("system_prompt"), tools)
    guidance = guidance_as_sent(task, guidance)
    if system:
        traj.messages.append({"role": "system", "content": system})
    request_extra = protocol.request_kwargs(tools)

    step_limit = max_steps_per_turn or max_interactions
    for turn_index in itertools.count():
        user_messages = await user.next_turn(conversation(traj, turn_index))
        if user_messages is None:  # the user has no more to say
            break
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

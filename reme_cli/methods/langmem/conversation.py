"""A reme trajectory as the chat messages LangMem reads (shared by ``memory=langmem`` and
``memory=langmem_prompt``): the user turns from the task itself, never the injected
guidance; each assistant step with its tool calls; each call's output as a tool message."""

from __future__ import annotations

import json
from typing import Any

from reme_cli.agent.trajectory import Trajectory
from reme_cli.bench.base import Task
from reme_cli.core.text import clip

MAX_OUTPUT_CHARS = 1500
_MAX_OUTPUT_CHARS = MAX_OUTPUT_CHARS


def _args_object(call: dict[str, Any]) -> dict[str, Any]:
    args = call.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return {"arguments": args}
    return args if isinstance(args, dict) else {"arguments": args}


def trajectory_messages(task: Task, traj: Trajectory) -> list[dict[str, Any]]:
    """The episode as OpenAI-format chat messages (user turns from the task itself)."""
    msgs: list[dict[str, Any]] = []
    for t, steps in enumerate(traj.turns):
        for m in task.turns[t] if t < len(task.turns) else []:
            msgs.append({"role": "user", "content": str(m.get("content", ""))})
        for s, step in enumerate(steps):
            text = step.text or ""
            if step.code and step.code not in text:
                text = f"{text}\n```python\n{step.code}\n```".strip()
            ids = [f"call_{t}_{s}_{j}" for j in range(len(step.calls))]
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            if step.calls:
                msg["tool_calls"] = [
                    {"id": i, "type": "function",
                     "function": {"name": c.get("name") or "?", "arguments": json.dumps(_args_object(c))}}
                    for i, c in zip(ids, step.calls)]
            msgs.append(msg)
            for i, c in zip(ids, step.calls):
                out = str(c.get("output", ""))
                msgs.append({"role": "tool", "tool_call_id": i,
                             "content": clip(("Error: " if c.get("error") else "") + out, _MAX_OUTPUT_CHARS)})
            if step.code_output is not None:
                msgs.append({"role": "user", "content": clip(f"Output:\n{step.code_output}", _MAX_OUTPUT_CHARS)})
    return msgs

"""A trajectory as the authors' memory service read it: the messages their agents recorded,
rebuilt from a reme ``Trajectory``, and rendered as flowllm 0.1.9's ``merge_messages_content``.

The service (agentscope-ai/ReMe v0.1.9, which pins flowllm 0.1.9 = FlowLLM-AI/flowllm@976e293)
fills ``{step_sequence}`` with ``merge_messages_content(trajectory.messages)``
(flowllm/utils/llm_utils.py:7-28): one block per message, numbered by its position in the list,
system messages skipped (but counted), an assistant's ``reasoning_content`` printed before its
content, each tool call as its name and raw argument string, nothing clipped.

What the messages were is each agent's (agentscope-ai/ReMe 65971baf, benchmark/):
- BFCL (bfcl_agent.py:604-699): message 0 is the task's first user message, with the injected
  experiences still in it (``get_query_without_experience`` is never called); a reply with
  tool calls is followed by one ``tool`` message per result (``str(result)``, empty results
  left out, 636-657); a reply without calls by the next turn's user message, or, after the
  last turn, ``[CONVERSATION_COMPLETED]`` (an ``env`` message the agent appends as ``user``).
  Building a pool, init_task_memory_pool.py:68-73 appends the task's tool schemas to
  message 0 (``tool_prompt``).
- AppWorld (appworld_react_agent.py:132-136,203-213,284-292): the system prompt, the
  instruction with the experiences stripped again before summarizing (the regex leaves the
  ``Task:\\n`` prefix), then per step the code alone as the assistant message and its output
  as ``"Output:\\n```\\n" + output + "```\\n\\n"``.

A reme trajectory records steps, not messages (records keep ``turns``), so the messages are
rebuilt from the task, the guidance the episode was given and the steps: the same text for a
live episode and for one read back from ``trials.jsonl``.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from reme_cli.agent.trajectory import TURN_GOES_ON, Step, Trajectory, guidance_as_sent, with_guidance
from reme_cli.bench.base import Task

COMPLETED = "[CONVERSATION_COMPLETED]"
# appworld_react_agent.py:286, applied to the first user message before summarizing.
_EXPERIENCES = re.compile(r"\n\nSome Related Experience to help you to complete the task:.*", re.DOTALL)
PYTHON_NOTE = " Note that the provided function is in Python 3 syntax."

# init_task_memory_pool.py:38-51 (get_tool_prompt), verbatim.
TOOL_PROMPT_HEAD = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query."
                    "\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOL_PROMPT_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name"
                    " and arguments within <tool_call></tool_call> XML tags:"
                    '\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')


@dataclass(frozen=True)
class AgentShape:
    """What the authors' agent on a benchmark put into the trajectories it summarized."""

    keeps_experiences: bool  # the first user message keeps the injected experiences (BFCL)
    tool_block: bool  # pool building appends the task's tool schemas to it (BFCL)


# By reme benchmark name; a benchmark not named here is summarized as BFCL is (tool calls).
AGENT_SHAPES = {"bfcl_v3": AgentShape(keeps_experiences=True, tool_block=True),
                "appworld": AgentShape(keeps_experiences=False, tool_block=False)}
DEFAULT_SHAPE = AgentShape(keeps_experiences=True, tool_block=True)


def agent_shape(benchmark: str) -> AgentShape:
    return AGENT_SHAPES.get(benchmark, DEFAULT_SHAPE)


def authors_tool_schemas(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools as the pool builder read them from the authors' preprocessed task file: the
    OpenAI form with ``function.response`` popped (bfcl_utils.py:395-399) and each description
    ending in one Python 3 note (preprocess.py:54 added it once), whether or not the
    environment's own schemas carry it, or carry it several times."""
    out = copy.deepcopy(tools)
    for tool in out:
        fn = tool.get("function", {})
        fn.pop("response", None)
        if isinstance(fn.get("description"), str):
            desc = fn["description"]
            while desc.endswith(PYTHON_NOTE):
                desc = desc[: -len(PYTHON_NOTE)]
            fn["description"] = desc + PYTHON_NOTE
    return out


def tool_prompt(tools: list[dict[str, Any]]) -> str:
    """get_tool_prompt: the block appended to the first message (json.dumps defaults:
    ASCII-escaped, ", " and ": ")."""
    return TOOL_PROMPT_HEAD + "".join("\n" + json.dumps(t) for t in tools) + TOOL_PROMPT_TAIL


def _first_user(messages: list[dict[str, str]]) -> str:
    """create_user_response: a later turn is its first user message."""
    return next((m.get("content", "") for m in messages if m.get("role", "user") == "user"), "")


def _arguments(call: dict[str, Any]) -> str:
    args = call.get("arguments")
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _assistant(step: Step) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": step.text or "", "reasoning_content": step.reasoning or ""}
    if step.calls:
        msg["tool_calls"] = [{"name": c.get("name", ""), "arguments": _arguments(c)} for c in step.calls]
    return msg


def authors_messages(task: Task, traj: Trajectory, *, guidance: str | None = None,
                     shape: AgentShape = DEFAULT_SHAPE, tools: list[dict[str, Any]] | None = None
                     ) -> list[dict[str, Any]]:
    """The trajectory's messages as the authors' agent for ``shape`` recorded them;
    ``guidance``: the experiences the episode was given; ``tools``: append the pool builder's
    tool block to the first message."""
    messages: list[dict[str, Any]] = []
    if task.meta.get("system_prompt"):
        messages.append({"role": "system", "content": task.meta["system_prompt"]})
    for j, msg in enumerate(task.turns[0] if task.turns else []):
        content = msg.get("content", "")
        if j == 0:
            content = with_guidance(content, guidance_as_sent(task, guidance))
            if not shape.keeps_experiences:
                content = _EXPERIENCES.sub("", content)
            if tools:
                content += tool_prompt(authors_tool_schemas(tools))
        messages.append({"role": msg.get("role", "user"), "content": content})
    for t, steps in enumerate(traj.turns):
        if t > 0:  # the previous turn ended with a reply without calls: the next question
            messages.append({"role": "user", "content": _first_user(task.turns[t]) if t < len(task.turns) else ""})
        for step in steps:
            if step.code is not None:
                messages.append({"role": "assistant", "content": step.code})
                messages.append({"role": "user", "content": "Output:\n```\n" + (step.code_output or "") + "```\n\n"})
                continue
            messages.append(_assistant(step))
            if step.calls:
                results = [str(c.get("output", "")) for c in step.calls]
                results = [r for r in results if len(r) > 0]
                messages += ([{"role": "tool", "content": r} for r in results] if results
                             else [{"role": "user", "content": ""}])
    if _completed(task, traj):
        messages.append({"role": "user", "content": COMPLETED})
    return messages


def _completed(task: Task, traj: Trajectory) -> bool:
    """The BFCL environment said the conversation was over: the last turn ended with a reply
    without calls, a truncated one too (AppWorld's agent ends on the world's word and appends
    nothing)."""
    if traj.stop_reason not in TURN_GOES_ON or not traj.turns or len(traj.turns) < len(task.turns):
        return False
    last = traj.turns[-1]
    return bool(last) and last[-1].code is None and not last[-1].calls


def merge_messages_content(messages: list[dict[str, Any]]) -> str:
    """flowllm 0.1.9 flowllm/utils/llm_utils.py:7-28, over plain dicts."""
    blocks = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant":
            line = f"### step.{i} role=assistant content=\n{m.get('reasoning_content') or ''}\n\n{m.get('content') or ''}\n"
            for call in m.get("tool_calls") or []:
                line += f" - tool call={call['name']}\n   params={call['arguments']}\n"
            blocks.append(line)
        elif role == "user":
            blocks.append(f"### step.{i} role=user content=\n{m.get('content') or ''}\n")
        elif role == "tool":
            blocks.append(f"### step.{i} role=tool tool call result=\n{m.get('content') or ''}\n")
    return "\n".join(blocks)


def step_sequence(task: Task, traj: Trajectory, *, guidance: str | None = None, shape: AgentShape = DEFAULT_SHAPE,
                  tools: list[dict[str, Any]] | None = None) -> str:
    return merge_messages_content(authors_messages(task, traj, guidance=guidance, shape=shape, tools=tools))

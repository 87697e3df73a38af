"""Tool-call protocols: how tools are offered to a model and how its calls are read back.

- ``openai``: native ``tools`` / ``tool_calls`` (vLLM with the hermes parser for Qwen3).
  Hermes ``<tool_call>`` blocks left in the content (server started without the parser)
  are read too, and Qwen3 ``<think>`` blocks are kept out of the history.
- ``json``: for small local models that emit no native calls. The tools are described in
  the system prompt and the reply is constrained to a JSON schema by the server's grammar,
  so every reply parses and every tool name is one the task offers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from reme_cli.llm.client import ChatResult, ToolCallRequest

_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
TOOL_RESULTS_PREFIX = "[tool results]"


@dataclass
class Reply:
    text: str
    calls: list[ToolCallRequest]
    message: dict[str, Any]  # the assistant message to append to the history


class ToolProtocol(Protocol):
    name: str

    def system_prompt(self, base: str | None, tools: list[dict[str, Any]]) -> str | None: ...

    def request_kwargs(self, tools: list[dict[str, Any]]) -> dict[str, Any]: ...

    def read(self, result: ChatResult) -> Reply: ...

    def result_messages(self, calls: list[ToolCallRequest], outputs: list[str]) -> list[dict[str, Any]]: ...


class OpenAIProtocol:
    name = "openai"

    def system_prompt(self, base: str | None, tools: list[dict[str, Any]]) -> str | None:
        return base

    def request_kwargs(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"tools": tools}

    def read(self, result: ChatResult) -> Reply:
        text = _THINK.sub("", result.content).strip()
        calls = list(result.tool_calls)
        if not calls:
            calls = _hermes_calls(text)
            if calls:
                text = _HERMES.sub("", text).strip()
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _as_json_text(c.arguments)},
                }
                for c in calls
            ]
        return Reply(text=text, calls=calls, message=message)

    def result_messages(self, calls: list[ToolCallRequest], outputs: list[str]) -> list[dict[str, Any]]:
        return [
            {"role": "tool", "tool_call_id": c.id, "name": c.name, "content": out}
            for c, out in zip(calls, outputs, strict=True)
        ]


class JSONProtocol:
    name = "json"

    _INSTRUCTIONS = (
        "You can call these tools. Reply with JSON only: "
        '{"tool_calls": [{"name": TOOL, "arguments": {ARG: VALUE}}], "answer": TEXT}. '
        "Use an empty tool_calls list and an answer when the request is done."
    )

    def system_prompt(self, base: str | None, tools: list[dict[str, Any]]) -> str | None:
        lines = [base] if base else []
        lines.append(self._INSTRUCTIONS)
        lines.append("Tools:")
        lines.extend(_tool_line(t["function"]) for t in tools)
        return "\n".join(lines)

    def request_kwargs(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"response_format": {"type": "json_object",
                                    "schema": step_schema(tools, max_calls=4, max_str=64)}}

    def read(self, result: ChatResult) -> Reply:
        raw = result.content.strip()
        message = {"role": "assistant", "content": raw}
        try:
            # strict=False: llama.cpp's grammar lets raw control characters into strings.
            data = json.loads(raw, strict=False)
        except json.JSONDecodeError:
            return Reply(text=raw, calls=[], message=message)
        if not isinstance(data, dict):
            return Reply(text=raw, calls=[], message=message)
        calls = []
        for i, item in enumerate(data.get("tool_calls") or []):
            if isinstance(item, dict):
                calls.append(ToolCallRequest(
                    id=f"call_{i}", name=str(item.get("name", "")), arguments=item.get("arguments", {})
                ))
        answer = data.get("answer")
        return Reply(text=answer if isinstance(answer, str) else "", calls=calls, message=message)

    def result_messages(self, calls: list[ToolCallRequest], outputs: list[str]) -> list[dict[str, Any]]:
        lines = [f"{c.name}: {out}" for c, out in zip(calls, outputs, strict=True)]
        return [{"role": "user", "content": TOOL_RESULTS_PREFIX + "\n" + "\n".join(lines)}]


_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)

CODE_SYSTEM_PROMPT = """\
You are an AI assistant who completes a user's day-to-day task by writing Python code that \
calls app APIs. Work step by step, in a loop: think briefly, then write ONE ```python code block; \
it runs in a persistent Python session where `apis` is defined, and its printed output comes \
back to you. Look up what you need first: apis.api_docs.show_app_descriptions(), \
apis.api_docs.show_api_descriptions(app_name=...), apis.api_docs.show_api_doc(app_name=..., \
api_name=...). Log in to an app with the supervisor's credentials from \
apis.supervisor.show_account_passwords() before using it. When the task is done, call \
apis.supervisor.complete_task(answer=...) (answer only when the task asks a question; use \
status="fail" if it cannot be done). Do not ask for clarification."""


class CodeProtocol:
    """Code actions (AppWorld): the model writes Python; the environment runs it.

    The reply's last ```python block is one call of the environment's ``execute`` action;
    its output comes back as the next user message. A reply without code ends the turn.
    (The agent prompt follows the official ReMe AppWorld agent's ReAct loop in spirit; the
    text is reme's own.)"""

    name = "code"
    code_actions = True

    def system_prompt(self, base: str | None, tools: list[dict[str, Any]]) -> str | None:
        return base or CODE_SYSTEM_PROMPT

    def request_kwargs(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {}

    def read(self, result: ChatResult) -> Reply:
        text = _THINK.sub("", result.content).strip()
        blocks = _CODE_BLOCK.findall(text)
        calls = [ToolCallRequest(id="code_0", name="execute", arguments={"code": blocks[-1].strip()})] if blocks else []
        return Reply(text=text, calls=calls, message={"role": "assistant", "content": text})

    def result_messages(self, calls: list[ToolCallRequest], outputs: list[str]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": "Output:\n```\n" + "\n".join(outputs) + "\n```"}]


def make_protocol(name: str) -> ToolProtocol:
    """The protocol ``model.tool_protocol`` names (built-in or registered by a plug-in)."""
    from reme_cli.core.registry import PROTOCOLS

    return PROTOCOLS.get(name)()


_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
_GRAMMAR_DROP = ("description", "default", "response", "title", "examples")


def grammar_schema(schema: Any, max_str: int | None = None) -> Any:
    """A parameter schema reduced to what constrains the output. BFCL's own type names
    would make llama.cpp's converter silently fall back to free JSON; prose and defaults
    only bloat the grammar; closed objects stop invented argument names; bounded strings
    stop a runaway string from eating the token budget."""
    if isinstance(schema, list):
        return [grammar_schema(s, max_str) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str) and value in _BFCL_TYPES:
            if _BFCL_TYPES[value]:
                out[key] = _BFCL_TYPES[value]
        elif key in _GRAMMAR_DROP:
            continue
        elif key == "properties":
            out[key] = {name: grammar_schema(p, max_str) for name, p in value.items()}
        else:
            out[key] = grammar_schema(value, max_str)
    if out.get("type") == "object":
        out["additionalProperties"] = False
    if out.get("type") == "string" and max_str and "enum" not in out:
        out["maxLength"] = max_str
    return out


def step_schema(tools: list[dict[str, Any]], max_calls: int | None = None,
                max_str: int | None = None) -> dict[str, Any]:
    """One agent step: zero or more calls, each following its named tool's parameters.

    Per-tool alternatives, measured on SmolLM2 with a BFCL prompt (scripts/
    probe_local_model.py): 10/10 steps with valid arguments for 18 and for 32 tools, vs
    3-4/10 with a free-form arguments object, at the same sampling speed."""
    per_tool = [
        {
            "type": "object",
            "properties": {
                "name": {"const": t["function"]["name"]},
                "arguments": grammar_schema(t["function"].get("parameters") or {"type": "object"}, max_str),
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    calls: dict[str, Any] = {"type": "array", "items": {"anyOf": per_tool}}
    answer: dict[str, Any] = {"type": "string"}
    if max_calls:
        calls["maxItems"] = max_calls
    if max_str:
        answer["maxLength"] = max_str
    return {"type": "object", "properties": {"tool_calls": calls, "answer": answer},
            "required": ["tool_calls"], "additionalProperties": False}


def _hermes_calls(text: str) -> list[ToolCallRequest]:
    calls = []
    for i, block in enumerate(_HERMES.findall(text)):
        try:
            data = json.loads(block)
        except json.JSONDecodeError:
            # Kept as a call with unparseable arguments: the env answers with an error
            # the model can read, instead of the call silently vanishing.
            calls.append(ToolCallRequest(id=f"hermes_{i}", name="", arguments=block))
            continue
        if isinstance(data, dict):
            calls.append(ToolCallRequest(
                id=f"hermes_{i}", name=str(data.get("name", "")), arguments=data.get("arguments", {})
            ))
    return calls


def _as_json_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _tool_line(fn: dict[str, Any]) -> str:
    """One compact line per tool: the 135M model's context is 8k tokens."""
    props = (fn.get("parameters") or {}).get("properties") or {}
    required = set((fn.get("parameters") or {}).get("required") or [])
    params = ", ".join(
        f"{k}{'' if k in required else '?'}: {v.get('type', 'any')}" for k, v in props.items()
    )
    desc = fn.get("description") or ""
    # BFCL prefixes every description with its class blurb; the tool's own part follows.
    desc = desc.split("Tool description:", 1)[-1].strip().split(". ")[0].strip()
    return f"- {fn['name']}({params}): {desc}"

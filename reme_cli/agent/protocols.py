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

from reme_cli.bench.base import PLAIN_TOOLS, ToolDialect
from reme_cli.core.registry import PROTOCOLS
from reme_cli.core.seams import ToolCalls
from reme_cli.llm.client import ChatResult, ToolCallRequest

_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
TOOL_RESULTS_PREFIX = "[tool results]"


@dataclass
class Reply:
    text: str
    calls: list[ToolCallRequest]
    message: dict[str, Any]  # the assistant message to append to the history


class ToolProtocol(ToolCalls, Protocol):
    """The tool-call seam with the agent's types (``PROTOCOLS`` holds its classes)."""

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
    """Built with the benchmark's ``ToolDialect`` (``make_protocol``): the grammar and the
    tool lines read its schemas, so they must know how the benchmark writes them."""

    name = "json"

    _INSTRUCTIONS = (
        "You can call these tools. Reply with JSON only: "
        '{"tool_calls": [{"name": TOOL, "arguments": {ARG: VALUE}}], "answer": TEXT}. '
        "Use an empty tool_calls list and an answer when the request is done."
    )

    def __init__(self, dialect: ToolDialect = PLAIN_TOOLS):
        self.dialect = dialect

    def system_prompt(self, base: str | None, tools: list[dict[str, Any]]) -> str | None:
        lines = [base] if base else []
        lines.append(self._INSTRUCTIONS)
        lines.append("Tools:")
        lines.extend(_tool_line(t["function"], self.dialect) for t in tools)
        return "\n".join(lines)

    def request_kwargs(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"response_format": {"type": "json_object",
                                    "schema": step_schema(tools, max_calls=4, max_str=64, dialect=self.dialect)}}

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


_FULL_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_OPEN_BLOCK = re.compile(r".*```python\n(.*)", re.DOTALL)


def extract_code(text: str) -> str:
    """The code a reply runs, as the authors' AppWorld agent reads it
    (agentscope-ai/ReMe 65971baf, appworld_react_agent.py ``extract_code_and_fix_content``
    with ``ignore_multiple_calls=True``): the first complete ```python block; else a block
    left open at the end (the reply was cut off); else the whole reply, run as it is."""
    full = _FULL_BLOCK.search(text)
    if full:
        return full.group(1).strip()
    partial = _OPEN_BLOCK.match(text)
    if not partial:
        return text
    if partial.group(1).strip():
        return partial.group(1).strip()
    return (text if text.endswith("\n") else text + "\n") + "```"  # theirs: the closed reply runs


class CodeProtocol:
    """Code actions (AppWorld), as the authors' AppWorld agent runs them.

    Every reply is one call of the environment's ``execute`` action with ``extract_code``'s
    code, so a reply without a block runs too (and usually prints a SyntaxError for the
    model to read); only that code stays in the history as the assistant message, and the
    output comes back as ``"Output:\n```\n" + output + "```\n\n"``. The episode ends when
    the environment says the task is complete or the interactions run out. What the code
    may call is the benchmark's to say, in its system prompt."""

    name = "code"
    code_actions = True

    def system_prompt(self, base: str | None, tools: list[dict[str, Any]]) -> str | None:
        return base

    def request_kwargs(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {}

    def read(self, result: ChatResult) -> Reply:
        # vLLM's reasoning parser keeps <think> out of the content the authors read.
        text = _THINK.sub("", result.content)
        code = extract_code(text)
        return Reply(text=text, calls=[ToolCallRequest(id="code_0", name="execute", arguments={"code": code})],
                     message={"role": "assistant", "content": code})

    def result_messages(self, calls: list[ToolCallRequest], outputs: list[str]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": "Output:\n```\n" + "".join(outputs) + "```\n\n"}]


def protocol_name(cfg: Any) -> str:
    """The protocol a run's agent acts through: the benchmark's own where it names one
    (``benchmark.tool_protocol``; AppWorld: code), else the model's (``model.tool_protocol``)."""
    return cfg.benchmark.tool_protocol or cfg.model.tool_protocol


def acts_with_code(cfg: Any) -> bool:
    """Whether a run's agent acts with code (its protocol declares ``code_actions``, as
    ``CodeProtocol`` does) rather than tool calls: what a method's prompts may depend on,
    asked of the protocol, never of the benchmark's name."""
    return bool(getattr(PROTOCOLS.get(protocol_name(cfg)), "code_actions", False))


def make_protocol(name: str, dialect: ToolDialect = PLAIN_TOOLS) -> ToolProtocol:
    """The protocol ``model.tool_protocol`` names (built-in or registered by a plug-in),
    for a benchmark whose tool schemas follow ``dialect``."""
    cls = PROTOCOLS.get(name)
    if isinstance(cls, type) and issubclass(cls, JSONProtocol):
        return cls(dialect)
    return cls()


_GRAMMAR_DROP = ("description", "default", "response", "title", "examples")


def grammar_schema(schema: Any, max_str: int | None = None, dialect: ToolDialect = PLAIN_TOOLS) -> Any:
    """A parameter schema reduced to what constrains the output. A benchmark's own type
    names would make llama.cpp's converter silently fall back to free JSON; prose and
    defaults only bloat the grammar; closed objects stop invented argument names; bounded
    strings stop a runaway string from eating the token budget."""
    if isinstance(schema, list):
        return [grammar_schema(s, max_str, dialect) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str) and value in dialect.types:
            if dialect.types[value]:
                out[key] = dialect.types[value]
        elif key in _GRAMMAR_DROP:
            continue
        elif key == "properties":
            out[key] = {name: grammar_schema(p, max_str, dialect) for name, p in value.items()}
        else:
            out[key] = grammar_schema(value, max_str, dialect)
    if out.get("type") == "object":
        out["additionalProperties"] = False
    if out.get("type") == "string" and max_str and "enum" not in out:
        out["maxLength"] = max_str
    return out


def step_schema(tools: list[dict[str, Any]], max_calls: int | None = None,
                max_str: int | None = None, dialect: ToolDialect = PLAIN_TOOLS) -> dict[str, Any]:
    """One agent step: zero or more calls, each following its named tool's parameters.

    Per-tool alternatives, measured on SmolLM2 with a BFCL prompt (results/
    local_model_probe.md): 10/10 steps with valid arguments for 18 and for 32 tools, vs
    3-4/10 with a free-form arguments object, at the same sampling speed."""
    per_tool = [
        {
            "type": "object",
            "properties": {
                "name": {"const": t["function"]["name"]},
                "arguments": grammar_schema(t["function"].get("parameters") or {"type": "object"}, max_str, dialect),
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


def _tool_line(fn: dict[str, Any], dialect: ToolDialect) -> str:
    """One compact line per tool: the 135M model's context is 8k tokens."""
    props = (fn.get("parameters") or {}).get("properties") or {}
    required = set((fn.get("parameters") or {}).get("required") or [])
    params = ", ".join(
        f"{k}{'' if k in required else '?'}: {v.get('type', 'any')}" for k, v in props.items()
    )
    desc = fn.get("description") or ""
    if dialect.description_marker:
        desc = desc.split(dialect.description_marker, 1)[-1]
    desc = desc.strip().split(". ")[0].strip()
    return f"- {fn['name']}({params}): {desc}"

"""TEST DOUBLE helper: answers that satisfy a request's JSON schema or forced tool call.

Memory baselines built on other libraries (LangMem's prompt optimizer, A-Mem's note
analysis and evolution) ask for structured output: ``response_format`` with a
``json_schema``, or tools with ``tool_choice`` ``"required"`` / a named function. This fills
such a schema deterministically. Free-text fields take words from the request's last user
message, so what is stored still says something about the task it came from (retrieval in
tests then has a signal to find).
"""

from __future__ import annotations

import json
import re
from typing import Any

_WORD = re.compile(r"[A-Za-z][A-Za-z_]{2,}")
# Where LangMem's optimizer prompts quote the material they reason about.
_QUOTED = re.compile(r"<(data|trajectories|trajectory \d+)>(.*?)</\1>", re.DOTALL)


def _words(text: str, n: int = 12) -> str:
    return " ".join(_WORD.findall(text)[:n])


def fill(schema: dict[str, Any], topic: str, name: str = "", defs: dict[str, Any] | None = None,
         depth: int = 0) -> Any:
    """A value of ``schema``; strings are ``"<field>: <topic words>"``."""
    defs = defs if defs is not None else {**schema.get("definitions", {}), **schema.get("$defs", {})}
    if depth > 8:
        return None
    if "$ref" in schema:
        return fill(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), topic, name, defs, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return fill(options[0], topic, name, defs, depth + 1)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        return {k: fill(v, topic, k, defs, depth + 1) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [fill(schema.get("items", {"type": "string"}), topic, name, defs, depth + 1)]
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return 1
    return f"{name or 'text'}: {topic}".strip()


def last_user_text(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages") or []):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def response_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema a ``response_format`` asks for: OpenAI/vLLM's ``json_schema``, or
    llama-cpp-python's ``json_object`` with a ``schema``."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema") or {}
    if fmt.get("type") == "json_object" and isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    return None


def topic_text(text: str) -> str:
    """The part of a prompt the topic words come from: the first quoted data block
    (``<data>``, ``<trajectories>``, ``<trajectory N>``) if there is one, else all of it;
    the instructions around such a block are the same in every request."""
    quoted = _QUOTED.search(text)
    return quoted.group(2) if quoted else text


def structured_request(body: dict[str, Any]) -> bool:
    """Does the request ask for a JSON schema or a forced tool call?"""
    if response_schema(body) is not None:
        return True
    return bool(body.get("tools")) and body.get("tool_choice") not in (None, "auto", "none")


def structured_answer(body: dict[str, Any], topic_from: str | None = None) -> tuple[str | None, list[tuple[str, dict]]]:
    """(content, tool calls) satisfying the request: JSON text for a schema, else one call of
    the forced tool (or, for ``"required"``, of the last tool offered: LangMem offers its
    answer tool after its think/critique helpers)."""
    topic = _words(topic_from if topic_from is not None else topic_text(last_user_text(body)))
    schema = response_schema(body)
    if schema is not None:
        return json.dumps(fill(schema, topic)), []
    tools = [t["function"] for t in body.get("tools") or [] if t.get("type") == "function"]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        tools = [t for t in tools if t.get("name") == wanted] or tools
    tool = tools[-1]
    return None, [(tool["name"], fill(tool.get("parameters") or {}, topic))]

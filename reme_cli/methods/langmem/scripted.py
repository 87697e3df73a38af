"""TEST DOUBLE: the scripted answer to LangMem's memory manager (found by the test server
through the registry, ``reme_cli.core.registry.SCRIPTED``): an insert of the first schema
offered that is not trustcall's patch/remove tool, filled with words of the session, so each
task's memory says what the task was. The policy's ``fill`` satisfies the forced schema;
LangMem's other structured requests (the prompt optimizer) get the server's generic fill."""

from __future__ import annotations

from typing import Any

MANAGER = "You are a memory subroutine for an AI."
_NOT_INSERTS = ("PatchDoc", "RemoveDoc", "PatchFunctionErrors")


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def answer(system: str, user: str, body: dict[str, Any], policy: Any = None) -> dict[str, Any] | None:
    if system != MANAGER:  # first among the structured answers: its tool_choice may be "auto"
        return None
    names = [t["function"]["name"] for t in body.get("tools") or [] if t.get("type") == "function"]
    insert = next((n for n in names if n not in _NOT_INSERTS), None)
    if insert is None:
        raise ValueError("a memory-manager request offers no schema to insert")
    forced = {**body, "tool_choice": {"type": "function", "function": {"name": insert}}}
    texts = [_text(m.get("content")) for m in body.get("messages") or []]
    session = next((t for t in texts if "<session_" in t), user).split("<session_", 1)[-1].split(">", 1)[-1]
    return policy.fill(forced, topic_from=session)

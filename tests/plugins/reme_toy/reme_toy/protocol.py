"""A plain-text tool protocol: every line ``CALL name`` in the reply is a call."""

from __future__ import annotations

from typing import Any

from reme_cli.agent.protocols import Reply
from reme_cli.llm.client import ChatResult, ToolCallRequest


class ToyProtocol:
    name = "toy"

    def system_prompt(self, base: str | None, tools: list[dict[str, Any]]) -> str | None:
        names = ", ".join(t["function"]["name"] for t in tools)
        return f"Call a tool by writing a line 'CALL <name>'. Tools: {names}."

    def request_kwargs(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {}

    def read(self, result: ChatResult) -> Reply:
        calls = [ToolCallRequest(id=f"toy_{i}", name=line.split(None, 1)[1].strip(), arguments={})
                 for i, line in enumerate(result.content.splitlines()) if line.startswith("CALL ")]
        return Reply(text=result.content, calls=calls, message={"role": "assistant", "content": result.content})

    def result_messages(self, calls: list[ToolCallRequest], outputs: list[str]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": "[result] " + "; ".join(outputs)}]

"""A LangChain chat model whose every call goes through reme's own LLM client.

LangMem (and trustcall under it) talk to a LangChain ``BaseChatModel``. This one sends each
request through reme's ``LLM.chat`` (the summarizer's client), so the response cache,
seeds, retries, the circuit breaker, token accounting, the embedded llama.cpp server and
the scripted test server all apply, as they do to ReMe's own summarizer calls.

What LangMem uses, and how it maps:
- ``bind_tools(tools, tool_choice=...)``: tools in OpenAI form; ``"any"`` -> ``"required"``,
  a tool's name -> the forced-function form, sent in ``extra_body``, which the client merges
  over the body (over ``model.tool_choice``; the summarizer adds the model's own request
  extras, e.g. Qwen3's thinking switch). Without one, none is sent: the server's ``auto``.
- ``with_structured_output(schema, method="json_schema")``: the summarizer's
  ``schema_format`` (``json_schema`` for vLLM/OpenAI, ``json_object`` + ``schema`` for
  llama.cpp), and the reply parsed into a dict (TypedDict) or a model (pydantic).

trustcall catches *every* exception from a model call and turns it into a "fix the
validation error" turn. A transport error (connection lost, the breaker's abort, a context
overflow) must not become a silently kept prompt, so the model remembers the first one,
answers every later call with it, and ``raise_fault()`` re-raises it once the optimizer is
done.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Optional

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
from pydantic import ConfigDict, PrivateAttr

from reme_cli.llm.answer_health import is_truncated
from reme_cli.llm.json_reply import parse_json

_CHOICES_AS_IS = ("auto", "none", "required")


def openai_tool_choice(choice: Any) -> Any:
    """LangChain's tool_choice -> the OpenAI request's (None: send none, the server's "auto")."""
    if choice is None or isinstance(choice, dict):
        return choice
    if choice is True or choice == "any":
        return "required"
    if isinstance(choice, str):
        return choice if choice in _CHOICES_AS_IS else {"type": "function", "function": {"name": choice}}
    raise ValueError(f"unsupported tool_choice {choice!r}")


class RemeChatModel(BaseChatModel):
    """``llm``: reme's ``LLM`` (async ``chat``); ``schema_format(name, schema)`` gives the
    response_format for a JSON schema on that server."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: Any
    schema_format: Callable[[str, dict[str, Any]], dict[str, Any]]
    temperature: Optional[float] = 0.0  # None: not sent
    max_tokens: int | None = 1024  # None: no cap
    seed: int | None = None

    _fault: BaseException | None = PrivateAttr(default=None)
    _calls: int = PrivateAttr(default=0)
    _truncated: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "reme"

    @property
    def calls(self) -> int:
        """Requests sent through reme's client so far."""
        return self._calls

    @property
    def truncated(self) -> int:
        """Replies cut off by max_tokens or inside <think> (trustcall may retry them)."""
        return self._truncated

    def raise_fault(self) -> None:
        """Re-raise the first error reme's client raised, if any (trustcall swallows them)."""
        if self._fault is not None:
            raise self._fault

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("reme's LLM client is async: use ainvoke")

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self.raise_fault()  # the run is going down: no more requests
        body = [_sendable(m) for m in convert_to_openai_messages(messages)]
        tools = kwargs.get("tools") or None
        choice = openai_tool_choice(kwargs.get("tool_choice")) if tools else None
        request: dict[str, Any] = {"tools": tools, "response_format": kwargs.get("response_format"),
                                   "temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}
        if choice is not None:
            request["extra_body"] = {"tool_choice": choice}
        self._calls += 1
        try:
            res = await self.llm.chat(body, **request)
        except Exception as exc:  # reme's transport / server errors: remembered, never swallowed
            self._fault = exc
            raise
        self._truncated += is_truncated(res)
        calls, invalid = [], []
        for tc in res.tool_calls:
            args = tc.arguments
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except json.JSONDecodeError as exc:
                    invalid.append({"id": tc.id, "name": tc.name, "args": tc.arguments, "error": str(exc),
                                    "type": "invalid_tool_call"})
                    continue
            if not isinstance(args, dict):
                invalid.append({"id": tc.id, "name": tc.name, "args": json.dumps(args), "error": "not an object",
                                "type": "invalid_tool_call"})
                continue
            calls.append({"id": tc.id, "name": tc.name, "args": args, "type": "tool_call"})
        msg = AIMessage(content=res.content or "", tool_calls=calls, invalid_tool_calls=invalid,
                        usage_metadata={"input_tokens": res.prompt_tokens, "output_tokens": res.completion_tokens,
                                        "total_tokens": res.prompt_tokens + res.completion_tokens},
                        response_metadata={"finish_reason": res.finish_reason})
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], tool_choice=tool_choice, **kwargs)

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, method: str = "json_schema",
                               **kwargs: Any) -> Any:
        """Structured output by a JSON-schema response_format, whatever ``method`` asks
        (LangMem asks for ``json_schema``)."""
        if include_raw:
            raise NotImplementedError("include_raw is not supported")
        js = convert_to_json_schema(schema)
        if str(js.get("description", "")).startswith("dict() ->"):  # a TypedDict without a docstring
            js.pop("description")
        bound = self.bind(response_format=self.schema_format(js.get("title") or "response", js))
        is_model = isinstance(schema, type) and hasattr(schema, "model_validate")

        def parse(message: AIMessage) -> Any:
            data = parse_json(message.content, dict)
            if data is None:
                raise OutputParserException(f"no JSON object in the reply: {str(message.content)[:200]!r}")
            return schema.model_validate(data) if is_model else data

        return bound | RunnableLambda(parse)


def _sendable(message: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp rejects an assistant message whose content is null."""
    if message.get("content") is None:
        message = {**message, "content": ""}
    return message

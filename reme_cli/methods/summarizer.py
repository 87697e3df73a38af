"""The summarizer/judge LLM: the executor's server (``summarizer=same``) or another one
(e.g. executor qwen3-8b, summarizer qwen3-32b on a second vLLM server).

Its requests follow the authors' memory service (results/authors_setup_evidence.md section 3):
no temperature (``summarizer.temperature``: null, the FAQ's service config sets none), no
max_tokens, no thinking switch unless ``summarizer.thinking`` sets one
(the executor's ``model.thinking`` is the agent's, not the summarizer's). The authors' client
sent no top_p/top_k/min_p, so the endpoint's defaults applied; here the model config's
``model.sampling`` top_p/top_k/min_p go with every call, each one not sent where it is null
(the Qwen3 configs: none, as the authors); on the executor's own server its
``repeat_penalty`` too (the embedded model's). Reasoning stays out
of what is parsed: the client keeps ``reasoning_content`` apart and ``llm.json_reply`` drops
``<think>`` blocks left in the content by a server without a reasoning parser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reme_cli.core.config import Config
from reme_cli.llm.client import LLM, ChatClient, check_server
from reme_cli.llm.endpoint import WithDefaults, penalty_body, side_client, thinking_field
from reme_cli.llm.keys import llm_key
from reme_cli.llm.spend import Prices


@dataclass
class SummarizerSettings:
    llm: LLM
    author: str
    temperature: float | None  # None: not sent
    max_tokens: int | None  # None: no cap
    # A small local model whose free text is rarely JSON: methods ask for their answers'
    # schemas (response_format) so that the server's grammar makes them parse.
    constrained: bool = False
    llama_cpp: bool = False  # the summarizer is a llama.cpp server: JSON schemas go as json_object
    seed: int | None = None  # the authors' summarizer's seed (summarizer.seed); None: none sent

    def schema_format(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The response_format asking for ``schema``: OpenAI/vLLM's ``json_schema``, or
        llama-cpp-python's ``json_object`` + ``schema`` (it rejects ``json_schema``)."""
        if self.llama_cpp:
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}

    def text_grammar(self, gbnf: str) -> dict[str, Any]:
        """The request extras that hold a constrained llama.cpp summarizer to ``gbnf``, a
        grammar of a method's own text format (DC's cheatsheet block, ReasoningBank's
        ``Status:`` line and Markdown items), so that its answer is read as any other
        model's; nothing for other summarizers, which answer freely."""
        return {"extra_body": {"grammar": gbnf}} if self.constrained and self.llama_cpp else {}


def thinking_switch(cfg: Config, llama_cpp: bool = False, model: Any = None) -> dict[str, Any] | None:
    """The request extras for ``summarizer.thinking``: none when it is null (the authors'
    client sends no switch), else Qwen3's switch in the server's dialect (``model``'s
    ``thinking_switch``, the executor's by default), as ``llm.endpoint.request_extra_body``
    sends the executor's. The embedded llama.cpp model has no switch."""
    thinking = cfg.summarizer.thinking
    if thinking is None or llama_cpp:
        return None
    return thinking_field(model or cfg.model, thinking)


def serve_model(cfg: Config) -> Any:
    """The model config ``summarizer.serve`` names (its kind, thinking switch and prices), or None."""
    if not cfg.summarizer.serve:
        return None
    from reme_cli.core.config import compose

    return compose([f"model={cfg.summarizer.serve}"]).model


def sampling_filters(cfg: Config) -> dict[str, Any]:
    """top_p, top_k, min_p of every summarizer call (``model.sampling``; None: not sent)."""
    s = cfg.model.sampling
    return {"top_p": s.top_p, "top_k": s.top_k, "min_p": s.min_p}


def summarizer_settings(cfg: Config, executor: ChatClient) -> tuple[SummarizerSettings, ChatClient | None]:
    """The settings, and a client of our own to close (None when sharing the executor's)."""
    s = cfg.summarizer
    own: ChatClient | None = None
    if s.name == "same" or not s.base_url:
        author = cfg.model.name
        constrained = cfg.model.tool_protocol == "json"
        llama_cpp = cfg.model.kind == "local"
        # The executor's server: its repeat penalty too (the embedded model's, sent as before).
        extra = {**penalty_body(cfg), **(thinking_switch(cfg, llama_cpp) or {})}
        travel = {"stream": s.stream} if s.stream is not None else {}  # how its calls travel on a shared client
        llm: LLM = WithDefaults(executor, extra or None, {**sampling_filters(cfg), **travel})
    else:
        served_by = serve_model(cfg)
        hosted = served_by is not None and served_by.kind == "openai"
        key = llm_key(cfg)
        # A hosted provider is asked nothing before the first request (it need not list models).
        served = [] if hosted else check_server(s.base_url, key)
        model = s.model or (served[0] if served else s.name)
        own = side_client(cfg, executor, s.base_url, model, f"summarizer-{s.name}",
                          Prices.of(served_by.price) if served_by is not None else None, stream=s.stream,
                          prices_from=f"summarizer.serve={s.serve}'s model.price")
        llm, author, constrained, llama_cpp = (
            WithDefaults(own, thinking_switch(cfg, model=served_by), sampling_filters(cfg)), s.name, False, False)
    return SummarizerSettings(llm, author, s.temperature, s.max_tokens, constrained, llama_cpp, s.seed), own

"""Where the executor model lives: a given server, or the embedded CPU model started here."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from reme_cli.core.config import Config
from reme_cli.llm.cache import ResponseCache
from reme_cli.core.errors import UserError
from reme_cli.llm.client import LLM, ChatClient, ChatResult, served_models
from reme_cli.llm.keys import llm_key
from reme_cli.llm.pacing import Pacer
from reme_cli.llm.spend import Prices, SpendMeter



@dataclass
class Endpoint:
    base_urls: list[str]  # one server, or several replicas serving the same model
    model: str
    identity: dict[str, Any] = field(default_factory=dict)  # recorded in the run manifest
    # For a server we started: a one-line message once its process has died, else None.
    health: Callable[[], str | None] | None = None
    # The summarizer's own server when reme started it or a suite shares it (manifest).
    summarizer_identity: dict[str, Any] | None = None
    # The server's request dialect (ChatClient.adapt), e.g. llama.cpp's compact JSON grammar.
    adapt: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def base_url(self) -> str:
        return self.base_urls[0]


def base_urls(cfg: Config) -> list[str]:
    value = cfg.llm.base_url
    if not value:
        return []
    return [value] if isinstance(value, str) else list(value)


@contextlib.contextmanager
def endpoint(cfg: Config) -> Iterator[Endpoint]:
    """Yield a reachable endpoint: the given server(s), or one started here (the embedded
    CPU model, or `vllm serve` for a GPU model config), stopped on exit, errors included.
    A summarizer with a server of its own (``summarizer.serve``, no ``summarizer.base_url``)
    gets it started here too, planned with the executor's on GPUs of its own, and
    ``cfg.summarizer.base_url`` pointed at it (a key outside the run hash)."""
    from reme_cli.llm.shared import summarizer_server_cfg

    urls = base_urls(cfg)
    summ = summarizer_server_cfg(cfg)
    executor = not urls and cfg.model.kind != "local"
    if summ is not None and not urls and cfg.model.kind == "local":
        raise UserError("summarizer.serve starts a vLLM summarizer beside a GPU executor; with model=local "
                        "point summarizer.base_url at a running server instead")
    if not executor and summ is None:
        yield from _endpoint(cfg, urls, None)
        return
    from reme_cli.llm.vllm_server import managed

    def log(model: int, replica: int) -> Path:
        name = "vllm_server" if executor and model == 0 else "vllm_summarizer"
        return _log_path(cfg, f"{name}.log" if replica == 0 else f"{name}-{replica}.log")

    with managed([*([cfg] if executor else []), *([summ] if summ else [])], log) as groups:
        if summ is not None:
            cfg.summarizer.base_url = groups[-1].urls[0]
        yield from _endpoint(cfg, urls, groups[0] if executor else None, groups[-1] if summ else None)


def _endpoint(cfg: Config, urls: list[str], group: Any, summarizer: Any = None) -> Iterator[Endpoint]:
    if urls or group is not None:
        from reme_cli.llm.shared import shared_identity

        if group is not None:
            ep = _external(cfg, group.urls, group.identity())
        else:
            ep = _external(cfg, urls, shared_identity(urls) or {"kind": "external"})
        ep.health = _first_failure(group, summarizer)
        ep.summarizer_identity = _summarizer_identity(cfg, summarizer)
        yield ep
        return

    from reme_cli.llm.local_server import LocalServer, default_model_path

    check_fits(cfg, cfg.model.n_ctx, "model.n_ctx")
    model_path = default_model_path()
    log_path = _log_path(cfg, "local_server.log")
    with LocalServer(model_path=model_path, n_ctx=cfg.model.n_ctx, log_path=log_path) as server:
        engine = server.engine
        yield Endpoint([server.base_url], server.model_name, {
            "kind": "embedded-llama.cpp",
            **engine.identity(),
            "model_path": model_path,
            "model_name": server.model_name,
            "n_ctx": cfg.model.n_ctx,
            "max_model_len": cfg.model.n_ctx,
            "log": str(log_path),
        }, health=server.failure, adapt=_dialect(engine.name == "xllamacpp"),
           summarizer_identity=_summarizer_identity(cfg, None))


def _first_failure(*groups: Any) -> Callable[[], str | None] | None:
    """One health check over the servers started here (the executor's, the summarizer's)."""
    started = [g for g in groups if g is not None]
    if not started:
        return None
    return lambda: next((msg for msg in (g.failure() for g in started) if msg), None)


def _summarizer_identity(cfg: Config, group: Any) -> dict[str, Any] | None:
    if group is not None:
        return {**group.identity(), "base_url": group.urls[0]}
    url = cfg.summarizer.base_url
    if not url:
        return None
    from reme_cli.llm.shared import shared_identity

    return shared_identity([url]) or {"kind": "external", "base_url": url}


def _log_path(cfg: Config, name: str) -> Path:
    path = Path(cfg.llm.cache_dir).parent / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _external(cfg: Config, urls: list[str], identity: dict[str, Any]) -> Endpoint:
    """Every URL must answer now; during the run the client fails over between them. A
    hosted provider (model.kind=openai) is asked nothing before the first request: it need
    not list its models, and its context length is the model config's."""
    if cfg.model.kind == "openai":
        return _hosted(cfg, urls)
    entries = [served_models(u, llm_key(cfg)) for u in urls]
    served = [m.get("id", "") for m in entries[0]]
    model = cfg.llm.model or cfg.model.served_name or (served[0] if served else cfg.model.name)
    # The entry of the model we will call (or the only one served: aliases differ).
    entry = next((m for m in entries[0] if m.get("id") == model), entries[0][0] if len(entries[0]) == 1 else {})
    max_len = entry.get("max_model_len") or (entry.get("meta") or {}).get("n_ctx")  # vLLM's, llama.cpp's
    check_fits(cfg, max_len, "the server's max_model_len")
    identity.update(base_url=urls[0] if len(urls) == 1 else urls, served_models=served, max_model_len=max_len)
    cpp = cfg.model.kind == "local" and is_llama_cpp_server(entries[0])
    if cpp:
        identity["server_software"] = "llama.cpp"
    return Endpoint(urls, model, identity, adapt=_dialect(cpp))


def _hosted(cfg: Config, urls: list[str]) -> Endpoint:
    model = cfg.llm.model or cfg.model.served_name
    if not model:
        raise UserError(f"model={cfg.model.name} calls a hosted provider: name its model with llm.model=NAME")
    check_fits(cfg, cfg.model.n_ctx, "model.n_ctx")
    identity = {"kind": "hosted", "hosts": sorted({urlsplit(u).hostname or u for u in urls}), "model": model,
                "n_ctx": cfg.model.n_ctx}
    if (price := Prices.of(cfg.model.price)) is not None:
        identity["price"] = {"input": price.input, "output": price.output, "thinking_output": price.thinking_output,
                             "cached_input": price.cached_input, "unit": f"{price.currency} per 1M tokens",
                             **({"converted": price.converted} if price.converted else {}),
                             "source": price.source, "date": price.date}
    return Endpoint(urls, model, identity)


def is_llama_cpp_server(entries: list[dict[str, Any]]) -> bool:
    """Whether ``/models`` came from llama.cpp's C++ server (the xllamacpp engine, or a
    ``llama-server``): it says ``owned_by: llamacpp``; llama-cpp-python's says ``me``."""
    return any(e.get("owned_by") == "llamacpp" for e in entries)


def _dialect(llama_cpp_server: bool) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """JSON schemas go to llama.cpp's C++ server as a compact grammar (llm/json_grammar.py
    says why); other servers take reme's requests as they are."""
    if not llama_cpp_server:
        return None
    from reme_cli.llm.json_grammar import compact_json_request

    return compact_json_request


def check_fits(cfg: Config, context_len: Any, what: str) -> None:
    """Refuse a config whose answers alone could fill the model's context."""
    max_tokens = cfg.model.sampling.max_tokens
    if isinstance(context_len, int) and max_tokens is not None and max_tokens >= context_len:
        raise UserError(f"model.sampling.max_tokens={cfg.model.sampling.max_tokens} does not fit a context of "
                        f"{context_len} tokens ({what}); lower it or serve the model with a longer context")


def make_client(cfg: Config, ep: Endpoint) -> ChatClient:
    cache = None
    if cfg.llm.cache:
        # One cache file per model name keeps unrelated models' entries apart on disk.
        # The embedded model's answers depend on the engine too: one file per engine.
        name = ep.model + (f"@{ep.identity['engine']}" if ep.identity.get("engine") else "")
        safe = "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in name)
        cache = ResponseCache(Path(cfg.llm.cache_dir) / f"{safe}.sqlite")
    client = ChatClient(
        base_url=ep.base_urls if len(ep.base_urls) > 1 else ep.base_url,
        model=ep.model,
        api_key=llm_key(cfg),
        concurrency=cfg.llm.concurrency,
        timeout=cfg.llm.timeout,
        max_retries=cfg.llm.max_retries, breaker_threshold=cfg.llm.breaker_threshold,
        cache=cache,
        stream=cfg.llm.stream,
        # One pacer and one meter for the run: the summarizer's own client shares them.
        pacer=Pacer(cfg.llm.rpm, cfg.llm.tpm) if cfg.llm.rpm or cfg.llm.tpm else None,
        meter=SpendMeter(cfg.llm.budget_usd),
        prices=Prices.of(cfg.model.price),
        parallel_tool_calls=cfg.model.parallel_tool_calls,
        tool_choice=cfg.model.tool_choice,
        adapt=ep.adapt,  # the server's dialect: llama.cpp's C++ server takes a schema as a compact grammar
    )
    client.meter.require_usd(client.prices, "model.price")
    return client


class WithDefaults:
    """An LLM whose every call carries ``defaults`` where the call sets none, and
    ``extra_body`` under any extras the call adds: a role's own request fields (the
    summarizer's thinking switch and sampling filters, a simulated user's sampling, seed and
    headers) on a client it may share."""

    def __init__(self, llm: LLM, extra_body: dict[str, Any] | None = None, defaults: dict[str, Any] | None = None):
        self._llm = llm
        self._extra = extra_body
        self._defaults = defaults or {}
        self.model = llm.model
        self.usage = llm.usage

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        if self._extra:
            kwargs["extra_body"] = {**self._extra, **(kwargs.get("extra_body") or {})}
        return await self._llm.chat(messages, **{**self._defaults, **kwargs})


def side_client(cfg: Config, executor: ChatClient, base_url: str, model: str, cache_name: str,
                prices: Prices | None = None, stream: str | None = None,
                prices_from: str = "model.price") -> ChatClient:
    """A client for a role served by an endpoint of its own beside the executor's (the
    summarizer, a benchmark's simulated user): the run's limits and retries, the executor's
    pacer, spend meter and throughput (one budget for the run) and, at the executor's own
    endpoint, its requests in flight; its response cache ``cache_name`` beside the executor's;
    ``stream`` as the role streams (None: as ``llm.stream`` says). ``prices`` (the config key
    they come from: ``prices_from``) must fit a USD budget, as the executor's must."""
    if executor.meter is not None:
        executor.meter.require_usd(prices, prices_from)
    cache = ResponseCache(executor.cache.path.with_name(f"{cache_name}.sqlite")) if executor.cache is not None else None
    # One endpoint, one count of requests in flight (a role at the executor's provider); a
    # server of its own has its own.
    same_endpoint = base_url in {r.base_url for r in executor.replicas}
    return ChatClient(base_url=base_url, model=model, api_key=llm_key(cfg), concurrency=cfg.llm.concurrency,
                      timeout=cfg.llm.timeout, max_retries=cfg.llm.max_retries,
                      breaker_threshold=cfg.llm.breaker_threshold, cache=cache, stream=stream or cfg.llm.stream,
                      pacer=executor.pacer, meter=executor.meter, prices=prices,
                      inflight=executor.inflight if same_endpoint else None, throughput=executor.throughput)


def request_extra_body(cfg: Config) -> dict[str, Any] | None:
    """The executor's request fields outside OpenAI's schema: the repeat penalty, and Qwen3's
    thinking switch as the server takes it (``model.thinking_switch``)."""
    body = penalty_body(cfg)
    if cfg.model.kind != "local":
        thinking = cfg.model.thinking if cfg.benchmark.thinking is None else cfg.benchmark.thinking
        body.update(thinking_field(cfg.model, thinking))
    return body or None


def thinking_field(model: Any, thinking: bool) -> dict[str, Any]:
    """Qwen3's thinking switch in the dialect of ``model`` (a ``model`` config section): vLLM's
    chat-template kwargs, or the top-level ``enable_thinking`` DashScope's compatible mode reads."""
    if model.thinking_switch == "none":
        return {}
    if model.thinking_switch == "enable_thinking":
        return {"enable_thinking": thinking}
    return {"chat_template_kwargs": {"enable_thinking": thinking}}


def penalty_body(cfg: Config) -> dict[str, Any]:
    """``model.sampling.repeat_penalty`` under the server's name: ``repeat_penalty`` for
    llama.cpp's servers (model=local), ``repetition_penalty`` for vLLM; nothing when unset."""
    penalty = cfg.model.sampling.repeat_penalty
    if penalty is None:
        return {}
    return {"repeat_penalty" if cfg.model.kind == "local" else "repetition_penalty": penalty}

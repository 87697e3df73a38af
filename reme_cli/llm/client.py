"""One async client for any OpenAI-compatible chat endpoint (vLLM, llama.cpp, a hosted
provider such as DashScope's compatible mode).

Bounded concurrency, retries with backoff on transient failures (a 429 waits what its
``Retry-After`` says), a per-request seed, token/latency accounting per call, an on-disk
response cache, replicas of one model with episode affinity (``episode_affinity``), streamed
answers assembled whole (``llm.stream``), pacing under a provider's limits (``llm/pacing.py``),
requests in flight fixed or adaptive (``llm/inflight.py``), what a run achieves against the
limits (``llm/throughput.py``) and spend at the model's prices (``llm/spend.py``). A refused
key, a closed account or an exhausted quota stops the run at once (``RunAborted``), never
after its retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol
from urllib.parse import urlsplit

import httpx
import openai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from reme_cli.core.errors import RunAborted, UserError
from reme_cli.llm.cache import ResponseCache, request_key
from reme_cli.llm.inflight import InFlight
from reme_cli.llm.pacing import Pacer, estimate_tokens
from reme_cli.llm.spend import Prices, SpendMeter
from reme_cli.llm.throughput import Throughput

# Transient by nature: the same request may succeed a moment later.
_RETRYABLE = (
    openai.APIConnectionError,  # includes APITimeoutError
    openai.RateLimitError,
    openai.InternalServerError,
)


@dataclass
class ToolCallRequest:
    """A call as the model produced it: ``arguments`` is raw (usually a JSON string)."""

    id: str
    name: str
    arguments: Any


@dataclass
class ChatResult:
    content: str
    tool_calls: list[ToolCallRequest]
    reasoning: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    finish_reason: str | None = None
    model: str | None = None  # what the server says answered (its response's ``model``)
    system_fingerprint: str | None = None


# How servers say "prompt + max_tokens do not fit the context": vLLM ("This model's maximum
# context length is ...", "... is longer than the maximum model length of ..."), OpenAI and
# llama-cpp-python (code context_length_exceeded, the same sentence), llama.cpp's own
# server ("the request exceeds the available context size", exceed_context_size_error).
_OVERFLOW = re.compile(r"maximum context length|longer than the maximum model length|context_length_exceeded|"
                       r"exceeds? the available context size|exceed_context_size|exceeds? context window",
                       re.IGNORECASE)


class ContextOverflow(Exception):
    """The server refused the request because it does not fit the model's context: the
    episode has outgrown the model (a result), not a failure of the run."""


def is_context_overflow(exc: openai.APIStatusError) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    text = " ".join(str(x) for x in (exc.message, body.get("code"), body.get("type"), body.get("message")))
    return exc.status_code in (400, 413, 422) and bool(_OVERFLOW.search(text))


# The server is unreachable or silent, as opposed to answering with an error.
_UNREACHABLE = (openai.APIConnectionError,)  # APITimeoutError is a subclass


def unreachable(exc: openai.APIConnectionError, url: str) -> openai.APIConnectionError:
    """``exc`` in the words of what failed underneath. openai's aiohttp client (httpx-aiohttp)
    turns every failure to connect, a refused connection or an unknown host among them, into
    httpx's ConnectTimeout, which the SDK reports as "Request timed out."; the OS's error at
    the bottom of the chain says what happened. A timeout that is one (a server that took the
    connection and did not answer in time) and reme's own errors (a cut stream) stay as they are."""
    if type(exc) not in (openai.APIConnectionError, openai.APITimeoutError):
        return exc
    cause: BaseException = exc
    seen = {id(exc)}
    while (below := cause.__cause__ or cause.__context__) is not None and id(below) not in seen:
        seen.add(id(below))
        cause = below
    if not isinstance(cause, OSError) or isinstance(cause, TimeoutError):
        return exc
    said = str(cause).splitlines()[0] if str(cause) else ""
    better = openai.APIConnectionError(message=f"connection to {url} failed: {type(cause).__name__}: {said}",
                                       request=exc.request)
    better.__cause__ = exc
    return better


@dataclass
class CircuitBreaker:
    """Trips after ``threshold`` consecutive attempts that could not reach the server.

    One slow request is one failure and the next answer resets the count; a dead server
    fails every attempt of every request in flight, so the count climbs at once and the run
    stops instead of retrying each unit into an error record.
    """

    threshold: int = 5
    base_url: str = ""
    failures: int = 0
    last_error: str = ""
    tripped: bool = False

    def success(self) -> None:
        self.failures = 0

    def failure(self, exc: BaseException) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if self.failures >= self.threshold:
            self.tripped = True

    def check(self) -> None:
        if self.tripped:
            raise RunAborted(
                f"the LLM server at {self.base_url} stopped answering: {self.failures} requests in a row "
                f"failed to connect or timed out (last: {self.last_error}); check the server, then rerun "
                "the same command to resume (llm.breaker_threshold sets the count)")


NO_SERVER = "no request reached a server"  # a session whose every answer the cache replayed


@dataclass
class UsageTotals:
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    # What answered the calls the server computed: model -> calls, fingerprint -> calls.
    models: dict[str, int] = field(default_factory=dict)
    fingerprints: dict[str, int] = field(default_factory=dict)

    def add(self, r: ChatResult) -> None:
        self.calls += 1
        self.cached_calls += r.cached
        self.prompt_tokens += r.prompt_tokens
        self.completion_tokens += r.completion_tokens
        self.latency_s += r.latency_s
        if not r.cached:
            if r.model:
                self.models[r.model] = self.models.get(r.model, 0) + 1
            if r.system_fingerprint:
                self.fingerprints[r.system_fingerprint] = self.fingerprints.get(r.system_fingerprint, 0) + 1

    def served(self) -> dict[str, Any]:
        """The manifest's record of what answered: the models and fingerprints the responses
        named, whether either changed during the run, and how many answers the response cache
        replayed. When none came from a server (all replayed, or none asked), ``note`` says so:
        a replay needs no server, and the record says why it names no model."""
        out: dict[str, Any] = {"models": dict(self.models)}
        if self.fingerprints:
            out["system_fingerprints"] = dict(self.fingerprints)
        out["changed"] = len(self.models) > 1 or len(self.fingerprints) > 1
        out["replayed"] = self.cached_calls
        if self.calls == self.cached_calls:
            out["note"] = NO_SERVER
        return out


# Errors after which no retry can succeed: the key is refused, the account cannot pay, the
# quota is spent. OpenAI says insufficient_quota (HTTP 429) for an exhausted quota; DashScope
# says Arrearage (400) for an overdue account and AllocationQuota.FreeTierOnly (403) once a
# free-tier-only account's quota is spent (Model Studio's error codes). DashScope's own 429s
# (Throttling.RateQuota, Throttling.AllocationQuota: requests or tokens per minute) pass.
_EXHAUSTED = {"insufficient_quota", "Arrearage", "AllocationQuota.FreeTierOnly"}


def fatal_refusal(exc: openai.APIStatusError) -> str | None:
    """Why no retry of this request can succeed (a refused key, a closed account), or None."""
    body = exc.body if isinstance(exc.body, dict) else {}
    codes = {str(body.get("code")), str(body.get("type"))}
    if codes & _EXHAUSTED:
        return "says the account's quota or balance is exhausted"
    if exc.status_code == 401:
        return "refused the API key"
    if exc.status_code == 403:
        return "refused access"
    return None


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms``, ``Retry-After`` in seconds or
    as an HTTP date), or None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


RETRY_AFTER_MAX_S = 600.0  # past this a provider's hint is not waited for in full


class wait_retry_after:
    """A tenacity wait: what the server's ``Retry-After`` says, else ``fallback``'s backoff."""

    def __init__(self, fallback: Callable[[RetryCallState], float]):
        self.fallback = fallback

    def __call__(self, state: RetryCallState) -> float:
        asked = retry_after(state.outcome.exception() if state.outcome else None)
        return min(asked, RETRY_AFTER_MAX_S) if asked is not None else self.fallback(state)


@dataclass(frozen=True)
class Wire:
    """How one answer travelled, for a caller that measures the endpoint (``reme check``):
    the response's headers (rate limits, request ids) and, for a streamed answer, the
    seconds from sending to its first chunk that carried text, reasoning or a call."""

    headers: dict[str, str]
    streamed: bool
    first_token_s: float | None = None


class StreamCutOff(openai.APIConnectionError):
    """A streamed answer ended before its last chunk: retried as a whole request."""


def thinking_on(request: dict[str, Any]) -> bool:
    """Whether a request turns Qwen3's thinking on, in either dialect (a top-level
    ``enable_thinking``, or vLLM's ``chat_template_kwargs``)."""
    body = {**request, **(request.get("extra_body") or {})}
    kwargs = body.get("chat_template_kwargs") or {}
    return body.get("enable_thinking") is True or kwargs.get("enable_thinking") is True


# A unit's executor calls when every call sends one fixed seed (model.sampling.seed): the
# response cache keys them by unit and trial too, so run 2 of a task is asked, not replayed
# from run 1's answer, and a resume replays each unit's own. Set by the runner.
REPLAY_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar("reme_replay_scope", default=None)


class LLM(Protocol):
    model: str
    usage: UsageTotals

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = 0.0,
        top_p: float | None = 1.0,
        max_tokens: int | None = 1024,
        seed: int | None = None,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        tool_choice: Any = None,
        stream: str | None = None,
    ) -> ChatResult: ...


@dataclass
class ChatClient:
    base_url: str | list[str]  # one server, or replicas of one model
    model: str
    api_key: str = "EMPTY"
    concurrency: int | None = 8  # requests in flight; None: adaptive (llm/inflight.py)
    timeout: float = 600.0
    max_retries: int = 6
    breaker_threshold: int = 5
    cache: ResponseCache | None = None
    usage: UsageTotals = field(default_factory=UsageTotals)
    # The server's dialect: a request as built here -> the request that server is sent (and
    # cached under), e.g. a JSON schema as llama.cpp's compact grammar (llm/json_grammar.py).
    adapt: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    stream: str = "never"  # auto (a request that turns thinking on) | always | never (llm.stream)
    pacer: Pacer | None = None  # shared by a run's clients (llm.rpm, llm.tpm)
    meter: SpendMeter | None = None  # shared by a run's clients (llm.budget_usd)
    prices: Prices | None = None  # this client's model's (model.price)
    parallel_tool_calls: bool | None = None  # sent with tools when set (model.parallel_tool_calls)
    # Told how each answer the server computed travelled (``Wire``); None: nobody asks.
    on_wire: Callable[[Wire], None] | None = None
    tool_choice: Any = None  # sent with tools when set (model.tool_choice); None: none, the server's auto
    inflight: InFlight | None = None  # shared by the run's clients of one endpoint; None: its own
    throughput: Throughput | None = None  # shared by a run's clients

    def __post_init__(self) -> None:
        urls = [self.base_url] if isinstance(self.base_url, str) else list(self.base_url)
        self._replicas = [Replica(url, openai.AsyncOpenAI(
            base_url=url,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=0,  # tenacity below owns retries, so every attempt is counted alike
            # aiohttp's pool: httpcore's scans every connection per request, which
            # dominated the harness's CPU at 32+ requests in flight (scripts/bench_harness.py).
            http_client=openai.DefaultAioHttpClient(timeout=self.timeout),
        )) for url in urls]
        if self.inflight is None:
            self.inflight = InFlight(self.concurrency)
        if self.throughput is None:
            self.throughput = Throughput(self.pacer.rpm if self.pacer else None, self.pacer.tpm if self.pacer else None)
        if self.inflight not in self.throughput.inflight:
            self.throughput.inflight.append(self.inflight)
        self.breaker = CircuitBreaker(self.breaker_threshold, ", ".join(urls))

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = 0.0,
        top_p: float | None = 1.0,
        max_tokens: int | None = 1024,
        seed: int | None = None,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        tool_choice: Any = None,
        stream: str | None = None,
    ) -> ChatResult:
        """One chat completion. ``tool_choice``: sent with ``tools`` (a caller forcing a call),
        over the client's own (``model.tool_choice``); None: the client's, and with neither set
        none is sent, as the authors' agents sent none. ``stream``: how this call travels
        (``llm.stream``'s values), over the client's (the summarizer's ``summarizer.stream``)."""
        request: dict[str, Any] = {"model": self.model, "messages": messages}
        # None: not sent, so the server's default applies (vLLM >= 0.8: the model's
        # generation_config.json; llama.cpp: top_k 40, min_p 0.05). top_k and min_p are
        # outside OpenAI's schema but read from the body by vLLM and llama.cpp alike.
        for name, value in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens),
                            ("top_k", top_k), ("min_p", min_p)):
            if value is not None:
                request[name] = value
        if seed is not None:
            request["seed"] = seed
        if tools:
            request["tools"] = tools
            if (choice := self.tool_choice if tool_choice is None else tool_choice) is not None:
                request["tool_choice"] = choice
            if self.parallel_tool_calls is not None:
                request["parallel_tool_calls"] = self.parallel_tool_calls
        if response_format is not None:
            request["response_format"] = response_format
        if extra_body:
            request["extra_body"] = extra_body
        if self.adapt is not None:
            request = self.adapt(request)

        # The cache keys what is asked, never how it travels (streamed or not) nor the key.
        scope = REPLAY_SCOPE.get()
        key = (request_key(request if scope is None else {"request": request, "replay_scope": scope})
               if self.cache is not None else "")
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            result = _result_from_record(hit, cached=True)
            self.usage.add(result)
            return result

        how = self.stream if stream is None else stream
        streamed = how == "always" or (how == "auto" and thinking_on(request))
        inflight = self.inflight
        await inflight.acquire()
        try:
            start = time.perf_counter()
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(_RETRYABLE),
                stop=stop_after_attempt(self.max_retries + 1),
                wait=wait_retry_after(wait_exponential_jitter(initial=1, max=30)),
                reraise=True,
            ):
                with attempt:
                    self.breaker.check()
                    if self.meter is not None:
                        self.meter.check()  # the budget: before anything more is billed
                    paced = await self.pacer.acquire(estimate_tokens(request)) if self.pacer else None
                    response = await self._send(request, headers, streamed)
            latency = time.perf_counter() - start
            record = _record_from_response(response, latency)
            waited = paced.waited_s if paced is not None else 0.0
            inflight.answered(paced_s=waited, answer_s=latency - waited)
        finally:
            inflight.release()

        used = record["prompt_tokens"] + record["completion_tokens"]
        if paced is not None:
            self.pacer.settle(paced, used)
        self.throughput.answered(used)
        if self.meter is not None:
            self.meter.charge(self.prices, record["prompt_tokens"], record["completion_tokens"],
                              thinking=thinking_on(request) or bool(record["reasoning"]),
                              cached_prompt_tokens=record.get("cached_prompt_tokens", 0))
        if self.cache is not None:
            self.cache.put(key, record)
        result = _result_from_record(record, cached=False)
        self.usage.add(result)
        return result

    async def _send(self, request: dict[str, Any], headers: dict[str, str] | None, streamed: bool) -> dict[str, Any]:
        """One attempt, counted: a 429 (or a provider's throttling code, sent as 429) lowers
        the requests in flight of this endpoint once for the burst it belongs to."""
        epoch = self.inflight.epoch
        self.throughput.sent()
        try:
            return await self._post_watched(request, headers, streamed)
        except openai.RateLimitError:
            self.inflight.throttled(epoch)  # counted there, for the throughput's record too
            raise

    async def _post_watched(self, request: dict[str, Any], headers: dict[str, str] | None,
                            streamed: bool = False) -> dict[str, Any]:
        try:
            response = await (self._post_stream(request, headers) if streamed else self._post(request, headers))
        except _UNREACHABLE as exc:
            self.breaker.failure(exc)
            self.breaker.check()
            raise
        except openai.APIStatusError as exc:
            self.breaker.success()  # it answered, if only with an error: the server is up
            if is_context_overflow(exc):
                raise ContextOverflow(str(exc.message)) from None
            if (why := fatal_refusal(exc)) is not None:
                raise RunAborted(self._refusal_line(exc, why)) from None
            raise
        self.breaker.success()
        return response

    def _refusal_line(self, exc: openai.APIStatusError, why: str) -> str:
        """One line naming the provider and its reason, the key never in it."""
        said = provider_said(exc)
        if self.api_key and len(self.api_key) > 3:
            said = said.replace(self.api_key, "***")
        host = ", ".join(sorted({urlsplit(r.base_url).hostname or r.base_url for r in self._replicas}))
        return (f"the LLM provider at {host} {why} (HTTP {exc.status_code}: {said[:300]}); fix the key in the "
                "variable llm.api_key_env names, or the account, then rerun the same command to resume")

    def _body(self, request: dict[str, Any]) -> dict[str, Any]:
        body = dict(request)
        body.update(body.pop("extra_body", None) or {})
        return body

    async def _post(self, request: dict[str, Any], headers: dict[str, str] | None) -> dict[str, Any]:
        # The raw endpoint skips the SDK's per-call type-driven transform of the request
        # (~13 ms of CPU for a BFCL prompt with its tool schemas); auth, errors and
        # status-code exceptions are still the SDK's own.
        body = self._body(request)
        replica = self._route()
        replica.outstanding += 1
        try:
            response = await replica.client.post(
                "/chat/completions", body=body, cast_to=httpx.Response,
                options={"headers": headers or {}},
            )
        except _UNREACHABLE as exc:
            replica.down_until = time.monotonic() + REPLICA_COOLDOWN_S  # the retry goes elsewhere
            raise unreachable(exc, replica.base_url)  # noqa: B904 - it keeps exc as its cause
        finally:
            replica.outstanding -= 1
        replica.served += 1
        if self.on_wire is not None:
            self.on_wire(Wire(dict(response.headers), streamed=False))
        return response.json()

    async def _post_stream(self, request: dict[str, Any], headers: dict[str, str] | None) -> dict[str, Any]:
        """The answer streamed (the SDK's SSE stream), assembled whole by the SDK's own
        accumulator: content, ``reasoning_content`` and tool calls arriving in pieces (by
        ``index``, several per reply), usage from the last chunk. A stream that ends before
        a finish reason, or breaks, is a ``StreamCutOff``: the whole request is retried."""
        body = {**self._body(request), "stream": True, "stream_options": {"include_usage": True}}
        replica = self._route()
        replica.outstanding += 1
        state = ChatCompletionStreamState()
        chunks = 0
        sent, first = time.perf_counter(), None
        try:
            stream = await replica.client.post(
                "/chat/completions", body=body, cast_to=ChatCompletionChunk, stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk], options={"headers": headers or {}},
            )
            try:
                async for chunk in stream:
                    state.handle_chunk(chunk)
                    chunks += 1
                    if first is None and _carries_tokens(chunk):
                        first = time.perf_counter() - sent
            except (openai.APIError, asyncio.CancelledError):
                raise
            except Exception as exc:  # the connection broke mid-answer (httpx, aiohttp, OSError)
                raise StreamCutOff(message=f"the answer's stream broke after {chunks} chunk(s): "
                                           f"{type(exc).__name__}: {exc}",
                                   request=httpx.Request("POST", replica.base_url)) from exc
        except _UNREACHABLE as exc:
            replica.down_until = time.monotonic() + REPLICA_COOLDOWN_S
            raise unreachable(exc, replica.base_url)  # noqa: B904 - it keeps exc as its cause
        finally:
            replica.outstanding -= 1
        snapshot = state.current_completion_snapshot if chunks else None
        if snapshot is None or not snapshot.choices or not snapshot.choices[0].finish_reason:
            raise StreamCutOff(message=f"the answer's stream ended after {chunks} chunk(s) without a finish reason",
                               request=httpx.Request("POST", replica.base_url))
        replica.served += 1
        if self.on_wire is not None:
            self.on_wire(Wire(dict(stream.response.headers), streamed=True, first_token_s=first))
        return snapshot.model_dump()

    def _route(self) -> Replica:
        """The replica of the current episode (``episode_affinity``): chosen at its first
        call, kept while it is up, so every step and trial re-uses the prefix that replica
        has cached; moved (and kept there) only when it goes down. Without an episode, the
        least busy replica."""
        affinity = _AFFINITY.get()
        if affinity is None or len(self._replicas) == 1:
            return pick_replica(self._replicas)
        pinned = affinity.pins.get(id(self))
        if pinned is not None and pinned.down_until <= time.monotonic():
            return pinned
        chosen = pick_replica(self._replicas, by_episodes=True)
        if pinned is not None:
            pinned.episodes -= 1
        chosen.episodes += 1
        affinity.pins[id(self)] = chosen
        return chosen

    @property
    def replicas(self) -> list[Replica]:
        return self._replicas

    async def close(self) -> None:
        for replica in self._replicas:
            await replica.client.close()


REPLICA_COOLDOWN_S = 10.0


def _carries_tokens(chunk: ChatCompletionChunk) -> bool:
    """Whether a streamed chunk holds generated text: content, reasoning or a call's piece
    (the first chunk often holds only the role)."""
    for choice in chunk.choices:
        delta = choice.delta
        if delta.content or delta.tool_calls or getattr(delta, "reasoning_content", None):
            return True
    return False


@dataclass
class Replica:
    """One server of several serving the same model."""

    base_url: str
    client: Any
    outstanding: int = 0  # requests in flight to it now
    served: int = 0  # requests it answered
    down_until: float = 0.0  # after a connection failure, others are preferred until then
    episodes: int = 0  # open episodes pinned to it (episode_affinity)


def pick_replica(replicas: list[Replica], by_episodes: bool = False) -> Replica:
    """Least outstanding requests among the replicas that are up (``by_episodes``: fewest
    open episodes first, since an episode between two steps has nothing in flight but will
    come back); if none is up, the one that went down first (it may be back)."""
    if len(replicas) == 1:
        return replicas[0]
    now = time.monotonic()
    up = [r for r in replicas if r.down_until <= now]
    if not up:
        return min(replicas, key=lambda r: r.down_until)
    if by_episodes:
        return min(up, key=lambda r: (r.episodes, r.outstanding))
    return min(up, key=lambda r: r.outstanding)


@dataclass
class _Affinity:
    key: str
    pins: dict[int, Replica] = field(default_factory=dict)  # id(client) -> its replica for this episode


# A context variable, not an argument: the summarizer's calls of a unit (distill, judge,
# rerank) reach the client through method code that knows nothing of replicas, and tasks
# spawned inside (asyncio.gather, to_thread) inherit it.
_AFFINITY: contextvars.ContextVar[_Affinity | None] = contextvars.ContextVar("reme_episode_affinity", default=None)


@contextlib.contextmanager
def episode_affinity(key: str) -> Iterator[None]:
    """Every call made inside, by any client, goes to one replica of that client (chosen
    at the first call, fewest open episodes first) while that replica answers: one unit's
    steps, trials and summarizer calls share a prompt prefix that only that replica has
    cached (vLLM's prefix cache is per server)."""
    affinity = _Affinity(key)
    token = _AFFINITY.set(affinity)
    try:
        yield
    finally:
        _AFFINITY.reset(token)
        for replica in affinity.pins.values():
            replica.episodes -= 1


def _record_from_response(response: dict[str, Any], latency: float) -> dict[str, Any]:
    """The JSON-safe part of a response that the harness uses (what the cache stores)."""
    try:
        choice = response["choices"][0]
        msg = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise openai.APIResponseValidationError(
            response=httpx.Response(200, request=httpx.Request("POST", "/chat/completions")),
            body=response, message=f"malformed chat completion: {str(response)[:200]}") from None
    usage = response.get("usage") or {}
    # Prompt tokens the provider served from its context cache (billed apart where it has
    # a cached-input price: model.price.cached_input).
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "content": msg.get("content") or "",
        "reasoning": msg.get("reasoning_content") or msg.get("reasoning"),
        "tool_calls": [
            {"id": tc.get("id") or f"call_{i}", "name": (tc.get("function") or {}).get("name", ""),
             "arguments": (tc.get("function") or {}).get("arguments", "")}
            for i, tc in enumerate(msg.get("tool_calls") or [])
        ],
        "finish_reason": choice.get("finish_reason"),
        "prompt_tokens": usage.get("prompt_tokens") or 0,
        "completion_tokens": usage.get("completion_tokens") or 0,
        **({"cached_prompt_tokens": int(cached)} if cached else {}),
        "latency_s": latency,
        "model": response.get("model"),
        "system_fingerprint": response.get("system_fingerprint"),
    }


def _result_from_record(rec: dict[str, Any], cached: bool) -> ChatResult:
    return ChatResult(
        content=rec["content"],
        tool_calls=[ToolCallRequest(**tc) for tc in rec["tool_calls"]],
        reasoning=rec.get("reasoning"),
        prompt_tokens=rec["prompt_tokens"],
        completion_tokens=rec["completion_tokens"],
        latency_s=0.0 if cached else rec["latency_s"],
        cached=cached,
        finish_reason=rec.get("finish_reason"),
        model=rec.get("model"),
        system_fingerprint=rec.get("system_fingerprint"),
    )


class ServerUnreachable(UserError):
    """A server named by the config does not answer its ``/models``: bad input for a run (fix
    the URL or start the server, exit 2), a failed probe for `reme check` (exit 4)."""


def served_models(base_url: str, api_key: str = "EMPTY", timeout: float = 10.0) -> list[dict[str, Any]]:
    """The server's ``/models`` entries (vLLM adds ``max_model_len``); a one-line
    ``ServerUnreachable`` if it cannot be reached."""
    url = base_url.rstrip("/") + "/models"
    try:
        resp = httpx.get(url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout)
        resp.raise_for_status()
        return [m for m in resp.json().get("data", []) if isinstance(m, dict)]
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise ServerUnreachable(
            f"cannot reach the LLM server at {base_url} ({type(exc).__name__}): "
            "start it (e.g. `reme serve model=...`) or fix llm.base_url"
        ) from None


def provider_said(exc: openai.APIStatusError) -> str:
    """The provider's own words on a refused request: its error body's message (under
    ``error`` where the body wraps it), else the SDK's, first line."""
    body = exc.body if isinstance(exc.body, dict) else {}
    if isinstance(body.get("error"), dict):
        body = body["error"]
    said = str(body.get("message") or exc.message or "")
    return said.splitlines()[0] if said else ""


def check_server(base_url: str, api_key: str = "EMPTY", timeout: float = 10.0) -> list[str]:
    """The model ids a server serves; a one-line UserError if it cannot be reached."""
    return [m.get("id", "") for m in served_models(base_url, api_key, timeout)]

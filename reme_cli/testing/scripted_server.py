"""TEST DOUBLE: an OpenAI-compatible chat server that answers from a script, not a model.

Used by tests and by benchmarks of the harness itself (its overhead, and end-to-end
runs whose correct verdict is known in advance). Never use it for results.

    with ScriptedServer(FixedPolicy("ok")) as srv:
        client = OpenAI(base_url=srv.base_url, api_key="x")

    python -m reme_cli.testing.scripted_server --policy NAME [--corrupt ID ...]
        [--delay S] [--port N]          # first stdout line: the base_url

Policies:
* ``FixedPolicy(text)``: always answers ``text``.
* ``StepsPolicy(steps)``: answers the i-th request of an episode with ``steps[i]``, then
  "Done." (``--policy steps --step TEXT --step TEXT ...``).
* Replay policies: a benchmark's ground truth for the task named in the ``X-Reme-Task-Id``
  header (tasks in ``corrupt`` answered wrongly), each in its benchmark's plug-in and found
  through the registry by name (``REPLAY_POLICIES``; the seam is reme_cli/bench/replay.py),
  which also contributes its own options to this command line.
* ``ScriptedSummarizerPolicy``: each memory method's canned answers to its own prompts
  (distillation, judge, reflection, curation...), scripted in the method's plug-in and found
  through the registry (``scripted_answers``, end of this file); other requests for a JSON
  schema or a forced tool call get an answer that fills the schema (``schema_fill``).
* ``CheckPolicy``: what a model that does as asked would answer `reme check`'s probes.
* ``AgentAndSummarizerPolicy``: replay for agent requests, the summarizer for the rest.
* ``FaultPolicy(inner, overflow, truncate)``: vLLM's context-length 400 or a reply cut off
  by ``max_tokens`` for chosen tasks (``--overflow``, ``--truncate``).

``--refuse-chat`` hangs up on every chat request (a server dying under a run);
``--max-model-len`` reports a context length in ``/v1/models`` as vLLM does.

A request with ``stream: true`` gets its answer as server-sent events, the same message as
unstreamed (content, ``reasoning_content``, tool calls), ``usage`` in a last chunk of its
own when ``stream_options.include_usage`` asks for it.

``Provider`` (``--provider dashscope``) behaves like DashScope's OpenAI-compatible mode
where reme relies on it: a wrong bearer key gets HTTP 401 (``invalid_api_key``);
``enable_thinking: true`` without ``stream: true`` gets HTTP 400, as the provider refuses
it; a thinking request's answer starts with reasoning; streamed answers come in small
pieces (reasoning, content and each tool call's arguments split across chunks, two tool
calls' pieces sharing a chunk); every ``rate_limit_every``-th chat request gets HTTP 429
with ``Retry-After``; past ``rate_limit_rps`` chat requests in one clock second the rest of
that second get HTTP 429 (``Throttling.RateQuota``) with ``Retry-After`` (DashScope may
enforce RPM/60 a second), counted per second at ``GET /scripted/stats``; the first
``cut_streams`` streamed answers break off midway; and ``system_fingerprint`` and ``headers``
(rate-limit headers, say) are sent when given; ``/v1/models`` is not served. Only behaviour,
never the provider's model.

``/v1/embeddings`` answers every policy with deterministic vectors (``scripted_vector``: the
same model, text and ``dimensions`` always give the same vector; 8 numbers when no
``dimensions`` is sent), in request order. ``embedding_faults`` (``--embedding-fault 429``)
answers the first embedding requests with those HTTP statuses, one each, before any
succeeds; ``max_embedding_inputs`` refuses a request with more texts (HTTP 400), as
DashScope refuses more than 10.

Requests with ``response_format`` get the harness's JSON tool-call protocol in
``content`` (``{"tool_calls": [{"name", "arguments"}], "answer"?}``) instead of native
``tool_calls``; in that protocol tool results come back as user messages starting with
``[tool results]``, which are not turns.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import itertools
import json
import struct
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from reme_cli.bench.replay import (  # noqa: F401 - the seam's parts, re-exported for the server's users
    DONE_TEXT,
    TASK_HEADER,
    TOOL_RESULTS_PREFIX,
    Call,
    PolicyError,
    Reply,
    conversation_position,
    has_lessons,
    scripted_answers,
)
from reme_cli.bench.replay import text_of as _text_of
from reme_cli.testing.schema_fill import structured_answer, structured_request



class Policy(Protocol):
    name: str

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply: ...


class FixedPolicy:
    """Always the same text: measures the harness, not a model."""

    name = "fixed"

    def __init__(self, text: str = "ok"):
        self.text = text

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        return Reply(content=self.text)


class StepsPolicy:
    """The i-th reply of every episode is ``steps[i]``, then "Done." (e.g. chosen code for a
    code-action benchmark, one block per step)."""

    name = "steps"

    def __init__(self, steps: Iterable[str]):
        self.steps = list(steps)

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        done = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
        return Reply(content=self.steps[done] if done < len(self.steps) else DONE_TEXT)


class ScriptedSummarizerPolicy:
    """Canned summarizer/judge answers: each method's script (``scripted_answers``) is asked
    in turn, the first answer wins; a request none knows that asks for a JSON schema or a
    forced tool call gets the schema filled (``schema_fill``). ``judge_score`` is what
    scripted judges score; ``junk_every`` > 0 makes every n-th answer junk, to exercise the
    skip-and-count paths."""

    name = "summarizer"

    def __init__(self, judge_score: float = 0.8, junk_every: int = 0):
        self.judge_score = judge_score
        self.junk_every = junk_every
        self._count = itertools.count(1)

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        messages = body.get("messages") or []
        system = _text_of(messages[0].get("content")) if messages else ""
        user = _text_of(messages[-1].get("content")) if messages else ""
        if self.junk_every and next(self._count) % self.junk_every == 0:
            return Reply(content="I think the agent did fine.")
        for script in scripted_answers():
            try:
                fields = script.answer(system, user, body, self)
            except ValueError as exc:  # a request of the method's that its script refuses
                raise PolicyError(str(exc)) from exc
            if fields is not None:
                return Reply(**fields)
        if structured_request(body):  # other methods' schemas (LangMem's optimizer, A-Mem)
            return Reply(**self.fill(body))
        raise PolicyError("the summarizer script does not know this prompt")

    @staticmethod
    def fill(body: dict[str, Any], topic_from: str | None = None) -> dict[str, Any]:
        """The fields of a reply satisfying the request's schema or forced tool (for scripts)."""
        content, calls = structured_answer(body, topic_from=topic_from)
        return {"content": content, "tool_calls": calls, "raw": True}


class CheckPolicy:
    """What a model that does as asked would answer `reme check`'s probes (run/probes.py): a
    call of every offered tool the last user message names (one reply, as parallel calls; one
    call only when ``parallel_tool_calls`` is false), Python in a fenced block when asked for
    code, else one sentence."""

    name = "check"

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        messages = body.get("messages") or []
        asked = _text_of(messages[-1].get("content")) if messages else ""
        if any(m.get("role") == "tool" for m in messages):
            return Reply(content="It is sunny in Paris.")
        offered = [t["function"]["name"] for t in body.get("tools") or [] if isinstance(t, dict) and "function" in t]
        named = [n for n in offered if n in asked and "Without calling" not in asked]
        if named:
            calls = named if body.get("parallel_tool_calls") is not False else named[:1]
            return Reply(tool_calls=[(n, {"city": "Paris"}) for n in calls])
        if "```python" in asked:
            return Reply(content="```python\nprint(2 + 3)\n```")
        return Reply(content="The capital of France is Paris.")


class AgentAndSummarizerPolicy:
    """Replay for the agent's requests (they carry the task header), the summarizer script
    for the rest: one server for ``summarizer=same``."""

    def __init__(self, agent: Policy, summarizer: Policy):
        self.agent, self.summarizer = agent, summarizer
        self.name = f"{agent.name}+summarizer"

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        policy = self.agent if headers.get(TASK_HEADER) else self.summarizer
        return policy.reply(body, headers)


# ------------------------------------------------------------------ faults


# The message vLLM sends (HTTP 400) when prompt + max_tokens outgrow the context.
CONTEXT_OVERFLOW_MESSAGE = ("This model's maximum context length is 32768 tokens. However, you requested "
                            "33792 tokens (29696 in the messages, 4096 in the completion). Please reduce the "
                            "length of the messages or completion.")


class FaultPolicy:
    """Wraps a policy and breaks chosen tasks the way real servers do: ``overflow`` tasks
    get vLLM's context-length 400 from turn ``overflow_turn`` on; ``truncate`` tasks get a
    reply cut off by ``max_tokens`` (``finish_reason: "length"``, inside ``<think>``)."""

    def __init__(self, inner: Policy, overflow: Iterable[str] = (), truncate: Iterable[str] = (),
                 overflow_turn: int = 1):
        self.inner = inner
        self.name = inner.name
        self.overflow, self.truncate = set(overflow), set(truncate)
        self.overflow_turn = overflow_turn

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        task_id = headers.get(TASK_HEADER)
        if task_id in self.overflow and conversation_position(body.get("messages") or [])[0] >= self.overflow_turn:
            raise PolicyError(CONTEXT_OVERFLOW_MESSAGE)
        if task_id in self.truncate:
            return Reply(content="<think>Let me think about which function to call first, and",
                         finish_reason="length")
        return self.inner.reply(body, headers)


# ------------------------------------------------------------------- embeddings

SCRIPTED_EMBEDDING_DIM = 8  # when a request names no dimensions


def scripted_vector(model: str, text: str, dimensions: int = SCRIPTED_EMBEDDING_DIM) -> list[float]:
    """A fixed pseudo-random vector for (model, text, dimensions): not a meaning, an identity."""
    out: list[float] = []
    block = 0
    while len(out) < dimensions:
        digest = hashlib.sha256(f"{model}\0{dimensions}\0{text}\0{block}".encode()).digest()
        out.extend(b / 127.5 - 1.0 for b in digest)
        block += 1
    return out[:dimensions]


def _embeddings(body: dict[str, Any]) -> dict[str, Any]:
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise PolicyError("'input' must be a string or a list of strings")
    model = str(body.get("model") or "scripted")
    dims = body.get("dimensions") or SCRIPTED_EMBEDDING_DIM
    rows = []
    for i, text in enumerate(texts):
        vec = scripted_vector(model, text, int(dims))
        embedding: Any = vec
        if body.get("encoding_format") == "base64":
            embedding = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
        rows.append({"object": "embedding", "index": i, "embedding": embedding})
    tokens = sum(max(1, len(t) // 4) for t in texts)
    return {"object": "list", "data": rows, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


# ----------------------------------------------------------------------- server


def _completion(body: dict[str, Any], reply: Reply, turn_id: int) -> dict[str, Any]:
    json_protocol = body.get("response_format") is not None
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    finish = "stop"
    if reply.finish_reason == "length":  # cut off mid-reply: the text is all there is
        message["content"] = reply.content or ""
    elif reply.raw and not reply.tool_calls:
        message["content"] = reply.content
    elif json_protocol and not reply.raw:
        payload: dict[str, Any] = {
            "tool_calls": [{"name": n, "arguments": a} for n, a in reply.tool_calls]
        }
        if not reply.tool_calls:
            payload["answer"] = reply.content if reply.content is not None else DONE_TEXT
        message["content"] = json.dumps(payload)
    elif reply.tool_calls:
        # Ids from what was asked, not from the server's count: a resumed run, asking the same
        # again, gets the same ids (and so the same token counts) as an uninterrupted one.
        asked = hashlib.sha256(json.dumps(body.get("messages", []), sort_keys=True).encode()).hexdigest()[:10]
        message["tool_calls"] = [
            {
                "id": f"call_{asked}_{i}",
                "type": "function",
                "function": {"name": n, "arguments": json.dumps(a)},
            }
            for i, (n, a) in enumerate(reply.tool_calls)
        ]
        finish = "tool_calls"
    finish = reply.finish_reason or finish
    # Rough token counts (4 characters ~ 1 token): enough for the harness's bookkeeping.
    prompt_tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
    completion_tokens = max(1, len(json.dumps(message)) // 4)
    return {
        "id": f"chatcmpl-scripted-{turn_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# ------------------------------------------------------------------ a provider's rules


@dataclass
class Provider:
    """DashScope's compatible mode as reme meets it (a TEST DOUBLE's rules, not the service)."""

    api_key: str = "sk-scripted-provider-key"
    rate_limit_every: int = 0  # every n-th chat request: 429 with Retry-After (0: never)
    retry_after: str = "1"
    cut_streams: int = 0  # the first n streamed answers break off after a few chunks
    piece: int | None = 7  # characters per streamed piece (None: each field whole)
    fingerprint: str | None = None
    headers: dict[str, str] | None = None  # sent with every answer (a provider's x-ratelimit-* headers)
    rate_limit_rps: int = 0  # chat requests admitted per clock second; the rest get 429 (0: no limit)
    # clock second -> [admitted, throttled] chat requests (rate_limit_rps's count)
    per_second: dict[int, list[int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def refusal(self, body: dict[str, Any], headers: Mapping[str, str], count: int) -> tuple[int, dict, dict] | None:
        """(status, error body, headers) when the provider refuses the request, else None."""
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, _err("Invalid API-key provided.", "invalid_request_error", "invalid_api_key"), {}
        # _over_rate() first: it counts every request in its clock second, refused or not.
        if self._over_rate() or (self.rate_limit_every and count % self.rate_limit_every == 0):
            return 429, _err("Requests rate limit exceeded, please try again later.", "Throttling.RateQuota",
                             "Throttling.RateQuota"), {"Retry-After": self.retry_after}
        if body.get("enable_thinking") is True and not body.get("stream"):
            return 400, _err("parameter.enable_thinking must be set to false for non-streaming calls",
                             "invalid_request_error", "invalid_parameter_error"), {}
        return None

    def _over_rate(self) -> bool:
        """Count this request in its clock second; True past ``rate_limit_rps`` in it."""
        second = int(time.time())
        with self._lock:
            counts = self.per_second.setdefault(second, [0, 0])
            over = bool(self.rate_limit_rps) and counts[0] >= self.rate_limit_rps
            counts[over] += 1
        return over


def _err(message: str, kind: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


def _pieces(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    return [text] if not size else [text[i:i + size] for i in range(0, len(text), size)]


def stream_chunks(completion: dict[str, Any], piece: int | None, include_usage: bool) -> list[dict[str, Any]]:
    """A completion as the chunks of its stream: the same message, in pieces of ``piece``
    characters (None: each field whole), ``usage`` last when asked for."""
    message = completion["choices"][0]["message"]
    base = {k: completion[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    if completion.get("system_fingerprint"):
        base["system_fingerprint"] = completion["system_fingerprint"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": p}) for p in _pieces(message.get("reasoning_content") or "", piece)]
    out += [chunk({"content": p}) for p in _pieces(message.get("content") or "", piece)]
    pending: list[dict[str, Any]] = []  # a call's last piece goes out with the next call's first
    for i, call in enumerate(message.get("tool_calls") or []):
        args = _pieces(call["function"]["arguments"], piece) or [""]
        first = {"index": i, "id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": args[0]}}
        out.append(chunk({"tool_calls": [*pending, first]}))
        pending = []
        rest = [{"index": i, "function": {"arguments": a}} for a in args[1:]]
        out += [chunk({"tool_calls": [r]}) for r in rest[:-1]]
        pending = rest[-1:] if piece else []
    if pending:
        out.append(chunk({"tool_calls": pending}))
    out.append(chunk({}, completion["choices"][0]["finish_reason"]))
    if include_usage:
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    provider: Provider | None = None
    refuse_chat: bool = False
    max_model_len: int | None = None  # reported in /v1/models, as vLLM does
    embedding_faults: list[int]  # statuses for the next embedding requests, first to last
    max_embedding_inputs: int | None = None
    policy: Policy
    delay: float
    requests: list[dict[str, Any]]
    counter: itertools.count
    lock: threading.Lock

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer (a run stopped by Ctrl-C) is normal, as for a
        # real server: no traceback on stderr, where it reads like a failure of the client.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: client connection reuse like a real server
    # Headers and body go out in separate writes; with Nagle on, keep-alive clients wait
    # ~40 ms for a delayed ACK on every request, which would swamp harness benchmarks.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def _send(self, status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(
            status, {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        )

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        elif path == "/scripted/stats" and isinstance(self.server.provider, Provider):
            with self.server.provider._lock:
                counts = {str(k): list(v) for k, v in self.server.provider.per_second.items()}
            self._send(200, {"per_second": counts, "rate_limit_rps": self.server.provider.rate_limit_rps})
        elif path == "/v1/models" and self.server.provider is not None:
            # A provider need not list its models: reme must not depend on it.
            self._error(404, "no model list here (a provider's compatible mode need not have one)")
        elif path == "/v1/models":
            model = {
                "id": f"scripted-{self.server.policy.name}",
                "object": "model",
                "created": 0,
                "owned_by": "reme-testing",
            }
            if self.server.max_model_len:
                model["max_model_len"] = self.server.max_model_len
            self._send(200, {"object": "list", "data": [model]})
        else:
            self._error(404, f"no route for GET {path}")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/embeddings":
            self._embed(raw, path)
            return
        if path != "/v1/chat/completions":
            self._error(404, f"no route for POST {path}")
            return
        if self.server.refuse_chat:  # a dying server: hang up without an answer
            self.close_connection = True
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._error(400, "the request body is not valid JSON")
            return
        if not isinstance(body, dict):
            self._error(400, "the request body must be a JSON object")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append({"path": path, "body": body, "headers": headers})
        provider = self.server.provider
        with self.server.lock:
            count = self.server.chat_count = self.server.chat_count + 1
        if provider is not None and (refused := provider.refusal(body, headers, count)) is not None:
            status, payload, extra = refused
            self._send(status, payload, extra)
            return
        try:
            reply = self.server.policy.reply(body, self.headers)
        except PolicyError as exc:
            self._error(400, str(exc))
            return
        if provider is not None and reply.reasoning is None and body.get("enable_thinking") is True:
            # A thinking answer starts with its reasoning; the same for the same request.
            reply.reasoning = f"Thinking about step {sum(m.get('role') == 'assistant' for m in body['messages'])}."
        if self.server.delay > 0:
            time.sleep(self.server.delay)
        completion = _completion(body, reply, next(self.server.counter))
        if provider is not None and provider.fingerprint:
            completion["system_fingerprint"] = provider.fingerprint
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(stream_chunks(completion, provider.piece if provider else None, include_usage))
        else:
            self._send(200, completion, provider.headers if provider else None)

    def _stream(self, chunks: list[dict[str, Any]]) -> None:
        """Server-sent events, chunked; the first ``cut_streams`` streams stop midway and hang up."""
        provider = self.server.provider
        cut = False
        if provider is not None and provider.cut_streams:
            with self.server.lock:
                cut = self.server.streams_cut < provider.cut_streams
                self.server.streams_cut += cut
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in ((provider.headers if provider else None) or {}).items():
            self.send_header(name, value)
        self.end_headers()
        events = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
        for i, event in enumerate(events):
            if cut and i >= max(1, len(events) // 2):
                self.close_connection = True
                self.wfile.flush()
                return  # no last chunk: the client sees the body end early
            data = event.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


    def _embed(self, raw: bytes, path: str) -> None:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._error(400, "the request body is not valid JSON")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append({"path": path, "body": body, "headers": headers})
        with self.server.lock:
            fault = self.server.embedding_faults.pop(0) if self.server.embedding_faults else None
        if fault is not None:
            self._error(fault, f"scripted fault {fault}")
            return
        limit = self.server.max_embedding_inputs
        texts = body.get("input") if isinstance(body, dict) else None
        if limit and isinstance(texts, list) and len(texts) > limit:
            self._error(400, f"batch size is invalid, it should not be larger than {limit}")
            return
        try:
            self._send(200, _embeddings(body if isinstance(body, dict) else {}))
        except PolicyError as exc:
            self._error(400, str(exc))


class ScriptedServer:
    """TEST DOUBLE: serve ``policy`` on 127.0.0.1 from a background thread."""

    def __init__(self, policy: Policy, delay: float = 0.0, host: str = "127.0.0.1", port: int = 0,
                 refuse_chat: bool = False, max_model_len: int | None = None,
                 embedding_faults: Iterable[int] = (), max_embedding_inputs: int | None = None,
                 provider: Provider | None = None):
        self.policy = policy
        self._httpd = _Server((host, port), _Handler)
        self._httpd.provider = provider
        self._httpd.chat_count = 0
        self._httpd.streams_cut = 0
        self._httpd.refuse_chat = refuse_chat
        self._httpd.max_model_len = max_model_len
        self._httpd.embedding_faults = list(embedding_faults)
        self._httpd.max_embedding_inputs = max_embedding_inputs
        self._httpd.lock = threading.Lock()
        self._httpd.policy = policy
        self._httpd.delay = delay
        self._httpd.requests = []
        self._httpd.counter = itertools.count()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self._httpd.server_address[0]}:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat and embedding request received: ``{"path", "body", "headers"}``
        (header names lower-cased)."""
        return self._httpd.requests

    def start(self) -> ScriptedServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, name="scripted-server", daemon=True
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


BASE_POLICIES = ("fixed", "steps", "summarizer", "check")


def policy_names() -> list[str]:
    """The built-in policies and, for each registered replay policy, NAME and NAME+summarizer."""
    from reme_cli.core.registry import REPLAY_POLICIES

    return [*BASE_POLICIES, *(f"{n}{s}" for n in REPLAY_POLICIES.names() for s in ("", "+summarizer"))]


def make_policy(name: str, corrupt: Iterable[str] = (), text: str = "ok", steps: Iterable[str] = (),
                **options: Any) -> Policy:
    """A policy by name; ``options`` go to a replay policy's ``from_options`` (e.g. BFCL's
    ``heal_on_retry``, AppWorld's ``appworld_root``: the option names its plug-in declares)."""
    from reme_cli.core.registry import REPLAY_POLICIES

    if name == "fixed":
        return FixedPolicy(text)
    if name == "steps":
        return StepsPolicy(steps)
    if name == "summarizer":
        return ScriptedSummarizerPolicy()
    if name == "check":
        return CheckPolicy()
    base, plus, rest = name.partition("+")
    if REPLAY_POLICIES.has(base) and (not plus or rest == "summarizer"):
        replay = REPLAY_POLICIES.get(base)
        agent = replay.from_options(corrupt=corrupt, **options) if hasattr(replay, "from_options") else replay()
        return AgentAndSummarizerPolicy(agent, ScriptedSummarizerPolicy()) if plus else agent
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(policy_names())}")


def main(argv: list[str] | None = None) -> int:
    from reme_cli.core.registry import REPLAY_POLICIES

    parser = argparse.ArgumentParser(
        prog="python -m reme_cli.testing.scripted_server",
        description="TEST DOUBLE: OpenAI-compatible server answering from a script.",
    )
    parser.add_argument("--policy", choices=policy_names(), default="fixed")
    parser.add_argument("--text", default="ok", help="answer of the fixed policy")
    parser.add_argument("--step", action="append", default=[], metavar="TEXT",
                        help="the steps policy's next answer within an episode (repeat it)")
    parser.add_argument("--corrupt", nargs="+", action="extend", default=[], metavar="TASK_ID")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--overflow", nargs="+", action="extend", default=[], metavar="TASK_ID",
                        help="these tasks get vLLM's context-length 400 from their second turn on")
    parser.add_argument("--truncate", nargs="+", action="extend", default=[], metavar="TASK_ID",
                        help="these tasks get replies cut off by max_tokens")
    parser.add_argument("--refuse-chat", action="store_true",
                        help="answer /v1/models but hang up on every chat request (a dying server)")
    parser.add_argument("--max-model-len", type=int, help="report this context length in /v1/models")
    parser.add_argument("--embedding-fault", type=int, action="append", default=[], metavar="STATUS",
                        help="answer the next embedding request with this HTTP status (repeat it)")
    parser.add_argument("--max-embedding-inputs", type=int, help="refuse embedding requests with more texts")
    parser.add_argument("--provider", choices=["dashscope"], help="behave like this provider's compatible mode")
    parser.add_argument("--api-key", default=Provider.api_key, help="--provider: the key it accepts")
    parser.add_argument("--rate-limit-every", type=int, default=0, help="--provider: every n-th chat request is a 429")
    parser.add_argument("--retry-after", default="1", help="--provider: the 429's Retry-After")
    parser.add_argument("--cut-streams", type=int, default=0, help="--provider: break off the first n streams")
    parser.add_argument("--fingerprint", help="--provider: the system_fingerprint its answers carry")
    parser.add_argument("--rate-limit-rps", type=int, default=0,
                        help="--provider: chat requests admitted per clock second; the rest get 429")
    parser.add_argument("--stream-piece", type=int, default=7,
                        help="--provider: characters per streamed piece (0: each field in one chunk)")
    common = set(vars(parser.parse_args([])))  # the server's own options; the rest are the policies'
    replays = REPLAY_POLICIES.names()
    for replay in replays:  # each replay policy declares its own options (e.g. a data root)
        add_arguments = getattr(REPLAY_POLICIES.get(replay), "add_arguments", None)
        if add_arguments is not None:
            add_arguments(parser)
    args = parser.parse_args(argv)
    if args.corrupt and args.policy.partition("+")[0] not in replays:
        parser.error(f"--corrupt needs a replay policy ({', '.join(replays)})")
    options = {k: v for k, v in vars(args).items() if k not in common}
    try:
        policy = make_policy(args.policy, corrupt=args.corrupt, text=args.text, steps=args.step, **options)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.overflow or args.truncate:
        policy = FaultPolicy(policy, overflow=args.overflow, truncate=args.truncate)
    provider = Provider(args.api_key, args.rate_limit_every, args.retry_after, args.cut_streams,
                        piece=args.stream_piece or None, fingerprint=args.fingerprint,
                        rate_limit_rps=args.rate_limit_rps) if args.provider else None
    server = ScriptedServer(policy, delay=args.delay, port=args.port, refuse_chat=args.refuse_chat,
                            max_model_len=args.max_model_len, embedding_faults=args.embedding_fault,
                            max_embedding_inputs=args.max_embedding_inputs, provider=provider)
    print(server.base_url, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

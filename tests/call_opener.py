"""TEST DOUBLE in front of a real llama.cpp server: it opens the assistant's turn with a tool
call, because a 135M model does not decide to call on its own.

SmolLM2-135M served with Qwen3's chat template answers a request with tools in prose, and
llama.cpp's ``tool_choice: "required"`` does not stop it: the grammar its chat parser builds
(common/chat-auto-parser-generator.cpp) lets any text come before the first ``<tool_call>``,
so the model talks until ``max_tokens``. This proxy forwards every request to the server and
changes a chat request with tools in three ways only:

- ``tool_choice`` becomes ``"required"`` (unless the request names another than ``auto``):
  the server's grammar then holds the call to an offered tool with arguments of its schema;
- an assistant message opening with ``<tool_call>\\n`` is appended, which llama.cpp continues
  (``prefill_assistant``). No reasoning is opened: llama.cpp returns an opened
  ``reasoning_content`` in a whole answer but not in a streamed one, so the two paths would
  differ by what the proxy wrote, not by what the model or reme did;
- ``cache_prompt: false`` on every chat request, so a prompt is evaluated alike whatever the
  server answered before (a reused prefix changes greedy output beyond the first words).

Everything else is the real server's: Qwen3's template rendering the tools and the history,
the grammar, the parsing of ``<tool_call>`` blocks into native ``tool_calls`` (several per
reply), streaming them in pieces, usage and finish reasons.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

OPENED_CALL = "<tool_call>\n"


def opened(body: dict[str, Any]) -> dict[str, Any]:
    """The request as the server gets it (see the module's docstring)."""
    body = {**body, "cache_prompt": False}
    if not body.get("tools"):
        return body
    if body.get("tool_choice") in (None, "auto"):
        body["tool_choice"] = "required"
    body["messages"] = [*body["messages"], {"role": "assistant", "content": OPENED_CALL}]
    return body


class CallOpener:
    """``with CallOpener(upstream_base_url) as proxy:`` serves ``proxy.base_url`` on 127.0.0.1."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.bodies: list[dict[str, Any]] = []  # every chat request as it was sent to the server
        opener = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                with httpx.Client(timeout=60) as client:
                    resp = client.get(opener.upstream + self.path.removeprefix("/v1"))
                self._send(resp.status_code, resp.content, resp.headers.get("content-type", "application/json"))

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.rstrip("/").endswith("/chat/completions"):
                    body = opened(body)
                    opener.bodies.append(body)
                url = opener.upstream + self.path.removeprefix("/v1")
                with httpx.Client(timeout=600) as client, client.stream("POST", url, json=body) as resp:
                    if not body.get("stream"):
                        self._send(resp.status_code, resp.read(), resp.headers.get("content-type", "application/json"))
                        return
                    self.send_response(resp.status_code)
                    self.send_header("Content-Type", resp.headers.get("content-type", "text/event-stream"))
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for piece in resp.iter_raw():
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")

            def _send(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> CallOpener:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._thread.join(timeout=5)
        self._httpd.server_close()

"""`reme view DIR...` live: the page and a read-only JSON API over the runs, from the
standard library's threaded HTTP server (nothing to install, nothing fetched: ``reme view``
works on a cluster login node as it does on a laptop).

It serves ``GET`` only, from the runs it was given (the API names runs by id, never by
path). Bound to a loopback address, it answers only requests that name it by a loopback
host (``127.0.0.1``, ``localhost``, ``[::1]``), so a web page elsewhere cannot read the runs
through a DNS-rebinding name; ``--host`` to share it opens it to whoever can reach that
address (run records hold prompts and model output)."""

from __future__ import annotations

import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from reme_cli.core.errors import UserError
from reme_cli.core.hosts import is_loopback
from reme_cli.view.api import answer
from reme_cli.view.export import as_json
from reme_cli.view.page import render
from reme_cli.view.runs import Catalog


def _host_of(header: str) -> str:
    """The host part of a Host header ("127.0.0.1:8000", "[::1]:8000", "localhost")."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class ViewServer(ThreadingHTTPServer):
    daemon_threads = True  # Ctrl-C must not wait for a browser's open connection

    def __init__(self, catalog: Catalog, host: str, port: int):
        self.catalog = catalog
        self.loopback_only = is_loopback(host)
        self.page = render(None)
        super().__init__((host, port), Handler)

    def warm(self) -> None:
        """Compute the Overview before the URL is given out: the first page then opens at once."""
        answer(self.catalog, "index")

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in str(host) else host
        return f"http://{shown}:{port}/"


class Handler(BaseHTTPRequestHandler):
    server: ViewServer
    server_version = "reme-view"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # one line per request would bury the URL; errors are reported as they happen

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, as_json(data).encode(), "application/json; charset=utf-8")

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's naming)
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        if self.server.loopback_only and not is_loopback(_host_of(self.headers.get("Host", ""))):
            return self._json(403, {"error": "this reme view answers loopback names only (127.0.0.1, localhost)"})
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            return self._send(200, self.server.page.encode(), "text/html; charset=utf-8")
        if not path.startswith("/api/"):
            return self._json(404, {"error": f"no page {path}"})
        key = unquote(path.removeprefix("/api/"))
        try:
            return self._json(200, answer(self.server.catalog, key))
        except KeyError:
            return self._json(404, {"error": f"no such page: {key}"})
        except UserError as exc:  # a run damaged meanwhile: said, not a traceback
            return self._json(409, {"error": str(exc)})
        except Exception as exc:  # a bug: the page says so, the terminal gets the traceback
            traceback.print_exc(file=sys.stderr)
            return self._json(500, {"error": f"{type(exc).__name__}: {exc}"})

    def do_POST(self) -> None:  # noqa: N802
        self._json(405, {"error": "reme view only reads"})

    do_PUT = do_DELETE = do_PATCH = do_POST

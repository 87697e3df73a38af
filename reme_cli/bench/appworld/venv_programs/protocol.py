"""One JSON object per line, between reme and a program here, and between a program and the
process it forked for one episode (whose lines are untrusted: read with a size cap)."""

import json
import os
import select
import time


class Broken(Exception):
    """The other end went away, sent too much, broke the format, or did not answer in time:
    ``kind`` says which (eof, size, format, time)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def channel_to_reme():
    """(read, write) files of the reme channel. fd 1 becomes a copy of stderr (the log), so
    a stray print (AppWorld prints warnings) can never corrupt the protocol."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return os.fdopen(0, "r"), out


def warm_up_common(apis=True):
    """What every world opening (``apis``) or every evaluation pays on first use, paid once in
    the process that forks them: AppWorld and its apps imported, freezegun's scan of every
    loaded module cached (it runs whenever a world's clock is frozen), and pytest imported
    (AppWorld's test assertions import it lazily). A world serves the apps' APIs, whose
    modules build FastAPI routes (~2 s of CPU); an evaluation reads the saved databases
    through the apps' models alone, and would import an API module itself if it needed one."""
    import datetime

    from appworld.apps import get_all_apps
    from appworld.apps.api_lib import set_local_date_and_time, unset_local_date_and_time
    from appworld.common.utils import import_apis_module, import_models_module

    for app in get_all_apps():
        (import_apis_module if apis else import_models_module)(app)
    try:
        import pytest  # noqa: F401
    except ImportError:
        pass
    unset_local_date_and_time(set_local_date_and_time(datetime.datetime(2023, 5, 18)))


def undumpable():
    """PR_SET_DUMPABLE 0: no other process of the same user reads or writes this one's
    memory or file descriptors through /proc (nor is a core dumped); inherited by a fork."""
    import ctypes

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)


def reply(out, request_id, result=None, error=None):
    message = {"id": request_id}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    out.write(json.dumps(message) + "\n")
    out.flush()


def serve(handlers):
    """Answer reme's requests until it closes the channel: ``handlers`` maps each method to a
    callable taking the request's params. An exception is that request's error, and the
    program goes on."""
    requests, out = channel_to_reme()
    undumpable()  # another process of the same user (an episode's) may not reach into this one
    handlers = {"hello": lambda: {"pid": os.getpid()}, **handlers}
    for line in requests:
        request = json.loads(line)
        method, params = request.get("method"), request.get("params") or {}
        try:
            if method not in handlers:
                raise ValueError(f"unknown method {method!r}")
            result = handlers[method](**params)
        except Exception as exc:  # noqa: BLE001 - reme's error for this request
            reply(out, request.get("id"), error=f"{type(exc).__name__}: {exc}")
            continue
        reply(out, request.get("id"), result)


def send_line(fd, obj):
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


class LineReader:
    """Lines from ``fd``, each at most ``limit`` bytes, waiting at most until a deadline."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = b""

    def read(self, limit, deadline=None):
        while b"\n" not in self.buf:
            if len(self.buf) > limit:
                raise Broken("size", f"a line longer than {limit} bytes")
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                raise Broken("time", "no answer in time")
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise Broken("eof", "the other end closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        if len(line) > limit:
            raise Broken("size", f"a line longer than {limit} bytes")
        try:
            return json.loads(line)
        except ValueError:
            raise Broken("format", "not a JSON line") from None


def printable(text):
    """``text`` with what UTF-8 cannot hold (a lone surrogate, from ``print('\\udcff')``)
    written as its backslash escape: AppWorld writes each step to its log, and every reader
    after it encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


MARKER_ROOM = 64  # a cut text may exceed its limit by its marker; cutting it again changes nothing


def cut(text, limit):
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit + MARKER_ROOM:
        return text
    return text[:limit] + f"\n[truncated {len(text) - limit} chars]"

"""One JSON object per line, between reme and a program here, and between a program and the
process it forked for one episode (whose lines are untrusted: read with a size cap and a
deadline, and each checked against its schema, ``parse``)."""

import json
import os
import select
import time
import typing
from dataclasses import MISSING, dataclass, field, fields


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


def send_line(fd, obj, deadline=None):
    """``obj`` as one line; with a ``deadline`` (``fd`` non-blocking), ``Broken("time")`` if
    the other end has not taken it all by then."""
    data = (json.dumps(obj) + "\n").encode()
    while data:
        if deadline is not None:
            _, ready, _ = select.select([], [fd], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise Broken("time", "the other end took no more in time")
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            continue


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
            try:
                chunk = os.read(self.fd, 1 << 20)
            except ConnectionResetError:  # it closed with our last line unread
                chunk = b""
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


class Malformed(ValueError):
    """A message that is valid JSON but not what its schema says."""


def parse(schema, obj):
    """``obj`` (one decoded line) as the dataclass ``schema``: an object with its fields and no
    others, each of its type and, where a field's ``metadata`` has ``choices``, one of them;
    else ``Malformed``, saying what is wrong."""
    if not isinstance(obj, dict):
        raise Malformed(f"a {type(obj).__name__}, not an object")
    known = {f.name: f for f in fields(schema)}
    unknown = sorted(set(obj) - set(known))
    if unknown:
        raise Malformed(f"an unknown key {unknown[0][:40]!r}")
    hints = typing.get_type_hints(schema)
    for name, f in known.items():
        if name not in obj:
            if f.default is MISSING:
                raise Malformed(f"no {name!r}")
            continue
        value = obj[name]
        if not _of_type(value, hints[name]):
            raise Malformed(f"{name!r} is a {type(value).__name__}")
        choices = f.metadata.get("choices")
        if choices is not None and value is not None and value not in choices:
            raise Malformed(f"{name!r} is {str(value)[:40]!r}, not one of {', '.join(choices)}")
    return schema(**obj)


def _of_type(value, hint):
    allowed = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    if value is None or isinstance(value, bool):  # JSON's null and booleans are their own types
        return type(value) in allowed
    if isinstance(value, int) and float in allowed:
        return True
    return any(isinstance(value, t) for t in allowed if t not in (type(None), bool))


# What an episode's process says to its supervisor. Its model code may write anything on the
# channel, so each line is checked against one of these (``parse``) before it is used.
@dataclass(frozen=True)
class Opened:
    """The first line: the world opened (``cpu_s`` it took, and the CPU seconds at which
    RLIMIT_CPU ends the process, ``cpu_limit_s``), or not (``failed``: why). Sent before any
    model code runs."""

    cpu_s: float = 0.0
    cpu_limit_s: float = 0.0
    failed: typing.Optional[str] = None


@dataclass(frozen=True)
class StepDone:
    """One step's answer: its output, whether the task is done, whether the output was cut
    (``cut``), and a bound the step hit (``hit``)."""

    output: str
    done: bool = False
    cut: typing.Optional[str] = field(default=None, metadata={"choices": ("output",)})
    hit: typing.Optional[str] = field(default=None, metadata={"choices": ("memory", "disk")})


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

"""Every JSON and JSON-lines file reme reads back is read here, with care.

A file reme wrote may come back damaged: cut short by a kill or a full disk, edited by hand,
overwritten by another program, or made to hurt (a pool from elsewhere). Read here, such a
file costs one line, never a traceback:

- **bounded**: a document (or one line) larger than its kind's ``max_bytes`` is refused
  before it is parsed, one nested deeper than ``MAX_DEPTH`` once it is (``json``'s parser
  recurses once per level: 200,000 ``[`` is a RecursionError, and 900 levels would overflow
  the recursive readers after it);
- **decoded strictly** as UTF-8, line by line: random bytes appended to a file damage their
  own lines, not the reading of the file;
- **typed**: a kind's ``shape`` names the keys its readers rely on and the JSON types those
  must hold, checked at read time (``"embedding": 5`` is one line naming the file and key,
  not an AttributeError later);
- **a regular file or nothing**: a FIFO or a device is refused without a blocking read.

A damaged document is a ``Damaged`` error (a ``UserError``: one line naming the file, what is
wrong and what to do). A damaged line of a JSON-lines file is left out with one warning on
stderr naming ``file line N`` (the rest of the file still serves), or refused in one line
where the caller reads strictly (a pool whose records are counted and checked). A last line
that is cut short and began like a record is a write in progress or one a kill stopped: it is
left out silently, as the writers of ``core/io.py`` expect.

Every kind of file is declared once, as a ``JsonFile``, beside the code that owns it, and
the declaration registers it in ``FILES``: ``tests/core/test_damaged_files.py`` finds every
declaration in the source, imports it, and feeds every registered kind a nested, a
wrong-typed, a truncated and a binary-garbage variant. The same test fails on a
``json.load``/``json.loads`` anywhere else in reme that is not on its list of parsers of
text that never was a file (an LLM's answer, an HTTP body, a pipe message).
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Union

from reme_cli.core.errors import UserError, os_error_message

__all__ = ["FILES", "MAX_BYTES", "MAX_DEPTH", "Damaged", "JsonFile", "Shape", "new_command", "required_of", "shape_of",
           "warn", "wrong_key"]

# Deeper than anything reme writes (a unit record: a parsed call argument, at most 32 deep,
# inside a trajectory ~10 deep; a checker's details are cut at 8), and shallow enough that a
# recursive reader of what was parsed has stack to spare under Python's limit of 1000.
MAX_DEPTH = 128
# A document, or one line of a JSON-lines file: far above any manifest, pool or unit record
# (strings in a unit record are cut at eval.max_stored_chars), far below what fills memory.
MAX_BYTES = 256 * 1024 * 1024

# A JSON type: str, int (not bool), float (int or float, not bool), bool, dict, list or
# type(None); a key's shape is one or a tuple of them.
Shape = Mapping[str, Union[type, tuple[type, ...]]]

_WORDS = {str: "a string", int: "a whole number", float: "a number", bool: "true or false", dict: "an object",
          list: "a list", type(None): "null"}

FILES: dict[str, JsonFile] = {}  # every kind of JSON file reme reads back, by name (see JsonFile)


class Damaged(UserError):
    """A file (or one line of it) that is not what its kind says, as one line: ``where`` is
    the file or ``FILE line N``, ``why`` what is wrong with it."""

    def __init__(self, where: str, why: str, fix: str):
        super().__init__(f"{where} is damaged ({why}){'; ' + fix if fix else ''}")
        self.where, self.why = where, why


class _Bad(ValueError):
    """What is wrong with one document or line (then said with the file's name)."""


class _WrongShape(_Bad):
    """Whole JSON of the wrong shape: damage, never a line that is still being written."""


_warned: set[str] = set()


def warn(message: str) -> None:
    """One warning line on stderr, once per command (a viewer reads the same file often)."""
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


def new_command() -> None:
    """Each command says its warnings again (the CLI calls this as a command starts)."""
    _warned.clear()


@dataclass(frozen=True, eq=False)
class JsonFile:
    """One kind of JSON (``lines=False``) or JSON-lines file reme reads back, and how to read
    it. Declaring one registers it in ``FILES`` (its ``name`` is its key there)."""

    name: str  # the file as a reader would say it, e.g. "a run's trials.jsonl"
    fix: str  # what to do about a damaged one, e.g. "restore it from a copy, or rebuild the pool"
    shape: Shape = field(default_factory=dict)  # keys readers rely on -> the JSON types they hold
    required: tuple[str, ...] = ()  # keys every document (or line) has
    lines: bool = False  # JSON lines: one object per line
    top: type = dict  # a document's top level (a few foreign files are lists)
    max_bytes: int = MAX_BYTES  # a document's size, or one line's

    def __post_init__(self) -> None:
        FILES[self.name] = self

    # ---------------------------------------------------------------- documents

    def read(self, path: str | Path) -> Any:
        """The document at ``path``, checked against the shape; None if there is no file
        there; ``Damaged`` (one line) if it is not a regular file, not UTF-8, not JSON, too
        large, too deep or not of its shape. An unreadable one: the OS's reason, one line."""
        raw = self.read_bytes(path)
        if raw is None:
            return None
        try:
            return self.parse(raw)
        except _Bad as exc:
            raise Damaged(str(path), str(exc), self.fix) from None

    def read_bytes(self, path: str | Path) -> bytes | None:
        """The bytes of the file at ``path`` (None if there is none), if it is a regular file
        of at most ``max_bytes``; else ``Damaged``, or the OS's reason, in one line."""
        f = self._open(Path(path))
        if f is None:
            return None
        with f:
            raw = f.read(self.max_bytes + 1)
        if len(raw) > self.max_bytes:
            raise Damaged(str(path), f"larger than {self.max_bytes:,} bytes", self.fix)
        return raw

    def probe(self, path: str | Path) -> Any:
        """The document at ``path`` if it reads as JSON of the right top level, else None
        (missing, damaged, unreadable): for asking "is this one of ours?". Its values are
        not checked against the shape: compare them, never use them as a type."""
        try:
            raw = self.read_bytes(path)
            return None if raw is None else self._load(raw)
        except (UserError, _Bad, OSError):
            return None

    def parse(self, raw: str | bytes) -> Any:
        """One document's text (a file's, or a cache row's), checked; ``ValueError`` saying
        what is wrong."""
        data = self._load(raw)
        if isinstance(data, dict):
            why = wrong_key(data, self.shape, self.required)
            if why:
                raise _WrongShape(why)
        return data

    def _load(self, raw: str | bytes) -> Any:
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Bad(f"not UTF-8 text: byte {exc.start + 1} is {raw[exc.start:exc.start + 1]!r}") from None
        try:
            data = json.loads(raw)
        except RecursionError:  # json's parser recurses once per level, up to Python's limit
            raise _Bad(f"nested deeper than {MAX_DEPTH} levels") from None
        except json.JSONDecodeError as exc:
            where = f"column {exc.colno}" if self.lines else f"line {exc.lineno} column {exc.colno}"
            raise _Bad(f"not JSON: {exc.msg} at {where}") from None
        except ValueError as exc:  # an integer of more than 4,300 digits
            raise _Bad(f"not JSON: {_one_line(exc)}") from None
        if _too_deep(raw, data):
            raise _WrongShape(f"nested deeper than {MAX_DEPTH} levels")
        if not isinstance(data, self.top):
            raise _WrongShape(f"not {_WORDS[self.top]} but {_kind(data)}")
        return data

    def _open(self, path: Path) -> IO[bytes] | None:
        """``_open``, its refusals said in one line naming ``path``."""
        try:
            return _open(path)
        except _Bad as exc:
            raise Damaged(str(path), str(exc), self.fix) from None
        except OSError as exc:
            exc.filename = exc.filename or str(path)
            raise UserError(os_error_message(exc)) from None

    # ---------------------------------------------------------------- JSON lines

    def records(self, path: str | Path, strict: bool = False) -> list[dict[str, Any]]:
        """The whole, well-formed records of the JSON-lines file at ``path`` (none if there is
        no file there), in order; see ``numbered``."""
        return [rec for _, rec in self.numbered(path, strict)]

    def numbered(self, path: str | Path, strict: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line number, record) for every good line of ``path``. A damaged line (not UTF-8,
        not JSON, not an object, not of the shape, too long, too deep) is left out with one
        warning for the file; ``strict``: refused instead (``Damaged``, one line). A last
        line that was cut short while being written is left out silently (strict: refused)."""
        path = Path(path)
        f = self._open(path)
        if f is None:
            return
        damaged: list[tuple[int, str]] = []
        with f:
            for number, raw in enumerate(_lines(f, self.max_bytes), 1):
                if raw is None:
                    why = f"longer than {self.max_bytes:,} bytes"
                elif not raw.strip():
                    continue
                else:
                    try:
                        yield number, self.parse(raw)
                        continue
                    except _Bad as exc:
                        if not strict and _torn(raw) and not isinstance(exc, _WrongShape):
                            continue
                        why = str(exc)
                if strict:
                    raise Damaged(f"{path} line {number}", why, self.fix)
                damaged.append((number, why))
        if damaged:
            (first, why), more = damaged[0], len(damaged) - 1
            warn(f"{path} line {first}: {why}; left out" + (f", with {more} more damaged line{'s' * (more > 1)} "
                                                               f"(the last: line {damaged[-1][0]})" if more else ""))


def _open(path: Path) -> IO[bytes] | None:
    """``path`` opened for reading if it is a regular file; None if there is nothing there.
    Opened without blocking: a FIFO would wait for a writer forever, /dev/zero never end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _Bad("a folder, not a file" if stat.S_ISDIR(mode) else "not a regular file (a device, FIFO or socket)")
    return os.fdopen(fd, "rb")


def _lines(f: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """Each line of ``f`` (None for one longer than ``limit``: read past, never held)."""
    while raw := f.readline(limit + 1):
        if len(raw) > limit and not raw.endswith(b"\n"):
            while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield None
        else:
            yield raw


def _torn(raw: bytes) -> bool:
    """A last line (no newline after it) that began like a record: cut while being written."""
    return not raw.endswith(b"\n") and raw.lstrip().startswith(b"{")


def _too_deep(text: str, data: Any) -> bool:
    """Whether ``data`` (parsed from ``text``) nests lists and objects deeper than
    ``MAX_DEPTH``: walked a level at a time (no recursion), and only when ``text`` holds more
    openers than that (a unit record's ~150 cost a tenth of its parsing)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # the common case, at C speed
        return False
    level = [data]
    for _ in range(MAX_DEPTH):
        level = [v for c in level for v in (c.values() if type(c) is dict else c) if type(v) in (dict, list)]
        if not level:
            return False
    return True


def _kind(value: Any) -> str:
    for t in (bool, int, float, str, dict, list, type(None)):
        if isinstance(value, t):
            return _WORDS[t]
    return type(value).__name__


def _one_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _fits(value: Any, want: tuple[type, ...]) -> bool:
    for t in want:
        if t is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return True
        elif t is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return True
        elif isinstance(value, t):
            return True
    return False


def wrong_key(data: Mapping[str, Any], shape: Shape, required: tuple[str, ...] = ()) -> str | None:
    """What is wrong with ``data`` against ``shape`` (a required key missing, a key holding
    the wrong JSON type), as words naming the key; None if nothing is."""
    for key in required:
        if key not in data:
            return f"no {key!r}"
    for key, want in shape.items():
        if key in data:
            kinds = want if isinstance(want, tuple) else (want,)
            if not _fits(data[key], kinds):
                return (f"{key}={_short(data[key])} is not " + " or ".join(_WORDS[k] for k in kinds)
                        + f" but {_kind(data[key])}")
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def shape_of(cls: type, nullable: bool = False) -> dict[str, tuple[type, ...]]:
    """The JSON types of a dataclass's fields (``X | None`` allows null; ``Any`` and
    annotations with no JSON type are left out); ``nullable``: null is allowed everywhere."""
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[type, ...]] = {}
    for f in dataclasses.fields(cls):
        kinds = _json_types(hints[f.name])
        if kinds:
            out[f.name] = (*kinds, type(None)) if nullable and type(None) not in kinds else kinds
    return out


def required_of(cls: type) -> tuple[str, ...]:
    """The fields of a dataclass that have no default: the keys every record of it holds."""
    return tuple(f.name for f in dataclasses.fields(cls)
                 if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


def _json_types(hint: Any) -> tuple[type, ...]:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        parts = [_json_types(a) for a in typing.get_args(hint)]
        return () if any(not p for p in parts) else tuple(t for p in parts for t in p)
    base = origin or hint
    if base is type(None):
        return (type(None),)
    for t in (bool, int, float, str):
        if base is t:
            return (t,)
    if isinstance(base, type) and issubclass(base, Mapping):
        return (dict,)
    if base in (list, tuple):
        return (list,)
    return ()

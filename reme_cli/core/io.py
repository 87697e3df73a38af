"""Durable file writes shared by run records, event logs and pools.

Whole lines, then one fsync: a crash leaves only whole lines behind (a torn last line is
cut on reopen), and a JSON file is replaced atomically or not at all.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

_append_lock = threading.Lock()


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)  # never leave a half-written temp file behind
        if exc.errno in (errno.ENOSPC, errno.EDQUOT) and _overwrite_in_place(path, text):
            return
        exc.filename = exc.filename or str(path)  # a failed write() names no file
        raise


def _overwrite_in_place(path: Path, text: str) -> bool:
    """A full disk has no room for a new file, but an existing one's blocks can take text
    that fits them (a manifest saying "interrupted"). Not atomic: only when nothing else can
    be written at all."""
    data = text.encode()
    try:
        st = path.stat()
        if len(data) > st.st_blocks * 512:
            return False
        with open(path, "r+b") as f:
            f.write(data)
            f.truncate(len(data))
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        return False
    return True


def append_lines(path: Path, records: list[dict[str, Any]]) -> None:
    """Append JSON lines durably: whole lines, then one fsync."""
    text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
    try:
        with _append_lock, open(path, "a") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        exc.filename = exc.filename or str(path)  # a failed write() names no file
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None where it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The whole JSON lines of a file (none if it does not exist); a torn last line, left by
    a crash mid-append, is skipped so that its work is simply redone."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def keep_units(path: Path, finished_units: set[str]) -> list[dict[str, Any]]:
    """Drop (atomically) the lines of units that never finished from a unit-keyed JSON-lines
    log, and return the rest in order: a resumed stream replays only what was committed."""
    kept = [r for r in read_lines(path) if r.get("unit") in finished_units]
    if path.exists():
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as f:
            f.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in kept)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return kept

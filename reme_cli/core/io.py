"""Durable file writes shared by run records, event logs and pools.

Whole lines, then one fsync: a crash leaves only whole lines behind (a torn last line is
cut on reopen), and a JSON file is replaced atomically or not at all. What is written here
is read back through ``core/reading.py``.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reme_cli.core.reading import JsonFile

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


def keep_units(kind: JsonFile, path: Path, finished_units: set[str]) -> list[dict[str, Any]]:
    """Drop (atomically) the lines of units that never finished from a unit-keyed JSON-lines
    log of ``kind``, and return the rest in order: a resumed stream replays only what was
    committed (a damaged line was left out of it with a warning, and is dropped too)."""
    kept = [r for r in kind.records(path) if r.get("unit") in finished_units]
    if path.exists():
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as f:
            f.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in kept)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return kept

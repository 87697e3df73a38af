"""Durable file writes shared by run records, event logs and pools.

Whole lines, then one fsync: a crash leaves only whole lines behind (a torn last line is
cut on reopen), and a JSON file is replaced atomically or not at all.
"""

from __future__ import annotations

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
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, ensure_ascii=False, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def append_lines(path: Path, records: list[dict[str, Any]]) -> None:
    """Append JSON lines durably: whole lines, then one fsync."""
    text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
    with _append_lock, open(path, "a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())

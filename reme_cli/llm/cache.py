"""On-disk cache of chat responses, keyed by everything that determines a response.

Reruns and resumes then replay exactly (same seed, same messages -> same answer), and a
crashed run costs no LLM time for what it already asked. SQLite gives atomic writes and
safe sharing between concurrent processes without a server.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from reme_cli.core.errors import RunAborted, UserError
from reme_cli.core.reading import JsonFile, warn, wrong_key

_TEXT = (str, type(None))
# What the client stores per response (llm/client.py ``_record_from_response``).
ENTRY = JsonFile("a response cache entry", fix="it is asked again", required=(
    "content", "tool_calls", "prompt_tokens", "completion_tokens"), shape={
    "content": str, "tool_calls": list, "prompt_tokens": int, "completion_tokens": int, "latency_s": float,
    "reasoning": _TEXT, "finish_reason": _TEXT, "model": _TEXT, "system_fingerprint": _TEXT})
_CALL = {"id": str, "name": str, "arguments": str}


def request_key(request: dict[str, Any]) -> str:
    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection, used only from the event-loop thread; lookups take microseconds.
        try:
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT)")
        except sqlite3.Error as exc:
            raise UserError(self._unusable(exc)) from None

    def _unusable(self, exc: Exception) -> str:
        return (f"the response cache {self.path} is unusable ({exc}); move it away (it refills as the "
                "run goes) or run with llm.cache=false")

    def get(self, key: str) -> dict[str, Any] | None:
        """The response stored for ``key``; None if there is none, or if its entry is damaged
        (a warning: the request is sent again, and its answer replaces the entry)."""
        try:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:  # damaged after it opened: stop, not a unit's error
            raise RunAborted(self._unusable(exc) + "; then rerun the same command to resume") from None
        if row is None:
            return None
        try:
            if not isinstance(row[0], (str, bytes)):
                raise ValueError(f"not text but {type(row[0]).__name__}")
            entry = ENTRY.parse(row[0])
            for call in entry["tool_calls"]:
                if not isinstance(call, dict) or set(call) != set(_CALL) or wrong_key(call, _CALL):
                    raise ValueError(f"a tool call is not {{id, name, arguments}}: {str(call)[:60]}")
        except ValueError as exc:
            warn(f"the response cache {self.path}: the entry {key[:16]} is damaged ({exc}); {ENTRY.fix}")
            return None
        return entry

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)",
                (key, json.dumps(value, ensure_ascii=False)),
            )
        except sqlite3.Error as exc:
            raise RunAborted(self._unusable(exc) + "; then rerun the same command to resume") from None

    def close(self) -> None:
        self._db.close()

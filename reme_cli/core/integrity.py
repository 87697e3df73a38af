"""What a pool holds, recorded in its manifest and checked on load.

Every pool writer records its data files with ``record`` (sha256, size, line count) and
every loader calls ``verify``: a file that was emptied, cut short or swapped since the
save is refused in one line instead of being used as a smaller (or empty) pool.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable

from reme_cli.core.errors import UserError

_TEXT = {".jsonl", ".json", ".txt"}


def describe(path: Path) -> dict[str, Any]:
    h = hashlib.sha256()
    size = lines = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            size += len(block)
            lines += block.count(b"\n")
    return {"sha256": h.hexdigest(), "bytes": size, "lines": lines}


def record(directory: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    return {name: describe(directory / name) for name in names}


def damage(directory: Path, recorded: dict[str, Any], names: Iterable[str]) -> str | None:
    """How the first of ``names`` disagrees with its record, or None if all agree.

    A record may be a bare sha256 string (manifests written before line counts were kept).
    """
    for name in names:
        want = recorded.get(name)
        if want is None:
            return f"its manifest has no record of {name}"
        if isinstance(want, str):
            want = {"sha256": want}
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        have = describe(path)
        if have["sha256"] == want.get("sha256"):
            continue
        # Say how it differs in the terms a reader can check: lines of a text file, else bytes.
        if path.suffix in _TEXT and "lines" in want and have["lines"] != want["lines"]:
            return f"{name} has {have['lines']} lines, its manifest records {want['lines']}"
        if "bytes" in want and have["bytes"] != want["bytes"]:
            return f"{name} has {have['bytes']} bytes, its manifest records {want['bytes']}"
        return f"{name} differs from what was saved (sha256 mismatch)"
    return None


def verify(directory: Path, recorded: Any, names: Iterable[str], fix: str) -> None:
    """Refuse (UserError) a pool whose files disagree with what its manifest recorded."""
    if not isinstance(recorded, dict):
        raise UserError(f"pool {directory} is damaged: its manifest records no files; {fix}")
    problem = damage(directory, recorded, names)
    if problem:
        raise UserError(f"pool {directory} is damaged: {problem}; {fix}")


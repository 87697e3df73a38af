"""Where a memory method's pool is: ``memory.pool`` names the pool directory or the
``reme build-pool`` output directory holding it (``DIR/pool``). Methods whose pool manifest
names them share these two helpers."""

from __future__ import annotations

import json
from pathlib import Path

from reme_cli.core.errors import UserError

MANIFEST = "manifest.json"


def names_method(path: Path, method: str) -> bool:
    """Whether ``path`` holds a pool whose manifest names ``method``."""
    try:
        return json.loads((path / MANIFEST).read_text()).get("method") == method
    except (OSError, ValueError):
        return False


def find_pool(path: str | Path, method: str, label: str) -> Path:
    """The pool of ``method`` at ``path`` or ``path/pool``; else one line on how to make one."""
    p = Path(path)
    for candidate in (p / "pool", p):
        if names_method(candidate, method):
            return candidate
    raise UserError(f"memory.pool={path} is not {label}: build one with "
                    f"`reme build-pool memory={method}` and give its output directory")

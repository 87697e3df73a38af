"""Where a memory method's pool is: ``memory.pool`` names the pool directory or the
``reme build-pool`` output directory holding it (``DIR/pool``). Methods whose pool manifest
names them share these helpers; ``is_pool`` says whether a folder holds a pool reme wrote."""

from __future__ import annotations

from pathlib import Path

from reme_cli.core.errors import UserError
from reme_cli.core.run_log import POOL_HEADER

MANIFEST = "manifest.json"


def names_method(path: Path, method: str) -> bool:
    """Whether ``path`` holds a pool whose manifest names ``method``."""
    return (POOL_HEADER.probe(path / MANIFEST) or {}).get("method") == method


def find_pool(path: str | Path, method: str, label: str) -> Path:
    """The pool of ``method`` at ``path`` or ``path/pool``; else one line on how to make one."""
    p = Path(path)
    for candidate in (p / "pool", p):
        if names_method(candidate, method):
            return candidate
    raise UserError(f"memory.pool={path} is not {label}: build one with "
                    f"`reme build-pool memory={method}` and give its output directory")


def is_pool(directory: Path) -> bool:
    """Whether ``directory`` holds a pool reme wrote (a manifest of one of reme's pool formats,
    or one its method says it wrote: ``Memory.wrote_pool``), i.e. one build-pool may replace."""
    manifest = POOL_HEADER.probe(directory / MANIFEST)
    if manifest is None:
        return False
    if str(manifest.get("format", "")).startswith("reme-"):
        return True
    from reme_cli.methods.base import find_method

    plugin = find_method(manifest.get("method"))
    return plugin is not None and plugin.wrote_pool(manifest)

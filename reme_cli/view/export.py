"""`reme view DIR... --export FILE.html`: the page with every answer it can ask for inside it,
one file to attach or archive (no server, no network: it opens from disk).

Each answer is stored as its own JSON text and parsed when the page first shows it, so a
1,800-unit run opens without building every unit's trajectory first. The file is written
beside its target and renamed over it at the end: an interrupted export leaves nothing half
written, and only a file reme wrote as an export is replaced."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Callable

from reme_cli.core.errors import UserError
from reme_cli.view.api import answer, every_key
from reme_cli.view.page import GENERATOR, render
from reme_cli.view.runs import Catalog


def as_json(value: object) -> str:
    """JSON text the page's ``JSON.parse`` reads: a NaN or infinity (no JSON) becomes null."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, allow_nan=False)


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _ours(path: Path) -> bool:
    """Whether ``path`` is a file an earlier ``reme view --export`` wrote (its head says so)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return GENERATOR in f.read(4096)
    except OSError:
        return False


def check_target(path: Path) -> None:
    if path.is_dir():
        raise UserError(f"--export {path} is a directory; give a file name, e.g. {path / 'view.html'}")
    if path.exists() and not _ours(path):
        raise UserError(f"--export {path} exists and is not a page `reme view` wrote; choose another file, "
                        "or move that one away")
    if not path.parent.is_dir():
        raise UserError(f"--export {path}: the folder {path.parent} does not exist")


def export(catalog: Catalog, path: Path, progress: Callable[[int, int], None] | None = None) -> int:
    """Write the page with every answer to ``path``; returns its size in bytes."""
    check_target(path)
    keys = every_key(catalog)
    data: dict[str, str | object] = {}
    for i, key in enumerate(keys):
        value = answer(catalog, key, live=False)
        data[key] = value if key == "index" else as_json(value)
        if progress:
            progress(i + 1, len(keys))
    html = render(data).encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as an ordinary new file (mkstemp's are private)
        with os.fdopen(fd, "wb") as f:
            f.write(html)
            f.flush()
            os.fsync(f.fileno())
        check_target(path)  # a file someone put there meanwhile is not replaced either
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(html)

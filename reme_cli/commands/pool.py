"""`reme pool import|stats|show`: pools as files a researcher can inspect.

What reads a ReMe pool lives with ReMe (``reme_cli.methods.reme.pool_commands``); here stay
the import (it writes under a run-layer lock) and the routing of a pool to its method.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reme_cli.core.config import Config
from reme_cli.core.errors import UserError
from reme_cli.core.io import read_lines
from reme_cli.core.staging import clean_stale, replace_dir
from reme_cli.run.lock import DirLock
from reme_cli.methods.reme import pool_commands as reme_pool
from reme_cli.methods.reme.official import import_official
from reme_cli.llm.embed import check_key_for, make_embedder_for
from reme_cli.methods.reme.method import _other_method
from reme_cli.methods.reme.pool_commands import list_released

__all__ = ["import_pool", "list_released", "show_pool", "show_stats"]


def import_pool(source: str | Path, out: Path, cfg: Config, console: Console) -> Path:
    if cfg.memory.name != "reme":
        raise UserError(f"`reme pool import` makes ReMe pools from the ReMe authors' released files; "
                        f"drop memory={cfg.memory.name}")
    check_key_for(cfg)
    with DirLock(out):
        if out.exists():
            raise UserError(f"{out} already exists; choose another --out or delete it")
        clean_stale(out, "importing")  # left by a killed earlier import to the same --out
        # Built beside the target and renamed at the end: a failed import leaves nothing at --out.
        pool = replace_dir(out, lambda staging: import_official(source, staging, make_embedder_for(cfg),
                                                                retrieval_key=cfg.memory.retrieval_key),
                           kind="importing")
    report = pool.built_by["import"]
    by_source = ", ".join(f"{n} {s}" for s, n in sorted(report["by_source"].items()))
    console.print(f"imported {report['imported']} experiences ({by_source}) from {source}; "
                  f"skipped {report.get('skipped', 0)} line(s)")
    return out


def _method_of(path: Path) -> str | None:
    """The memory method of another method's pool at ``path`` (or its ``pool/``); None: ReMe's."""
    return next(filter(None, (_other_method(p / "manifest.json") for p in (path, path / "pool"))), None)


def _refuse_other(path: Path, command: str) -> None:
    """Whatever memory= says: these commands read ReMe pools (and stats A-Mem's too)."""
    other = _method_of(path)
    if other:
        reads = "ReMe and A-Mem pools" if command == "stats" else "ReMe pools"
        raise UserError(f"{path} is a pool of memory={other}; `reme pool {command}` reads {reads}")


def show_stats(path: Path, cfg: Config, console: Console) -> None:
    if _method_of(path) == "amem":
        return _show_amem_stats(path, console)
    _refuse_other(path, "stats")
    reme_pool.show_stats(path, cfg, console)


def _show_amem_stats(path: Path, console: Console) -> None:
    """An A-Mem pool's notes (``reme build-pool memory=amem``), read without an embedder."""
    from reme_cli.methods.amem.method import resolve_store
    from reme_cli.methods.amem.notes import MANIFEST, NOTES, Note

    store = resolve_store(path)
    manifest = json.loads((store / MANIFEST).read_text())
    notes = [Note.from_dict(d) for d in read_lines(store / NOTES)]
    retrieved = [n.retrieval_count for n in notes]
    table = Table(title=f"A-Mem pool {store}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("notes", str(len(notes)))
    table.add_row("links", str(sum(len(n.links) for n in notes)))
    table.add_row("evolved notes", str(sum(bool(n.evolution_history) for n in notes)))
    table.add_row("embedding", f"{manifest.get('embedding_model')} ({manifest.get('dim')}-d)")
    table.add_row("retrievals", f"{sum(retrieved)} (max {max(retrieved, default=0)} of one note)")
    table.add_row("never retrieved", str(sum(1 for r in retrieved if r == 0)))
    console.print(table)


def show_pool(path: Path, query: str | None, limit: int, cfg: Config, console: Console) -> None:
    _refuse_other(path, "show")
    reme_pool.show_pool(path, query, limit, cfg, console)

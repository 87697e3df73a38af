"""`reme pool import|stats|show`: pools as files a researcher can inspect."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reme_cli.core.config import Config
from reme_cli.core.errors import UserError
from reme_cli.core.io import read_lines
from reme_cli.core.staging import CONTENT, clean_stale, new_staging
from reme_cli.run.lock import DirLock
from reme_cli.methods.reme.official import OFFICIAL_PREFIX, import_official, released_counts, released_pools
from reme_cli.methods.reme.pool import Pool
from reme_cli.methods.reme.method import _other_method, make_embedder_for, resolve_pool_path


def import_pool(source: str | Path, out: Path, cfg: Config, console: Console) -> Path:
    if cfg.memory.name != "reme":
        raise UserError(f"`reme pool import` makes ReMe pools from the ReMe authors' released files; "
                        f"drop memory={cfg.memory.name}")
    with DirLock(out):
        if out.exists():
            raise UserError(f"{out} already exists; choose another --out or delete it")
        clean_stale(out, "importing")  # left by a killed earlier import to the same --out
        # Built beside the target and renamed at the end: a failed import leaves nothing at --out.
        staging = new_staging(out, "importing")
        try:
            pool = import_official(source, staging / CONTENT, make_embedder_for(cfg),
                                   retrieval_key=cfg.memory.retrieval_key)
            os.replace(staging / CONTENT, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    report = pool.built_by["import"]
    by_source = ", ".join(f"{n} {s}" for s, n in sorted(report["by_source"].items()))
    console.print(f"imported {report['imported']} experiences ({by_source}) from {source}; "
                  f"skipped {report.get('skipped', 0)} line(s)")
    return out


def list_released(console: Console) -> None:
    """The bundled released pools: name and counts by category."""
    table = Table(title="Released ReMe pools bundled with reme (agentscope-ai/ReMe@65971baf, Apache-2.0)")
    for col in ("name", "total", "success", "failure", "comparative"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for name, path in released_pools().items():
        counts = released_counts(path)
        table.add_row(OFFICIAL_PREFIX + name, *(str(counts[k]) for k in ("total", "success", "failure", "comparative")))
    console.print(table)


def _method_of(path: Path) -> str | None:
    """The memory method of another method's pool at ``path`` (or its ``pool/``); None: ReMe's."""
    return next(filter(None, (_other_method(p / "manifest.json") for p in (path, path / "pool"))), None)


def _load(path: Path, cfg: Config, command: str) -> Pool:
    other = _method_of(path)
    if other:  # whatever memory= says: these commands read ReMe pools
        reads = "ReMe and A-Mem pools" if command == "stats" else "ReMe pools"
        raise UserError(f"{path} is a pool of memory={other}; `reme pool {command}` reads {reads}")
    path = resolve_pool_path(path)
    Pool.check(path)  # a damaged pool is refused before the embedding model loads
    return Pool.load(path, make_embedder_for(cfg))


def show_stats(path: Path, cfg: Config, console: Console) -> None:
    if _method_of(path) == "amem":
        return _show_amem_stats(path, console)
    pool = _load(path, cfg, "stats")
    st = pool.stats()
    table = Table(title=f"pool {pool.path}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("size", str(st["size"]))
    for source, n in sorted(st["counts_by_source"].items()):
        table.add_row(f"  {source}", str(n))
    table.add_row("embedding", f"{st['embedding']['name']} ({st['embedding']['dim']}-d)")
    table.add_row("retrieval key", st["retrieval_key"])
    for name in ("confidence", "f", "u", "u_over_f"):
        summary = st.get(name) or {}
        shown = ", ".join(f"{k} {v:.3g}" for k, v in summary.items() if isinstance(v, (int, float)))
        table.add_row(name, shown or "-")
    for name in ("f", "u"):
        hist = (st.get(name) or {}).get("histogram") or {}
        table.add_row(f"{name} histogram", "  ".join(f"{k}: {v}" for k, v in hist.items()) or "-")
    table.add_row("never retrieved", str(st["never_retrieved"]))
    console.print(table)


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
    pool = _load(path, cfg, "show")
    if query:
        rows = pool.search(query, limit)
        title = f"top {limit} for: {query}"
    else:
        rows = [(e, None) for e in list(pool)[:limit]]
        title = f"{min(limit, len(pool))} of {len(pool)} experiences in {pool.path}"
    table = Table(title=title, show_lines=True)
    for col in ("score", "id", "source", "f/u", "when to use", "content"):
        table.add_column(col, overflow="fold")
    for exp, score in rows:
        table.add_row("" if score is None else f"{score:.3f}", exp.id[:8], exp.source, f"{exp.f}/{exp.u}",
                      exp.when_to_use, exp.content)
    console.print(table)

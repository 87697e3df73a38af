"""ReMe's side of `reme pool list|stats|show`: its released pools and its pool directories, as
tables a researcher can read. ``reme_cli.commands.pool`` routes to here for ReMe pools."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from reme_cli.core.config import Config
from reme_cli.llm.embed import make_embedder_for
from reme_cli.methods.reme.method import resolve_pool_path
from reme_cli.methods.reme.official import OFFICIAL_PREFIX, released_counts, released_pools
from reme_cli.methods.reme.pool import Pool


def list_released(console: Console) -> None:
    """The bundled released pools: name and counts by category."""
    table = Table(title="Released ReMe pools bundled with reme (agentscope-ai/ReMe@65971baf, Apache-2.0)")
    for col in ("name", "total", "success", "failure", "comparative"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for name, path in released_pools().items():
        counts = released_counts(path)
        table.add_row(OFFICIAL_PREFIX + name, *(str(counts[k]) for k in ("total", "success", "failure", "comparative")))
    console.print(table)


def load_pool(path: Path, cfg: Config) -> Pool:
    """The ReMe pool at ``path`` (or its ``pool/``), checked before the embedding model loads."""
    path = resolve_pool_path(path)
    Pool.check(path)
    return Pool.load(path, make_embedder_for(cfg))


def show_stats(path: Path, cfg: Config, console: Console) -> None:
    pool = load_pool(path, cfg)
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


def show_pool(path: Path, query: str | None, limit: int, cfg: Config, console: Console) -> None:
    pool = load_pool(path, cfg)
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

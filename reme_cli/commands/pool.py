"""`reme pool import|stats|show`: pools as files a researcher can inspect, for every method.

Nothing here knows a method. Which method a folder belongs to, what its pool holds and
what a query retrieves from it come from the method's own hooks, looked up in the registry
(``reme_cli.methods.base.Memory``): ``describe`` (items and summary, read from files),
``preflight`` (a damaged pool refused in one line), ``query_saved`` (``show --query``) and
``releases`` (the bundled pools ``import`` reads). Here stay the import's lock and
crash-safe swap, and the tables.
"""

from __future__ import annotations

from pathlib import Path
from statistics import fmean
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

from reme_cli.core.config import Config, compose
from reme_cli.core.errors import UserError
from reme_cli.core.registry import METHODS
from reme_cli.core.run_log import POOL_HEADER
from reme_cli.core.staging import clean_stale, refuse_system_folder, replace_dir
from reme_cli.llm.embed import check_key_for
from reme_cli.methods.base import Memory, Releases, find_method, method_class
from reme_cli.methods.state_view import StateItem, StateView
from reme_cli.run.lock import DirLock

__all__ = ["import_pool", "list_released", "releases_of", "show_pool", "show_stats"]


# ------------------------------------------------------------------ released pools


def releases_of(name: str) -> Releases:
    """The released pools of ``memory=name``; a one-line refusal when it has none."""
    found = method_class(name).releases()
    if found is None:
        raise UserError(f"memory={name} has no released pools to import; methods that do: "
                        f"{', '.join(f'memory={n}' for n in _releasing()) or 'none'}")
    return found


def _plugins() -> Iterator[tuple[str, type[Memory]]]:
    """Every registered method but ``none``, for finding one nobody named. A plug-in that
    cannot load is passed over here (it is refused in one line when named)."""
    for name in METHODS.names():
        plugin = find_method(name) if name != "none" else None
        if plugin is not None:
            yield name, plugin


def _releasing() -> list[str]:
    return [name for name, plugin in _plugins() if plugin.releases() is not None]


def _with_method(overrides: list[str]) -> list[str]:
    """``overrides`` with ``memory=NAME`` first when none is given and exactly one registered
    method has released pools (the CLI's default names no method)."""
    if any(o.lstrip("+~").startswith("memory=") for o in overrides):
        return overrides
    having = _releasing()
    if len(having) != 1:
        raise UserError(f"name the method whose released pool this is: memory=NAME "
                        f"(methods with released pools: {', '.join(having) or 'none'})")
    return [f"memory={having[0]}", *overrides]


def list_released(overrides: list[str], console: Console) -> None:
    cfg = compose(_with_method(overrides))
    releases_of(cfg.memory.name).list(console)


def import_pool(source: str | Path, out: Path, cfg: Config | list[str], console: Console) -> Path:
    """Import ``source`` (a bundled name or a file) as a native pool of ``cfg.memory.name`` at
    ``out``; ``cfg`` may be the command line's overrides (the method defaults to the one
    registered method with released pools)."""
    if not isinstance(cfg, Config):
        cfg = compose(_with_method(cfg))
    releases = releases_of(cfg.memory.name)
    check_key_for(cfg)
    refuse_system_folder(out, "--out", "./pool")  # before its lock is made beside it
    with DirLock(out):
        if out.exists():
            raise UserError(f"{out} already exists; choose another --out or delete it")
        clean_stale(out, "importing")  # left by a killed earlier import to the same --out
        # Built beside the target and renamed at the end: a failed import leaves nothing at --out.
        said = replace_dir(out, lambda staging: releases.import_into(str(source), staging, cfg), kind="importing")
    console.print(said)
    return out


# ------------------------------------------------------------------ what a pool holds


def _manifest_method(path: Path) -> str | None:
    """The method the pool manifest at ``path`` (or its ``pool/``) names; a damaged manifest
    is refused in one line naming it."""
    for manifest in (path / "manifest.json", path / "pool" / "manifest.json"):
        method = (POOL_HEADER.read(manifest) or {}).get("method")
        if method:
            return method
    return None


def _owner(path: Path, overrides: list[str]) -> tuple[Config, type[Memory], StateView]:
    """The config, method class and description of the saved state at ``path``: the method
    named by ``memory=`` on the command line, else by the folder's manifest, else the first
    registered method that recognises the folder (``describe``)."""
    if not path.exists():
        raise UserError(f"{path} does not exist; give a pool directory (reme build-pool, reme pool import)")
    given = [o.split("=", 1)[1] for o in overrides if o.lstrip("+~").startswith("memory=")]
    named = given[-1] if given else _manifest_method(path)
    candidates = [(named, method_class(named))] if named else _plugins()
    for name, plugin in candidates:
        view = plugin.describe(path)
        if view is not None and view.changes is not None and not named:  # every method reads a commit log
            raise UserError(f"{path} is a dynamic stream's folder; say whose it is: memory=NAME "
                            "(the run's config.yaml names it)")
        if view is not None:
            base = overrides if given else [f"memory={name}", *overrides]
            if view.changes is None:  # a pool (not a stream's folder): refuse a damaged one in one line
                plugin.preflight(compose([*base, f"memory.pool={path}", "eval.mode=fixed"]))
            return compose(base), plugin, view
        if named:
            raise UserError(f"{path} holds no saved state of memory={name}; give one of its pools "
                            f"(reme build-pool memory={name})")
    raise UserError(f"{path} holds no pool of any registered method ({', '.join(n for n, _ in _plugins())}); "
                    "give a pool directory (reme build-pool, reme pool import)")


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def show_stats(path: Path, overrides: list[str], console: Console) -> None:
    """The method's summary of its pool, and each of its items' numbers as min / mean / max."""
    _, plugin, view = _owner(path, overrides)
    table = Table(title=f"{view.method} pool {path}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("items", str(len(view.items)))
    for key, value in view.summary.items():
        table.add_row(str(key), _shown(value))
    names = dict.fromkeys(k for item in view.items for k in item.numbers)
    for name in names:
        values = [float(item.numbers[name]) for item in view.items if isinstance(item.numbers.get(name), (int, float))]
        if values:
            table.add_row(f"{name} per item", f"min {min(values):.3g}, mean {fmean(values):.3g}, max {max(values):.3g}")
    if view.changes is not None:
        table.add_row("committed units", str(len(view.changes)))
    console.print(table)


def show_pool(path: Path, query: str | None, limit: int, overrides: list[str], console: Console) -> None:
    """The pool's items (the first ``limit``), or what ``query`` retrieves from it."""
    cfg, plugin, view = _owner(path, overrides)
    rows: list[tuple[StateItem, float | None]]
    if query:
        hits = plugin.query_saved(path, query, limit, cfg)
        if hits is None:
            raise UserError(f"memory={view.method} does not search a saved pool outside a run; drop --query")
        by_id = {item.id: item for item in view.items}
        rows = [(by_id.get(i) or StateItem(i, "(not in the described pool)"), s) for i, s in hits]
        title = f"top {limit} for: {query}"
    else:
        rows = [(item, None) for item in view.items[:limit]]
        title = f"{min(limit, len(view.items))} of {len(view.items)} items in {view.method} pool {path}"
    table = Table(title=title, show_lines=True)
    for col in ("score", "id", "kind", "numbers", "title", "text"):
        table.add_column(col, overflow="fold")
    for item, score in rows:
        numbers = ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in item.numbers.items())
        table.add_row("" if score is None else f"{score:.3f}", item.id[:8], item.kind, numbers, item.title,
                      item.text)
    console.print(table)

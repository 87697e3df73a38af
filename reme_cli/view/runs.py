"""The runs `reme view` shows: found under the given directories, read from their files, and
read again only when those files change (a run that is still going shows its new units on
reload). Every run is read through ``core/run_log.py``, as `reme report` reads it. Nothing here
writes anything or takes a lock: a viewer only reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from reme_cli.core.errors import UserError
from reme_cli.core.registry import METHODS
from reme_cli.core.run_log import COMMIT_LOG, CONFIG_FILE, MANIFEST_FILE, STREAMS_DIR, TRIALS_FILE, RunLog, find_runs
from reme_cli.methods.base import Memory
from reme_cli.methods.state_view import StateView
from reme_cli.report.columns import method_columns

_WATCHED = (CONFIG_FILE, MANIFEST_FILE, TRIALS_FILE)
RESCAN_S = 1.0


@dataclass
class Run(RunLog):
    """One run directory as read at one moment (``signature``: the files it was read from), and
    what pages computed from it."""

    id: str = ""  # r0, r1, ...: stable for one set of directories, safe in a URL
    signature: tuple = ()
    suite: Path | None = None  # the `reme ablate` suite directory it belongs to
    _cache: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The suite's variant name (the run's folder) or, for a lone run, its folder name."""
        return self.path.name

    @cached_property
    def setting(self) -> str:
        """The report's row label of the run's method and mode ("ReMe (fixed)")."""
        params = {f"memory.{k}": v for k, v in self.config.section("memory").items()}
        return method_columns(self.config.method).setting_label(self.config.mode, params)

    def plugin(self) -> type[Memory] | None:
        """The run's memory method, if it is installed here (a viewer of someone else's runs
        may lack their plug-in: their records still show)."""
        if self.config.mode == "none" or not METHODS.has(self.config.method):
            return None
        try:
            plugin = METHODS.get(self.config.method)
        except UserError:
            return None
        return plugin if isinstance(plugin, type) and issubclass(plugin, Memory) else None

    def start_state_dir(self) -> Path | None:
        """Where the run's start state is: a pool the run derived for itself (ReMe re-keyed or
        re-embedded it into the run directory), else ``memory.pool`` resolved against the
        directory the run was started from (``out_dir`` says where that was)."""
        if self.config.mode == "none":
            return None
        derived = sorted(p for p in self.path.glob("pool-*") if p.is_dir())
        if derived:
            return derived[0]
        if not self.config.pool:
            return None
        pool = Path(self.config.pool)
        if pool.is_absolute():
            return pool if pool.exists() else None
        for base in self._bases():
            if (base / pool).exists():
                return (base / pool).resolve()
        return None

    def _bases(self) -> list[Path]:
        bases = []
        out = Path(str(self.config.get("out_dir") or ""))
        if out.parts and not out.is_absolute() and self.path.parts[-len(out.parts):] == out.parts:
            bases.append(Path(*self.path.parts[:-len(out.parts)]))
        return [*bases, Path.cwd()]

    def describe(self, where: Path | None) -> StateView | None:
        """The method's description of a saved state (``Memory.describe``), cached per state."""
        plugin = self.plugin()
        if plugin is None or where is None:
            return None
        key = f"describe:{where}:{_stamp(where)}"
        if key not in self._cache:
            self._cache[key] = plugin.describe(where)
        return self._cache[key]

    def cached(self, name: str, make: Any) -> Any:
        """``make()`` once per reading of the run (a page's data)."""
        if name not in self._cache:
            self._cache[name] = make()
        return self._cache[name]


def _stamp(path: Path) -> tuple:
    """What changes when a file at or right under ``path`` is rewritten."""
    files = [path] if path.is_file() else [path, *path.iterdir()] if path.is_dir() else []
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        out.append((f.name, st.st_mtime_ns, st.st_size))
    return tuple(out)


def signature(path: Path) -> tuple:
    parts = [_stamp(path / name) for name in _WATCHED]
    streams = path / STREAMS_DIR
    if streams.is_dir():
        parts += [_stamp(s / COMMIT_LOG) for s in sorted(streams.iterdir())]
    return tuple(parts)


def suite_of(path: Path) -> Path | None:
    """The `reme ablate` suite a run belongs to (``SUITE/runs/LABEL``), if any."""
    parent = path.parent
    if parent.name == "runs" and any((parent.parent / d).is_dir() for d in ("pools", "report", "logs")):
        return parent.parent
    return None


def read_run(run_id: str, path: Path) -> Run:
    """A run directory as it is now; a damaged one is refused in one line (``read_run_log``)."""
    sig = signature(path)  # before the files are read: a change meanwhile is read again
    run = Run.read(path, id=run_id, signature=sig, suite=suite_of(path))
    run.trials  # noqa: B018 - read now, under the signature just taken
    return run


SuiteOrder = Callable[[Path], list[str]]  # a suite directory -> its run labels, in the suite's order


class Catalog:
    """The runs under ``dirs``, re-read when their files change (thread-safe: the server
    answers requests from several threads). ``suite_order`` tells the order a suite lists
    its runs (the command line passes `reme ablate`'s); without it, or where it raises, runs
    sort by name."""

    def __init__(self, dirs: list[Path], suite_order: SuiteOrder | None = None):
        self.suite_order = suite_order
        self.dirs = [Path(d) for d in dirs]
        for d in self.dirs:
            if not d.exists():
                raise UserError(f"{d} does not exist: give run directories, suite directories or folders "
                                "holding them")
            if not d.is_dir():
                raise UserError(f"{d} is a file: give run directories, suite directories or folders holding them")
        self._lock = threading.Lock()
        self._runs: dict[Path, Run] = {}
        self.paths = self._find()
        self._found_at = time.monotonic()

    def _find(self) -> list[Path]:
        try:
            return find_runs(self.dirs)
        except UserError:
            raise UserError(f"no `reme eval` run directories under {', '.join(map(str, self.dirs))}: give a run "
                            "directory (it holds config.yaml, manifest.json and trials.jsonl), a suite "
                            "directory from `reme ablate`, or a folder holding them") from None

    def runs(self) -> list[Run]:
        """Every run, re-read where its files changed; new run directories are picked up (the
        folders are searched again at most once a second: a page asks for several answers)."""
        with self._lock:
            if time.monotonic() - self._found_at > RESCAN_S:
                self.paths = self._find()
                self._found_at = time.monotonic()
            out = []
            for i, path in enumerate(self.paths):
                known = self._runs.get(path)
                rid = f"r{i}"
                if known is None or known.id != rid or known.signature != signature(path):
                    known = self._runs[path] = read_run(rid, path)
                out.append(known)
            return out

    def run(self, run_id: str) -> Run:
        for run in self.runs():
            if run.id == run_id:
                return run
        raise KeyError(run_id)


"""`reme track sync DIR... tracker=NAME`: log finished runs to a tracker after the fact.

For a run made without a tracker, or whose tracker failed (it said so in one warning), or to
log the same runs somewhere else: every `reme eval` and `reme build-pool` run under the given
directories is logged as it would have been while it ran (``reme_cli.track.run``), its
tracker run continued where its manifest keeps one for the same place. A suite or sweep
directory (one holding ``runs/``) is one parent run (W&B: group) with its runs as children,
and its report as its files. A run that is still being written (its lock is held) is left
for its own process and named.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from reme_cli.core.config import TrackerCfg, compose
from reme_cli.core.errors import RunAborted, UserError
from reme_cli.core.run_log import MANIFEST_FILE, find_runs, read_run_log
from reme_cli.run.lock import DirLock
from reme_cli.track.content import headlines
from reme_cli.track.group import GroupTracking
from reme_cli.track.run import log_run

KINDS = ("eval", "build-pool")


def group_dirs(dirs: list[Path]) -> list[Path]:
    """The given directories that are a suite's or a sweep's (they hold ``runs/``)."""
    return [d for d in dirs if (d / "runs").is_dir()]


def sync(dirs: list[Path], overrides: list[str], console: Console) -> list[Path]:
    """Log every run under ``dirs``; the runs logged."""
    cfg = compose(overrides).tracker
    if cfg.name == "none":
        raise UserError("name the tracker to log to: reme track sync DIR... tracker=mlflow (or tracker=wandb)")
    runs = [r for r in find_runs(dirs, kinds=KINDS) if (r / MANIFEST_FILE).is_file()]
    for path in runs:
        read_run_log(path)  # a damaged run is named in one line before anything is logged
    done: list[Path] = []
    grouped: set[Path] = set()
    for folder in group_dirs(dirs):
        members = [r for r in runs if folder.resolve() in r.parents and r not in grouped]
        grouped |= set(members)
        kind = "sweep" if any(folder.glob("*.db")) else "suite"
        with GroupTracking(cfg, console, folder.resolve(), kind) as group:
            done += _log_all(cfg, console, members, group.parent)
            report = folder / "report"
            files = [(f, str(Path("report") / f.relative_to(report).parent)) for f in sorted(report.rglob("*"))
                     if f.is_file()] if report.is_dir() else []
            group.finish("finished", params={f"{kind}.path": str(folder.resolve())},
                         metrics=headlines([r for r in members if r.name != "build"]), files=files)
    return done + _log_all(cfg, console, [r for r in runs if r not in grouped], None)


def _log_all(cfg: TrackerCfg, console: Console, runs: list[Path], parent: str | None) -> list[Path]:
    done = []
    for path in runs:
        holder = path.parent if path.name == "build" else path  # build-pool locks the folder around build/
        try:
            with DirLock(holder, wait=False):
                run_id = log_run(cfg, console, path, parent)
        except UserError as exc:  # another reme is writing it: its own tracker logs it as it ends
            console.print(f"[yellow]skipped[/yellow] {escape(str(path))}: {escape(str(exc))}", highlight=False,
                          soft_wrap=True)
            continue
        if run_id is None:  # the tracker failed (its warning said why): the rest would fail alike
            raise RunAborted(f"{cfg.name} stopped answering at {path}; {len(done)} run(s) before it were logged: "
                             "rerun the same command when it answers (logged runs are continued, not doubled)")
        console.print(f"logged {escape(str(path))} ({cfg.name} run {run_id})", highlight=False, soft_wrap=True)
        done.append(path)
    return done

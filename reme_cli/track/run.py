"""One reme run's tracker run: started (or continued) when the run directory opens, told the
run's params and tags then, its metrics, series and files when it finishes, and ended as
killed if the run stops on the way. Its id is kept in the run's manifest (``trackers``,
by where it logs), so a resumed run continues the same tracker run.

`reme eval` and `reme build-pool` use ``RunTracking`` as they run; `reme track sync` uses
``log_run`` on a finished run directory.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from reme_cli.core.config import TrackerCfg
from reme_cli.run.records import RunDir
from reme_cli.track.base import Link
from reme_cli.track.content import RunContent, write_metrics_csv

MANIFEST_KEY = "trackers"  # manifest.json: {where: {"name", "run_id", "series"}}

# How a run's final manifest status ends its tracker run.
END_STATUS = {"complete": "finished", "incomplete": "failed"}


def kept(trackers: dict[str, Any], where: str | None) -> dict[str, Any]:
    entry = trackers.get(where) if where else None
    return entry if isinstance(entry, dict) else {}


def begin(link: Link, run_dir: RunDir, name: str, parent: str | None) -> None:
    """Start or continue the run's tracker run and tell it what is known at the start."""
    where = link.where()
    content = RunContent.read(run_dir.path)
    manifest = content.manifest
    entry = kept(manifest.trackers, where)
    if link.start(name, entry.get("run_id"), parent, manifest.kind) is None:
        return
    if entry.get("run_id") != link.run_id:
        trackers = {**manifest.trackers, str(where): {"name": link.name, "run_id": link.run_id, "series": False}}
        run_dir.update_manifest(**{MANIFEST_KEY: trackers})
    link.call("log_params", content.params())
    link.call("set_tags", *content.tags())


def conclude(link: Link, run_dir: RunDir) -> None:
    """Tell the tracker run the finished run's numbers and files, then end it as the
    manifest's status says."""
    if not link.live:
        return
    content = RunContent.read(run_dir.path)
    metrics = content.tracked_metrics()
    link.call("set_tags", *content.tags())
    link.call("log_metrics", metrics)
    where = link.where()
    manifest = content.manifest
    entry = kept(manifest.trackers, where)
    if manifest.status == "complete" and not entry.get("series"):  # once: a tracker keeps every point it is sent
        for step, values in content.series():
            link.call("log_metrics", values, step)
        if link.live:
            trackers = {**manifest.trackers, str(where): {**entry, "name": link.name, "run_id": link.run_id,
                                                          "series": True}}
            run_dir.update_manifest(**{MANIFEST_KEY: trackers})
    for path in content.artifacts():
        link.call("log_artifact", path, "")
    with tempfile.TemporaryDirectory(prefix="reme-track-") as tmp:
        link.call("log_artifact", write_metrics_csv(metrics, Path(tmp) / "metrics.csv"), "")
    link.end(END_STATUS.get(manifest.status, "killed"))


def log_run(cfg: TrackerCfg, console: Console, path: Path, parent: str | None = None) -> str | None:
    """A run directory logged after the fact (its tracker run continued if its manifest keeps
    one for ``cfg``'s place); the tracker run's id, None if the tracker failed."""
    link = Link.open(cfg, console)
    if link is None:
        return None
    run_dir = RunDir(path)
    name = path.parent.name if path.name == "build" else path.name  # a build-pool run is its folder's
    begin(link, run_dir, name, parent)
    run_id = link.run_id
    conclude(link, run_dir)
    return None if link.failed else run_id


class RunTracking:
    """``with RunTracking(cfg.tracker, console, name) as track``, around a run: pass
    ``track.opened`` to ``RunLifecycle.run`` (``on_open``), call ``track.finished`` after
    ``RunLifecycle.finish``. Without a tracker every call does nothing."""

    def __init__(self, cfg: TrackerCfg, console: Console, name: str):
        self.link = Link.open(cfg, console)  # a missing package is refused here, before the run
        self.parent = cfg.parent
        self.name = name
        self._run_dir: RunDir | None = None

    def __enter__(self) -> RunTracking:
        return self

    def opened(self, run_dir: RunDir) -> None:
        self._run_dir = run_dir
        if self.link is not None:
            begin(self.link, run_dir, self.name, self.parent)

    def finished(self) -> None:
        if self.link is not None and self._run_dir is not None:
            conclude(self.link, self._run_dir)

    def __exit__(self, *exc: Any) -> None:
        if self.link is not None and self.link.live:  # stopped before finished(): Ctrl-C, a dead server
            self.link.end("killed")

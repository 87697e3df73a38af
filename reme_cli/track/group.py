"""A suite's or a sweep's own tracker run: in MLflow the parent run of its runs, in W&B a run
of their group. Its id is kept in the folder's ``tracker.json`` (by where it logs), so the
same `reme ablate` or sweep run again continues it, and its runs are its children again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from reme_cli.core.config import TrackerCfg
from reme_cli.core.errors import UserError
from reme_cli.core.io import write_json_atomic
from reme_cli.core.reading import JsonFile, warn
from reme_cli.track.base import Link

GROUP_FILE = "tracker.json"
# Where a group logs -> {"name", "run_id"} of its tracker run there.
GROUP_STATE = JsonFile("a suite's or sweep's tracker.json", fix="move it away (the group's tracker run then starts "
                       "anew)")


class GroupTracking:
    """``with GroupTracking(cfg, console, folder, kind) as group``: ``group.parent`` is what
    the group's runs carry as ``tracker.parent`` (None without a tracker, or once it failed);
    ``group.link`` logs the group's own params, metrics and files; ``finish`` ends it, and
    leaving the block before that ends it as killed."""

    def __init__(self, cfg: TrackerCfg, console: Console, folder: Path, kind: str):
        self.link = Link.open(cfg, console)
        self.folder, self.kind = folder, kind
        self.parent: str | None = None

    def __enter__(self) -> GroupTracking:
        link = self.link
        if link is None:
            return self
        where = link.where()
        try:
            kept, damaged = GROUP_STATE.read(self.folder / GROUP_FILE) or {}, False
        except UserError as exc:  # tracking never stops a run: a new tracker run, the file left as it is
            warn(f"{exc}; the group is tracked as a new run meanwhile")
            kept, damaged = {}, True
        entry = kept.get(str(where))
        before = entry.get("run_id") if isinstance(entry, dict) else None
        run_id = link.start(self.folder.name, before, None, self.kind)
        if run_id is None:
            return self
        if before != run_id and not damaged:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.folder / GROUP_FILE, {**kept, str(where): {"name": link.name, "run_id": run_id}})
        self.parent = link.call("children", run_id, self.folder.name)
        return self

    @property
    def live(self) -> bool:
        return self.link is not None and self.link.live

    def finish(self, status: str, params: dict[str, str] | None = None, metrics: dict[str, float] | None = None,
               files: list[tuple[Path, str]] = (), series: list[tuple[int, dict[str, float]]] = (),
               tags: dict[str, str] | None = None) -> None:
        """Log the group's own ``params`` (written once), ``tags`` (what may change when it runs
        again, e.g. a study's best trial), ``metrics``, ``series`` ((step, values) pairs) and
        ``files`` ((path, folder) pairs), then end its run with ``status``."""
        if self.link is None:
            return
        if params:
            self.link.call("log_params", params)
        if tags:
            self.link.call("set_tags", tags, [])
        if metrics:
            self.link.call("log_metrics", metrics)
        for step, values in series:
            self.link.call("log_metrics", values, step)
        for path, folder in files:
            self.link.call("log_artifact", path, folder)
        self.link.end(status)

    def __exit__(self, *exc: Any) -> None:
        if self.link is not None and self.link.live:
            self.link.end("killed")


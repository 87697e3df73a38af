"""The seam between reme and an experiment tracker: a ``Tracker`` is one backend (MLflow,
W&B, or a plug-in's, registered in ``reme_cli.core.registry.TRACKERS``), and a ``Link`` is
how reme uses one: its first failure is one warning, after which it does nothing more.

A tracker never decides anything about a run: the run directory is the record, and a
tracker that is down, full or slow costs the run one warning line, never its exit code.
What a tracker cannot be built for (its package is missing) is bad input, refused before
anything runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rich.console import Console
from rich.markup import escape

from reme_cli.core.config import TrackerCfg
from reme_cli.core.registry import TRACKERS
from reme_cli.core.seams import Tracking

STATUSES = ("finished", "failed", "killed")  # how a tracker run ends: complete, units errored, stopped


@runtime_checkable
class Tracker(Tracking, Protocol):
    """One backend, built with the run's ``tracker`` settings (``TrackerCfg``) for one run
    (or a suite's or sweep's own run). Any method may raise: ``Link`` turns that into one
    warning. A backend whose package is missing raises ``UserError`` from ``__init__``."""

    def where(self) -> str:
        """Where its runs go (a tracking URI; a folder and mode): a run id kept in a
        manifest is continued only at the same place."""
        ...

    def start(self, name: str, run_id: str | None, parent: str | None, kind: str) -> str:
        """Start a run named ``name`` (reme's run name) or, given ``run_id``, continue that
        one (a new run if the store has no such run); ``parent``: a ``children`` value of
        the suite's or sweep's run; ``kind``: eval, build-pool, suite or sweep. Its id."""
        ...

    def children(self, run_id: str, name: str) -> str:
        """What the runs of the suite or sweep started as ``run_id`` (named ``name``) carry as
        ``tracker.parent`` (MLflow: the parent run's id; W&B: the group)."""
        ...

    def log_params(self, params: dict[str, str]) -> None: ...

    def set_tags(self, tags: dict[str, str], labels: list[str]) -> None:
        """``tags``: key -> text; ``labels``: short marks ("scripted server")."""
        ...

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Final values (``step`` None), or one point of a series at ``step``."""
        ...

    def log_artifact(self, path: Path, folder: str = "") -> None: ...

    def end(self, status: str) -> None:
        """One of ``STATUSES``."""
        ...


def make_tracker(cfg: TrackerCfg) -> Tracker | None:
    """The backend ``cfg`` names, or None for ``tracker=none``."""
    if cfg.name == "none":
        return None
    return TRACKERS.get(cfg.name)(cfg)


class Link:
    """One tracker run, used through this. The first call that raises prints one warning and
    turns every later call into a no-op: a run is never failed or held up by its tracker."""

    def __init__(self, tracker: Tracker, name: str, console: Console):
        self.tracker, self.name, self.console = tracker, name, console
        self.run_id: str | None = None
        self.failed = False

    @classmethod
    def open(cls, cfg: TrackerCfg, console: Console) -> Link | None:
        tracker = make_tracker(cfg)
        return None if tracker is None else cls(tracker, cfg.name, console)

    @property
    def live(self) -> bool:
        return self.run_id is not None and not self.failed

    def call(self, method: str, *args: Any) -> Any:
        if self.failed:
            return None
        try:
            return getattr(self.tracker, method)(*args)
        except Exception as exc:  # noqa: BLE001 - whatever a tracker raises, the run goes on
            self.failed = True
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            self.console.print(f"[yellow]warning:[/yellow] tracker {escape(self.name)} failed ({escape(why)}); "
                               "the run goes on without it (its directory is the record; `reme track sync "
                               "DIR` logs it later)", highlight=False, soft_wrap=True)
            return None

    def start(self, name: str, run_id: str | None, parent: str | None, kind: str) -> str | None:
        self.run_id = self.call("start", name, run_id, parent, kind)
        return self.run_id

    def where(self) -> str | None:
        return self.call("where")

    def end(self, status: str) -> None:
        if self.live:
            self.call("end", status)
        self.run_id = None

"""Weights & Biases as reme's tracker (``tracker=wandb``), through the wandb package.

Offline by default (``tracker.mode=offline``): each run is written under
``tracker.dir``/wandb/ (runs_root/.wandb by default: hidden, out of the way of the folders reme
reads runs from) and uploaded later with ``wandb sync DIR``;
``tracker.mode=online`` logs live after ``wandb login``. A suite's or sweep's runs are one W&B
group (the suite's or study's name), with the suite's own run in it. Final numbers go to the
run's summary; series (a dynamic run's streams, a study's trials) are logged against ``reme/step``.

reme keeps W&B off the terminal and the machine: no console capture (stdout carries only
reme's paths), no system metrics sampler, no code or git snapshot.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from reme_cli.core.config import TrackerCfg
from reme_cli.core.errors import UserError

INSTALL = "pip install -c constraints.txt -e '.[wandb]' from the reme checkout (or pip install wandb)"
STEP = "reme/step"  # the x-axis of reme's series (a stream's position, a study's trial)
_EXIT = {"finished": 0, "failed": 1, "killed": 255}


class WandbTracker:
    def __init__(self, cfg: TrackerCfg):
        # W&B's own lines (and its advice on LLM tracing) would land among reme's; read once,
        # when W&B sets itself up, unless the environment says otherwise.
        os.environ.setdefault("WANDB_SILENT", "true")
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
        try:
            import wandb
        except ImportError:
            raise UserError(f"tracker=wandb needs W&B: {INSTALL}") from None
        self.wandb = wandb
        self.cfg = cfg
        self.dir = Path(cfg.dir or ".").resolve()
        self.run: Any = None
        self._series = False

    def where(self) -> str:
        return f"wandb {self.cfg.mode} {self.cfg.project} {self.dir}"

    def start(self, name: str, run_id: str | None, parent: str | None, kind: str) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        settings = self.wandb.Settings(mode=self.cfg.mode, console="off", silent=True, show_warnings=False,
                                       x_disable_stats=True, x_disable_machine_info=True, save_code=False,
                                       disable_git=True, x_save_requirements=False,
                                       init_timeout=max(1.0, self.cfg.timeout))
        group = parent if parent else name if kind in ("suite", "sweep") else None
        self.run = self.wandb.init(project=self.cfg.project, name=name, id=run_id, resume="allow" if run_id else None,
                                   group=group, job_type=kind, dir=str(self.dir), settings=settings,
                                   reinit="create_new")
        return self.run.id

    def children(self, run_id: str, name: str) -> str:
        return name

    def log_params(self, params: dict[str, str]) -> None:
        self.run.config.update(params, allow_val_change=True)

    def set_tags(self, tags: dict[str, str], labels: list[str]) -> None:
        self.run.tags = tuple(dict.fromkeys([*self.run.tags, *labels]))
        self.run.notes = "\n".join(f"{key}: {value}" for key, value in tags.items())
        self.run.config.update({f"tag.{key}": value for key, value in tags.items()}, allow_val_change=True)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if step is None:
            self.run.summary.update(metrics)
            return
        if not self._series:  # W&B's own step only grows (a resumed run starts again): an x-axis of its own
            self.run.define_metric(STEP)
            self.run.define_metric("*", step_metric=STEP)
            self._series = True
        self.run.log({**metrics, STEP: step})

    def log_artifact(self, path: Path, folder: str = "") -> None:
        """A copy in the run's files (a file saved by reference would change or vanish),
        saved there so that `wandb sync` uploads it."""
        target = Path(self.run.dir) / folder / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        self.run.save(str(target), base_path=self.run.dir, policy="now")

    def end(self, status: str) -> None:
        self.run.finish(exit_code=_EXIT[status])

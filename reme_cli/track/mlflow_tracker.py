"""MLflow as reme's tracker (``tracker=mlflow``), through MLflow's own client.

The default store is a local SQLite database beside the runs (``sqlite:///runs/mlflow.db``:
a real MLflow backend store, no server), with the artifacts in ``.mlartifacts/`` beside it
(hidden: their copies of a run's files are out of the way of the folders reme reads runs from);
``tracker.uri=http://HOST:5000`` logs to a server. A suite's or sweep's run is the parent
of its runs (MLflow's ``mlflow.parentRunId`` tag).

Set before MLflow is imported, unless the environment says otherwise: no retries and
``tracker.timeout`` seconds per request to a server (a tracker that is down costs one
warning, not MLflow's minutes of backoff), and MLflow's usage telemetry off (reme runs
offline).
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from reme_cli.core.config import TrackerCfg
from reme_cli.core.errors import UserError

INSTALL = "pip install -c constraints.txt -e '.[mlflow]' from the reme checkout (or pip install mlflow-skinny sqlalchemy alembic)"
_STATUS = {"finished": "FINISHED", "failed": "FAILED", "killed": "KILLED"}
_BATCH = 100  # MLflow takes at most 100 params or tags per batch (1000 metrics)
ARTIFACTS = ".mlartifacts"  # a local store's artifacts, beside its database


def _client(cfg: TrackerCfg) -> Any:
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, round(cfg.timeout))))
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise UserError(f"tracker=mlflow needs MLflow: {INSTALL}") from None
    for name in ("mlflow", "alembic"):  # their INFO lines (creating the database's tables) are not reme's
        logging.getLogger(name).setLevel(logging.WARNING)
    return MlflowClient


def store_uri(uri: str | None) -> str:
    """``uri`` with a relative SQLite path made absolute: the same store from any folder."""
    if not uri:
        raise UserError("tracker=mlflow needs tracker.uri (e.g. sqlite:///runs/mlflow.db or http://HOST:5000)")
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(uri.removeprefix("sqlite:///")).resolve())
    return uri


def metric_key(key: str) -> str:
    """A metric name MLflow accepts (letters, digits, ``_-. /:``): ``avg@4/mean`` is
    ``avg_at_4/mean``."""
    return re.sub(r"[^\w\-. /:]", "_", key.replace("@", "_at_"))


class MLflowTracker:
    def __init__(self, cfg: TrackerCfg):
        self.cfg = cfg
        self.uri = store_uri(cfg.uri)
        self._client_class = _client(cfg)
        self._client: Any = None
        self.run_id: str | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            if self.uri.startswith("sqlite:///"):
                Path(self.uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            self._client = self._client_class(tracking_uri=self.uri)
        return self._client

    def where(self) -> str:
        return self.uri

    def _experiment(self) -> str:
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(self.cfg.project)
        if found is not None:
            return found.experiment_id
        artifacts = None
        if self.uri.startswith("sqlite:///"):  # beside the database, not ./mlruns of whatever folder reme ran in
            artifacts = (Path(self.uri.removeprefix("sqlite:///")).parent / ARTIFACTS).as_uri()
        try:
            return self.client.create_experiment(self.cfg.project, artifact_location=artifacts)
        except MlflowException:  # another run created it meanwhile
            return self.client.get_experiment_by_name(self.cfg.project).experiment_id

    def start(self, name: str, run_id: str | None, parent: str | None, kind: str) -> str:
        from mlflow.exceptions import MlflowException

        if run_id:
            try:
                run = self.client.get_run(run_id)
            except MlflowException:  # not in this store (deleted, or another database)
                run = None
            if run is not None and run.info.lifecycle_stage == "active":
                self.client.update_run(run_id, status="RUNNING")
                self.run_id = run_id
                return run_id
        tags = {"reme.kind": kind, **({"mlflow.parentRunId": parent} if parent else {})}
        self.run_id = self.client.create_run(self._experiment(), run_name=name, tags=tags).info.run_id
        return self.run_id

    def children(self, run_id: str, name: str) -> str:
        return run_id

    def log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

        # A param is written once: a continued run keeps what its first session logged.
        have = self.client.get_run(self.run_id).data.params
        new = [Param(k, v[:MAX_PARAM_VAL_LENGTH]) for k, v in params.items() if k not in have]
        for i in range(0, len(new), _BATCH):
            self.client.log_batch(self.run_id, params=new[i:i + _BATCH])

    def set_tags(self, tags: dict[str, str], labels: list[str]) -> None:
        from mlflow.entities import RunTag
        from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

        every = {**tags, **{label: "true" for label in labels}}
        if "reme.fidelity" in tags:  # the run's description in MLflow's UI
            every["mlflow.note.content"] = "; ".join(
                [f"fidelity: {tags['reme.fidelity']}", *(tags[k] for k in ("reme.test_double", "reme.smoke") if k in tags)])
        found = [RunTag(k, v[:MAX_TAG_VAL_LENGTH]) for k, v in every.items()]
        for i in range(0, len(found), _BATCH):
            self.client.log_batch(self.run_id, tags=found[i:i + _BATCH])

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        found = [Metric(metric_key(k), v, stamp, step or 0) for k, v in metrics.items()]
        for i in range(0, len(found), 10 * _BATCH):
            self.client.log_batch(self.run_id, metrics=found[i:i + 10 * _BATCH])

    def log_artifact(self, path: Path, folder: str = "") -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path=folder or None)

    def end(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=_STATUS[status])

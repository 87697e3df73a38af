"""What a tracker is told about a run, read from its directory alone: the same for a run
that logs as it goes and for one logged after the fact (`reme track sync`).

- params: the flattened resolved config, the run's hash and kind, the package versions of
  its manifest (the BFCL release's bfcl-eval among them), the method and its starting
  pool's provenance (``pool.*``: who built it, from what);
- tags: where the run is, its status, its fidelity (departures from the authors' setup) and
  the marks of numbers that are not model results (a scripted server, the embedded model);
- metrics: ``metrics.json`` flattened (``avg@4/mean``, ``per_seed/0/avg@4``,
  ``first_attempt/avg@4/mean``, the benchmark's declared scores, ``stop_reasons/...``), the
  units' tokens and time; a build's ``report.json`` the same way;
- series (dynamic runs): the method's declared series (ReMe: pool size, mean utility) and
  the additions and deletions, per stream, at each position of the stream;
- artifacts: config.yaml, manifest.json, the result file and ``metrics.csv`` (every metric,
  one per line).
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from reme_cli.core.errors import UserError
from reme_cli.core.run_log import CONFIG_FILE, MANIFEST_FILE, RunLog, UnitRecord, flatten, read_run_log
from reme_cli.report.columns import method_columns
from reme_cli.report.fidelity import departures, fidelity_text, pool_built_by, pool_origin

TEST_DOUBLE = "scripted server"
SMOKE = "embedded 135M"
SERIES_PREFIX = "stream/"
# metrics.json's copy of its variants (final, first attempt) repeats what it holds beside them.
_REPEATED = {"variants"}


class RunContent(RunLog):
    """One run directory as a tracker sees it (its log, ``core/run_log.py``)."""

    @property
    def mode(self) -> str:
        return self.config.mode if self.manifest.kind == "eval" else "build"

    def params(self) -> dict[str, str]:
        manifest = self.manifest
        out = {key: _text(value) for key, value in self.config.flat().items() if not key.startswith("tracker.")}
        out["run.hash"] = manifest.config_hash
        out["run.kind"] = manifest.kind
        out.update({f"packages.{name}": str(v) for name, v in manifest.packages.items()})
        if (git := manifest.git).get("commit"):
            out["git.commit"] = str(git["commit"]) + ("+dirty" if git.get("dirty") else "")
        built_by = pool_built_by(self.config, self.mode) if manifest.kind == "eval" else None
        out.update({f"pool.{key}": _text(value) for key, value in flatten(built_by or {}).items()})
        return out

    def tags(self) -> tuple[dict[str, str], list[str]]:
        """(tags, labels): key -> text, and the short marks a list of runs shows."""
        manifest = self.manifest
        tags = {"reme.kind": manifest.kind, "reme.path": str(self.path.resolve()), "reme.status": manifest.status,
                "reme.hash": manifest.config_hash}
        labels: list[str] = []
        if manifest.kind == "eval":
            origin = pool_origin(self.config, self.mode)
            tags["reme.fidelity"] = fidelity_text(departures(self.config.flat(), pool=origin["pool_start"],
                                                             pool_params=origin["pool_params"]))
        if manifest.test_double:
            tags["reme.test_double"] = f"{TEST_DOUBLE}: its answers come from a script; the numbers are not model results"
            labels.append(TEST_DOUBLE)
        if self.config.model == "local":
            from reme_cli.report.tables import SMOKE_NOTE  # (scipy: only when it is needed)

            tags["reme.smoke"] = SMOKE_NOTE
            labels.append(SMOKE)
        return tags, labels

    def tracked_metrics(self) -> dict[str, float]:
        """The numbers a tracker is told: the result file's and the units' tokens and time."""
        out = numbers(self.result or {})
        ok = [t for t in self.trials if t.tokens or t.wall_s]
        if ok:
            out["tokens/prompt"] = float(sum(t.tokens.get("prompt", 0) for t in ok))
            out["tokens/completion"] = float(sum(t.tokens.get("completion", 0) for t in ok))
            out["time/llm_s"] = round(sum(t.llm_latency_s for t in ok), 3)
            out["time/units_s"] = round(sum(t.wall_s for t in ok), 3)
            if (wall := _span(ok)) is not None:
                out["time/wall_s"] = wall
        return out

    def series(self) -> list[tuple[int, dict[str, float]]]:
        """Per stream position, the values along each dynamic stream (``stream/FIELD/sS_rR``):
        the method's declared series fields and the counts of what a unit added and deleted."""
        if self.mode != "dynamic":
            return []
        fields = list(method_columns(self.config.method).series)
        rows: dict[int, dict[str, float]] = defaultdict(dict)
        for t in self.trials:
            if not t.ok:
                continue
            stream = f"s{t.seed}_r{t.run}"
            for name in fields:
                if _is_number(value := t.method.get(name)):
                    rows[t.position][f"{SERIES_PREFIX}{name}/{stream}"] = float(value)
            for name in ("added", "deleted"):
                if isinstance(value := t.method.get(name), list):
                    rows[t.position][f"{SERIES_PREFIX}{name}/{stream}"] = float(len(value))
        return sorted(rows.items())

    def artifacts(self) -> list[Path]:
        files = (self.path / CONFIG_FILE, self.path / MANIFEST_FILE, self.result_file)
        return [path for path in files if path.is_file()]


def headlines(runs: list[Path]) -> dict[str, float]:
    """Each eval run's Avg@k and Pass@k means as ``NAME/avg@k``: a suite's or sweep's runs side
    by side in its own tracker run."""
    out: dict[str, float] = {}
    for path in runs:
        try:
            m = read_run_log(path).metrics
        except UserError:  # not a run (yet), or its metrics unreadable: nothing to show of it
            continue
        for key, score in ((f"avg@{m.k}", m.avg), (f"pass@{m.k}", m.pass_)) if m else ():
            if score is not None and _is_number(score.mean):
                out[f"{path.name}/{key}"] = score.mean
    return out


def numbers(data: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every number in ``data`` (a metrics.json), keyed by its path joined with ``/``."""
    out: dict[str, float] = {}
    for key, value in data.items():
        if not prefix and key in _REPEATED:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(numbers(value, f"{name}/"))
        elif _is_number(value):
            out[name] = float(value)
    return out


def write_metrics_csv(metrics: dict[str, float], path: Path) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["metric", "value"])
        writer.writerows(sorted(metrics.items()))
    return path


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (list, dict)) else "null" if value is None else str(value)


def _span(records: list[UnitRecord]) -> float | None:
    """Seconds from the first unit's start to the last unit's end (a resumed run's pause
    included)."""
    try:
        start = min(datetime.fromisoformat(t.started_at) for t in records if t.started_at)
        end = max(datetime.fromisoformat(t.finished_at) for t in records if t.finished_at)
    except ValueError:  # no unit with both times
        return None
    return round((end - start).total_seconds(), 3)


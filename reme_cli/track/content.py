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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from reme_cli.core.trials import UnitRecord, read_trials
from reme_cli.report.columns import method_columns
from reme_cli.report.fidelity import departures, fidelity_text, flatten, pool_built_by, pool_origin, scored_by_test_double
from reme_cli.run.records import CONFIG_FILE, MANIFEST_FILE, METRICS_FILE, REPORT_FILE

RESULT_FILES = {"eval": METRICS_FILE, "build-pool": REPORT_FILE}
TEST_DOUBLE = "scripted server"
SMOKE = "embedded 135M"
SERIES_PREFIX = "stream/"
# metrics.json's copy of its variants (final, first attempt) repeats what it holds beside them.
_REPEATED = {"variants"}


@dataclass
class RunContent:
    """One run directory as a tracker sees it."""

    path: Path
    kind: str  # eval | build-pool
    config: dict[str, Any]
    manifest: dict[str, Any]
    result: dict[str, Any] | None = None  # metrics.json / report.json, once written
    records: list[UnitRecord] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> RunContent:
        manifest = read_json(path / MANIFEST_FILE) or {}
        kind = str(manifest.get("kind") or "eval")
        config = yaml.safe_load((path / CONFIG_FILE).read_text()) or {}
        return cls(path, kind, config, manifest, read_json(path / RESULT_FILES.get(kind, METRICS_FILE)),
                   read_trials(path))

    @property
    def mode(self) -> str:
        return str((self.config.get("eval") or {}).get("mode", "none")) if self.kind == "eval" else "build"

    def params(self) -> dict[str, str]:
        out = {key: _text(value) for key, value in flatten(self.config).items() if not key.startswith("tracker.")}
        out["run.hash"] = str(self.manifest.get("config_hash", ""))
        out["run.kind"] = self.kind
        out.update({f"packages.{name}": str(v) for name, v in (self.manifest.get("packages") or {}).items()})
        if (git := self.manifest.get("git") or {}).get("commit"):
            out["git.commit"] = str(git["commit"]) + ("+dirty" if git.get("dirty") else "")
        built_by = pool_built_by(self.config, self.mode) if self.kind == "eval" else None
        out.update({f"pool.{key}": _text(value) for key, value in flatten(built_by or {}).items()})
        return out

    def tags(self) -> tuple[dict[str, str], list[str]]:
        """(tags, labels): key -> text, and the short marks a list of runs shows."""
        tags = {"reme.kind": self.kind, "reme.path": str(self.path.resolve()),
                "reme.status": str(self.manifest.get("status", "running")),
                "reme.hash": str(self.manifest.get("config_hash", ""))}
        labels: list[str] = []
        if self.kind == "eval":
            origin = pool_origin(self.config, self.mode)
            tags["reme.fidelity"] = fidelity_text(departures(flatten(self.config), pool=origin["pool_start"],
                                                             pool_params=origin["pool_params"]))
        if (self.path / MANIFEST_FILE).is_file() and scored_by_test_double(self.path):
            tags["reme.test_double"] = f"{TEST_DOUBLE}: its answers come from a script; the numbers are not model results"
            labels.append(TEST_DOUBLE)
        if (self.config.get("model") or {}).get("name") == "local":
            from reme_cli.report.tables import SMOKE_NOTE  # (scipy: only when it is needed)

            tags["reme.smoke"] = SMOKE_NOTE
            labels.append(SMOKE)
        return tags, labels

    def metrics(self) -> dict[str, float]:
        out = numbers(self.result or {})
        ok = [t for t in self.records if t.tokens or t.wall_s]
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
        fields = list(method_columns(str((self.config.get("memory") or {}).get("name"))).series)
        rows: dict[int, dict[str, float]] = defaultdict(dict)
        for t in self.records:
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
        names = (CONFIG_FILE, MANIFEST_FILE, RESULT_FILES.get(self.kind, METRICS_FILE))
        return [self.path / name for name in names if (self.path / name).is_file()]


def headlines(runs: list[Path]) -> dict[str, float]:
    """Each eval run's Avg@k and Pass@k means as ``NAME/avg@k``: a suite's or sweep's runs side
    by side in its own tracker run."""
    out: dict[str, float] = {}
    for path in runs:
        m = read_json(path / METRICS_FILE) or {}
        for key in (f"avg@{m.get('k')}", f"pass@{m.get('k')}"):
            if isinstance(m.get(key), dict) and _is_number(m[key].get("mean")):
                out[f"{path.name}/{key}"] = float(m[key]["mean"])
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


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

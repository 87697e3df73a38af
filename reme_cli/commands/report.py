"""`reme report DIR...`: tables, intervals and plots from run records alone.

Finds every eval run directory under the given directories (runs or suites), turns their
records into the frames ``reme_cli.report`` works on, and writes the report. Nothing is
recomputed from episodes, and nothing is locked: it only reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from reme_cli.core.errors import UserError
from reme_cli.run.records import CONFIG_FILE, MANIFEST_FILE, RunDir


def find_runs(dirs: list[Path]) -> list[Path]:
    found: set[Path] = set()
    for d in dirs:
        if not d.exists():
            raise UserError(f"{d} does not exist")
        for manifest in [d / MANIFEST_FILE, *d.rglob(MANIFEST_FILE)]:
            if manifest.is_file() and (manifest.parent / CONFIG_FILE).is_file():
                try:
                    kind = json.loads(manifest.read_text()).get("kind")
                except (json.JSONDecodeError, AttributeError):  # not a reme manifest (not an object)
                    continue
                if kind == "eval":
                    found.add(manifest.parent.resolve())
    if not found:
        raise UserError(f"no `reme eval` run directories under {', '.join(map(str, dirs))}")
    return sorted(found)


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _run_id(path: Path, paths: list[Path]) -> str:
    """The shortest unique tail of a run's path: its name, or parent/name."""
    for depth in range(1, len(path.parts) + 1):
        tail = Path(*path.parts[-depth:])
        if sum(1 for p in paths if p.parts[-depth:] == path.parts[-depth:]) == 1:
            return str(tail)
    return str(path)


def load_frames(paths: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """(units, runs, pool_series) in the columns reme_cli.report expects."""
    unit_rows, run_rows, series_rows = [], [], []
    for path in paths:
        cfg = _run_config(path / CONFIG_FILE)
        manifest = json.loads((path / MANIFEST_FILE).read_text())
        run_id = _run_id(path, paths)
        trials = RunDir(path).trials()
        mode = cfg["eval"]["mode"]
        run_rows.append({
            "run_id": run_id, "path": str(path), "benchmark": cfg["benchmark"]["name"],
            "model": cfg["model"]["name"], "mode": mode,
            "memory": "none" if mode == "none" else cfg["memory"]["name"],
            "k": cfg["eval"]["runs"], "seeds": cfg["eval"]["seeds"],
            "tasks": len(manifest.get("task_ids") or []), "status": manifest.get("status", "running"),
            "variant": path.name, "params": _flatten(cfg),
        })
        for t in trials:
            checker = t.checker or {}
            unit_rows.append({"run_id": run_id, "seed": t.seed, "run": t.run, "task_id": t.task_id,
                              "success": t.success, "error": not t.ok, "stop_reason": t.stop_reason,
                              "checker_error_type": None if t.success else checker.get("error_type"),
                              # AppWorld's checker names both; SGC and the difficulty table need them.
                              "scenario": checker.get("scenario"), "difficulty": checker.get("difficulty")})
        if mode == "dynamic":
            series_rows += [{"run_id": run_id, **row} for row in _pool_series(trials)]
    units = pd.DataFrame(unit_rows, columns=["run_id", "seed", "run", "task_id", "success", "error",
                                             "stop_reason", "checker_error_type", "scenario", "difficulty"])
    series = pd.DataFrame(series_rows) if series_rows else None
    return units, pd.DataFrame(run_rows), series


def _run_config(path: Path) -> dict[str, Any]:
    try:
        cfg = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML ({str(exc).splitlines()[0]}); restore it, or move that "
                        "run out of the report's directories") from None
    sections = ("eval", "benchmark", "model")
    if not isinstance(cfg, dict) or not all(isinstance(cfg.get(k), dict) for k in sections):
        raise UserError(f"{path} is not a reme run config (it needs the sections {', '.join(sections)}); "
                        "restore it, or move that run out of the report's directories")
    return cfg


def _pool_series(trials: list) -> list[dict[str, Any]]:
    """Pool size along each dynamic stream, from the per-unit ``pool_size`` ReMe records."""
    rows = []
    for t in trials:
        if t.ok and "pool_size" in t.method:
            rows.append({"seed": t.seed, "run": t.run, "position": t.position,
                         "pool_size": t.method["pool_size"], "mean_utility": t.method.get("mean_utility")})
    return rows


def report(dirs: list[Path], out: Path | None = None, suite: str | None = None) -> tuple[Path, list[Path]]:
    from reme_cli.report.write import write_report

    paths = find_runs(dirs)
    units, runs, series = load_frames(paths)
    target = out or (dirs[0] / "report" if len(dirs) == 1 else Path("report"))
    try:
        written = write_report(target, units, runs, pool_series=series, suite=suite)
    except ValueError as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    doubles = [_run_id(p, paths) for p in paths if _scored_by_test_double(p)]
    if doubles:
        md = target / "report.md"
        md.write_text(f"> **Test double:** {', '.join(doubles)} ran against reme's scripted server, which "
                      "answers from a script (e.g. replays the ground truth); their numbers are not model "
                      "results.\n\n" + md.read_text())
    return target, written


def _scored_by_test_double(path: Path) -> bool:
    served = (json.loads((path / MANIFEST_FILE).read_text()).get("server") or {}).get("served_models") or []
    return any(str(m).startswith("scripted-") for m in served)

"""`reme report DIR...`: tables, intervals and plots from run records alone.

Finds every eval run directory under the given directories (runs or suites), turns their
records into the frames ``reme_cli.report`` works on, and writes the report. Nothing is
recomputed from episodes, and the runs are not locked: it only reads them.

The report is written whole into a staging folder and swapped in at the end (the inputs are
validated first), so a failed or killed report leaves the previous one untouched and two
reports to one folder never mix. Only a folder reme can prove it wrote is replaced: its
``REME_REPORT`` manifest lists every file with its sha256, and any other file, or a changed
one, makes reme refuse in one line before it writes anything. An ``--out`` that is a
symbolic link is written through.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from reme_cli.core import integrity
from reme_cli.core.errors import UserError
from reme_cli.core.io import now
from reme_cli.core.staging import replace_dir
from reme_cli.core.staging import clean_stale
from reme_cli.run.lock import DirLock
from reme_cli.core.trials import TRIALS_FILE, UnitRecord, read_trials
from reme_cli.llm.answer_health import summary_failures
from reme_cli.run.records import CONFIG_FILE, MANIFEST_FILE, RunDir
from reme_cli.report.fidelity import flatten, pool_origin, scored_by_test_double  # noqa: F401 - theirs, read here

REPORT_MARK = "REME_REPORT"  # in every report folder: the files reme wrote there, with their sha256


def find_runs(dirs: list[Path], kinds: tuple[str, ...] = ("eval",)) -> list[Path]:
    """The run directories under ``dirs`` whose manifest says one of ``kinds`` (`reme eval`
    runs by default), and eval runs that lost their manifest."""
    found: set[Path] = set()
    for d in dirs:
        if not d.exists():
            raise UserError(f"{d} does not exist")
        for manifest in [d / MANIFEST_FILE, *d.rglob(MANIFEST_FILE)]:
            if manifest.is_file():
                try:
                    kind = json.loads(manifest.read_text()).get("kind")
                except (json.JSONDecodeError, AttributeError):  # not a reme manifest (not an object)
                    continue
                if kind in kinds:  # config.yaml is checked below: a damaged run is named, not skipped
                    found.add(manifest.parent.resolve())
        # A run whose manifest.json is gone still has its config and records.
        for config in [d / CONFIG_FILE, *d.rglob(CONFIG_FILE)]:
            run = config.parent
            if "eval" in kinds and config.is_file() and (run / TRIALS_FILE).is_file() and not (run / MANIFEST_FILE).exists():
                found.add(run.resolve())
    if not found:
        what = " or ".join(f"`reme {k}`" for k in kinds)
        raise UserError(f"no {what} run directories under {', '.join(map(str, dirs))}")
    return sorted(found)


def _run_id(path: Path, paths: list[Path]) -> str:
    """The shortest unique tail of a run's path: its name, or parent/name."""
    for depth in range(1, len(path.parts) + 1):
        tail = Path(*path.parts[-depth:])
        if sum(1 for p in paths if p.parts[-depth:] == path.parts[-depth:]) == 1:
            return str(tail)
    return str(path)


def load_frames(paths: list[Path], order: list[str] | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """(units, runs, pool_series) in the columns reme_cli.report expects.

    ``order``: the suite's run labels as it lists its variants; a run named there gets its
    place as ``suite_rank``, which orders the report's rows, bars and points.
    """
    from reme_cli.report.columns import method_columns
    from reme_cli.report.order import SUITE_RANK

    rank = {label: i for i, label in enumerate(order or [])}
    unit_rows, run_rows, series_rows = [], [], []
    for path in paths:
        cfg = yaml.safe_load((path / CONFIG_FILE).read_text())  # validated by RunDir.check in report()
        manifest = json.loads((path / MANIFEST_FILE).read_text())
        run_id = _run_id(path, paths)
        trials = read_trials(path)
        mode = cfg["eval"]["mode"]
        memory = "none" if mode == "none" else cfg["memory"]["name"]
        run_rows.append({
            "run_id": run_id, "path": str(path), "benchmark": cfg["benchmark"]["name"],
            "model": cfg["model"]["name"], "mode": mode,
            "memory": memory,
            "k": cfg["eval"]["runs"], "seeds": cfg["eval"]["seeds"],
            "tasks": len(manifest.get("task_ids") or []), "status": manifest.get("status", "running"),
            "variant": path.name, "params": flatten(cfg), SUITE_RANK: rank.get(path.name),
            **pool_origin(cfg, mode),
        })
        unit_rows += [unit_row(run_id, t) for t in trials]
        if mode == "dynamic":
            fields = list(method_columns(memory).series)
            series_rows += [{"run_id": run_id, **row} for row in _series(trials, fields)]
    units = pd.DataFrame(unit_rows, columns=unit_columns())
    series = pd.DataFrame(series_rows) if series_rows else None
    return units, pd.DataFrame(run_rows), series


UNIT_COLUMNS = ["run_id", "seed", "run", "task_id", "success", "first_success", "attempts", "error",
                "stop_reason", "checker_error_type", "tokens", "max_prompt", "summaries", "summary_failures"]


def unit_columns() -> list[str]:
    """The unit frame's columns: ``UNIT_COLUMNS`` and the checker fields the benchmarks' own
    metrics read (``reme_cli.bench.scoring``)."""
    return [*UNIT_COLUMNS, *checker_fields()]


def checker_fields() -> tuple[str, ...]:
    from reme_cli.bench.scoring import fields_of
    from reme_cli.report.metrics import declared_reducers

    return fields_of(declared_reducers())


def unit_row(run_id: str, t: UnitRecord) -> dict[str, Any]:
    """One unit as the report's unit frame holds it (``unit_columns()``)."""
    checker = t.checker or {}
    summaries = summary_failures(t.summarizer_answers)
    return {"run_id": run_id, "seed": t.seed, "run": t.run, "task_id": t.task_id,
            "success": t.success, "first_success": first_trial_success(t),
            "attempts": t.attempts, "error": not t.ok, "stop_reason": t.stop_reason,
            "checker_error_type": None if t.success else checker.get("error_type"),
            # The executor's tokens over the unit's trials (the methods table's cost).
            "tokens": (t.tokens.get("prompt", 0) + t.tokens.get("completion", 0)) if t.tokens else None,
            "max_prompt": t.tokens.get("max_prompt") if t.tokens else None,
            # The method's summaries of the unit's trials, and how many of them raised.
            "summaries": summaries["summaries"], "summary_failures": summaries["failed"],
            # What the benchmarks' own metrics read (AppWorld's SGC: scenario, difficulty).
            **{f: checker.get(f) for f in checker_fields()}}


def first_trial_success(t: UnitRecord) -> bool:
    """The verdict on a unit's first trial: its ``first_success``, except that a unit that ran
    one trial (``attempts`` <= 1) was scored on it. The exception is how a line without
    ``first_success`` reads: reme 0.1 wrote neither field for its single-trial units, and
    the record's default (False) would count a solved unit as a first-trial failure."""
    return bool(t.first_success if t.attempts > 1 else t.success)


def _series(trials: list, fields: list[str]) -> list[dict[str, Any]]:
    """The method's declared series fields along each dynamic stream, from its per-unit records
    (``reme_cli.report.columns``: ReMe's pool size and mean utility)."""
    rows = []
    for t in trials:
        if t.ok and any(f in t.method for f in fields):
            rows.append({"seed": t.seed, "run": t.run, "position": t.position,
                         **{f: t.method.get(f) for f in fields}})
    return rows


def suite_order(name: str) -> list[str]:
    """The run labels of suite ``name`` (as ``reme ablate`` names its runs), in the order the
    suite lists its variants, each swept variant's points in sweep order."""
    from reme_cli.commands.ablate import load_suite
    from reme_cli.commands.jobs import expand, job_label, swept_keys

    labels = []
    for vname, variant in load_suite(name)["variants"].items():
        extra = list(variant.get("overrides") or [])
        swept = swept_keys(extra)
        labels += [job_label(vname, job, swept) for job in expand(extra)]
    return labels


def report(dirs: list[Path], out: Path | None = None, suite: str | None = None,
           order: list[str] | None = None) -> tuple[Path, list[Path]]:
    """Write the report of every run under ``dirs``; ``suite``: the table layout, ``order``:
    run labels as the suite lists them (``suite_order``)."""
    from reme_cli.report.specs import table_spec
    from reme_cli.report.write import write_report

    if suite is not None:
        table_spec(suite)  # a UserError naming the valid tables
    paths = find_runs(dirs)
    for path in paths:
        RunDir(path).check()
    units, runs, series = load_frames(paths, order)
    target = out or (dirs[0] / "report" if len(dirs) == 1 else Path("report"))
    _check_target(target)
    doubles = [_run_id(p, paths) for p in paths if scored_by_test_double(p)]

    def fill(staging: Path) -> list[Path]:
        written = write_report(staging, units, runs, pool_series=series, suite=suite)
        if doubles:
            md = staging / "report.md"
            md.write_text(f"> **Test double:** {', '.join(doubles)} ran against reme's scripted server, which "
                          "answers from a script (e.g. replays the ground truth); their numbers are not model "
                          "results.\n\n" + md.read_text())
        files = sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())
        (staging / REPORT_MARK).write_text(json.dumps({"runs": [str(p) for p in paths], "created_at": now(),
                                                       "files": integrity.record(staging, files)}, indent=1))
        return [target / p.relative_to(staging) for p in written]

    with DirLock(target, wait=True, what="report"):  # two reports to one folder take turns
        clean_stale(target, "building")  # left by a killed report
        _check_target(target)
        try:
            return target, replace_dir(target, fill, proof=lambda old: _check_target(old, shown=target))
        except ValueError as exc:
            raise UserError(str(exc).splitlines()[0]) from None


def _check_target(target: Path, shown: Path | None = None) -> None:
    """Refuse (one line) to replace a folder unless it is empty or every file in it is one
    its ``REME_REPORT`` manifest lists, unchanged."""
    shown = shown or target
    if not target.exists():
        return
    if not target.is_dir():
        raise UserError(f"--out {shown} is a file; choose another --out")
    entries = sorted(p for p in target.rglob("*") if not p.is_dir() or p.is_symlink())
    if not entries:
        return
    try:
        listed = json.loads((target / REPORT_MARK).read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    if not isinstance(listed, dict):
        raise UserError(f"--out {shown} exists and holds files reme cannot prove it wrote (no {REPORT_MARK} "
                        "manifest listing them); choose another --out, or move its files away")
    for path in entries:
        rel = str(path.relative_to(target))
        if rel == REPORT_MARK:
            continue
        problem = f"{rel} is not one of its files" if rel not in listed else (
            None if path.is_file() and not path.is_symlink() and integrity.damage(target, listed, [rel]) is None
            else f"{rel} changed since reme wrote it")
        if problem:
            raise UserError(f"--out {shown} holds files reme did not write ({problem}); choose another --out, "
                            "or move them away")

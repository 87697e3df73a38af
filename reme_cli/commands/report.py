"""`reme report DIR...`: tables, intervals and plots from run records alone.

Finds every eval run directory under the given directories (runs or suites), reads them
(``core/run_log.py``) into the frames ``reme_cli.report`` works on (``report/frames.py``), and
writes the report. Nothing is recomputed from episodes, and the runs are not locked: it
only reads them.

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

from reme_cli.core import integrity
from reme_cli.core.errors import UserError
from reme_cli.core.io import now
from reme_cli.core.reading import JsonFile
from reme_cli.core.run_log import find_runs, read_run_log
from reme_cli.core.staging import clean_stale, refuse_system_folder, replace_dir
from reme_cli.run.lock import DirLock

REPORT_MARK = "REME_REPORT"  # in every report folder: the files reme wrote there, with their sha256
MARK = JsonFile("a report folder's REME_REPORT", fix="choose another --out, or move its files away",
                shape={"runs": list, "created_at": str, "files": dict})


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


def suite_dir_order(folder: Path) -> list[str]:
    """The run labels of the suite whose `reme ablate` directory is ``folder`` (named
    ``SUITE-BENCHMARK-MODEL[-START]``), as ``suite_order`` lists them: what `reme view` is
    given to order a suite's runs."""
    return suite_order(folder.name.split("-")[0])


def report(dirs: list[Path], out: Path | None = None, suite: str | None = None,
           order: list[str] | None = None) -> tuple[Path, list[Path]]:
    """Write the report of every run under ``dirs``; ``suite``: the table layout, ``order``:
    run labels as the suite lists them (``suite_order``)."""
    from reme_cli.report.frames import load_frames, run_ids
    from reme_cli.report.specs import table_spec
    from reme_cli.report.write import write_report

    if suite is not None:
        table_spec(suite)  # a UserError naming the valid tables
    target = out or (dirs[0] / "report" if len(dirs) == 1 else Path("report"))
    refuse_system_folder(target, "--out", "./report")  # before anything is read, walked or written
    paths = find_runs(dirs)
    logs = [read_run_log(path) for path in paths]  # a damaged run is named before anything is written
    units, runs, series = load_frames(logs, order)
    _check_target(target)
    ids = run_ids(paths)
    doubles = [ids[log.path] for log in logs if log.manifest.test_double]

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
    # Walked lazily, and no further than the first file reme cannot prove it wrote.
    entries = (p for p in target.rglob("*") if not p.is_dir() or p.is_symlink())
    listed = (MARK.probe(target / REPORT_MARK) or {}).get("files")
    if not isinstance(listed, dict):
        if next(entries, None) is None:
            return
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

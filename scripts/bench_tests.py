"""How long the test suite takes, and where the time goes: the README's test command, timed.

Runs pytest (the README's `pytest -q`, plus any arguments after `--`) in a subprocess from the
checkout, and reports its wall time, the CPU it and every process it started used (user +
system of the whole process tree), the machine's cores and load when it started, and the files
and tests that took longest (pytest's own per-test times, from a JUnit XML it writes to a
temporary folder). The suite's budget is 10 minutes of wall time on 2 cores.

    python scripts/bench_tests.py --out results/test_suite_benchmark.md
    python scripts/bench_tests.py -- tests/cli/test_cli_meta.py        # a part of the suite
    python scripts/bench_tests.py --save-durations                  # ... and keep each file's time

``--save-durations`` writes each file's seconds to tests/durations.json, which the suite reads
to start its longest files first (tests/conftest.py); files the run did not cover keep theirs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DURATIONS = REPO / "tests" / "durations.json"


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_file(classname: str) -> str:
    """The test file of a JUnit classname: ``tests.test_x`` or ``tests.test_x.TestClass``."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n]) + ".py"
        if (REPO / path).is_file():
            return path
    return classname


def run(pytest_args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *pytest_args]
        load = os.getloadavg()[0]
        cpu0, t0 = cpu_of_children(), time.monotonic()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        wall, cpu = time.monotonic() - t0, cpu_of_children() - cpu0
        if not junit.exists():
            raise SystemExit(f"error: pytest wrote no results (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        cases = []
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome = "failed" if case.find("failure") is not None or case.find("error") is not None else \
                "skipped" if case.find("skipped") is not None else "passed"
            cases.append({"file": test_file(case.get("classname", "")),
                          "name": case.get("name", ""), "time": float(case.get("time") or 0), "outcome": outcome})
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return {"wall": wall, "cpu": cpu, "load": load, "cores": os.cpu_count(), "cases": cases,
            "exit": proc.returncode, "summary": summary, "args": pytest_args}


def file_seconds(cases: list[dict]) -> dict[str, float]:
    by_file: dict[str, float] = defaultdict(float)
    for c in cases:
        by_file[c["file"]] += c["time"]
    return by_file


def save_durations(cases: list[dict], path: Path = DURATIONS) -> None:
    """Merge this run's per-file seconds into ``path``, longest first."""
    try:
        seconds = json.loads(path.read_text())
    except (OSError, ValueError):
        seconds = {}
    seconds.update({f: round(t, 1) for f, t in file_seconds(cases).items()})
    ordered = dict(sorted(seconds.items(), key=lambda kv: -kv[1]))
    path.write_text(json.dumps(ordered, indent=1) + "\n")


def table(r: dict, top: int) -> str:
    by_file = file_seconds(r["cases"])
    counts = {o: sum(c["outcome"] == o for c in r["cases"]) for o in ("passed", "failed", "skipped")}
    lines = [
        f"`pytest -q {' '.join(r['args'])}`".replace(" `", "`"),
        f"on {r['cores']} cores, load average {r['load']:.1f} at the start, {dt.date.today().isoformat()}",
        "",
        "| measure | value |",
        "| --- | ---: |",
        f"| wall time | {r['wall']:.0f} s ({r['wall'] / 60:.1f} min) |",
        f"| CPU time of pytest and everything it started | {r['cpu']:.0f} s |",
        f"| tests passed / failed / skipped | {counts['passed']} / {counts['failed']} / {counts['skipped']} |",
        f"| pytest exit code | {r['exit']} |",
        *(f"| failed | `{c['file']}::{c['name']}` |" for c in r["cases"] if c["outcome"] == "failed"),
        "",
        f"The {top} files that took longest (sum of their tests' times; files run side by side):",
        "",
        "| file | s |",
        "| --- | ---: |",
        *(f"| {f} | {t:.1f} |" for f, t in sorted(by_file.items(), key=lambda kv: -kv[1])[:top]),
        "",
        f"The {top} slowest tests:",
        "",
        "| test | s |",
        "| --- | ---: |",
        *(f"| {c['file']}::{c['name']} | {c['time']:.1f} |" for c in sorted(r["cases"], key=lambda c: -c["time"])[:top]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, help="how many files and tests to list")
    parser.add_argument("--out", type=Path, help="also write the tables (markdown) here")
    parser.add_argument("--save-durations", action="store_true",
                        help=f"write each file's seconds to {DURATIONS.relative_to(REPO)} (the suite starts the longest first)")
    args = parser.parse_args(own)
    if args.top < 1:
        parser.error("--top: give at least 1")
    result = run(pytest_args)
    text = table(result, args.top)
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    if args.save_durations:
        save_durations(result["cases"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

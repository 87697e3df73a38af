"""How long `reme` takes to answer what needs no run: a bad override, `--help`.

Each command runs as `PYTHON -m reme_cli.cli ARGS` in a fresh process from an empty folder,
RUNS times, the interpreters given with --python taken in turn (A B A B ...: a drift of the
machine's speed falls on both), and the table gives per command and interpreter the median
wall seconds and CPU seconds (user + system, the kernel's count of the finished child), the
CPU ratio to the first interpreter, and the heavy libraries the command imported (one
`-X importtime` run). Compare two checkouts by giving each one's venv interpreter, labelled:

    python scripts/bench_startup.py --python before=../main/.venv/bin/python --python after=.venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A bad override Hydra refuses, one the schema refuses, one a method's own section refuses (its
# section alone is loaded to validate it), one after the default method's section settled, help.
COMMANDS = (("eval", "model=nope"), ("eval", "eval.runs=0"), ("eval", "memory=reme", "memory.colour=red"),
            ("eval", "--mode", "fixed", "eval.runs=0"), ("--help",), ("eval", "--help"))
HEAVY = ("openai", "pandas", "numpy", "optuna", "mlflow", "wandb", "torch", "sentence_transformers", "faiss")


def timed(python: str, args: tuple[str, ...], cwd: str) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of the command."""
    start = time.perf_counter()
    proc = subprocess.Popen([python, "-m", "reme_cli.cli", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def heavy_imports(python: str, args: tuple[str, ...], cwd: str) -> list[str]:
    proc = subprocess.run([python, "-X", "importtime", "-m", "reme_cli.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return [m for m in HEAVY if m in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", metavar="[LABEL=]PATH",
                        help="an interpreter with reme installed (repeatable; default: this one); the first is "
                             "the yardstick")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, help="also write the table here")
    opts = parser.parse_args()
    pythons = []  # (its name in the table, the interpreter)
    for spec in opts.python or [sys.executable]:
        label, _, path = spec.rpartition("=")
        pythons.append((label or path, path))
    with tempfile.TemporaryDirectory(prefix="reme-startup-") as cwd:
        for _, python in pythons:  # one warm-up each: the disk cache, compiled bytecode
            for args in COMMANDS:
                timed(python, args, cwd)
        samples = {(i, c): [] for i in range(len(pythons)) for c in COMMANDS}
        for _ in range(opts.runs):
            for args in COMMANDS:
                for i, (_, python) in enumerate(pythons):
                    samples[(i, args)].append(timed(python, args, cwd))
        heavy = {(i, c): heavy_imports(python, c, cwd) for i, (_, python) in enumerate(pythons) for c in COMMANDS}
    rows = ["| command | python | wall s (median) | cpu s (median) | cpu / first | heavy imports |",
            "| --- | --- | --- | --- | --- | --- |"]
    for args in COMMANDS:
        first = statistics.median(c for _, c in samples[(0, args)])
        for i, (label, _) in enumerate(pythons):
            wall = statistics.median(w for w, _ in samples[(i, args)])
            cpu = statistics.median(c for _, c in samples[(i, args)])
            rows.append(f"| reme {' '.join(args)} | {label} | {wall:.2f} | {cpu:.2f} | {cpu / first:.2f} | "
                        f"{', '.join(heavy[(i, args)]) or 'none'} |")
    text = "\n".join([f"{opts.runs} runs each, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", "",
                      *rows]) + "\n"
    print(text, end="")
    if opts.out:
        opts.out.write_text(text)


if __name__ == "__main__":
    main()

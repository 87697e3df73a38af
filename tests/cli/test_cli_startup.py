"""`reme` answers a bad override or `--help` at once: nothing heavy is imported before the
config is composed and validated. Each command runs in a fresh interpreter (the test's own
has imported everything), which then lists the heavy libraries it had loaded when it exited.
scripts/bench_startup.py measures the seconds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reme_cli.core.config import group_files
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # a fresh interpreter per command (tests/tiers.py)

HEAVY = ("openai", "pandas", "numpy", "optuna", "mlflow", "wandb", "torch", "sentence_transformers", "faiss")
# The CLI as `reme` runs it, then what the interpreter had imported.
DRIVER = f"""
import json, sys
from reme_cli.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code, "heavy": sorted(m for m in {HEAVY!r} if m in sys.modules)}}))
"""


def run(*args: str, cwd) -> tuple[dict, str]:
    proc = subprocess.run([sys.executable, "-c", DRIVER, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.parametrize("args, says", [
    (["eval", "model=nope"], "model=nope does not exist"),
    (["eval", "--mode", "fixed", "model=nope"], "model=nope does not exist"),
    (["eval", "benchmark.colour=red"], "unknown key 'benchmark.colour'"),  # BFCL's own section
    (["eval", "benchmark=appworld", "benchmark.colour=red"], "unknown key 'benchmark.colour'"),
    (["eval", "eval.runs=0"], "eval.runs"),  # after both plug-ins' sections were validated
    (["eval", "-m", "eval.runs=1,0"], "eval.runs"),  # any point of a sweep, before the first runs
    (["build-pool", "model=nope"], "model=nope does not exist"),
    (["build-pool", "benchmark.limit=0"], "benchmark.limit=0 must be >= 1"),  # the default method's, validated
    (["eval", "--mode", "fixed", "eval.runs=0"], "eval.runs"),  # after the default method's section settled
    (["eval", "--mode", "dynamic", "-m", "eval.runs=1,0"], "eval.runs"),
    # Each plug-in's own section: validated by its section alone (core.registry.Registry.section).
    *((["eval", f"{group}={option}", f"{group}.colour=red"], f"unknown key '{group}.colour'")
      for group, option in (("memory", o) for o in group_files("memory"))),
    *((["eval", f"{group}={option}", f"{group}.colour=red"], f"unknown key '{group}.colour'")
      for group, option in (("benchmark", o) for o in group_files("benchmark"))),
])
def test_a_config_error_imports_nothing_heavy(args, says, tmp_path):
    out, stderr = run(*args, cwd=tmp_path)
    assert out == {"code": 2, "heavy": []}, stderr[-2000:]
    assert says in stderr and "Traceback" not in stderr
    assert not any(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.parametrize("args", [["--help"], ["eval", "--help"], ["build-pool", "--help"]])
def test_help_imports_nothing_heavy(args, tmp_path):
    out, stderr = run(*args, cwd=tmp_path)
    assert out == {"code": 0, "heavy": []}, stderr[-2000:]

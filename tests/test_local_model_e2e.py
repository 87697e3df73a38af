"""The embedded CPU model for real, through the CLI: reme starts llama.cpp with the SmolLM2
GGUF, runs an episode, records it, and stops the server. Kept to a few model calls: on 2
cores each costs seconds."""

import json
import subprocess
from pathlib import Path

SMALL = ["eval.runs=1", "eval.seeds=1", "benchmark.max_interactions=3", "llm.concurrency=1"]


def _llama_servers() -> list[str]:
    out = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if "llama_cpp.server" in l and not l.startswith("Z")]


def test_embedded_model_episode_completes_and_is_recorded(reme):
    before = set(_llama_servers())
    proc = reme("eval", "--mode", "none", "benchmark.task_ids=[multi_turn_base_1]", *SMALL, "out_dir=run",
                check=True)
    run = Path(reme.cwd) / "run"
    assert proc.stdout.strip().splitlines()[-1] == "run"
    assert "smoke-level" in proc.stderr  # the table says these are not model results
    (trial,) = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    assert trial["error"] is None, trial.get("traceback")
    assert 1 <= trial["interactions"] <= 3
    assert trial["tokens"]["prompt"] > 0 and trial["tokens"]["completion"] > 0
    # The official checker gave a verdict on whatever the model did.
    assert "decoded_calls" in trial["checker"] and isinstance(trial["success"], bool)
    # Constrained decoding: every step's reply parsed, so every call names an offered tool.
    steps = [s for turn in trial["trajectory"]["turns"] for s in turn]
    assert steps and all(c["name"] for s in steps for c in s["calls"])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["server"]["kind"] == "embedded-llama.cpp" and manifest["status"] == "complete"
    assert set(_llama_servers()) <= before  # the embedded server was stopped


def test_embedded_model_builds_a_pool(reme):
    proc = reme("build-pool", "benchmark.limit=1", "memory.build_samples=2", "benchmark.max_interactions=3",
                "llm.concurrency=1", "out_dir=pool", check=True)
    out = Path(reme.cwd) / "pool"
    report = json.loads((out / "build" / "report.json").read_text())
    assert report["trajectories"] == 2 and report["unit_errors"] == 0 and report["tasks_distilled"] == 1
    assert (out / "pool" / "manifest.json").exists()
    assert report["summarizer_llm_calls"] >= 1
    assert "pool size" in proc.stderr

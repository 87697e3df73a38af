"""`reme eval -m hydra/sweeper=optuna ...`: a search with the real Optuna (its study in SQLite),
each trial an ordinary run against the scripted server (a TEST DOUBLE: its scores are not
model results). The objective here is the prompt tokens, which the server counts from what it
is sent: more retrieved experiences make longer prompts, so the search has a true best."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from reme_cli.commands.optuna_sweep import objective_value, parse
from reme_cli.core.errors import UserError
from tests.conftest import reme_env, reme_popen, reme_process, run_reme, scripted_server_process
from tests.track.test_tracking import REPLAY, mlflow_runs

SWEEP = ["--mode", "fixed", "hydra/sweeper=optuna", "memory.top_k=choice(5,3,1)", "hydra/sweeper/sampler=grid",
         "hydra.sweeper.n_trials=3", "hydra.sweeper.objective=tokens/prompt", "hydra.sweeper.direction=minimize"]


@pytest.mark.slow
def test_a_three_trial_sweep_over_top_k_resumes_after_an_interrupt_and_reports_the_best(tmp_path):
    run_reme(["pool", "import", "official:bfcl/qwen3-8b", "--out", "pool", "model=qwen3-8b", "embedding=minilm"],
             tmp_path, check=True)
    with scripted_server_process("--policy", "bfcl-replay", "--delay", "0.1") as url:
        args = ["eval", "-m", *SWEEP, *REPLAY, f"llm.base_url={url}", "benchmark.limit=3", "eval.runs=1",
                "eval.seeds=1", "memory.pool=pool", "tracker=mlflow"]
        env = reme_env(tmp_path / "cache")
        proc = reme_popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sweeps = tmp_path / "runs" / "sweeps"
        deadline = time.time() + 180
        # Ctrl-C once the second trial has units on disk: the first is finished, the second half-way.
        while time.time() < deadline and len(list(sweeps.glob("*/runs/*/trials.jsonl"))) < 2:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err[-2000:]
        (where,) = sweeps.iterdir()
        assert len(list(where.glob("runs/*/metrics.json"))) == 1, "the interrupt must land in the second trial"
        interrupted = next(p for p in where.glob("runs/*") if not (p / "metrics.json").exists())
        kept = (interrupted / "trials.jsonl").read_text()

        done = reme_process(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == str(where.relative_to(tmp_path))
    # The interrupted trial ran again in its own run directory, which kept what it had.
    assert (interrupted / "trials.jsonl").read_text().startswith(kept)
    runs = sorted(p.name for p in where.glob("runs/*"))
    assert runs == ["trial-top_k1", "trial-top_k3", "trial-top_k5"]
    rows = list(csv.DictReader((where / "trials.csv").open()))
    assert [r["state"] for r in rows] == ["COMPLETE"] * 3
    tokens = {r["run"]: float(r["value"]) for r in rows}
    for name, value in tokens.items():  # each trial's objective is its run's own prompt tokens
        units = [json.loads(line) for line in (where / "runs" / name / "trials.jsonl").read_text().splitlines()]
        assert value == sum(u["tokens"]["prompt"] for u in units)
    assert tokens["trial-top_k1"] < tokens["trial-top_k3"] < tokens["trial-top_k5"]
    assert "best: trial" in done.stderr and "memory.top_k=1: tokens/prompt = " in done.stderr
    # The study is one MLflow parent run of its trials, holding the best trial and the table.
    client, found = mlflow_runs(tmp_path / "runs" / "mlflow.db")
    (parent,) = [r for r in found if r.data.tags.get("reme.kind") == "sweep"]
    assert parent.data.tags["best.memory.top_k"] == "1" and parent.info.status == "FINISHED"
    assert parent.data.metrics["best/value"] == tokens["trial-top_k1"]
    children = {r.info.run_name for r in found if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert children == set(runs)
    assert [(m.step, m.value) for m in client.get_metric_history(parent.info.run_id, "objective")] == \
        [(int(r["number"]), float(r["value"])) for r in rows]
    assert "trials.csv" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    # The same command again: the study is done, nothing runs.
    again = reme_process(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "trial 3" not in again.stderr
    assert sorted(p.name for p in where.glob("runs/*")) == runs


def test_the_search_space_reads_hydras_sweep_grammar():
    import optuna.distributions as d

    sweep = parse(["hydra/sweeper=optuna", "memory.top_k=range(1,11)", "memory.deletion.alpha=interval(1,10)",
                   "memory.deletion.beta=tag(log, interval(0.01, 0.9))", "memory.rerank=true,false",
                   "x.n=int(interval(2,8))", "model=qwen3-8b", "hydra.sweeper.n_trials=12", "hydra.sweeper.seed=7"])
    assert sweep.space == {"memory.top_k": d.IntDistribution(1, 10), "memory.deletion.alpha": d.FloatDistribution(1.0, 10.0),
                           "memory.deletion.beta": d.FloatDistribution(0.01, 0.9, log=True),
                           "memory.rerank": d.CategoricalDistribution([True, False]), "x.n": d.IntDistribution(2, 8)}
    assert sweep.fixed == ["model=qwen3-8b"]
    assert (sweep.settings.n_trials, sweep.settings.seed, sweep.settings.objective) == (12, 7, "avg@k")


@pytest.mark.parametrize("overrides, message", [
    (["memory.top_k=5"], "needs a search space"),
    (["memory.top_k=1,2", "hydra.sweeper.trials=3"], "hydra.sweeper.trials"),
    (["memory.top_k=1,2", "hydra.sweeper.direction=up"], "choose maximize or minimize"),
    (["memory.top_k=1,2", "hydra/sweeper/sampler=cmaes"], "choose one of tpe, random, grid"),
    (["memory.deletion.alpha=interval(1,2)", "hydra/sweeper/sampler=grid"], "choice(...) and range(...) only"),
    (["memory.top_k=1,2", "out_dir=x"], "set runs_root= instead"),
])
def test_a_bad_sweep_is_one_line(overrides, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse(["hydra/sweeper=optuna", *overrides])


def test_the_objective_is_a_run_metric_as_its_tracker_names_it():
    metrics = {"avg@4/mean": 0.5, "avg@4/std": 0.1, "pass@4/mean": 0.75, "first_attempt/avg@4/mean": 0.25,
               "tokens/prompt": 1000.0}
    assert objective_value(metrics, "avg@k", 4) == 0.5
    assert objective_value(metrics, "first_attempt.avg@k", 4) == 0.25
    assert objective_value(metrics, "tokens/prompt", 4) == 1000.0
    with pytest.raises(UserError, match="choose one of avg@k, first_attempt/avg@k, pass@k, tokens/prompt"):
        objective_value(metrics, "sgc@k", 4)


def test_the_optuna_sweeper_is_for_eval_multiruns_only(reme):
    single = reme("eval", "hydra/sweeper=optuna", "memory.top_k=1,2")
    assert single.returncode == 2 and "add -m" in single.stderr
    build = reme("build-pool", "-m", "hydra/sweeper=optuna", "build.samples=1,2")
    assert build.returncode == 2 and "searches the runs of `reme eval -m`" in build.stderr


@pytest.mark.slow
def test_a_dry_run_prints_one_trials_estimate_and_runs_nothing(reme):
    proc = reme("eval", "-m", "--mode", "fixed", "memory.pool=nowhere", "hydra/sweeper=optuna",
                "memory.top_k=range(1,11)", "hydra.sweeper.n_trials=4", "hydra.sweeper.dry_run=true",
                "benchmark.limit=5", "eval.runs=2", "eval.seeds=1", "llm.base_url=http://127.0.0.1:9/v1",
                env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "estimate of one trial of 4" in proc.stderr and "nothing was run" in proc.stderr
    row = next(line for line in proc.stderr.splitlines() if "one trial │" in line)
    assert row.split("│")[2].strip() == "120"  # executor calls: 5 tasks x 2 runs x 12 per episode (cost.py's assumption)
    assert not (reme.cwd / "runs").exists()

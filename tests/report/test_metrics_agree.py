"""`reme eval`'s final table (metrics.json) and `reme report` agree on the same records.

Both read one run directory: the numbers `reme eval` writes to metrics.json, and the row
`reme report` computes from the frames it loads. Errored units (failures on both sides), a
(seed, task) whose every unit errored, a retried unit, several seeds and runs, units scored on a later trial than their
first, and AppWorld scenarios all occur.
"""

from __future__ import annotations

import pytest

from reme_cli.bench.scoring import declared_metrics
from reme_cli.core.config import compose, config_hash, to_dict
from reme_cli.core.io import append_lines
from reme_cli.core.registry import BENCHMARKS
from reme_cli.core.run_log import read_run_log
from reme_cli.report.frames import load_frames
from reme_cli.report.metrics import run_metrics
from reme_cli.run.metrics import final_metrics
from reme_cli.run.records import TRIALS_FILE, RunDir, UnitRecord

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

SEEDS, K, TASKS = 3, 3, ["a_1", "a_2", "b_1", "b_2", "c_1"]


def _records(appworld: bool) -> list[UnitRecord]:
    out = []
    for seed in range(SEEDS):
        for run in range(K):
            for i, task in enumerate(TASKS):
                error = "Boom: x" if (seed * 7 + run * 3 + i) % 5 == 0 or (seed, task) == (1, "b_2") else None
                checker = {"scenario": task.split("_")[0], "difficulty": 1 + i % 3} if appworld else {}
                success, first = ((seed + 1) * (i + 1) + run) % 4 in (0, 1), (seed + run + i) % 2 == 0
                out.append(UnitRecord(unit=f"s{seed}/r{run}/{task}", task_id=task, seed=seed, run=run,
                                      position=i, success=success, first_success=first,
                                      attempts=1 + (first != success) + (run == 2), error=error,
                                      stop_reason="error" if error else "answered", checker=checker))
    # A unit that errored and then ran again: its last record counts, on both sides.
    retried = out[1]
    out.insert(0, UnitRecord(unit=retried.unit, task_id=retried.task_id, seed=retried.seed, run=retried.run,
                             error="Boom: first try", checker=retried.checker))
    return out


def _run_dir(path, benchmark: str, appworld: bool) -> RunDir:
    cfg = compose([f"benchmark={benchmark}", "eval.mode=dynamic", "memory=reme", f"eval.seeds={SEEDS}",
                   f"eval.runs={K}"])
    run_dir = RunDir.open(path, to_dict(cfg), config_hash(cfg), kind="eval")
    run_dir.update_manifest(status="incomplete", task_ids=TASKS)
    append_lines(path / TRIALS_FILE, [r.to_dict() for r in _records(appworld)])
    return run_dir


@pytest.mark.parametrize("benchmark,appworld", [("bfcl_v3", False), ("appworld", True)])
def test_final_table_and_report_agree_on_the_same_records(tmp_path, benchmark, appworld):
    run_dir = _run_dir(tmp_path / "run", benchmark, appworld)
    trials = run_dir.trials()
    assert any(not t.ok for t in trials) and any(t.ok for t in trials)  # errors are part of the case
    # As `reme eval` calls it: with what the run's benchmark declares (AppWorld: SGC, difficulty).
    final = final_metrics(trials, K, "dynamic", declared_metrics(BENCHMARKS.get(benchmark)))
    units, runs = load_frames([read_run_log(run_dir.path)])[:2]
    row = run_metrics(units, runs).iloc[0]

    same = pytest.approx  # the same records: equal up to float rounding
    assert row["avg_mean"] == same(final[f"avg@{K}"]["mean"]) and row["avg_std"] == same(final[f"avg@{K}"]["std"])
    assert row["pass_mean"] == same(final[f"pass@{K}"]["mean"])
    assert row["pass_std"] == same(final[f"pass@{K}"]["std"])
    assert row["n_seeds"] == final[f"avg@{K}"]["n_seeds"] == SEEDS
    assert sorted(row["per_seed"]) == [int(s) for s in sorted(final["per_seed"])]
    for seed, (avg, pass_) in row["per_seed"].items():
        assert (avg, pass_) == same((final["per_seed"][str(seed)][f"avg@{K}"], final["per_seed"][str(seed)][f"pass@{K}"]))
    # the first trials too (metrics.json's first_attempt block, the report's first_* columns)
    first = final["first_attempt"]
    assert row["first_avg_mean"] == same(first[f"avg@{K}"]["mean"]) and row["first_avg_std"] == same(first[f"avg@{K}"]["std"])
    assert row["first_pass_mean"] == same(first[f"pass@{K}"]["mean"])
    assert row["first_pass_std"] == same(first[f"pass@{K}"]["std"])
    assert row["first_avg_mean"] != same(row["avg_mean"])  # the retries changed something to agree on
    # seed 1's task b_2 errored in every run: a failed task (as the authors scored it), not a lost one
    assert final["per_seed"]["1"]["tasks"] == len(TASKS)
    b_2 = [t for t in trials if (t.seed, t.task_id) == (1, "b_2")]
    assert b_2 and not any(t.ok for t in b_2)
    assert row["n_errors"] == final["errors"] > 0 and row["n_units"] == final["units"] == SEEDS * K * len(TASKS)
    assert bool(row["partial"]) is (not final["complete"]) is True
    if appworld:
        assert row["sgc_mean"] == same(final["sgc"]["mean"]) and row["sgc_std"] == same(final["sgc"]["std"])
        assert row["by_difficulty"] == same(final["by_difficulty"]) and len(final["by_difficulty"]) == 3
    else:
        assert "sgc" not in final and row["by_difficulty"] == {}

"""Typed unit records: one definition, versioned, and reme 0.1's untyped lines still load."""

from __future__ import annotations

import json

from reme_cli.run.records import SCHEMA_VERSION, RunDir, UnitRecord

V1_LINE = {  # a trials.jsonl line as reme 0.1 wrote it (no schema_version, method fields on top)
    "unit": "s0/r1/multi_turn_base_3", "task_id": "multi_turn_base_3", "seed": 0, "run": 1, "position": 2,
    "success": True, "first_success": False, "reward": 1.0, "checker": {"valid": True},
    "memory": {"added": ["e1"], "pool_size": 7}, "lessons": ["check the folder first"],
    "error": None, "retrieved_ids": ["e0"], "retrieval_scores": [0.9], "guidance": "Experience 1: ...",
    "trajectory": {"turns": [], "interactions": 3, "stop_reason": "max_interactions"}, "attempts": 2,
    "tokens": {"prompt": 10, "completion": 5}, "llm_latency_s": 0.1, "interactions": 3,
    "started_at": "a", "finished_at": "b", "wall_s": 0.2,
}


def test_a_v1_record_is_upgraded_on_read():
    rec = UnitRecord.from_dict(V1_LINE)
    assert rec.schema_version == SCHEMA_VERSION == 2
    assert rec.method == {"added": ["e1"], "pool_size": 7, "lessons": ["check the folder first"]}
    assert rec.stop_reason == "interaction_limit"  # 0.1's name for it
    assert (rec.unit, rec.success, rec.first_success, rec.attempts) == ("s0/r1/multi_turn_base_3", True, False, 2)
    errored = UnitRecord.from_dict({**V1_LINE, "error": "RuntimeError: boom", "trajectory": None})
    assert errored.stop_reason == "error" and not errored.ok


def test_a_record_round_trips_and_unknown_keys_are_ignored():
    rec = UnitRecord(unit="s0/r0/t", task_id="t", seed=0, run=0, success=True, stop_reason="answered",
                     method={"x": 1})
    assert UnitRecord.from_dict(rec.to_dict()) == rec
    assert UnitRecord.from_dict({**rec.to_dict(), "added_in_a_later_version": 1}) == rec


def test_a_run_directory_with_old_and_new_lines_reads_typed(tmp_path):
    run = RunDir.open(tmp_path / "run", {"a": 1}, "hash", kind="eval")
    new = UnitRecord(unit="s0/r0/t2", task_id="t2", seed=0, run=0, stop_reason="answered")
    (run.path / "trials.jsonl").write_text(json.dumps(V1_LINE) + "\n" + json.dumps(new.to_dict()) + "\n")
    trials = run.trials()
    assert [type(t) for t in trials] == [UnitRecord, UnitRecord]
    assert run.finished_units() == {"s0/r1/multi_turn_base_3", "s0/r0/t2"}

"""Typed unit records: one definition, versioned, and reme 0.1's untyped lines still load."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from reme_cli.run import records
from reme_cli.run.records import SCHEMA_VERSION, JsonlWriter, RunDir, UnitRecord

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


@pytest.mark.parametrize("fails", [False, True])
def test_a_writer_cancelled_mid_flush_leaves_its_batch_and_the_loop_clean(tmp_path, monkeypatch, fails):
    """Ctrl-C cancels every stream, some while their line is on its way to disk: the flush
    must not set a result on the cancelled writer (InvalidStateError, printed as a traceback
    at exit) and must still wake the other writers of its batch."""
    on_disk = threading.Event()
    write_lines = records.append_lines

    def slow_append(path, lines):
        assert on_disk.wait(2)
        if fails:
            raise OSError("disk full")
        write_lines(path, lines)

    monkeypatch.setattr(records, "append_lines", slow_append)

    async def scenario():
        loop_errors = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: loop_errors.append(ctx))
        writer = JsonlWriter(tmp_path / "trials.jsonl")
        cancelled = asyncio.create_task(writer.write({"unit": "a"}))
        other = asyncio.create_task(writer.write({"unit": "b"}))
        await asyncio.sleep(0.05)  # both lines are in one batch, in the flusher's thread
        cancelled.cancel()
        await asyncio.sleep(0)
        on_disk.set()
        done, _ = await asyncio.wait([other], timeout=2)
        assert done, "a writer whose batch-mate was cancelled never woke"
        await asyncio.wait([writer._flusher], timeout=2)
        return cancelled, other, writer._flusher, loop_errors

    cancelled, other, flusher, loop_errors = asyncio.run(scenario())
    assert cancelled.cancelled() and flusher.exception() is None and not loop_errors
    if fails:
        assert isinstance(other.exception(), OSError)
    else:
        assert other.exception() is None
        assert [json.loads(l)["unit"] for l in (tmp_path / "trials.jsonl").read_text().splitlines()] == ["a", "b"]

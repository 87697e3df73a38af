"""Typed unit records: one definition, versioned, and reme 0.1's untyped lines still load; a
whole run directory read as one typed log (core/run_log.py), as earlier versions wrote it too."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
import yaml

from reme_cli.core.errors import UserError
from reme_cli.core.run_log import MANIFEST_VERSION, Commit, find_runs, read_commits, read_pool_header, read_run_log
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


def test_a_manifest_records_the_packages_its_benchmark_names_beside_remes_own():
    """A benchmark names its packages (``Benchmark.packages``): none is listed in run/ (BFCL's
    checker is installed here, and recorded only for a benchmark that names it)."""
    from importlib import metadata

    from reme_cli.core.registry import BENCHMARKS

    assert "bfcl-eval" not in records.package_versions()
    names = (*BENCHMARKS.get("bfcl_v3").packages, "pytest", "no-such-distribution")
    versions = records.package_versions(names)
    assert versions["bfcl-eval"] == metadata.version("bfcl-eval") and versions["pytest"] == metadata.version("pytest")
    assert "no-such-distribution" not in versions and "reme-harness" in versions


@pytest.mark.slow
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


# ---------------------------------------------------------------- the run log (core/run_log.py)

CONFIG = {"benchmark": {"name": "bfcl_v3"}, "model": {"name": "qwen3-8b"}, "experiment": "default",
          "eval": {"mode": "dynamic", "runs": 2, "seeds": 1},
          "memory": {"name": "reme", "pool": "pools/p", "top_k": 5}}
# A manifest and metrics.json as reme wrote them before the manifest had a schema_version (and
# before metrics.json said "complete"), with a key from a later version beside them.
OLD_MANIFEST = {"kind": "eval", "status": "complete", "config_hash": "abc123", "created_at": "t0",
                "git": {"commit": None, "dirty": None}, "packages": {"bfcl-eval": "2025.10.27"},
                "server": {"served_models": ["scripted-replay"]}, "task_ids": ["a", "b"], "streams": None,
                "from_a_later_version": {"x": 1}}
OLD_METRICS = {"k": 2, "tasks": 2, "units": 4, "errors": 0, "per_seed": {"0": {"avg@2": 0.75, "pass@2": 1.0}},
               "avg@2": {"mean": 0.75, "std": 0.0, "n_seeds": 1}, "pass@2": {"mean": 1.0, "std": 0.0, "n_seeds": 1}}


def old_run(path, trials: list[dict] | None = None, manifest: dict | None = None):
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    (path / "manifest.json").write_text(json.dumps(manifest or OLD_MANIFEST))
    (path / "metrics.json").write_text(json.dumps(OLD_METRICS))
    (path / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials or [V1_LINE]))
    return path


def test_a_run_written_by_an_earlier_version_reads_as_one_typed_log(tmp_path):
    log = read_run_log(old_run(tmp_path / "run"))
    cfg, manifest = log.config, log.manifest
    assert (cfg.benchmark, cfg.model, cfg.mode, cfg.method, cfg.k, cfg.seeds, cfg.pool) == \
        ("bfcl_v3", "qwen3-8b", "dynamic", "reme", 2, 1, "pools/p")
    assert cfg.flat()["memory.top_k"] == 5 and cfg["memory"]["top_k"] == 5  # still the mapping it wrote
    assert (manifest.schema_version, manifest.kind, manifest.status, manifest.task_ids) == (1, "eval", "complete", ["a", "b"])
    assert manifest.streams is None and manifest.test_double  # the scripted server answered it
    assert manifest.extra == {"from_a_later_version": {"x": 1}}  # kept, not refused
    assert {k: manifest.to_dict()[k] for k in OLD_MANIFEST} == OLD_MANIFEST  # what it read, it gives back
    m = log.metrics
    assert (m.k, m.units, m.avg.mean, m.pass_.mean, m.complete, m.first_attempt) == (2, 4, 0.75, 1.0, None, None)
    assert m.data == OLD_METRICS and log.build_report is None
    (t,) = log.trials  # reme 0.1's line, upgraded on load
    assert t.schema_version == SCHEMA_VERSION and t.method["lessons"] == ["check the folder first"]


@pytest.mark.slow
def test_a_new_run_directory_says_its_manifest_version(tmp_path):
    RunDir.open(tmp_path / "run", CONFIG, "hash", kind="eval")
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["schema_version"] == MANIFEST_VERSION
    log = read_run_log(tmp_path / "run")
    assert (log.manifest.schema_version, log.manifest.status, log.metrics, log.trials) == (MANIFEST_VERSION, "created", None, [])


def test_trials_and_metrics_are_read_when_first_asked_for(tmp_path):
    """Like inspect_ai's header_only: the header is read at once, the records not yet (a
    report of 1,800 units reads them once; a tracker that only tags a run never does)."""
    path = old_run(tmp_path / "run")
    (path / "trials.jsonl").write_text('{"unit": "s0/r0/a", "seed": "zero"}\n')  # not a unit record
    (path / "metrics.json").write_text('{"no k": 1}')
    log = read_run_log(path)  # the header reads
    assert log.manifest.status == "complete"
    with pytest.raises(UserError, match=r"trials.jsonl line 1 is not a unit record"):
        log.trials  # noqa: B018
    with pytest.raises(UserError, match=r"metrics.json is not a reme metrics file"):
        log.metrics  # noqa: B018


@pytest.mark.parametrize("edit, said", [
    ({"config_hash": None}, "is damaged (no config_hash)"),
    ({"task_ids": "a,b"}, "is damaged (task_ids='a,b' is not a list or null but a string)"),
    ({"server": ["x"]}, "is damaged (server=['x'] is not an object or null but a list)"),
])
def test_a_damaged_manifest_field_is_one_line_naming_it(tmp_path, edit, said):
    path = old_run(tmp_path / "run", manifest={k: v for k, v in {**OLD_MANIFEST, **edit}.items() if v is not None})
    with pytest.raises(UserError) as err:
        read_run_log(path)
    assert said in str(err.value) and "\n" not in str(err.value) and str(path / "manifest.json") in str(err.value)


def test_commit_logs_read_in_commit_order_without_a_torn_line(tmp_path):
    stream = tmp_path / "run" / "streams" / "s0_r0"
    stream.mkdir(parents=True)
    (stream / "commits.jsonl").write_text('{"unit": "s0/r0/b", "seq": 1, "events": [{"op": "add"}]}\n'
                                          '{"unit": "s0/r0/a", "seq": 0, "events": []}\n{"unit": "s0/r0/c", "se')
    assert read_commits(stream) == [Commit("s0/r0/a", 0, []), Commit("s0/r0/b", 1, [{"op": "add"}])]
    assert read_commits(tmp_path) is None  # a pool, not a stream


def test_a_pools_header_is_found_where_a_pool_may_be(tmp_path):
    built = tmp_path / "built"
    (built / "pool").mkdir(parents=True)
    (built / "pool" / "manifest.json").write_text(json.dumps({"method": "amem", "built_by": {"kind": "build-pool",
                                                                                              "run": "x/build"}}))
    header = read_pool_header(built)  # a `reme build-pool` folder: its pool/
    assert (header.path, header.method, header.built_by["run"]) == (built / "pool", "amem", "x/build")
    assert read_pool_header(built, method="reme") is None and read_pool_header(tmp_path / "nowhere") is None
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "manifest.json").write_text("{}")  # ReMe's first pools named no method
    assert read_pool_header(tmp_path / "old") == type(header)(tmp_path / "old", None, {})


def test_find_runs_finds_runs_by_kind_and_one_that_lost_its_manifest(tmp_path):
    old_run(tmp_path / "a")
    old_run(tmp_path / "b", manifest={**OLD_MANIFEST, "kind": "build-pool"})
    old_run(tmp_path / "c")
    (tmp_path / "c" / "manifest.json").unlink()
    assert find_runs([tmp_path]) == [(tmp_path / "a").resolve(), (tmp_path / "c").resolve()]
    assert find_runs([tmp_path], kinds=("build-pool",)) == [(tmp_path / "b").resolve()]
    with pytest.raises(UserError, match=r"c is a damaged reme run directory: manifest.json is missing"):
        read_run_log(tmp_path / "c")

"""When something underneath breaks, or an episode outgrows the model, the run says so.

Through the real CLI against the scripted server (a TEST DOUBLE: it replays BFCL ground
truth, so its scores are not model results) and, for the crash, the real embedded server:
- exit codes: 0 all units finished, 3 some units errored, 4 the server broke;
- a server that hangs up trips the circuit breaker, with no unit recorded;
- context overflow, truncation and step limits are stop reasons of finished units;
- a max_tokens that cannot fit the server's context is refused before anything runs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import FaultPolicy, ScriptedServer, ScriptedSummarizerPolicy
from tests.conftest import reme_process, scripted_server_process

REPLAY = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "llm.cache=false", "eval.seeds=1",
          "benchmark.release=current"]  # the replay server replays the pinned release's ground truth
THREE = "benchmark.task_ids=[multi_turn_base_0,multi_turn_base_2,multi_turn_base_4]"


def trials(run: Path) -> list[dict]:
    path = run / "trials.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def error_lines(stderr: str) -> list[str]:
    return [l for l in stderr.splitlines() if l.startswith("error:")]


# ------------------------------------------------------------------ exit codes


@pytest.mark.slow
def test_all_units_finished_exits_0_and_errored_units_exit_3_with_errors_grouped(reme):
    with ScriptedServer(BFCLReplayPolicy()) as ok:
        proc = reme("eval", *REPLAY, f"llm.base_url={ok.base_url}", "benchmark.limit=2", "eval.runs=1",
                    "out_dir=good")
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The summarizer script answers no agent prompt: every unit gets an HTTP 400.
    with ScriptedServer(ScriptedSummarizerPolicy()) as bad:
        proc = reme("eval", *REPLAY, f"llm.base_url={bad.base_url}", "benchmark.limit=2", "eval.runs=2",
                    "out_dir=bad")
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "bad"  # the path is still printed for scripts
    recs = trials(reme.cwd / "bad")
    assert len(recs) == 4 and all(r["error"].startswith("BadRequestError") for r in recs)
    assert all(r["stop_reason"] == "error" and r["traceback"] for r in recs)
    assert "errors by message (4 units)" in proc.stderr
    assert "does not know this prompt" in proc.stderr
    assert manifest(reme.cwd / "bad")["status"] == "incomplete"


def test_bad_input_exits_2_without_a_traceback(reme):
    proc = reme("eval", "eval.runs=-1")
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ circuit breaker


@pytest.mark.slow
def test_a_server_that_hangs_up_trips_the_breaker_within_bounded_time(tmp_path):
    with scripted_server_process("--refuse-chat") as url:
        t0 = time.monotonic()
        # 50 units, 2 in flight: without the breaker each would retry for ~a minute.
        proc = reme_process(
            ["eval", *REPLAY, f"llm.base_url={url}", "benchmark.limit=25",
             "eval.runs=2", "llm.concurrency=2", "out_dir=run"],
            cwd=tmp_path, env={**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")},
            capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - t0
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert elapsed < 60
    (line,) = error_lines(proc.stderr)
    assert "stopped answering" in line and "5 requests in a row" in line and url in line
    assert "Traceback" not in proc.stderr
    assert trials(tmp_path / "run") == []  # nothing in flight became a result
    assert manifest(tmp_path / "run")["status"] == "interrupted"


@pytest.mark.slow  # openai's client runs `uname -p` (platform.platform()) on its first request in a process
def test_a_refused_connection_is_named_and_a_silent_server_is_a_timeout():
    """openai's aiohttp client reports a refused connection as "Request timed out." (its
    transport turns aiohttp's connector error into httpx's ConnectTimeout): the client names
    the cause underneath instead; a server that takes the connection and never answers is
    still a timeout."""
    import asyncio
    import socket

    import openai

    from reme_cli.llm.client import ChatClient

    async def ask(url: str) -> openai.APIConnectionError:
        client = ChatClient(base_url=url, model="m", max_retries=0, timeout=1.0, breaker_threshold=100)
        try:
            with pytest.raises(openai.APIConnectionError) as caught:
                await client.chat([{"role": "user", "content": "hi"}])
        finally:
            await client.close()
        return caught.value

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: a connection is refused
        refused = asyncio.run(ask(f"http://127.0.0.1:{port}/v1"))
    assert type(refused) is openai.APIConnectionError
    assert str(refused).startswith(f"connection to http://127.0.0.1:{port}/v1 failed: ConnectionRefusedError")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # takes connections, reads nothing, answers nothing
        timed_out = asyncio.run(ask(f"http://127.0.0.1:{silent.getsockname()[1]}/v1"))
    assert type(timed_out) is openai.APITimeoutError


# ------------------------------------------------------------------ stop reasons


@pytest.mark.slow
def test_context_overflow_is_a_failed_result_not_an_error_and_a_rerun_changes_nothing(reme):
    policy = FaultPolicy(BFCLReplayPolicy(), overflow={"multi_turn_base_2"})
    with ScriptedServer(policy) as srv:
        args = ("eval", *REPLAY, f"llm.base_url={srv.base_url}", THREE, "eval.runs=1", "out_dir=run")
        proc = reme(*args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        first = (reme.cwd / "run" / "trials.jsonl").read_text()
        again = reme(*args)
    assert again.returncode == 0
    assert (reme.cwd / "run" / "trials.jsonl").read_text() == first  # nothing retried
    by_task = {t["task_id"]: t for t in trials(reme.cwd / "run")}
    over = by_task["multi_turn_base_2"]
    assert over["error"] is None and over["success"] is False
    assert over["stop_reason"] == "context_overflow"
    assert "maximum context length" in over["trajectory"]["stop_detail"]
    assert over["checker"]["error_type"].startswith("multi_turn:")  # the checker scored what was done
    assert len(over["trajectory"]["turns"]) == 2 and over["tokens"]["max_prompt"] > 0
    assert {by_task[t]["stop_reason"] for t in ("multi_turn_base_0", "multi_turn_base_4")} == {"answered"}
    metrics = json.loads((reme.cwd / "run" / "metrics.json").read_text())
    assert metrics["errors"] == 0 and metrics["stop_reasons"] == {"answered": 2, "context_overflow": 1}
    assert "stop reasons: answered 2, context_overflow 1" in proc.stderr


@pytest.mark.slow
def test_a_reply_cut_off_by_max_tokens_is_truncated(reme):
    with ScriptedServer(FaultPolicy(BFCLReplayPolicy(), truncate={"multi_turn_base_0"})) as srv:
        reme("eval", *REPLAY, f"llm.base_url={srv.base_url}", THREE, "eval.runs=1", "out_dir=run", check=True)
    by_task = {t["task_id"]: t for t in trials(reme.cwd / "run")}
    assert by_task["multi_turn_base_0"]["stop_reason"] == "truncated"
    assert by_task["multi_turn_base_0"]["success"] is False and by_task["multi_turn_base_0"]["error"] is None
    # Every turn was cut, and each went on to the next (the authors' loop): one stop per turn.
    assert by_task["multi_turn_base_0"]["trajectory"]["turn_stops"] == ["truncated"] * 4
    assert by_task["multi_turn_base_2"]["stop_reason"] == "answered"


@pytest.mark.parametrize("limit, reason", [("benchmark.max_steps_per_turn=1", "turn_step_limit"),
                                           ("benchmark.max_interactions=1", "interaction_limit")])
@pytest.mark.slow
def test_step_limits_are_recorded_as_their_stop_reason(reme, limit, reason):
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        reme("eval", *REPLAY, f"llm.base_url={srv.base_url}", "benchmark.task_ids=[multi_turn_base_0]",
             "eval.runs=1", limit, "out_dir=run", check=True)
    (t,) = trials(reme.cwd / "run")
    assert t["stop_reason"] == reason and t["success"] is False and t["error"] is None
    assert t["interactions"] == 1 and len(t["trajectory"]["turns"]) == 1  # the episode ended there


@pytest.mark.slow
def test_max_tokens_larger_than_the_servers_context_is_refused(reme):
    with ScriptedServer(BFCLReplayPolicy(), max_model_len=4096) as srv:
        proc = reme("eval", *REPLAY, f"llm.base_url={srv.base_url}", "benchmark.limit=1",
                    "model.sampling.max_tokens=8192", "out_dir=run")
        # The Qwen3 configs send no max_tokens (as the authors): nothing to refuse.
        ok = reme("eval", *REPLAY, f"llm.base_url={srv.base_url}", "benchmark.limit=1", "eval.runs=1", "out_dir=run2")
    assert proc.returncode == 2
    (line,) = error_lines(proc.stderr)
    assert "max_tokens=8192" in line and "4096" in line
    assert not (reme.cwd / "run").exists()
    assert ok.returncode == 0 and manifest(reme.cwd / "run2")["server"]["max_model_len"] == 4096


# --------------------------------------------------------------- batches with a barrier


class _Method:
    """A dynamic stream's method for the runner: records the order units commit; one unit's
    commit raises (an error in the method, not in the unit)."""

    def __init__(self, order: list[str], breaks: str | None = None):
        self.order, self.breaks = order, breaks

    async def commit(self, unit: str, worker: int = 0) -> dict:
        if unit == self.breaks:
            raise RuntimeError(f"commit of {unit} broke")
        self.order.append(unit)
        return {}

    def discard(self, unit: str) -> None: ...

    def finish(self) -> None: ...


def _batched_runner(run_dir, order: list[str], breaks: str | None, delays: dict[str, float]):
    import asyncio

    from reme_cli.run.records import UnitRecord
    from reme_cli.run.runner import Runner

    method = _Method(order, breaks)
    runner = Runner(bench=None, llm=None, settings=None, run_dir=run_dir, method_for=lambda key: method,
                    concurrency=8, batch_size=2)

    async def run_unit(unit, method):
        await asyncio.sleep(delays.get(unit.task_id, 0.0))
        return UnitRecord(unit=unit.key, task_id=unit.task_id, seed=unit.seed, run=unit.run, stop_reason="answered")

    runner.run_unit = run_unit
    return runner


@pytest.mark.slow
def test_batches_wait_for_skipped_and_finished_units_and_a_dying_chain_holds_none_back(tmp_path):
    """run.runner.Batches: a batch starts when every unit of the one before has finished or was
    skipped on resume; a chain that stops on an error releases its later batches, so the other
    chains finish and the error is then raised (nothing waits forever)."""
    import asyncio

    from reme_cli.run.plan import plan_streams
    from reme_cli.run.records import RunDir

    streams = plan_streams([f"t{i}" for i in range(6)], seeds=1, runs=1, seed_base=0, sequential=True, workers=2)
    run_dir = RunDir.open(tmp_path / "run", {"a": 1}, "hash", kind="eval")
    order: list[str] = []
    runner = _batched_runner(run_dir, order, breaks="s0/r0/t1", delays={"t0": 0.2})
    with pytest.raises(RuntimeError, match="commit of s0/r0/t1 broke"):  # not a TimeoutError: nothing hung
        asyncio.run(asyncio.wait_for(runner.run(streams), 20))
    # t1's chain (t1, t3, t5) died at t1; t0's chain went on to t2 and t4 once t0's batch had ended
    assert order == ["s0/r0/t0", "s0/r0/t2", "s0/r0/t4"]
    # A resume: t0, t2, t4 are finished and skipped, t1's chain runs, its batches no longer wait on them.
    order.clear()
    runner = _batched_runner(run_dir, order, breaks=None, delays={"t1": 0.1})
    asyncio.run(asyncio.wait_for(runner.run(streams), 20))
    assert order == ["s0/r0/t1", "s0/r0/t3", "s0/r0/t5"]
    assert {t.task_id for t in run_dir.trials()} == {f"t{i}" for i in range(6)}

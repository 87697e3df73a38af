"""The summarizer's answers are counted per role, reported, and a command whose summarizer
mostly fails exits 3 after writing everything.

The LLM is a test double (the scripted server): BFCL ground-truth replay for the agent, and
for the summarizer either the canned answers or a "thinking model out of budget" that
answers every request with an unterminated <think> and finish_reason "length".
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any, Mapping

import pytest

from reme_cli.core.config import compose
from reme_cli.core.errors import EXIT_UNIT_ERRORS
from reme_cli.llm.answer_health import (MIN_JUDGED_CALLS, SUMMARY, answer_tally, failure_message, merge, note,
                                        summary_line)
from reme_cli.llm.client import ChatResult
from reme_cli.llm.json_reply import parse_json, strip_reasoning, unterminated_think
from reme_cli.methods.reme.formats import sampling
from reme_cli.methods.summarizer import summarizer_settings, thinking_switch
from reme_cli.run.records import UnitRecord
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import (
    CONTEXT_OVERFLOW_MESSAGE,
    AgentAndSummarizerPolicy,
    PolicyError,
    Reply,
    ScriptedServer,
    ScriptedSummarizerPolicy,
)
from tests.conftest import run_reme, small_reme_pool

CUT = "<think>Let me weigh the trajectory step by step. First, the agent"


def _result(content: str, finish: str | None = "stop") -> ChatResult:
    return ChatResult(content=content, tool_calls=[], reasoning=None, prompt_tokens=1, completion_tokens=1,
                      latency_s=0.0, cached=False, finish_reason=finish)


# ------------------------------------------------------------------ the parsing rule
def test_reasoning_never_reaches_the_json_reader():
    # A server without a reasoning parser leaves the block in the content: parsed after it,
    # even when the block itself holds JSON-looking text.
    assert parse_json('<think>maybe {"score": 0.1}</think>\n{"score": 0.9}', dict) == {"score": 0.9}
    assert parse_json('<THINK>[1, 2]</THINK>```json\n[3]\n```', list) == [3]
    # The server ate the opening tag: everything up to the dangling close is reasoning.
    assert parse_json('so {"score": 0.1} </think> {"score": 0.7}', dict) == {"score": 0.7}
    # Cut off while reasoning: no answer, and it says so.
    assert parse_json(CUT + ' {"score": 0.2}', dict) is None
    assert strip_reasoning(CUT) == ""
    assert unterminated_think(CUT) and unterminated_think('<think>a</think>{"x": 1}<think>b')
    assert not unterminated_think('<think>a</think>{"x": 1}') and not unterminated_think('{"x": "think"}')


# ------------------------------------------------------------------ the tally
def test_tallies_nest_follow_tasks_and_count_each_answer_once():
    async def main() -> tuple[dict, dict, dict]:
        with answer_tally() as outer:
            async def task_a() -> dict:
                with answer_tally() as inner:
                    note("judge", _result('{"score": 1}'), valid=True)
                    note("judge", _result(CUT, finish="stop"), valid=False)  # unterminated think
                    return inner.to_dict()

            async def task_b() -> None:
                note("distill", _result('[{"when_to_use"', finish="length"), valid=True)

            inner, _ = await asyncio.gather(task_a(), task_b())
            note("rerank", _result("[0]"), valid=True)
        note("rerank", _result("[0]"), valid=False)  # no tally open: not counted anywhere
        return outer.to_dict(), inner, {}

    outer, inner, _ = asyncio.run(main())
    assert inner == {"judge": {"calls": 2, "invalid": 1, "truncated": 1, "errors": 0, "failed": 1}}
    assert outer == {"distill": {"calls": 1, "invalid": 0, "truncated": 1, "errors": 0, "failed": 1},
                     "judge": {"calls": 2, "invalid": 1, "truncated": 1, "errors": 0, "failed": 1},
                     "rerank": {"calls": 1, "invalid": 0, "truncated": 0, "errors": 0, "failed": 0}}
    assert merge(outer, None, {"judge": {"calls": 3}}) ["judge"]["calls"] == 5


def test_the_exit_rule_judges_each_role_from_a_few_answers_on():
    row = lambda calls, failed, truncated=0: {"calls": calls, "invalid": failed - truncated,  # noqa: E731
                                              "truncated": truncated, "failed": failed}
    few = MIN_JUDGED_CALLS - 1
    assert failure_message({"judge": row(few, few)}, 0.2) is None  # too few to judge
    assert failure_message({"judge": row(10, 2)}, 0.2) is None  # exactly the share: not more
    msg = failure_message({"judge": row(10, 3), "distill": row(5, 5, truncated=5), "rerank": row(50, 0)}, 0.2)
    assert msg is not None and "\n" not in msg
    assert msg.startswith("summarizer answers failed: distill 5 of 5 (5 truncated, 0 invalid); judge 3 of 10")
    assert "summarizer.max_tokens" in msg and "reasoning parser" in msg and "rerank" not in msg
    assert failure_message({"judge": row(10, 3)}, 0.5) is None
    assert summary_line({"judge": row(10, 3), "rerank": row(4, 0)}) == \
        "summarizer answers: 14 (invalid 3, truncated 0); failed by role: judge 3/10"


def test_a_record_written_before_the_counts_still_loads():
    old = {"unit": "s0/r0/t", "task_id": "t", "seed": 0, "run": 0, "schema_version": 2}
    assert UnitRecord.from_dict(old).summarizer_answers == {}


# ------------------------------------------------------------------ settings
def test_settings_are_the_authors_and_the_cpu_model_keeps_its_cap():
    cfg = compose(["model=qwen3-8b"])
    # No temperature sent: the FAQ's service config sets none (65971baf reme/config/service.yaml:177-182).
    assert (cfg.summarizer.temperature, cfg.summarizer.max_tokens, cfg.summarizer.thinking) == (None, None, None)
    assert thinking_switch(cfg) is None  # no switch sent: the endpoint's default decides
    assert thinking_switch(compose(["model=qwen3-8b", "summarizer.thinking=false"])) == \
        {"chat_template_kwargs": {"enable_thinking": False}}
    assert thinking_switch(compose(["model=qwen3-8b", "summarizer.thinking=true"])) == \
        {"chat_template_kwargs": {"enable_thinking": True}}

    class Executor:
        model, usage = "m", None

    settings, own = summarizer_settings(compose(["model=local"]), Executor())
    assert own is None and settings.max_tokens == 384 and settings.constrained
    assert sampling(settings, "judge")["max_tokens"] == 384
    uncapped, _ = summarizer_settings(cfg, Executor())
    assert sampling(uncapped, "distill") == {"temperature": None, "max_tokens": None}


def test_the_requests_carry_no_switch_and_no_cap_unless_asked():
    policy = ScriptedSummarizerPolicy()
    with ScriptedServer(policy) as srv:
        from reme_cli.llm.client import ChatClient

        async def ask(cfg) -> None:
            client = ChatClient(base_url=srv.base_url, model="m")
            settings, _ = summarizer_settings(cfg, client)
            try:
                await settings.llm.chat([{"role": "system", "content": "Rewrite them into short guidance"},
                                         {"role": "user", "content": "x"}], **sampling(settings, "rewrite"))
            finally:
                await client.close()

        asyncio.run(ask(compose(["model=qwen3-8b"])))
        asyncio.run(ask(compose(["model=qwen3-8b", "summarizer.thinking=false", "summarizer.max_tokens=300"])))
        first, second = (r["body"] for r in srv.requests[-2:])
    assert "chat_template_kwargs" not in first and "max_tokens" not in first and "temperature" not in first
    assert second["chat_template_kwargs"] == {"enable_thinking": False} and second["max_tokens"] == 300


# ------------------------------------------------------------------ through the CLI
class OutOfBudget:
    """A thinking model whose token budget ends inside <think>, for every summarizer request."""

    name = "out-of-budget"

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        return Reply(content=CUT, finish_reason="length")


TASKS = 5  # = MIN_JUDGED_CALLS answers per role: enough to judge


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("answers")


@pytest.fixture(scope="module")
def pool(workdir) -> Path:
    return small_reme_pool(workdir)


def _server(summarizer: Any) -> ScriptedServer:
    return ScriptedServer(AgentAndSummarizerPolicy(BFCLReplayPolicy(), summarizer))


def _args(srv: ScriptedServer, *extra: str) -> list[str]:
    # No response cache: the healthy and the broken summarizer get the same requests.
    return ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", f"llm.base_url={srv.base_url}",
            "llm.cache=false", f"benchmark.limit={TASKS}", "benchmark.release=current", *extra]


def _failure_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("summarizer answers failed:")]


@pytest.mark.parametrize("healthy", [True, False], ids=["healthy", "out-of-budget"])
@pytest.mark.slow
def test_dynamic_eval_counts_answers_per_role_and_exits_3_when_they_fail(workdir, pool, healthy):
    out = workdir / f"eval-{healthy}"
    with _server(ScriptedSummarizerPolicy() if healthy else OutOfBudget()) as srv:
        # Rerank and rewrite on (the paper's text), so that every role the eval has is asked.
        proc = run_reme(["eval", "--mode", "dynamic", *_args(srv, f"memory.pool={pool}", "eval.runs=1",
                                                             "eval.seeds=1", "memory.rerank=true",
                                                             "memory.rewrite=true", f"out_dir={out}")], workdir)
    metrics = json.loads((out / "metrics.json").read_text())  # written whatever the verdict
    answers = metrics["summarizer_answers"]
    assert metrics["units"] == TASKS and metrics["errors"] == 0
    assert proc.stdout.strip().splitlines()[-1] == str(out)
    # Every unit retrieves 2 experiences (rerank, rewrite) and succeeds (distill).
    assert {r: answers[r]["calls"] for r in ("rerank", "rewrite", "distill")} == dict.fromkeys(
        ("rerank", "rewrite", "distill"), TASKS)
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert merge(*(t["summarizer_answers"] for t in trials)) == answers
    if healthy:
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert all(row["failed"] == row["invalid"] == row["truncated"] == 0 for row in answers.values())
        assert _failure_lines(proc.stderr) == []
        return
    assert proc.returncode == EXIT_UNIT_ERRORS, proc.stderr[-2000:]
    assert all(row["truncated"] == row["failed"] == row["calls"] for role, row in answers.items() if role != SUMMARY)
    assert "judge" not in answers  # a cut-off distillation yields no candidate to judge
    assert answers[SUMMARY] == {"calls": TASKS, "invalid": 0, "truncated": 0, "errors": 0, "failed": 0}
    [line] = _failure_lines(proc.stderr)
    assert f"rerank {TASKS} of {TASKS} ({TASKS} truncated" in line and "summarizer.max_tokens" in line
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


@pytest.mark.parametrize("healthy", [True, False], ids=["healthy", "out-of-budget"])
@pytest.mark.slow
def test_build_pool_counts_answers_per_role_and_exits_3_when_they_fail(workdir, healthy):
    out = workdir / f"built-{healthy}"
    with _server(ScriptedSummarizerPolicy() if healthy else OutOfBudget()) as srv:
        proc = run_reme(["build-pool", *_args(srv, "build.samples=1", f"out_dir={out}")], workdir)
    report = json.loads((out / "build" / "report.json").read_text())
    answers = report["summarizer_answers"]
    assert proc.stdout.strip().splitlines()[-1] == str(out)
    assert answers["distill"]["calls"] == TASKS  # one success analysis per task
    lines = [json.loads(line) for line in (out / "build" / "distill.jsonl").read_text().splitlines()]
    assert merge(*(line["summarizer_answers"] for line in lines)) == answers  # what a resume adds up
    if healthy:
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert answers["judge"]["calls"] == TASKS and all(row["failed"] == 0 for row in answers.values())
        assert _failure_lines(proc.stderr) == [] and "summarizer answers (invalid, truncated)" in proc.stderr
        return
    assert proc.returncode == EXIT_UNIT_ERRORS, proc.stderr[-2000:]
    assert answers == {"distill": {"calls": TASKS, "invalid": TASKS, "truncated": TASKS, "errors": 0, "failed": TASKS},
                       SUMMARY: {"calls": TASKS, "invalid": 0, "truncated": 0, "errors": 0, "failed": 0}}
    assert report["pool_size"] == 0 and (out / "pool" / "manifest.json").is_file()  # the work was finished
    [line] = _failure_lines(proc.stderr)
    assert line.startswith(f"summarizer answers failed: distill {TASKS} of {TASKS} ({TASKS} truncated")


# ------------------------------------------------------------------ summaries that raise
class Overflowing:
    """A summarizer whose context is too small: vLLM's 400 for the first ``first`` requests
    (every request when None), the canned answers after."""

    name = "overflowing"

    def __init__(self, first: int | None = None):
        self.left, self.lock, self.inner = first, threading.Lock(), ScriptedSummarizerPolicy()

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        with self.lock:
            overflow = self.left is None or self.left > 0
            if self.left:
                self.left -= 1
        if overflow:
            raise PolicyError(CONTEXT_OVERFLOW_MESSAGE)
        return self.inner.reply(body, headers)


@pytest.mark.parametrize("first", [1, None], ids=["one-summary", "every-summary"])
@pytest.mark.slow
def test_a_summary_that_raises_keeps_the_units_reward_and_is_counted_everywhere(workdir, pool, first):
    """65971baf bfcl_agent.py:192-211: a failed summary_task_memory call is an empty list, the
    trial's reward stands. Every unit succeeds (ground-truth replay) and none errors; the failed
    summaries are counted in metrics.json, the manifest, the report's runs and the viewer's
    health page; summarizer.max_failed_share (0.2) is still the alarm: 1 of 5 passes, 5 of 5 exits 3."""
    from reme_cli.core.run_log import read_run_log
    from reme_cli.report.frames import load_frames
    from reme_cli.report.metrics import run_metrics
    from reme_cli.view.health import health
    from reme_cli.view.runs import read_run

    out = workdir / f"overflow-{first}"
    with _server(Overflowing(first)) as srv:
        proc = run_reme(["eval", "--mode", "dynamic", *_args(srv, f"memory.pool={pool}", "eval.runs=1",
                                                             "eval.seeds=1", f"out_dir={out}")], workdir)
    failed = TASKS if first is None else 1
    counted = {"summaries": TASKS, "failed": failed}
    metrics = json.loads((out / "metrics.json").read_text())
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert metrics["units"] == TASKS and metrics["errors"] == 0 and all(t["success"] for t in trials)
    assert metrics["summary_failures"] == counted
    assert json.loads((out / "manifest.json").read_text())["summary_failures"] == counted
    errors = [tr["summary_error"] for t in trials for tr in t["method"]["trials"] if "summary_error" in tr]
    assert len(errors) == failed and all(e.startswith("ContextOverflow: ") for e in errors)
    assert health(read_run("r", out))["task"]["summaries"] == counted
    units, runs, _ = load_frames([read_run_log(out)])
    row = run_metrics(units, runs).iloc[0]
    assert (row["n_summaries"], row["n_summary_failures"]) == (TASKS, failed)
    shown = " ".join(proc.stderr.split())
    if first is None:
        assert proc.returncode == EXIT_UNIT_ERRORS, proc.stderr[-2000:]
        [line] = _failure_lines(proc.stderr)
        assert f"summary {TASKS} of {TASKS} ({TASKS} raised)" in line and "context overflow" in line
    else:
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"summaries failed: 1 of {TASKS}" in shown and _failure_lines(proc.stderr) == []


@pytest.mark.slow
def test_build_pool_skips_the_candidates_of_a_task_whose_summary_raises(workdir):
    """init_task_memory_pool.py:122-127,160-174: a group whose summary_task_memory call failed
    is recorded as an error and adds nothing; the other groups go on."""
    out = workdir / "built-overflow"
    with _server(Overflowing(None)) as srv:
        proc = run_reme(["build-pool", *_args(srv, "build.samples=1", f"out_dir={out}")], workdir)
    assert proc.returncode == EXIT_UNIT_ERRORS, proc.stderr[-2000:]  # every summary failed: the alarm
    report = json.loads((out / "build" / "report.json").read_text())
    lines = [json.loads(line) for line in (out / "build" / "distill.jsonl").read_text().splitlines()]
    assert report["unit_errors"] == 0 and report["pool_size"] == 0 and len(report["summary_failures"]) == TASKS
    assert all(line["summary_error"].startswith("ContextOverflow: ") and line["experiences"] == [] for line in lines)
    manifest = json.loads((out / "build" / "manifest.json").read_text())
    assert manifest["summary_failures"] == {"summaries": TASKS, "failed": TASKS} and manifest["status"] == "complete"

"""The scripted OpenAI-compatible test double, driven through the real openai client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from openai import BadRequestError, OpenAI

from reme_cli.bench.bfcl.benchmark import BFCLBenchmark
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import TASK_HEADER, FixedPolicy, ScriptedServer, conversation_position

BENCH = BFCLBenchmark(split="all")


def client_for(srv: ScriptedServer) -> OpenAI:
    return OpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=30)


def run_native(client: OpenAI, task_id: str, guidance: str = "") -> tuple[Any, list[list[Any]]]:
    """A minimal agent loop (native tool calls) against a BFCLEnv; returns outcome and the
    tool calls the server sent per turn."""
    task = BENCH.load(task_id)
    env = BENCH.episode(task, f"srv-{task_id}")
    tools = env.tools()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a tool user."}]
    sent: list[list[Any]] = []
    for t, turn in enumerate(task.turns):
        content = turn[0]["content"] + (guidance if t == 0 else "")
        messages.append({"role": "user", "content": content})
        sent.append([])
        for _ in range(5):
            resp = client.chat.completions.create(
                model="m", messages=messages, tools=tools, extra_headers={TASK_HEADER: task_id}
            )
            msg = resp.choices[0].message
            if not msg.tool_calls:
                messages.append({"role": "assistant", "content": msg.content or ""})
                env.end_step()
                break
            assert resp.choices[0].finish_reason == "tool_calls"
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [tc.model_dump() for tc in msg.tool_calls],
                }
            )
            for tc in msg.tool_calls:
                sent[-1].append((tc.function.name, json.loads(tc.function.arguments)))
                result = env.execute(tc.function.name, tc.function.arguments)
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": result.output})
            env.end_step()
        env.end_turn()
    return env.evaluate(), sent


def run_json_protocol(client: OpenAI, task_id: str) -> tuple[Any, list[list[Any]]]:
    task = BENCH.load(task_id)
    env = BENCH.episode(task, f"json-{task_id}")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Answer in JSON."}]
    sent: list[list[Any]] = []
    for turn in task.turns:
        messages.append({"role": "user", "content": turn[0]["content"]})
        sent.append([])
        for _ in range(5):
            resp = client.chat.completions.create(
                model="m",
                messages=messages,
                response_format={"type": "json_object"},
                extra_headers={TASK_HEADER: task_id},
            )
            msg = resp.choices[0].message
            assert not msg.tool_calls
            payload = json.loads(msg.content)
            messages.append({"role": "assistant", "content": msg.content})
            if not payload["tool_calls"]:
                assert payload["answer"] == "Done."
                env.end_step()
                break
            outputs = []
            for call in payload["tool_calls"]:
                sent[-1].append((call["name"], call["arguments"]))
                outputs.append(env.execute(call["name"], call["arguments"]).output)
            messages.append({"role": "user", "content": "[tool results]\n" + "\n".join(outputs)})
            env.end_step()
        env.end_turn()
    return env.evaluate(), sent


def test_replay_matches_ground_truth_and_passes_the_checker():
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        client = client_for(srv)
        for task_id in [
            "multi_turn_base_0",
            "multi_turn_base_40",
            "multi_turn_base_43",
            "multi_turn_base_160",
        ]:
            outcome, sent = run_native(client, task_id, guidance="\n\nSome Related Experience ...")
            assert sent == BENCH.ground_truth_calls(task_id)
            assert outcome.success, outcome.details
        # every request carried the task id header and was recorded
        assert srv.requests and all(r["headers"].get(TASK_HEADER.lower()) for r in srv.requests)
        assert srv.requests[0]["body"]["tools"]


def test_corrupt_changes_exactly_one_argument_and_fails_only_that_task():
    bad, good = "multi_turn_base_0", "multi_turn_base_1"
    policy = BFCLReplayPolicy(corrupt={bad})
    truth = BENCH.ground_truth_calls(bad)
    plan = policy.plan(bad)
    diffs = [
        (t, i, k)
        for t, (pt, tt) in enumerate(zip(plan, truth, strict=True))
        for i, ((pn, pa), (tn, ta)) in enumerate(zip(pt, tt, strict=True))
        for k in set(pa) | set(ta)
        if pn != tn or pa.get(k) != ta.get(k)
    ]
    assert len(diffs) == 1
    info = policy.corruption(bad)
    assert diffs[0] == (info["turn"], info["index"], info["arg"])
    first_turn = next(t for t, turn in enumerate(truth) if turn)
    assert (info["turn"], info["index"]) == (first_turn, 0)  # first call of first non-empty turn
    assert policy.corruption(good) is None
    with ScriptedServer(policy) as srv:
        client = client_for(srv)
        bad_outcome, _ = run_native(client, bad)
        good_outcome, _ = run_native(client, good)
    assert not bad_outcome.success
    assert good_outcome.success


def test_corruption_fails_every_task():
    ids = BENCH.task_ids()
    policy = BFCLReplayPolicy(corrupt=ids)
    for task_id in ids:
        env = BENCH.episode(BENCH.load(task_id), "corrupt-all")
        for turn in policy.plan(task_id):
            for name, args in turn:
                env.execute(name, args)
            env.end_turn()
        assert not env.evaluate().success, task_id


def test_json_protocol_variant():
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        client = client_for(srv)
        for task_id in ["multi_turn_base_0", "multi_turn_base_120"]:
            outcome, sent = run_json_protocol(client, task_id)
            assert sent == BENCH.ground_truth_calls(task_id)
            assert outcome.success, outcome.details


def test_conversation_position():
    u = lambda c: {"role": "user", "content": c}  # noqa: E731
    a = {"role": "assistant", "content": ""}
    assert conversation_position([{"role": "system", "content": "s"}, u("q")]) == (0, 0)
    assert conversation_position([u("q"), a, {"role": "tool", "content": "r"}]) == (0, 1)
    assert conversation_position([u("q"), a, u("[tool results]\nx"), a, u("[tool results] y")]) == (
        0,
        2,
    )
    assert conversation_position([u("q"), a, u("q2")]) == (1, 0)
    assert conversation_position([u([{"type": "text", "text": "[tool results] x"}]), u("q")]) == (
        0,
        0,
    )


def test_errors_are_openai_shaped_400s():
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        client = client_for(srv)
        with pytest.raises(BadRequestError, match=TASK_HEADER):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(BadRequestError, match="multi_turn_base_999"):
            client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={TASK_HEADER: "multi_turn_base_999"},
            )


def test_fixed_policy_models_health_and_delay():
    with ScriptedServer(FixedPolicy("hello"), delay=0.2) as srv:
        client = client_for(srv)
        start = time.perf_counter()
        resp = client.chat.completions.create(
            model="x", messages=[{"role": "user", "content": "q"}]
        )
        assert time.perf_counter() - start >= 0.2
        assert resp.choices[0].message.content == "hello"
        assert resp.choices[0].finish_reason == "stop"
        assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
        assert [m.id for m in client.models.list()] == ["scripted-fixed"]
        with urllib.request.urlopen(srv.base_url.replace("/v1", "/health")) as r:
            assert json.load(r) == {"status": "ok"}
        assert len(srv.requests) == 1


@pytest.mark.slow
def test_process_mode_prints_url_first_and_serves_until_killed():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reme_cli.testing.scripted_server",
            "--policy",
            "bfcl-replay",
            "--corrupt",
            "multi_turn_base_0",
            "--delay",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        client = OpenAI(base_url=url, api_key="x", max_retries=0, timeout=30)
        resp = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": BENCH.load("multi_turn_base_1").query}],
            extra_headers={TASK_HEADER: "multi_turn_base_1"},
        )
        calls = [
            (tc.function.name, json.loads(tc.function.arguments))
            for tc in resp.choices[0].message.tool_calls
        ]
        assert calls == BENCH.ground_truth_calls("multi_turn_base_1")[0]
        assert proc.poll() is None
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.slow
def test_process_mode_rejects_unknown_corrupt_id():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reme_cli.testing.scripted_server",
            "--policy",
            "bfcl-replay",
            "--corrupt",
            "multi_turn_base_999",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "multi_turn_base_999" in proc.stderr

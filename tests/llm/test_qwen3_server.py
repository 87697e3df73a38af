"""reme against a real server speaking Qwen3's wire format: llama.cpp's own server (the
xllamacpp engine) serving the bundled SmolLM2-135M with Qwen3's chat template
(tests/fixtures/chat_templates/, its source and license beside it) in jinja mode. The
template puts the tools into the system prompt, the server parses ``<tool_call>`` blocks into
native ``tool_calls`` (several per reply) and ``<think>`` into ``reasoning_content``, and
streams both in pieces: the wire format reme meets on vLLM (hermes and qwen3 parsers) and on
a hosted Qwen3, produced by a server reme did not write.

What is not real: the decision to call. A 135M model answers in prose, and llama.cpp's
``tool_choice: "required"`` lets it (its grammar allows any text before the first call), so
``tests/call_opener.py`` (a TEST DOUBLE in front of the server) opens the assistant's turn
with ``<tool_call>`` and sets ``tool_choice: "required"``; the server's grammar then holds
the call to an offered tool and its schema. Greedy decoding and ``cache_prompt: false``
make each answer the same whichever path asks. The model's numbers are no results.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import httpx
import pytest

from reme_cli.llm.client import ChatClient, ChatResult
from reme_cli.llm.local_server import LocalServer
from reme_cli.run.probes import PROBE_TOOLS
from tests.call_opener import OPENED_CALL, CallOpener
from tests.conftest import without_timing

pytestmark = pytest.mark.slow  # a llama.cpp server process

TEMPLATE = Path(__file__).parents[1] / "fixtures" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"
TEMPLATE_SHA256 = "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"
MODEL = "smollm2-135m-instruct"
ASK_ONE = [{"role": "user", "content": "What is the weather in Paris?"}]
ASK_TWO = [{"role": "user", "content": "What is the weather and the time in Paris?"}]


@pytest.fixture(scope="module")
def qwen3_server(tmp_path_factory):
    """llama.cpp's server (xllamacpp: llama-cpp-python's server has no Qwen3 tool-call
    format) with Qwen3's template; no RAM prompt cache, so what it answered before cannot
    change what it answers now."""
    assert hashlib.sha256(TEMPLATE.read_bytes()).hexdigest() == TEMPLATE_SHA256
    patch = pytest.MonkeyPatch()
    patch.setenv("REME_LLAMA_ENGINE", "xllamacpp")
    try:
        with LocalServer(log_path=tmp_path_factory.mktemp("qwen3") / "server.log",
                         extra_args=["--chat_template_file", str(TEMPLATE), "--cache_ram_mib", "0"]) as server:
            yield server
    finally:
        patch.undo()


def _ask(server: LocalServer, messages: list[dict], *, stream: bool, parallel: bool | None = None,
         max_tokens: int = 64, **extra) -> ChatResult:
    async def go() -> ChatResult:
        client = ChatClient(base_url=server.base_url, model=MODEL, stream="always" if stream else "never",
                            parallel_tool_calls=parallel, max_retries=0)
        try:
            return await client.chat(messages, temperature=0.0, max_tokens=max_tokens, seed=0,
                                     extra_body={"cache_prompt": False, **extra}, **(
                                         {"tools": PROBE_TOOLS} if "tool_choice" in extra else {}))
        finally:
            await client.close()
    return asyncio.run(go())


def _calls(r: ChatResult) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in r.tool_calls]


def test_the_server_renders_qwens_template_in_jinja_mode(qwen3_server):
    props = httpx.get(qwen3_server.base_url.removesuffix("/v1") + "/props", timeout=30).json()
    assert props["chat_template"] == TEMPLATE.read_text()
    assert props["chat_template_caps"]["supports_tool_calls"] and props["chat_template_caps"]["supports_parallel_tool_calls"]
    # The tools go into the prompt (Qwen3's "# Tools" system block): SmolLM2's own template drops them.
    bare = _ask(qwen3_server, ASK_ONE, stream=False, max_tokens=1)
    offered = _ask(qwen3_server, ASK_ONE, stream=False, max_tokens=1, tool_choice="none")
    assert offered.prompt_tokens > bare.prompt_tokens + 100


@pytest.mark.parametrize("parallel", [False, True], ids=["one call", "parallel calls"])
def test_native_tool_calls_are_parsed_from_tool_call_blocks_alike_streamed_or_not(qwen3_server, parallel):
    opened = [*(ASK_TWO if parallel else ASK_ONE), {"role": "assistant", "content": OPENED_CALL}]
    whole = _ask(qwen3_server, opened, stream=False, parallel=parallel, tool_choice="required")
    streamed = _ask(qwen3_server, opened, stream=True, parallel=parallel, tool_choice="required")
    for r in (whole, streamed):
        assert r.tool_calls and "<tool_call>" not in r.content  # native calls, not text
        assert all(name in {"get_weather", "get_time"} and isinstance(args.get("city"), str)
                   for name, args in _calls(r))
    if parallel:  # several <tool_call> blocks of one reply, each its own native call
        assert {name for name, _ in _calls(whole)[:2]} == {"get_weather", "get_time"}
    else:  # the grammar ends the reply after one call
        assert len(whole.tool_calls) == 1 and whole.finish_reason == "tool_calls"
    # The SDK's accumulator assembles the pieces into the answer the server sent whole.
    assert (_calls(streamed), streamed.content, streamed.finish_reason, streamed.completion_tokens) == \
        (_calls(whole), whole.content, whole.finish_reason, whole.completion_tokens)


def test_the_models_own_reasoning_streams_back_as_reasoning_content(qwen3_server):
    """Reasoning the model writes (continuing a turn opened in its ``<think>`` block) comes
    back in ``reasoning_content`` pieces, apart from the answer, and reme keeps it."""
    opened = [*ASK_ONE, {"role": "assistant", "reasoning_content": "The user", "content": ""}]
    r = _ask(qwen3_server, opened, stream=True, max_tokens=16, chat_template_kwargs={"enable_thinking": True})
    assert r.reasoning and len(r.reasoning.split()) >= 5 and "<think>" not in r.reasoning
    assert r.content == "" and not r.tool_calls
    # Found: llama.cpp's whole answer repeats the opened reasoning ("The user ..."), its
    # stream sends only what the model added; reme records what the server sent.
    whole = _ask(qwen3_server, opened, stream=False, max_tokens=16, chat_template_kwargs={"enable_thinking": True})
    assert whole.reasoning.endswith(r.reasoning.strip()) or r.reasoning.strip() in whole.reasoning


# BFCL's task with the fewest tool schemas (20 tools, ~2,650 tokens under Qwen3's template):
# one model call per run (one step, then the turn's step limit ends the episode). Thinking is
# switched on as each path sends it; the 135M model writes no <think> block of its own here
# (its reasoning, streamed, is the test above's).
EPISODE = ["eval", "--mode", "none", "benchmark.release=current", "benchmark.split=test",
           "benchmark.task_ids=[multi_turn_base_100]", "eval.runs=1", "eval.seeds=1", "model.max_steps_per_turn=1",
           "model.sampling.temperature=0", "model.sampling.max_tokens=64", "model.parallel_tool_calls=false",
           "llm.cache=false", "embedding=minilm", f"llm.model={MODEL}"]


def test_a_bfcl_episode_gives_the_same_records_on_the_hosted_and_the_vllm_path(qwen3_server, reme):
    with CallOpener(qwen3_server.base_url) as opener:
        url = f"llm.base_url={opener.base_url}"
        hosted = reme(*EPISODE, url, "model=openai-compatible", "llm.api_key_env=null", "llm.stream=always",
                      "model.thinking=true", "model.thinking_switch=chat_template_kwargs", "model.sampling.seed=0",
                      "out_dir=hosted", check=True)
        vllm = reme(*EPISODE, url, "model=qwen3-8b", "llm.stream=never", "out_dir=vllm", check=True)
        sent = opener.bodies
    assert hosted.returncode == vllm.returncode == 0
    assert [b.get("stream", False) for b in sent] == [True, False]
    assert all(b["chat_template_kwargs"] == {"enable_thinking": True} for b in sent)
    records = []
    for run in ("hosted", "vllm"):
        (trial,) = [json.loads(line) for line in (reme.cwd / run / "trials.jsonl").read_text().splitlines()]
        records.append(without_timing(trial)["trajectory"])
    assert records[0] == records[1], json.dumps(records, indent=1)[:6000]
    (step,) = records[0]["turns"][0]
    assert step["calls"] and step["calls"][0]["name"] and step["prompt_tokens"] > 2000
    manifest = json.loads((reme.cwd / "hosted" / "manifest.json").read_text())
    assert manifest["served"]["models"] == {MODEL: 1}


def test_reme_check_passes_against_the_real_server(qwen3_server, reme):
    with CallOpener(qwen3_server.base_url) as opener:
        proc = reme("check", "model=openai-compatible", f"llm.base_url={opener.base_url}", f"llm.model={MODEL}",
                    "llm.api_key_env=null", "model.parallel_tool_calls=true", "model.sampling.temperature=0",
                    "model.sampling.max_tokens=64", "benchmark.release=current", env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "parallel tool calls" in text and "FAIL" not in text and "check passed" in text
    kept = json.loads((reme.cwd / proc.stdout.strip().splitlines()[-1]).read_text())
    assert kept["model"] == MODEL and kept["seconds_per_answer"] > 0

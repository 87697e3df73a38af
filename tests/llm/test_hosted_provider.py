"""A hosted provider (DashScope's OpenAI-compatible mode) through reme: the client's rules and
the whole CLI, against the scripted server's provider mode.

The server is a TEST DOUBLE: it keeps DashScope's rules where reme relies on them (a wrong
key is a 401, thinking without a stream a 400, 429s with Retry-After, answers streamed in
small pieces with usage last, streams that break off) and answers with the BFCL ground truth
and canned summaries, never a model's. Its numbers are no model's results. No request leaves
this machine: a real provider is not exercised here (docs/hosted.md says what that leaves).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import openai
import pytest

from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.bench.replay import Reply
from reme_cli.core.config import compose
from reme_cli.core.errors import RunAborted
from reme_cli.llm.cache import ResponseCache
from reme_cli.llm.client import ChatClient
from reme_cli.methods.reme.fidelity import EXACT_COUNTS, EXACT_SEARCH
from reme_cli.llm.vllm_server import serve_command
from reme_cli.run import cost
from reme_cli.run.settings import request_record
from reme_cli.testing.scripted_server import (AgentAndSummarizerPolicy, Provider, ScriptedServer,
                                              ScriptedSummarizerPolicy)
from tests.conftest import reme_env, reme_popen, reme_process, small_reme_pool, without_timing

KEY = "sk-test-SECRET-4646-do-not-write"
# benchmark.release=current: the replay server replays the pinned release's ground truth.
HOSTED = ["model=qwen3-8b-dashscope", "embedding=minilm", "llm.model=replay", "benchmark.release=current"]
CORRUPT = "multi_turn_base_2"  # fails until its retry is guided by what its failure taught
THREE = ["benchmark.split=test", f"benchmark.task_ids=[multi_turn_base_0,{CORRUPT},multi_turn_base_4]"]


def _trials(run: Path) -> list[dict]:
    path = run / "trials.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _untimed(trial: dict) -> dict:
    """A unit's record without its clock readings and cache flags, its earlier trials' too."""
    out = without_timing(trial)
    out["earlier_attempts"] = [{**e, "trajectory": without_timing({"trajectory": e["trajectory"]})["trajectory"]}
                               for e in trial.get("earlier_attempts") or []]
    return out


def _chats(server: ScriptedServer, since: int = 0) -> list[dict]:
    return [r for r in server.requests[since:] if r["path"] == "/v1/chat/completions"]


def _replay_policy():
    return AgentAndSummarizerPolicy(BFCLReplayPolicy(corrupt={CORRUPT}, heal_on_retry=True), ScriptedSummarizerPolicy())


@pytest.fixture(scope="module")
def provider():
    """DashScope's rules: every 11th request is throttled, the first two streams break off."""
    with ScriptedServer(BFCLReplayPolicy(), provider=Provider(api_key=KEY, rate_limit_every=11, retry_after="0.2",
                                                            cut_streams=2, fingerprint="fp-scripted")) as srv:
        yield srv


def _files_holding(root: Path, secret: str) -> list[str]:
    """Every file under ``root`` (run records, manifests, caches and their WAL files, logs)
    whose bytes hold ``secret``."""
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


# ------------------------------------------------------------------------------- config


def test_the_hosted_configs_send_what_the_authors_agents_sent():
    cfg = compose(["model=qwen3-8b-dashscope"])
    assert (cfg.model.kind, cfg.model.same_as, cfg.model.served_name) == ("openai", "qwen3-8b", "qwen3-8b")
    assert cfg.llm.api_key_env == "DASHSCOPE_API_KEY" and cfg.llm.api_key == "EMPTY"
    assert cfg.embedding.model == "text-embedding-v4"  # the authors' embedding, on the same key
    sent = request_record(cfg)["sent"]
    # bfcl_agent.py:250-258: temperature 0.9, seed=0, extra_body enable_thinking, stream, parallel calls
    assert sent["temperature"] == 0.9 and sent["seed"] == 0
    assert sent["extra_body"] == {"enable_thinking": True}  # top level: DashScope's, not vLLM's kwargs
    assert sent["parallel_tool_calls"].startswith("true") and sent["stream"] == "when thinking is on"
    assert "tool_choice" not in sent  # bfcl_agent.py:250-259 names none
    # AppWorld: the authors' agent switched thinking off (appworld_react_agent.py:85)
    assert request_record(compose(["model=qwen3-8b-dashscope", "benchmark=appworld"]))["sent"]["extra_body"] == \
        {"enable_thinking": False}
    summ = compose(["model=qwen3-8b-dashscope", "summarizer=qwen3-14b-dashscope",
                    "llm.base_url=https://dashscope-intl.aliyuncs.com/compatible-mode/v1"]).summarizer
    assert (summ.model, summ.thinking) == ("qwen3-14b", None)
    assert summ.base_url == "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"  # one override moves both
    # The vLLM configs are what they were: per-unit seeds, vLLM's switch, no stream.
    vllm = compose(["model=qwen3-8b"])
    assert request_record(vllm)["sent"]["extra_body"] == {"chat_template_kwargs": {"enable_thinking": True}}
    assert vllm.model.sampling.seed is None and vllm.llm.stream == "never"


@pytest.mark.parametrize("override, fragment", [
    ("llm.api_key=sk-SECRET123", "llm.api_key_env=NAME"),
    ("llm.api_key_env=sk-SECRET123", "the name of an environment variable"),
])
def test_a_literal_key_is_refused_in_one_line_and_nothing_is_written(reme, override, fragment):
    proc = reme("eval", "benchmark.limit=1", override)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "SECRET123" not in lines[0]
    assert not (reme.cwd / "runs").exists()


def test_a_missing_key_is_one_line_before_anything_is_written(reme):
    # A provider elsewhere (192.0.2.1: TEST-NET-1, never routed; nothing is asked of it).
    proc = reme("eval", *HOSTED, "llm.base_url=http://192.0.2.1:9/v1", "benchmark.limit=1",
                env={"DASHSCOPE_API_KEY": None})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "export DASHSCOPE_API_KEY=" in proc.stderr and "llm.api_key_env=null" in proc.stderr
    assert not (reme.cwd / "runs").exists()


def test_no_key_is_a_valid_setting(monkeypatch):
    """model=openai-compatible names OPENAI_API_KEY; a server on this machine (llama.cpp's or
    vLLM's, keyless) is sent none when it is unset, and llm.api_key_env=null sends none to any
    server. A provider elsewhere still needs the variable, and a literal key stays refused
    (test_a_literal_key_is_refused_in_one_line_and_nothing_is_written)."""
    from reme_cli.core.errors import UserError
    from reme_cli.llm.keys import NO_KEY, llm_key

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    at = lambda *o: llm_key(compose(["model=openai-compatible", "llm.model=x", *o]))
    for url in ("http://127.0.0.1:8080/v1", "http://localhost:8000/v1", "http://[::1]:8000/v1"):
        assert at(f"llm.base_url='{url}'") == NO_KEY
    assert at("llm.base_url=[http://127.0.0.1:8080/v1,http://127.0.0.2:8080/v1]") == NO_KEY
    assert at("llm.base_url=http://192.0.2.1:8000/v1", "llm.api_key_env=null") == NO_KEY
    for remote in ("llm.base_url=http://192.0.2.1:8000/v1", "llm.base_url=[http://127.0.0.1:1/v1,http://192.0.2.1:1/v1]"):
        with pytest.raises(UserError, match="OPENAI_API_KEY.*llm.api_key_env=null"):
            at(remote)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        at()  # OpenAI's own endpoint, the config's default
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-proxy-key")  # a local proxy that takes one gets it
    assert at("llm.base_url=http://127.0.0.1:8080/v1") == "sk-local-proxy-key"


def test_a_gpu_run_can_have_the_hosted_context_through_yarn():
    cfg = compose(["model=qwen3-8b", "model.max_model_len=131072"])
    cmd = serve_command(cfg, 8000, "127.0.0.1", 1)
    assert cmd[cmd.index("--max-model-len") + 1] == "131072" and cmd.count("--max-model-len") == 1
    rope = json.loads(cmd[cmd.index("--hf-overrides") + 1])["rope_parameters"]
    assert rope["rope_type"] == "yarn" and rope["factor"] == 4.0  # Qwen's model card: factor 4 for 131,072
    assert rope["original_max_position_embeddings"] == 32768
    native = serve_command(compose(["model=qwen3-8b"]), 8000, "127.0.0.1", 1)
    assert "--hf-overrides" not in native and native[native.index("--max-model-len") + 1] == "32768"


def test_appworld_gets_the_long_context_by_default_and_bfcl_stays_native():
    """benchmark.context: AppWorld's episodes went past 32k in the authors' runs (issue #81), so
    a managed server serves them 131,072 with YaRN; BFCL's stay native, as Qwen advises for
    contexts under 32k; model.max_model_len wins over both. Jobs of other contexts never share
    a server."""
    from reme_cli.core.config import context_length
    from reme_cli.llm.shared import server_key

    def served(*overrides: str) -> tuple[str, bool]:
        cmd = serve_command(compose(["model=qwen3-8b", *overrides]), 8000, "127.0.0.1", 1)
        return cmd[cmd.index("--max-model-len") + 1], "--hf-overrides" in cmd

    assert served("benchmark=appworld") == ("131072", True)
    assert served() == ("32768", False)
    assert served("benchmark=appworld", "model.max_model_len=65536") == ("65536", True)
    assert served("benchmark=appworld", "benchmark.context=null") == ("32768", False)
    appworld, bfcl = compose(["model=qwen3-8b", "benchmark=appworld"]), compose(["model=qwen3-8b"])
    assert server_key(appworld) != server_key(bfcl)
    m = appworld.model
    assert context_length(m.kind, m.n_ctx, m.max_model_len, appworld.benchmark.context) == 131072
    hosted = compose(["model=qwen3-8b-dashscope", "benchmark=appworld"])  # the provider applies its own
    assert context_length(hosted.model.kind, hosted.model.n_ctx, hosted.model.max_model_len,
                          hosted.benchmark.context) == 32768


# ------------------------------------------------------------------------------- client


class Answer:
    """A reply with reasoning, content and two tool calls, each long enough to be streamed in
    many pieces."""

    name = "answer"

    def reply(self, body, headers):
        return Reply(content="Both files are moved now; nothing else is needed.",
                     tool_calls=[("mv", {"source": "report_final_v2.txt", "destination": "archive/2024"}),
                                 ("ls", {"a": True, "path": "archive"})],
                     reasoning="The user wants the report archived, so move it, then list the folder.")


def _client(srv: ScriptedServer, **kw) -> ChatClient:
    return ChatClient(base_url=srv.base_url, model="qwen3-8b", **{"api_key": KEY, "max_retries": 3, **kw})


def _ask(client: ChatClient, thinking: bool):
    tools = [{"type": "function", "function": {"name": "mv", "parameters": {"type": "object"}}}]
    return client.chat([{"role": "user", "content": "archive the report"}], tools=tools, seed=0,
                       extra_body={"enable_thinking": thinking})


def test_a_streamed_answer_is_assembled_whole_and_recorded_as_an_unstreamed_one(tmp_path):
    async def go():
        with ScriptedServer(Answer(), provider=Provider(api_key=KEY, piece=3)) as srv:
            streamed_client = _client(srv, stream="always", cache=ResponseCache(tmp_path / "a.sqlite"))
            whole_client = _client(srv, stream="never", cache=ResponseCache(tmp_path / "b.sqlite"))
            streamed, whole = await _ask(streamed_client, False), await _ask(whole_client, False)
            await streamed_client.close(), await whole_client.close()
            sent = _chats(srv)
        return streamed, whole, sent

    streamed, whole, sent = asyncio.run(go())
    assert [r["body"].get("stream") for r in sent] == [True, None]
    assert sent[0]["body"]["stream_options"] == {"include_usage": True}
    assert len(streamed.tool_calls) == 2 and streamed.tool_calls[0].arguments == \
        json.dumps({"source": "report_final_v2.txt", "destination": "archive/2024"})
    assert streamed.prompt_tokens > 0 and streamed.completion_tokens > 0  # usage from the last chunk

    def stored(name: str) -> dict:
        rows = sqlite3.connect(tmp_path / name).execute("SELECT key, value FROM responses").fetchall()
        return json.loads(rows[0][1])

    a, b = stored("a.sqlite"), stored("b.sqlite")
    a.pop("latency_s"), b.pop("latency_s")
    for rec in (a, b):  # the scripted ids name the server's answer count, which differs by design
        for tc in rec["tool_calls"]:
            tc.pop("id")
    assert a == b  # the same record, streamed or not


def test_the_cache_replays_a_streamed_answer_byte_for_byte(tmp_path):
    async def go():
        with ScriptedServer(Answer(), provider=Provider(api_key=KEY, piece=2)) as srv:
            first = _client(srv, stream="always", cache=ResponseCache(tmp_path / "c.sqlite"))
            live = await _ask(first, True)
            await first.close()
            before = sqlite3.connect(tmp_path / "c.sqlite").execute("SELECT value FROM responses").fetchall()
            again = _client(srv, stream="always", cache=ResponseCache(tmp_path / "c.sqlite"))
            replayed = await _ask(again, True)
            await again.close()
            after = sqlite3.connect(tmp_path / "c.sqlite").execute("SELECT value FROM responses").fetchall()
            return live, replayed, before, after, len(_chats(srv))

    live, replayed, before, after, asked = asyncio.run(go())
    assert asked == 1 and replayed.cached and not live.cached
    assert before == after and len(before) == 1
    assert live.reasoning == "The user wants the report archived, so move it, then list the folder."
    for field in ("content", "reasoning", "tool_calls", "finish_reason", "prompt_tokens", "completion_tokens",
                  "model", "system_fingerprint"):
        assert getattr(replayed, field) == getattr(live, field), field
    assert json.loads(before[0][0])["reasoning"] == live.reasoning


def test_thinking_without_a_stream_is_refused_as_the_provider_does_and_auto_streams_it():
    async def go():
        with ScriptedServer(Answer(), provider=Provider(api_key=KEY)) as srv:
            whole = _client(srv, stream="never")
            with pytest.raises(openai.BadRequestError, match="non-streaming"):
                await _ask(whole, True)
            auto = _client(srv, stream="auto")
            thought = await _ask(auto, True)
            plain = await _ask(auto, False)
            await whole.close(), await auto.close()
            return thought, plain, [r["body"].get("stream") for r in _chats(srv)]

    thought, plain, streams = asyncio.run(go())
    assert streams == [None, True, None]  # auto streams exactly the request that thinks
    assert thought.reasoning and plain.content


def test_the_hosted_agent_streams_where_it_thinks_and_its_summarizer_every_call():
    """llm.stream=auto: BFCL's thinking calls stream, AppWorld's (thinking off) do not, as the
    authors' agents; the summarizer, sharing the agent's client, streams every call as the
    FAQ's service (summarizer.stream=always)."""
    from reme_cli.llm.endpoint import request_extra_body
    from reme_cli.methods.summarizer import summarizer_settings

    async def go():
        with ScriptedServer(Answer(), provider=Provider(api_key=KEY)) as srv:
            out = []
            for bench in ("bfcl_v3", "appworld"):
                cfg = compose(["model=qwen3-8b-dashscope", f"benchmark={bench}"])
                client = _client(srv, stream=cfg.llm.stream)
                summ, own = summarizer_settings(cfg, client)
                assert own is None  # summarizer=same: the agent's client
                await client.chat([{"role": "user", "content": "go"}], extra_body=request_extra_body(cfg))
                await summ.llm.chat([{"role": "user", "content": "summarize"}], temperature=summ.temperature)
                await client.close()
                out += [r["body"].get("stream") for r in _chats(srv)[len(out):]]
            return out

    assert asyncio.run(go()) == [True, True, None, True]  # BFCL agent, its summarizer, AppWorld agent, its summarizer


def test_a_429_waits_as_retry_after_says_and_a_broken_stream_is_asked_again_whole():
    async def go():
        with ScriptedServer(Answer(), provider=Provider(api_key=KEY, rate_limit_every=2, retry_after="0.6",
                                                         cut_streams=1)) as srv:
            client = _client(srv, stream="always")
            t0 = time.monotonic()
            first = await _ask(client, True)  # request 1: its stream breaks off; request 2: a 429
            took = time.monotonic() - t0
            await client.close()
            return first, took, len(_chats(srv))

    first, took, asked = asyncio.run(go())
    assert asked == 3 and len(first.tool_calls) == 2 and first.finish_reason == "tool_calls"
    assert 0.6 <= took < 5  # the 0.6 s the 429 asked for (the cut stream's backoff is ~1 s on top)


class Refuses:
    """A provider that says the account cannot pay (DashScope's Arrearage, HTTP 400)."""

    def __init__(self, status: int, code: str):
        self.status, self.code = status, code

    def refusal(self, body, headers, count):
        return self.status, {"error": {"message": "Access denied, please make sure your account is in good standing.",
                                       "type": self.code, "code": self.code}}, {}


@pytest.mark.parametrize("provider, said", [
    (Provider(api_key="the-right-key"), "refused the API key (HTTP 401"),
    (Refuses(400, "Arrearage"), "quota or balance is exhausted (HTTP 400"),
    (Refuses(403, "AllocationQuota.FreeTierOnly"), "quota or balance is exhausted (HTTP 403"),
    (Refuses(429, "insufficient_quota"), "quota or balance is exhausted (HTTP 429"),
])
def test_a_refused_key_or_a_spent_quota_stops_at_once_without_retrying(provider, said):
    async def go():
        with ScriptedServer(Answer(), provider=provider) as srv:
            client = _client(srv, stream="always", max_retries=20)
            with pytest.raises(RunAborted) as caught:
                await _ask(client, True)
            await client.close()
            return str(caught.value), len(_chats(srv))

    message, asked = asyncio.run(go())
    assert asked == 1 and said in message and "\n" not in message and KEY not in message


# ------------------------------------------------------------------------------- the CLI


@pytest.mark.slow
def test_bfcl_replay_scores_100_through_the_provider_and_no_file_holds_the_key(reme, provider):
    since = len(provider.requests)
    proc = reme("eval", "--mode", "none", *HOSTED, f"llm.base_url={provider.base_url}", "benchmark.limit=5",
                "eval.runs=2", "eval.seeds=1", "out_dir=run", env={"DASHSCOPE_API_KEY": KEY}, check=True)
    run = reme.cwd / "run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["avg@2"]["mean"] == 1.0 and (metrics["units"], metrics["errors"]) == (10, 0)
    chats = _chats(provider, since)
    assert all(r["headers"]["authorization"] == f"Bearer {KEY}" for r in chats)
    for body in (r["body"] for r in chats):
        assert body["stream"] is True and body["seed"] == 0 and body["enable_thinking"] is True
        assert body["parallel_tool_calls"] is True and "chat_template_kwargs" not in body
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["server"]["kind"] == "hosted" and manifest["status"] == "complete"
    assert manifest["served"]["system_fingerprints"] == {"fp-scripted": manifest["served"]["models"]["replay"]}
    assert manifest["served"]["changed"] is False
    # Both runs of a task were asked (the cache keeps units apart under one seed) and came back alike.
    assert metrics["identical_runs"] == {"tasks": 5, "of": 5} and "honoured seed=0" in proc.stderr
    assert _files_holding(reme.cwd, KEY) == []
    assert "SECRET" not in proc.stderr + proc.stdout


@pytest.mark.slow
def test_a_keyless_local_server_answers_then_a_dead_one_replays_or_is_named_refused(reme):
    """model=openai-compatible against a keyless server on this machine (the scripted one),
    no key variable set: the run scores. Rerun against a dead port, every answer is in the
    response cache: it replays (exit 0) and says that no request reached a server, in the
    summary and the manifest. With nothing cached, the refused connection is named as one,
    not as a timeout."""
    args = ["eval", "--mode", "none", "model=openai-compatible", "embedding=minilm", "llm.model=replay",
            "benchmark.release=current", "benchmark.limit=2", "eval.runs=1", "eval.seeds=1"]
    keyless = {"OPENAI_API_KEY": None}
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        first = reme(*args, f"llm.base_url={srv.base_url}", "out_dir=first", env=keyless, check=True)
        asked = len(_chats(srv))
    assert asked >= 2 and "no request reached a server" not in first.stderr
    served = json.loads((reme.cwd / "first" / "manifest.json").read_text())["served"]
    assert served["models"] == {"replay": asked} and served["replayed"] == 0 and "note" not in served

    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
    again = reme(*args, f"llm.base_url={dead}", "out_dir=again", env=keyless)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"no request reached a server: all {asked} answers were replayed from the response cache" in \
        " ".join(again.stderr.split())
    served = json.loads((reme.cwd / "again" / "manifest.json").read_text())["served"]
    assert served == {"models": {}, "changed": False, "replayed": asked, "note": "no request reached a server"}
    metrics = lambda run: json.loads((reme.cwd / run / "metrics.json").read_text())
    assert metrics("again")["avg@1"] == metrics("first")["avg@1"]

    refused = reme(*args, f"llm.base_url={dead}", "llm.cache=false", "llm.max_retries=0", "llm.breaker_threshold=1",
                   "out_dir=refused", env=keyless)
    assert refused.returncode == 4
    (line,) = [l for l in refused.stderr.splitlines() if l.startswith("error:")]
    assert "ConnectionRefusedError" in line and "Request timed out" not in line


@pytest.mark.slow
def test_a_wrong_key_stops_the_run_at_once_in_one_line(reme, provider):
    since = len(provider.requests)
    proc = reme("eval", "--mode", "none", *HOSTED, f"llm.base_url={provider.base_url}", "benchmark.limit=3",
                "eval.seeds=1", "eval.runs=1", "out_dir=run", env={"DASHSCOPE_API_KEY": "sk-wrong-key-4646"})
    assert proc.returncode == 4, proc.stderr
    assert "refused the API key (HTTP 401" in proc.stderr and "Traceback" not in proc.stderr
    assert len(_chats(provider, since)) <= 3  # one per unit in flight: no retries
    assert json.loads((reme.cwd / "run" / "manifest.json").read_text())["status"] == "interrupted"
    assert _files_holding(reme.cwd, "sk-wrong-key-4646") == []


@pytest.mark.slow
def test_a_budget_stops_a_run_resumably_and_the_spend_adds_up(reme, provider):
    priced = [*HOSTED, f"llm.base_url={provider.base_url}", "benchmark.limit=4", "eval.seeds=1", "eval.runs=1",
              "model.price.input=200", "model.price.output=800", "model.price.thinking_output=2000",
              "llm.concurrency=1", "out_dir=run"]
    stopped = reme("eval", "--mode", "none", *priced, "llm.budget_usd=1", env={"DASHSCOPE_API_KEY": KEY})
    assert stopped.returncode == 4 and "llm.budget_usd=1 reached" in stopped.stderr
    manifest = json.loads((reme.cwd / "run" / "manifest.json").read_text())
    spent = manifest["spend"]["usd"]
    assert manifest["status"] == "interrupted" and 1 <= spent < 3  # one call past the line at most
    assert len(_trials(reme.cwd / "run")) < 4
    done = reme("eval", "--mode", "none", *priced, "llm.budget_usd=1000", env={"DASHSCOPE_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    after = json.loads((reme.cwd / "run" / "manifest.json").read_text())
    assert after["status"] == "complete" and after["spend"]["usd"] > spent  # the sessions' spend together
    assert len(_trials(reme.cwd / "run")) == 4


@pytest.mark.slow
def test_the_dry_run_prices_a_table_and_the_hosted_rows_keep_the_authors_setup(reme):
    priced = reme("ablate", "table1", "model=qwen3-8b-dashscope", "model.price.input=0.5", "model.price.output=2",
                  "model.price.thinking_output=5", "model.price.source=https://example.test/price-list",
                  "model.price.date=2026-12-05", "--dry-run", env={"COLUMNS": "220"}, check=True)
    text = re.sub(r"[\s│]+", " ", priced.stderr)
    assert "cost (USD)" in priced.stderr and "https://example.test/price-list, 2026-12-05" in text
    usd = float(re.search(r"\$([\d,.]+) at prices", text).group(1).replace(",", ""))
    assert usd > 0
    # The hosted setup is the authors' own: no seed or embedding note, only what reme departs in
    # on purpose for every provider (docs/fidelity.md, "Named, not changed").
    assert "no_memory authors' setup" in text and f"reme_fixed {EXACT_SEARCH} reme_dynamic" in text
    assert f"reme_dynamic {EXACT_SEARCH}; {EXACT_COUNTS} " in text
    assert "seed:" not in text and "embedding:" not in text
    # Without prices (qwen3-8b's: no published list was found) the cost is unknown.
    cfg = compose(["model=qwen3-8b-dashscope", "eval.mode=none"])
    calls = cost.run_calls(cfg, 150 * 4 * 3, cost.Assumptions())
    unknown = cost.estimate(cfg, calls, cost.Assumptions(), None)
    assert unknown.cost is None and unknown.gpu_hours == 0.0 and unknown.wall_s > 0


# ------------------------------------------------------------------------- ReMe dynamic, kill -9


@pytest.fixture(scope="module")
def base_pool(tmp_path_factory):
    return small_reme_pool(tmp_path_factory.mktemp("hosted_pool"))  # two experiences, MiniLM vectors


@pytest.mark.slow
def test_reme_dynamic_on_three_tasks_survives_kill_9_exactly(tmp_path, base_pool):
    """A ReMe dynamic run with a hosted executor and a hosted summarizer of its own, killed
    with SIGKILL after its first unit and resumed, records what an uninterrupted run records."""
    args = ["eval", "--mode", "dynamic", "memory=reme", f"memory.pool={base_pool}", *HOSTED, *THREE,
            "summarizer=qwen3-14b-dashscope", "eval.runs=1", "eval.seeds=1", "eval.dynamic_workers=1"]
    env = {**reme_env(tmp_path / ".reme_cache"), "DASHSCOPE_API_KEY": KEY}
    with ScriptedServer(_replay_policy(), delay=0.1,
                        provider=Provider(api_key=KEY, rate_limit_every=13, retry_after="0.2")) as srv:
        url = f"llm.base_url={srv.base_url}"
        whole = reme_process([*args, url, "out_dir=whole"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)
        assert whole.returncode == 0, whole.stderr[-2000:]
        # The killed run has a cache of its own: what it asks again, the provider answers again.
        killed_env = {**env, "REME_CACHE_DIR": str(tmp_path / "killed_cache")}
        (tmp_path / "killed_cache").mkdir()
        proc = reme_popen([*args, url, "out_dir=killed"], cwd=tmp_path, env=killed_env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
        trials = tmp_path / "killed" / "trials.jsonl"
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None and not (trials.exists() and trials.read_text().strip()):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert 1 <= len(_trials(tmp_path / "killed")) < 3, "the kill must land mid-run"
        resumed = reme_process([*args, url, "out_dir=killed"], cwd=tmp_path, env=killed_env, capture_output=True,
                               text=True, timeout=600)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        summarizer_calls = [r for r in _chats(srv) if not r["headers"].get("x-reme-task-id")]
    a = {t["unit"]: _untimed(t) for t in _trials(tmp_path / "whole")}
    b = {t["unit"]: _untimed(t) for t in _trials(tmp_path / "killed")}
    assert a == b and len(a) == 3
    assert a[f"s0/r0/{CORRUPT}"]["attempts"] == 2  # the failed trial's summary guided its retry
    assert summarizer_calls and all(r["body"]["model"] == "qwen3-14b" and r["body"]["stream"] is True
                                    for r in summarizer_calls)
    pools = [[{k: v for k, v in json.loads(line).items() if k not in ("created_at", "updated_at")}
              for line in (tmp_path / run / "streams" / "s0_r0" / "pool" / "experiences.jsonl").read_text().splitlines()]
             for run in ("whole", "killed")]
    assert pools[0] == pools[1] and len(pools[0]) > 2  # the same experiences, ids, f and u: clocks aside
    assert _files_holding(tmp_path, KEY) == []

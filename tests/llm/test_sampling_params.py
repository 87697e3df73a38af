"""What every request sends, and that a run records it: the Qwen3 configs send the temperature
and nothing else of the sampling, as the authors' agents did (the server's defaults apply),
model.sampling.* sends a value instead, the embedded model keeps its own; the manifest says
which were sent. The model's reasoning goes back to it as the authors' agent kept it. Checked
on the scripted server (a TEST DOUBLE). Also: embedding.device."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
import yaml

from reme_cli.core.config import compose, config_hash
from reme_cli.core.errors import UserError
from reme_cli.llm.client import ChatClient
from reme_cli.llm.embed import resolve_device
from reme_cli.methods.summarizer import summarizer_settings
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import FixedPolicy, Reply, ScriptedServer
from tests.conftest import REPO, reme_process

FILTERS = ("temperature", "top_p", "top_k", "min_p", "max_tokens")
UNSENT = {"top_p": None, "top_k": None, "min_p": None, "max_tokens": None}
EXPLICIT = ["model.sampling.top_p=0.95", "model.sampling.top_k=20", "model.sampling.min_p=0",
            "model.sampling.max_tokens=8192"]


def test_qwen3_configs_send_only_the_temperature_and_the_embedded_model_keeps_its_own():
    for size in ("8b", "14b", "32b"):
        cfg = compose([f"model=qwen3-{size}"])
        s = cfg.model.sampling
        assert {k: getattr(s, k) for k in FILTERS} == {"temperature": 0.9, **UNSENT}
        assert cfg.model.serve_args[-2:] == ["--generation-config", "auto"]  # what vLLM then applies
        assert cfg.llm.concurrency == 64
    local = compose(["model=local"]).model.sampling
    # what llama-cpp-python applied unasked, and a cap a 135M model needs on 2 cores
    assert (local.top_p, local.top_k, local.min_p, local.max_tokens) == (1.0, 40, 0.05, 128)


def test_the_filters_are_in_the_run_hash_and_device_and_concurrency_are_not():
    base = compose(["model=qwen3-8b"])
    for change in ("model.sampling.top_k=5", "model.sampling.min_p=0.1", "model.sampling.top_p=0.8",
                   "model.sampling.max_tokens=8192"):
        assert config_hash(compose(["model=qwen3-8b", change])) != config_hash(base), change
    for same in ("embedding.device=cpu", "embedding.device=cuda:1", "llm.concurrency=8"):
        assert config_hash(compose(["model=qwen3-8b", same])) == config_hash(base), same


@pytest.mark.parametrize("bad, message", [
    ("embedding.device=gpu", "choose auto, cpu, cuda or cuda:N"), ("model.sampling.min_p=1.5", "must be <= 1.0"),
    ("model.sampling.top_k=-1", "must be >= 0")])
def test_bad_values_are_one_line(bad, message):
    with pytest.raises(UserError, match=message.replace(".", r"\.")):
        compose([bad])


def test_device_auto_follows_torch():
    import torch

    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cuda:1") == "cuda:1"


class ThinkingReplay(BFCLReplayPolicy):
    """The ground truth, each reply with a reasoning text naming its turn and step."""

    def reply(self, body, headers):
        from reme_cli.testing.scripted_server import conversation_position

        turn, step = conversation_position(body["messages"])
        return Reply(**{**super().reply(body, headers).__dict__, "reasoning": f"thinking t{turn}s{step}"})


def run_replay(tmp_path, srv, *extra: str, out: str = "run") -> list[dict]:
    env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    proc = reme_process(
        ["eval", "model=qwen3-8b", "embedding=minilm", "llm.model=replay",
         f"llm.base_url={srv.base_url}", "benchmark.release=current", "benchmark.task_ids=[multi_turn_base_0]",
         "eval.runs=1", "eval.seeds=1", *extra, f"out_dir={out}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [r["body"] for r in srv.requests if r["path"].endswith("/chat/completions")]


@pytest.mark.slow
def test_a_run_sends_the_authors_parameters_and_records_what_it_sent(tmp_path):
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        bodies = run_replay(tmp_path, srv, out="authors")
        srv.requests.clear()
        explicit = run_replay(tmp_path, srv, *EXPLICIT, "model.sampling.top_k=7", out="explicit")
    assert bodies and all(b["temperature"] == 0.9 and not set(UNSENT) & set(b) for b in bodies)
    assert all({k: b.get(k) for k in FILTERS} == {"temperature": 0.9, "top_p": 0.95, "top_k": 7, "min_p": 0,
                                                  "max_tokens": 8192} for b in explicit)
    assert not any("tool_choice" in b for b in bodies)  # the authors' agents named none
    manifest = json.loads((tmp_path / "authors" / "manifest.json").read_text())["requests"]
    assert manifest["sent"]["temperature"] == 0.9 and sorted(manifest["not_sent"]) == sorted([*UNSENT, "tool_choice"])
    assert manifest["sent"]["extra_body"] == {"chat_template_kwargs": {"enable_thinking": True}}
    recorded = json.loads((tmp_path / "explicit" / "manifest.json").read_text())["requests"]
    assert recorded["not_sent"] == ["tool_choice"] and recorded["sent"]["top_k"] == 7
    config = yaml.safe_load((tmp_path / "explicit" / "config.yaml").read_text())["model"]["sampling"]
    assert {k: config[k] for k in FILTERS} == {"temperature": 0.9, "top_p": 0.95, "top_k": 7, "min_p": 0.0,
                                               "max_tokens": 8192}


@pytest.mark.slow
def test_the_models_reasoning_goes_back_as_reasoning_content_and_is_recorded(tmp_path):
    with ScriptedServer(ThinkingReplay()) as srv:
        kept = run_replay(tmp_path, srv, out="kept")
        srv.requests.clear()
        dropped = run_replay(tmp_path, srv, "benchmark.history_reasoning=drop", out="dropped")
    # Step 1 of turn 0 sees step 0's reply with its reasoning, as the authors' agent sent it.
    assistant = [m for m in kept[1]["messages"] if m["role"] == "assistant"]
    assert assistant and assistant[0]["reasoning_content"] == "thinking t0s0"
    later = [m for b in kept for m in b["messages"] if m["role"] == "assistant"]
    assert all(m["reasoning_content"].startswith("thinking t") for m in later)
    assert not any("reasoning_content" in m for b in dropped for m in b["messages"])
    for out in ("kept", "dropped"):  # the trial records every step's reasoning either way
        trial = json.loads((tmp_path / out / "trials.jsonl").read_text())
        steps = [s for turn in trial["trajectory"]["turns"] for s in turn]
        assert [s["reasoning"] for s in steps[:2]] == ["thinking t0s0", "thinking t0s1"]


def test_summarizer_calls_send_the_models_filters_unless_the_caller_sets_them():
    # summarizer.temperature: null, not sent (the FAQ's service config sets none).
    for overrides, want in ((["model=qwen3-8b"], {}),
                            (["model=qwen3-8b", *EXPLICIT[:3]], {"top_p": 0.95, "top_k": 20, "min_p": 0})):
        cfg = compose(overrides)
        with ScriptedServer(FixedPolicy(json.dumps({"score": 1}))) as srv:
            async def main() -> None:
                client = ChatClient(srv.base_url, "m")
                try:
                    summ, own = summarizer_settings(cfg, client)
                    assert own is None
                    await summ.llm.chat([{"role": "user", "content": "judge"}], temperature=summ.temperature,
                                        max_tokens=summ.max_tokens)
                    await summ.llm.chat([{"role": "user", "content": "x"}], temperature=0.0, top_k=3)
                finally:
                    await client.close()

            asyncio.run(main())
            first, second = (r["body"] for r in srv.requests if r["path"].endswith("/chat/completions"))
        assert {k: first[k] for k in FILTERS if k in first} == want
        assert second["top_k"] == 3


TOOLS = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]


def test_tools_go_without_a_tool_choice_unless_the_config_or_the_caller_names_one():
    """As the authors' agents (bfcl_agent.py:250-259): tools, no tool_choice; model.tool_choice
    sends one with every request's tools, and a caller forcing a call sends its own."""
    from reme_cli.llm.endpoint import Endpoint, make_client

    forced = {"type": "function", "function": {"name": "ls"}}
    with ScriptedServer(FixedPolicy("ok")) as srv:
        async def main() -> None:
            for overrides in ([], ["model.tool_choice=required"]):
                cfg = compose(["model=qwen3-8b", f"llm.base_url={srv.base_url}", "llm.cache=false", *overrides])
                client = make_client(cfg, Endpoint([srv.base_url], "m"))
                try:
                    await client.chat([{"role": "user", "content": "a"}], tools=TOOLS)
                    await client.chat([{"role": "user", "content": "b"}], tools=TOOLS, tool_choice=forced)
                    await client.chat([{"role": "user", "content": "c"}])  # no tools: never a tool_choice
                finally:
                    await client.close()

        asyncio.run(main())
        sent = [r["body"].get("tool_choice", "-") for r in srv.requests if r["path"].endswith("/chat/completions")]
    assert sent == ["-", forced, "-", "required", forced, "-"]
    assert compose(["model=qwen3-8b-dashscope"]).model.tool_choice is None
    with pytest.raises(UserError, match="model.tool_choice='sometimes' is not allowed"):
        compose(["model.tool_choice=sometimes"])


def test_runs_made_before_tool_choice_and_the_summarizer_seed_resume():
    """Earlier runs sent tool_choice auto and seed 42 to the summarizer: low departures
    (docs/fidelity.md), so at their new defaults they hash as they did; a value set differs."""
    base = compose(["model=qwen3-8b"])
    for same in ("model.tool_choice=null", "summarizer.seed=null"):
        assert config_hash(compose(["model=qwen3-8b", same])) == config_hash(base), same
    for change in ("model.tool_choice=required", "summarizer.seed=42", "benchmark.context=65536"):
        assert config_hash(compose(["model=qwen3-8b", change])) != config_hash(base), change
    assert config_hash(compose(["model=qwen3-8b", "summarizer.stream=always"])) == config_hash(base)  # travel only



def test_the_runs_client_speaks_its_servers_dialect():
    """An endpoint on llama.cpp's C++ server (the xllamacpp engine) takes a JSON schema as a
    compact grammar (llm/json_grammar.py); the client the run makes from it sends it so. It was
    built but never handed to the client (make_client dropped ``Endpoint.adapt``)."""
    from reme_cli.llm.endpoint import Endpoint, _dialect, make_client
    from reme_cli.llm.json_grammar import compact_json_request

    cfg = compose(["model=local", "llm.cache=false"])
    assert make_client(cfg, Endpoint(["http://127.0.0.1:9/v1"], "m", adapt=_dialect(True))).adapt \
        is compact_json_request
    assert make_client(cfg, Endpoint(["http://127.0.0.1:9/v1"], "m", adapt=_dialect(False))).adapt is None

"""Every sampling parameter a server applies is one reme sent and recorded: top_p, top_k and
min_p are in the config, in the run hash and in every request (the executor's and the
summarizer's), checked on the scripted server (a TEST DOUBLE). Also: embedding.device."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
import yaml

from reme_cli.core.config import compose, config_hash
from reme_cli.core.errors import UserError
from reme_cli.llm.client import ChatClient
from reme_cli.llm.embed import resolve_device
from reme_cli.methods.summarizer import summarizer_settings
from reme_cli.testing.scripted_server import BFCLReplayPolicy, FixedPolicy, ScriptedServer
from tests.conftest import REPO

FILTERS = ("temperature", "top_p", "top_k", "min_p")


def test_qwen3_configs_set_qwen3s_filters_and_concurrency():
    for size in ("8b", "14b", "32b"):
        cfg = compose([f"model=qwen3-{size}"])
        s = cfg.model.sampling
        # Qwen3's generation_config.json; the paper's temperature
        assert (s.temperature, s.top_p, s.top_k, s.min_p) == (0.9, 0.95, 20, 0.0)
        assert cfg.llm.concurrency == 64
    local = compose(["model=local"]).model.sampling
    assert (local.top_k, local.min_p) == (40, 0.05)  # what llama-cpp-python applied unasked


def test_the_filters_are_in_the_run_hash_and_device_and_concurrency_are_not():
    base = compose(["model=qwen3-8b"])
    for change in ("model.sampling.top_k=5", "model.sampling.min_p=0.1", "model.sampling.top_p=0.8"):
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


def test_a_run_sends_and_records_every_filter(tmp_path):
    with ScriptedServer(BFCLReplayPolicy()) as srv:
        env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
        proc = subprocess.run(
            [sys.executable, "-m", "reme_cli.cli", "eval", "model=qwen3-8b", "embedding=minilm", "llm.model=replay",
             f"llm.base_url={srv.base_url}", "benchmark.release=current", "benchmark.limit=1", "eval.runs=1",
             "eval.seeds=1", "model.sampling.top_k=7", "out_dir=run"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        bodies = [r["body"] for r in srv.requests if r["path"].endswith("/chat/completions")]
    assert bodies and all({k: b.get(k) for k in FILTERS} == {"temperature": 0.9, "top_p": 0.95, "top_k": 7,
                                                               "min_p": 0.0} for b in bodies)
    recorded = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["model"]["sampling"]
    assert {k: recorded[k] for k in FILTERS} == {"temperature": 0.9, "top_p": 0.95, "top_k": 7, "min_p": 0.0}


def test_summarizer_calls_send_the_models_filters_unless_the_caller_sets_them():
    cfg = compose(["model=qwen3-8b"])
    with ScriptedServer(FixedPolicy(json.dumps({"score": 1}))) as srv:
        async def main() -> None:
            client = ChatClient(srv.base_url, "m")
            try:
                summ, own = summarizer_settings(cfg, client)
                assert own is None
                await summ.llm.chat([{"role": "user", "content": "judge"}], temperature=summ.temperature)
                await summ.llm.chat([{"role": "user", "content": "x"}], temperature=0.0, top_k=3)
            finally:
                await client.close()

        asyncio.run(main())
        first, second = (r["body"] for r in srv.requests if r["path"].endswith("/chat/completions"))
    assert {k: first.get(k) for k in FILTERS} == {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0}
    assert second["top_k"] == 3

"""Embeddings from an OpenAI-compatible /v1/embeddings endpoint (the authors' text-embedding-v4
through DashScope, or any other): batched, `dimensions` sent, retried, cached on disk, the key
read from the environment and written nowhere. The endpoint is the scripted server, a TEST
DOUBLE whose vectors are fixed per text (not a model's)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import yaml

from reme_cli.core.config import compose, config_hash, to_dict
from reme_cli.core.errors import UserError
from reme_cli.llm.embed import CachedEmbedder, make_embedder, make_embedder_for
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import (
    AgentAndSummarizerPolicy,
    FixedPolicy,
    ScriptedServer,
    ScriptedSummarizerPolicy,
    scripted_vector,
)

KEY_ENV = "REME_TEST_EMBEDDING_KEY"
SECRET = "sk-test-0123456789abcdef"


def embedding_requests(srv: ScriptedServer) -> list[dict]:
    return [r for r in srv.requests if r["path"] == "/v1/embeddings"]


def endpoint_cfg(srv: ScriptedServer, **extra) -> dict:
    return {"kind": "openai", "model": "text-embedding-v4", "base_url": srv.base_url, "dim": 16,
            "dimensions": 16, "api_key_env": KEY_ENV, "batch_size": 10, **extra}


def test_the_text_embedding_v4_preset_is_what_the_authors_called():
    e = compose(["embedding=text-embedding-v4"]).embedding
    assert (e.kind, e.model, e.dim, e.dimensions, e.batch_size) == ("openai", "text-embedding-v4", 1024, 1024, 10)
    assert e.base_url == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    assert e.api_key_env == "DASHSCOPE_API_KEY"
    # Out of the hash: how fast it goes and where the key sits; in it: the provider's host.
    cfg = compose(["embedding=text-embedding-v4"])
    same = ["embedding.batch_size=5", "embedding.api_key_env=OTHER_KEY",
            "embedding.base_url=https://dashscope.aliyuncs.com:443/compatible-mode/v1"]
    for change in same:
        assert config_hash(compose(["embedding=text-embedding-v4", change])) == config_hash(cfg), change
    for change in ["embedding.base_url=https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
                   "embedding.dimensions=512", "embedding.model=text-embedding-v3"]:
        extra = ["embedding.dim=512"] if "dimensions" in change else []
        assert config_hash(compose(["embedding=text-embedding-v4", change, *extra])) != config_hash(cfg), change


@pytest.mark.parametrize("bad, message", [
    ("embedding.dimensions=512", "embedding.dimensions=512 asks the endpoint for 512-d vectors but embedding.dim=1024"),
    ("embedding.api_key_env=sk-abc123", "takes the name of an environment variable"),
    ("embedding.base_url=dashscope.aliyuncs.com", "must start with http:// or https://"),
])
def test_bad_endpoint_settings_are_one_line(bad, message):
    with pytest.raises(UserError, match=message.replace(".", r"\.").replace("+", r"\+")):
        compose(["embedding=text-embedding-v4", bad])
    with pytest.raises(UserError, match="is for an endpoint"):
        compose(["embedding=minilm", "embedding.dimensions=384"])


def test_texts_go_in_batches_with_dimensions_model_and_key(monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, SECRET)
    texts = [f"experience {i}" for i in range(23)]
    with ScriptedServer(FixedPolicy()) as srv:
        vecs = make_embedder(endpoint_cfg(srv)).embed(texts)
        sent = embedding_requests(srv)
    assert [len(r["body"]["input"]) for r in sent] == [10, 10, 3]
    assert [t for r in sent for t in r["body"]["input"]] == texts
    for r in sent:
        assert (r["body"]["model"], r["body"]["dimensions"], r["body"]["encoding_format"]) == \
            ("text-embedding-v4", 16, "float")
        assert r["headers"]["authorization"] == f"Bearer {SECRET}"
    want = np.array([scripted_vector("text-embedding-v4", t, 16) for t in texts], dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert vecs.shape == (23, 16) and np.allclose(vecs, want, atol=1e-6)


def test_a_429_and_a_500_are_retried_and_a_refusal_is_one_line(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with ScriptedServer(FixedPolicy(), embedding_faults=[429, 500]) as srv:
        vecs = make_embedder(endpoint_cfg(srv)).embed(["a", "b"])
        assert len(embedding_requests(srv)) == 3 and vecs.shape == (2, 16)
    # DashScope refuses more than 10 texts per request: said in one line, with what to change.
    with ScriptedServer(FixedPolicy(), max_embedding_inputs=10) as srv:
        with pytest.raises(UserError, match=r"HTTP 400: .*embedding\.batch_size") as refused:
            make_embedder(endpoint_cfg(srv, batch_size=11)).embed([str(i) for i in range(11)])
        assert "\n" not in str(refused.value) and len(embedding_requests(srv)) == 1  # a 400 is not retried


def test_a_second_run_takes_every_vector_from_the_disk_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, SECRET)
    texts = ["move the report", "book a flight", "move the report"]
    with ScriptedServer(FixedPolicy()) as srv:
        first = make_embedder(endpoint_cfg(srv, cache_dir=str(tmp_path)))
        assert isinstance(first, CachedEmbedder)
        a = first.embed(texts)
        assert [r["body"]["input"] for r in embedding_requests(srv)] == [["move the report", "book a flight"]]
        first.close()
        again = make_embedder(endpoint_cfg(srv, cache_dir=str(tmp_path)))  # a new process's embedder
        b = again.embed(texts)
        assert len(embedding_requests(srv)) == 1 and (again.hits, again.misses) == (2, 0)
        assert np.array_equal(a, b)
        # Other dimensions are other vectors: asked for, not taken from the cache.
        make_embedder(endpoint_cfg(srv, cache_dir=str(tmp_path), dim=8, dimensions=8)).embed(texts[:1])
        assert len(embedding_requests(srv)) == 2


def test_a_missing_key_is_one_line_before_anything_is_written(reme, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    cfg = compose(["embedding=text-embedding-v4", f"embedding.api_key_env={KEY_ENV}"])
    with pytest.raises(UserError, match=f"needs an API key in the environment variable {KEY_ENV}: export {KEY_ENV}="):
        make_embedder_for(cfg)
    env = {k: v for k, v in os.environ.items() if k != "DASHSCOPE_API_KEY"}
    proc = reme("pool", "import", "official:bfcl/qwen3-8b", "--out", "pool", "embedding=text-embedding-v4",
                env=env)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: embedding text-embedding-v4 needs an API key in the environment variable "
                               "DASHSCOPE_API_KEY: export DASHSCOPE_API_KEY=")
    assert not (reme.cwd / "pool").exists()


@pytest.mark.slow
def test_a_run_embeds_through_the_endpoint_records_it_and_never_the_key(reme):
    env = {"DASHSCOPE_API_KEY": SECRET}
    with ScriptedServer(AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())) as srv:
        endpoint = ["embedding=text-embedding-v4", f"embedding.base_url={srv.base_url}"]
        reme("pool", "import", "official:bfcl/qwen3-8b", "--out", "pool", *endpoint, env=env, check=True)
        imported = len(embedding_requests(srv))
        reme("eval", "--mode", "fixed", "model=qwen3-8b", *endpoint, "memory=reme", "memory.pool=pool",
             f"llm.base_url={srv.base_url}", "llm.model=replay", "llm.cache=false", "benchmark.release=current",
             "benchmark.limit=2", "eval.runs=1", "eval.seeds=1", "out_dir=run", env=env, check=True)
        sent = embedding_requests(srv)
    assert imported == 10  # 96 released experiences, 10 per request
    assert len(sent) > imported  # the eval embedded its queries through the endpoint too
    assert all(r["headers"]["authorization"] == f"Bearer {SECRET}" for r in sent)
    assert all(len(r["body"]["input"]) <= 10 and r["body"]["dimensions"] == 1024 for r in sent)
    run = reme.cwd / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["embedding"] == {"kind": "openai", "model": "text-embedding-v4", "dim": 1024,
                                     "dimensions": 1024, "host": "127.0.0.1"}
    # The embedding's tokens are priced (embedding.price: USD 0.072 per 1M), the model's are not.
    spend = manifest["spend"]
    assert 0 < spend["usd"] < 0.01 and spend["unpriced_calls"] > 0
    assert yaml.safe_load((run / "config.yaml").read_text())["embedding"]["api_key_env"] == "DASHSCOPE_API_KEY"
    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 2 and all(t["retrieved_ids"] for t in trials)
    for path in [*run.rglob("*"), *(reme.cwd / "pool").rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in json.dumps(to_dict(compose(["embedding=text-embedding-v4"])))

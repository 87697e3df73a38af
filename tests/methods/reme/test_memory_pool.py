"""Experience pool: real all-MiniLM-L6-v2 embeddings and real faiss, no stand-ins."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import socket
from pathlib import Path

import faiss
import numpy as np
import pytest

from reme_cli.core.errors import UserError
from reme_cli.methods.reme import pool as pool_mod
from reme_cli.llm.embed import (
    CachedEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    bundled_minilm_path,
    make_embedder,
)
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.official import RELEASED_DIR, import_official, parse_official, released_pools
from reme_cli.methods.reme.pool import Pool

OFFICIAL = RELEASED_DIR  # the authors' released pools, bundled with reme

# The counts the authors' files hold: total (success, failure, comparative).
OFFICIAL_COUNTS = {
    "appworld_qwen3_8b": (207, 28, 152, 27),
    "appworld_qwen3_14b": (218, 47, 141, 30),
    "appworld_qwen3_32b": (184, 43, 81, 60),
    "bfcl_qwen3_8b": (96, 48, 42, 6),
    "bfcl_qwen3_14b": (110, 54, 42, 14),
    "bfcl_qwen3_32b": (99, 44, 41, 14),
}

# Distinct tool workflows, written like extracted keypoint experiences.
WORKFLOWS = {
    "stock": (
        "When the user wants a company's share price and to track it in a watchlist",
        "Map the company name with get_symbol_by_name, read get_stock_info, then add_to_watchlist.",
    ),
    "car": (
        "Before starting the car engine",
        "Lock all doors and press the brake pedal before calling startEngine.",
    ),
    "files": (
        "When moving a file into a new folder in the file system",
        "Create the directory with mkdir, then mv the file, then ls to confirm it arrived.",
    ),
    "flight": (
        "When booking a flight ticket for a traveller",
        "Look up airport codes, get the flight cost, authenticate, then book_flight with the card id.",
    ),
    "tweet": (
        "When posting a message on social media with hashtags",
        "Authenticate the twitter account, then post_tweet with content, tags and mentions.",
    ),
}

PARAPHRASES = {
    "stock": "How much does Nvidia stock cost right now? Please also put it on my list of followed stocks.",
    "car": "Please turn on the vehicle's motor for me.",
    "files": "Relocate report.txt into a freshly created archive directory.",
    "flight": "Reserve me a plane seat from San Francisco to Los Angeles next Friday.",
    "tweet": "Share a tweet about our product launch, tagging #launch.",
}


def _exp(key: str, source: str = "success", **kw) -> Experience:
    when, content = WORKFLOWS[key]
    return Experience(when_to_use=when, content=content, source=source, id=key, author="test", **kw)


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    # Loaded once per module: the model load dominates this file's runtime.
    return SentenceTransformerEmbedder("all-MiniLM-L6-v2")


@pytest.fixture
def workflow_pool(tmp_path: Path, minilm) -> Pool:
    pool = Pool.create(tmp_path / "pool", minilm, built_by={"test": True})
    pool.add([_exp(k) for k in WORKFLOWS])
    pool.save()
    return pool


# ---- Experience -------------------------------------------------------------------


def test_experience_round_trip_and_retrieval_text() -> None:
    e = Experience(
        when_to_use="w",
        content="c",
        source="failure",
        keywords=["a", "b"],
        task_query="t",
        generalized_query="g",
        extra={"x": 1},
    )
    assert Experience.from_dict(json.loads(json.dumps(e.to_dict()))) == e
    assert e.retrieval_text("usage_scenario") == "w"
    assert e.retrieval_text("task_query") == "t"
    assert e.retrieval_text("generalized_query") == "g"
    assert e.retrieval_text("keywords") == "a, b"
    with pytest.raises(ValueError, match="retrieval key"):
        e.retrieval_text("content")


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"content": None}, "content"),
        ({"source": "lucky"}, "source"),
        ({"confidence": 1.5}, "confidence"),
        ({"keywords": "a, b"}, "keywords"),
        ({"f": -1}, "'f'"),
        ({"u": True}, "'u'"),
    ],
)
def test_experience_from_dict_names_bad_field(patch: dict, field: str) -> None:
    d = Experience(when_to_use="w", content="c", source="success").to_dict()
    d.update(patch)
    with pytest.raises(ValueError, match=field):
        Experience.from_dict(d)


def test_experience_from_dict_names_missing_field() -> None:
    d = Experience(when_to_use="w", content="c", source="success").to_dict()
    del d["when_to_use"]
    with pytest.raises(ValueError, match="when_to_use"):
        Experience.from_dict(d)


# ---- retrieval --------------------------------------------------------------------


@pytest.mark.parametrize("key", list(PARAPHRASES))
def test_relevant_experience_ranks_first(workflow_pool: Pool, key: str) -> None:
    hits = workflow_pool.search(PARAPHRASES[key], top_k=3)
    assert [e.id for e, _ in hits][0] == key
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and all(-1.0 <= s <= 1.0 + 1e-5 for s in scores)


def test_search_edge_cases(tmp_path: Path, minilm, workflow_pool: Pool) -> None:
    assert workflow_pool.search("anything", top_k=0) == []
    assert len(workflow_pool.search("anything", top_k=50)) == len(WORKFLOWS)
    empty = Pool.create(tmp_path / "empty", minilm)
    assert empty.search("anything", top_k=5) == []
    assert Pool.load(tmp_path / "empty", minilm).search("anything", top_k=5) == []


def test_retrieval_key_switch(tmp_path: Path, minilm) -> None:
    pool = Pool.create(tmp_path / "kw", minilm, retrieval_key="keywords")
    pool.add(
        [
            Experience(
                id="a", when_to_use="x", content="c", source="success", keywords=["flight", "booking", "airport"]
            ),
            Experience(id="b", when_to_use="x", content="c", source="success", keywords=["tweet", "hashtag", "post"]),
        ]
    )
    assert pool.search("book a plane ticket", 1)[0][0].id == "a"


# ---- dedup ------------------------------------------------------------------------


def test_dedup_drops_near_duplicate_keeps_distinct(workflow_pool: Pool) -> None:
    near = Experience(
        id="near",
        source="success",
        content="same lesson, reworded",
        when_to_use="When the user wants the share price of a company and to track it in their watchlist",
    )
    distinct = Experience(
        id="distinct",
        source="failure",
        content="Check the balance before transferring money.",
        when_to_use="When sending money to a contact through a payment app",
    )
    added = workflow_pool.add([near, distinct], dedup_threshold=0.85)
    assert [e.id for e in added] == ["distinct"]
    assert [(c.id, match) for c, match, _ in workflow_pool.last_dropped] == [("near", "stock")]
    assert workflow_pool.last_dropped[0][2] >= 0.85
    assert "near" not in workflow_pool and "distinct" in workflow_pool


def test_dedup_within_one_batch(tmp_path: Path, minilm) -> None:
    pool = Pool.create(tmp_path / "p", minilm)
    first = _exp("car")
    again = Experience(id="car2", when_to_use="Before starting the car's engine", content="x", source="failure")
    added = pool.add([first, again, _exp("files")], dedup_threshold=0.85)
    assert [e.id for e in added] == ["car", "files"]
    assert pool.last_dropped[0][1] == "car"
    # No threshold means no dedup (how the official pools are imported).
    assert [
        e.id for e in pool.add([Experience(id="car3", when_to_use=first.when_to_use, content="y", source="success")])
    ] == ["car3"]


def test_add_rejects_duplicate_ids(workflow_pool: Pool) -> None:
    with pytest.raises(ValueError, match="stock"):
        workflow_pool.add([_exp("stock")])


# ---- counts, removal, stats -------------------------------------------------------


def test_update_counts_remove_and_stats(workflow_pool: Pool) -> None:
    workflow_pool.update_counts(["stock", "car"], retrieved=True, success=True)
    workflow_pool.update_counts(["stock"], retrieved=True, success=False)
    assert (workflow_pool.get("stock").f, workflow_pool.get("stock").u) == (2, 1)
    assert (workflow_pool.get("car").f, workflow_pool.get("car").u) == (1, 1)
    # Returned objects are copies: editing one must not bypass update_counts().
    workflow_pool.get("stock").f = 99
    assert workflow_pool.get("stock").f == 2
    with pytest.raises(KeyError):
        workflow_pool.update_counts(["nope"])

    st = workflow_pool.stats()
    assert st["size"] == 5 and st["counts_by_source"]["success"] == 5
    assert st["f"]["histogram"] == {"0": 3, "1": 1, "2": 1}
    assert st["u_over_f"]["min"] == 0.5 and st["u_over_f"]["max"] == 1.0
    assert st["never_retrieved"] == 3
    assert st["confidence"]["mean"] == 1.0

    removed = workflow_pool.remove(["car", "tweet"])
    assert {e.id for e in removed} == {"car", "tweet"}
    assert len(workflow_pool) == 3 and workflow_pool.get("car") is None
    assert workflow_pool.search(PARAPHRASES["files"], 1)[0][0].id == "files"
    with pytest.raises(KeyError):
        workflow_pool.remove(["car"])


# ---- persistence ------------------------------------------------------------------


def test_save_load_round_trip(workflow_pool: Pool, minilm) -> None:
    workflow_pool.update_counts(["flight"], success=True)
    workflow_pool.save()
    loaded = Pool.load(workflow_pool.path, minilm)
    assert loaded.repairs == []
    assert [e.to_dict() for e in loaded] == [e.to_dict() for e in workflow_pool]
    assert np.array_equal(loaded.vectors, workflow_pool.vectors)
    assert loaded.built_by == {"test": True} and loaded.retrieval_key == "usage_scenario"
    q = PARAPHRASES["flight"]
    assert [(e.id, round(s, 5)) for e, s in loaded.search(q, 5)] == [
        (e.id, round(s, 5)) for e, s in workflow_pool.search(q, 5)
    ]
    manifest = json.loads((workflow_pool.path / "manifest.json").read_text())
    assert manifest["size"] == 5 and manifest["embedding"] == {"name": minilm.name, "dim": 384}


def test_crash_while_writing_files_keeps_previous_pool(workflow_pool: Pool, minilm, monkeypatch) -> None:
    before = [e.to_dict() for e in workflow_pool]
    workflow_pool.add([Experience(id="new", when_to_use="When cooking pasta", content="salt", source="success")])

    # experiences.jsonl and embeddings.npy of the new version are written, then the
    # process "dies" while writing the index.
    def die(*_a, **_k):
        raise OSError("simulated crash")

    monkeypatch.setattr(pool_mod.faiss, "write_index", die)
    with pytest.raises(OSError, match="simulated crash"):
        workflow_pool.save()
    monkeypatch.undo()

    loaded = Pool.load(workflow_pool.path, minilm)
    assert [e.to_dict() for e in loaded] == before and loaded.repairs == []
    assert not list(workflow_pool.path.parent.glob(".pool.*"))  # staging cleaned up

    workflow_pool.save()  # and the next save goes through
    assert "new" in Pool.load(workflow_pool.path, minilm)


def test_crash_between_directory_renames_recovers_previous_pool(workflow_pool: Pool, minilm, monkeypatch) -> None:
    before = [e.to_dict() for e in workflow_pool]
    workflow_pool.remove(["car"])
    real_rename = os.rename
    calls = []

    def rename_then_die(src, dst):
        calls.append(src)
        if len(calls) == 2:  # old pool moved aside, new one not yet moved in
            raise OSError("simulated crash")
        real_rename(src, dst)

    monkeypatch.setattr(pool_mod.os, "rename", rename_then_die)
    with pytest.raises(OSError, match="simulated crash"):
        workflow_pool.save()
    monkeypatch.undo()
    assert not workflow_pool.path.exists()

    loaded = Pool.load(workflow_pool.path, minilm)
    assert [e.to_dict() for e in loaded] == before
    workflow_pool.save()
    assert not list(workflow_pool.path.parent.glob(".pool.*"))  # leftovers cleaned by a good save
    assert "car" not in Pool.load(workflow_pool.path, minilm)


def test_index_rebuilt_when_missing_or_stale(workflow_pool: Pool, minilm) -> None:
    index_path = workflow_pool.path / "index.faiss"
    index_path.unlink()
    loaded = Pool.load(workflow_pool.path, minilm)
    assert any("index.faiss" in r for r in loaded.repairs)
    assert loaded.search(PARAPHRASES["car"], 1)[0][0].id == "car"

    # Stale: an index over other vectors (e.g. copied from another pool).
    faiss.write_index(faiss.IndexFlatIP(384), str(index_path))
    loaded = Pool.load(workflow_pool.path, minilm)
    assert any("index.faiss" in r for r in loaded.repairs)
    assert loaded.search(PARAPHRASES["tweet"], 1)[0][0].id == "tweet"
    loaded.save()
    assert Pool.load(workflow_pool.path, minilm).repairs == []


def test_experiences_that_disagree_with_the_manifest_are_refused(workflow_pool: Pool, minilm) -> None:
    path = workflow_pool.path / "experiences.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] != "stock"))
    with pytest.raises(UserError, match="experiences.jsonl has 4 lines, its manifest records 5"):
        Pool.load(workflow_pool.path, minilm)


def test_lost_embeddings_are_reembedded(workflow_pool: Pool, minilm) -> None:
    (workflow_pool.path / "embeddings.npy").unlink()
    loaded = Pool.load(workflow_pool.path, minilm)
    assert any("re-embedded" in r for r in loaded.repairs)
    assert len(loaded) == 5 and loaded.search(PARAPHRASES["flight"], 1)[0][0].id == "flight"


def test_copy_to_is_independent_and_keeps_foreign_files(workflow_pool: Pool, minilm, tmp_path: Path) -> None:
    (workflow_pool.path / "events.jsonl").write_text('{"event": "add"}\n')
    workflow_pool.save()
    assert (workflow_pool.path / "events.jsonl").read_text() == '{"event": "add"}\n'

    twin = workflow_pool.copy_to(tmp_path / "twin")
    twin.remove(["stock"])
    twin.save()
    assert len(Pool.load(tmp_path / "twin", minilm)) == 4
    assert len(Pool.load(workflow_pool.path, minilm)) == 5
    with pytest.raises(UserError):
        workflow_pool.copy_to(tmp_path / "twin")


def test_load_errors(tmp_path: Path, minilm, workflow_pool: Pool) -> None:
    (tmp_path / "not_a_pool").mkdir()
    with pytest.raises(UserError, match="not an experience pool"):
        Pool.load(tmp_path / "not_a_pool", minilm)
    with pytest.raises(UserError, match="not empty"):
        Pool.create(workflow_pool.path, minilm)


def test_embedder_mismatch_on_load(workflow_pool: Pool) -> None:
    # Same weights loaded by path: a different declared vector space, so the pool refuses it.
    other = SentenceTransformerEmbedder(str(bundled_minilm_path()))
    assert other.name != workflow_pool.embedder.name
    with pytest.raises(UserError, match="embedding="):
        Pool.load(workflow_pool.path, other)


# ---- embedders --------------------------------------------------------------------


def test_embeddings_are_normalized_float32(minilm) -> None:
    v = minilm.embed(["a", "b b b", ""])
    assert v.dtype == np.float32 and v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_cache_means_second_embed_computes_nothing(minilm, tmp_path: Path) -> None:
    texts = [w for w, _ in WORKFLOWS.values()] + ["a repeated text", "a repeated text"]
    cached = CachedEmbedder(minilm, tmp_path / "cache.sqlite")
    first = cached.embed(texts)
    assert (cached.hits, cached.misses) == (0, 6)  # distinct texts
    second = cached.embed(texts)
    assert (cached.hits, cached.misses) == (6, 6)
    assert np.array_equal(first, second)
    assert np.allclose(first, minilm.embed(texts), atol=1e-6)

    # Persisted: a new process (here: a new instance) computes nothing either.
    reopened = CachedEmbedder(minilm, tmp_path / "cache.sqlite")
    assert np.array_equal(reopened.embed(texts[::-1]), first[::-1])
    assert reopened.misses == 0 and reopened.name == minilm.name and reopened.dim == 384


def test_make_embedder(tmp_path: Path) -> None:
    emb = make_embedder(
        {"kind": "sentence_transformers", "model": "all-MiniLM-L6-v2", "dim": 384, "cache_dir": str(tmp_path)}
    )
    assert isinstance(emb, CachedEmbedder) and emb.dim == 384
    assert (tmp_path / "embeddings.sqlite").is_file()
    with pytest.raises(UserError, match="dim"):
        make_embedder({"model": "all-MiniLM-L6-v2", "dim": 1024})
    with pytest.raises(UserError, match="unknown embedding setting"):
        make_embedder({"kind": "sentence_transformers", "modle": "x"})
    with pytest.raises(UserError, match="base_url"):
        make_embedder({"kind": "openai", "model": "m"})


def test_missing_model_is_a_user_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="cannot load embedding model"):
        SentenceTransformerEmbedder(str(tmp_path / "no-such-model"))


def test_unreachable_endpoint_is_a_user_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    emb = OpenAIEmbedder(
        f"http://127.0.0.1:{port}/v1", "Qwen/Qwen3-Embedding-0.6B", dim=1024, max_attempts=1, timeout=5
    )
    with pytest.raises(UserError, match="unreachable"):
        emb.embed(["hello"])


# ---- official pools ---------------------------------------------------------------


@pytest.mark.parametrize("name", list(OFFICIAL_COUNTS))
def test_official_pools_import_with_reference_counts(name: str, minilm, tmp_path: Path) -> None:
    total, success, failure, comparative = OFFICIAL_COUNTS[name]
    bench, _, model = name.partition("_")
    pool = import_official(f"official:{bench}/{model.replace('_', '-')}", tmp_path / name, minilm)
    report = pool.built_by["import"]
    assert (len(pool), report["imported"], report["skipped"]) == (total, total, 0)
    loaded = Pool.load(tmp_path / name, minilm)
    assert loaded.stats()["counts_by_source"] == {
        "success": success,
        "failure": failure,
        "comparative": comparative,
        "reflection": 0,
        "trajectory": 0,
    }
    first = json.loads((OFFICIAL / f"{name}.jsonl").read_text().splitlines()[0])
    exp = loaded.get(first["memory_id"])
    assert exp.when_to_use == first["when_to_use"] and exp.content == first["content"]
    assert exp.task_query == first["metadata"]["task_query"]
    assert (exp.u, exp.f) == (first["metadata"]["utility"], first["metadata"]["freq"])
    assert exp.extra["workspace_id"] == first["workspace_id"]


def test_released_items_carry_all_four_retrieval_keys_and_the_later_format_imports_too(tmp_path: Path) -> None:
    """The first upload (shipped) has extra_info.tags and .generalized_query on every item;
    65971baf's format moved generalized_query up and dropped the tags: same experiences, no κ."""
    for name, path in released_pools().items():
        experiences, report = parse_official(path.read_text())
        for key in ("usage_scenario", "task_query", "generalized_query", "keywords"):
            assert all(e.retrieval_text(key).strip() for e in experiences), (name, key)
        assert "keywords" not in report["defaulted"] and all("metadata" not in e.extra for e in experiences)
    first = [json.loads(line) for line in (OFFICIAL / "bfcl_qwen3_8b.jsonl").read_text().splitlines()]
    later = []
    for rec in copy.deepcopy(first):  # the 65971baf transform (official_pools/NOTICE)
        rec["memory_type"] = "procedural"
        info = rec["metadata"].pop("extra_info")
        rec["metadata"]["generalized_query"] = info["generalized_query"]
        later.append(rec)
    a, _ = parse_official("\n".join(map(json.dumps, first)))
    b, report = parse_official("\n".join(map(json.dumps, later)))
    assert [(e.id, e.when_to_use, e.task_query, e.generalized_query) for e in a] == \
        [(e.id, e.when_to_use, e.task_query, e.generalized_query) for e in b]
    assert a[0].keywords == first[0]["metadata"]["extra_info"]["tags"] and b[0].keywords == []
    assert report["defaulted"]["keywords"] == len(b)


def test_official_import_skips_and_counts_bad_lines(minilm, tmp_path: Path) -> None:
    good = (OFFICIAL / "bfcl_qwen3_8b.jsonl").read_text().splitlines()[:3]
    bad_category = json.loads(good[0])
    bad_category["memory_id"] = "x1"
    bad_category["metadata"]["category"] = "lucky"
    no_content = json.loads(good[1])
    no_content["memory_id"] = "x2"
    del no_content["content"]
    src = tmp_path / "mixed.jsonl"
    src.write_text(
        "\n".join([*good, "{not json", "[1, 2]", json.dumps(bad_category), json.dumps(no_content), good[0], ""]) + "\n"
    )
    pool = import_official(src, tmp_path / "out", minilm)
    report = pool.built_by["import"]
    assert (len(pool), report["skipped"], report["lines"]) == (3, 5, 8)
    assert any("category" in e for e in report["errors"]) and any("duplicate" in e for e in report["errors"])


def test_bundled_pools_are_the_released_files_named_in_the_notice() -> None:
    notice = (RELEASED_DIR / "NOTICE").read_text()
    assert "agentscope-ai/ReMe" in notice and "f85ab472" in notice and "Apache License 2.0" in notice
    assert "Copyright 2025 Alibaba Group" in notice
    listed = {f[1]: (f[0], f[2]) for f in (line.split() for line in notice.splitlines())
              if len(f) == 3 and f[1].endswith(".jsonl")}
    assert sorted(listed) == sorted(p.name for p in RELEASED_DIR.glob("*.jsonl"))
    for name, (digest, blob) in listed.items():
        data = (RELEASED_DIR / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, name
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, name  # the upload's git blob
    assert sorted(released_pools()) == sorted(
        f"{b}/qwen3-{s}" for b in ("appworld", "bfcl") for s in ("8b", "14b", "32b"))


def test_official_import_user_errors(minilm, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        import_official(tmp_path / "nope.jsonl", tmp_path / "out", minilm)
    with pytest.raises(UserError, match="is a directory"):
        import_official(tmp_path, tmp_path / "out", minilm)
    with pytest.raises(UserError, match="official:bfcl/qwen3-8b"):
        import_official("official:bfcl/qwen3-7b", tmp_path / "out", minilm)
    (tmp_path / "junk.jsonl").write_text("junk\n{}\n")
    with pytest.raises(UserError, match="no valid"):
        import_official(tmp_path / "junk.jsonl", tmp_path / "out", minilm)


def test_pool_import_lists_the_bundled_pools_and_needs_a_source(reme) -> None:
    proc = reme("pool", "import", "--list", check=True, env={"COLUMNS": "200"})
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:6]]
            for line in proc.stderr.splitlines() if "official:" in line}
    for name, counts in OFFICIAL_COUNTS.items():
        bench, _, model = name.partition("_")
        assert rows[f"official:{bench}/{model.replace('_', '-')}"] == [str(n) for n in counts]
    proc = reme("pool", "import", "--out", "x")
    assert proc.returncode == 2 and "reme pool import --list" in proc.stderr and "Traceback" not in proc.stderr
    assert not (reme.cwd / "x").exists()


@pytest.mark.slow
def test_the_bundled_model_loads_when_it_first_embeds_and_not_for_cached_texts(tmp_path: Path) -> None:
    """A run whose texts are all in the embedding cache (a resume, a rerun) never imports
    sentence-transformers or torch (~9 s of CPU), not even to choose the default device
    (``auto``); the first text not in it loads the model. In a fresh process: this one has
    imported them already."""
    import subprocess
    import sys
    import textwrap

    child = textwrap.dedent(f"""
        import sys
        from reme_cli.llm.embed import make_embedder
        emb = make_embedder({{"model": "all-MiniLM-L6-v2", "cache_dir": {str(tmp_path)!r}}})
        assert "sentence_transformers" not in sys.modules and "torch" not in sys.modules  # nothing embedded yet
        emb.embed(["list the files", "move a file"])
        assert "sentence_transformers" in sys.modules  # a miss: the model loaded
    """)
    warm = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert warm.returncode == 0, warm.stderr[-2000:]
    cached = textwrap.dedent(f"""
        import sys
        from reme_cli.llm.embed import make_embedder
        emb = make_embedder({{"model": "all-MiniLM-L6-v2", "cache_dir": {str(tmp_path)!r}}})
        emb.embed(["move a file", "list the files"])
        assert "sentence_transformers" not in sys.modules, "cached texts loaded the model"
        assert "torch" not in sys.modules, "cached texts imported torch"
        vecs = emb.embed(["a text not seen before"])
        print(emb.dim, vecs.shape, "sentence_transformers" in sys.modules, emb.hits, emb.misses)
    """)
    proc = subprocess.run([sys.executable, "-c", cached], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["384", "(1,", "384)", "True", "2", "1"]

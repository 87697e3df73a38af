"""What the methods share instead of each writing its own: the vector store (real faiss),
the crash-safe folder swap they save through, the typed reader of run records (methods and
the report), and the wiring that eval and build-pool both hand a method."""

from __future__ import annotations

import json
import os

import faiss
import numpy as np
import pytest

from reme_cli.core.errors import UserError
from reme_cli.core.staging import clean_backups, recover_swap, replace_dir
from reme_cli.core.trials import TRIALS_FILE, UnitRecord, read_trials
from reme_cli.methods.vector_store import VectorIndex, read_vectors


def unit(*rows: list[float]) -> np.ndarray:
    vecs = np.asarray(rows, dtype=np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_search_is_cosine_best_first_and_ties_break_as_faiss_flat_search():
    rows = unit([1, 0], [0, 1], [1, 0], [1, 1])
    store = VectorIndex(2, rows)
    hits = store.search(unit([1, 0.1]), 3)[0]
    assert {r for r, _ in hits[:2]} == {0, 2} and hits[2][0] == 3  # rows 0 and 2 tie
    assert hits[0][1] == pytest.approx(1 / np.sqrt(1.01), abs=1e-6) and hits[0][1] == hits[1][1]
    # The order of a tie is what a plain IndexFlatIP gives, as every method searched before.
    flat = faiss.IndexFlatIP(2)
    flat.add(rows)
    assert [r for r, _ in hits] == flat.search(unit([1, 0.1]), 3)[1][0].tolist()
    assert store.search(unit([1, 0]), 10)[0][-1][0] == 1  # k past the end: every row
    assert store.search(unit([1, 0]), 0) == [[]] and VectorIndex(2).search(unit([1, 0]), 3) == [[]]


def test_changes_between_searches_are_seen():
    store = VectorIndex(2, unit([1, 0], [0, 1]))
    assert store.search(unit([1, 1]), 1)[0][0][0] == 0
    store.add(unit([1, 1]))  # an append extends the built index
    assert store.search(unit([1, 1]), 1)[0][0] == (2, pytest.approx(1.0))
    store.keep([1, 2])  # rows renumber
    assert [r for r, _ in store.search(unit([0, 1]), 2)[0]] == [0, 1]
    store.set_rows([0, 3], unit([1, 0], [0, 1]))  # a row past the end is padded first
    assert len(store) == 4 and store.search(unit([1, 0]), 1)[0][0][0] == 0
    assert store.search(unit([0, 1]), 1)[0][0][0] == 3


def test_a_copy_is_independent_and_vectors_are_read_only():
    store = VectorIndex(2, unit([1, 0]))
    other = store.copy()
    other.set_rows([0], unit([0, 1]))
    assert store.search(unit([1, 0]), 1)[0][0][1] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        store.vectors[0, 0] = 5.0
    shared = VectorIndex(2, store.vectors)  # built from another store's read-only view
    shared.set_rows([0], unit([0, 1]))
    assert store.vectors[0, 0] == pytest.approx(1.0)


def test_a_saved_index_is_used_only_while_it_holds_the_same_rows(tmp_path):
    store = VectorIndex(2, unit([1, 0], [0, 1]))
    store.save_vectors(tmp_path / "v.npy")
    store.save_index(tmp_path / "i.faiss")
    rows = read_vectors(tmp_path / "v.npy", (2, 2))
    assert rows is not None and VectorIndex(2, rows).load_index(tmp_path / "i.faiss")
    assert read_vectors(tmp_path / "v.npy", (3, 2)) is None and read_vectors(tmp_path / "nope.npy", (2, 2)) is None
    stale = VectorIndex(2, unit([1, 1], [0, 1]))
    assert not stale.load_index(tmp_path / "i.faiss")  # rebuilt from its own rows instead
    assert stale.search(unit([1, 1]), 1)[0][0] == (0, pytest.approx(1.0))
    assert not stale.load_index(tmp_path / "absent.faiss")


def test_a_swap_killed_between_its_renames_is_recovered(tmp_path, monkeypatch):
    dest = tmp_path / "store"
    replace_dir(dest, lambda d: (d / "manifest.json").write_text("v1"))
    real, calls = os.rename, []

    def die_on_second(src, dst):
        calls.append(src)
        if len(calls) == 2:  # old moved aside, new one not yet in
            raise OSError("killed")
        real(src, dst)

    monkeypatch.setattr(os, "rename", die_on_second)
    with pytest.raises(OSError, match="killed"):
        replace_dir(dest, lambda d: (d / "manifest.json").write_text("v2"))
    monkeypatch.undo()
    assert not dest.exists()
    complete = lambda p: (p / "manifest.json").is_file()  # noqa: E731
    recover_swap(dest, complete, wait_s=0)
    assert (dest / "manifest.json").read_text() == "v1"
    assert [p.name for p in tmp_path.iterdir()] == ["store"]  # no staging left

    backup = tmp_path / ".store.old-dead0000"  # as a kill after the second rename leaves it
    backup.mkdir()
    (backup / "manifest.json").write_text("v0")
    stranger = tmp_path / ".store.old-notmine"
    stranger.mkdir()
    assert clean_backups(dest, complete) == [backup] and stranger.exists()


def record(unit_key: str, **kw) -> dict:
    return UnitRecord(unit=unit_key, task_id=unit_key.rsplit("/", 1)[-1], seed=0, run=0, **kw).to_dict()


def test_read_trials_gives_typed_records_the_last_per_unit(tmp_path):
    lines = [record("s0/r0/a", error="boom"), record("s0/r0/b", success=True, method={"ace": {"n": 1}}),
             record("s0/r0/a", success=True), {"not": "a unit"}]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (tmp_path / TRIALS_FILE).write_text(text + '{"unit": "s0/r0/c", "ta')  # a torn last line
    trials = read_trials(tmp_path)
    assert [(t.unit, t.ok, t.success) for t in trials] == [("s0/r0/a", True, True), ("s0/r0/b", True, True)]
    assert trials[1].method == {"ace": {"n": 1}}
    assert read_trials(tmp_path / "no-run-here") == []

    (tmp_path / TRIALS_FILE).write_text(text + json.dumps({"unit": "s0/r0/d", "seed": "x"}) + "\n")
    with pytest.raises(UserError, match=r"line 5 is not a unit record"):
        read_trials(tmp_path)


def test_eval_and_build_pool_wire_a_method_the_same_way(tmp_path, monkeypatch):
    """run/wiring.method_context: the session's client, the summarizer (its own client
    closed afterwards, also when the run fails) and the units already finished."""
    import asyncio
    from types import SimpleNamespace

    from reme_cli.core.config import compose
    from reme_cli.run import wiring
    from reme_cli.run.records import RunDir

    (tmp_path / TRIALS_FILE).write_text(json.dumps(record("s0/r0/a", success=True)) + "\n"
                                        + json.dumps(record("s0/r0/b", error="boom")) + "\n")
    session = SimpleNamespace(client=object(), run_dir=RunDir(tmp_path))
    closed: list[str] = []

    class Own:
        async def close(self) -> None:
            closed.append("own")

    monkeypatch.setattr(wiring, "summarizer_settings", lambda cfg, client: (("settings", client), Own()))
    cfg = compose([])

    async def use(summarizer: bool, fail: bool = False):
        async with wiring.method_context(cfg, session, summarizer=summarizer) as ctx:
            if fail:
                raise RuntimeError("the run failed")
            return ctx

    ctx = asyncio.run(use(True))
    assert ctx.llm is session.client and ctx.summarizer == ("settings", session.client)
    assert ctx.run_path == tmp_path and ctx.finished_units == {"s0/r0/a"} and closed == ["own"]
    with pytest.raises(RuntimeError, match="the run failed"):
        asyncio.run(use(True, fail=True))
    assert closed == ["own", "own"]
    assert asyncio.run(use(False)).summarizer is None and closed == ["own", "own"]  # none opened


def test_a_pool_of_another_vector_space_is_refused_in_one_line(tmp_path):
    from types import SimpleNamespace

    from reme_cli.methods.vector_store import require_embedding

    embedder = SimpleNamespace(name="all-MiniLM-L6-v2", dim=384)
    require_embedding(tmp_path, {"embedding_model": "all-MiniLM-L6-v2", "dim": 384}, embedder, "A-Mem")
    for other in ({"embedding_model": "text-embedding-v4", "dim": 384}, {"embedding_model": "all-MiniLM-L6-v2"}):
        with pytest.raises(UserError, match=r"was embedded with .*; run with that embedding, or rebuild the A-Mem pool"):
            require_embedding(tmp_path, other, embedder, "A-Mem")

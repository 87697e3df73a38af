"""``Memory.describe``: every method tells its saved state (a pool, or a dynamic stream's folder
with the seam's commit log) in one shape, from its files alone. Each state here is written by
the method's own code (its store's ``apply`` and ``save``, the seam's ``CommitLog``), with the
events as its ``apply`` logs them; nothing calls an LLM. Embeddings are real (MiniLM)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from reme_cli.core.registry import METHODS
from reme_cli.core.run_log import COMMIT_LOG
from reme_cli.llm.embed import make_embedder
from reme_cli.methods.streams import CommitLog

@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    return make_embedder({"kind": "sentence_transformers", "model": "all-MiniLM-L6-v2",
                          "cache_dir": str(tmp_path_factory.mktemp("emb"))})


def commit(where: Path, *lines: tuple[str, list[dict]]) -> None:
    log = CommitLog(where / COMMIT_LOG)
    for seq, (unit, events) in enumerate(lines):
        log.append(unit, seq, events)


def test_ace_tells_bullets_counters_and_what_each_commit_added(tmp_path):
    from reme_cli.methods.ace.playbook import Playbook

    book = Playbook.parse("## STRATEGIES AND HARD RULES\n[shr-00001] helpful=2 harmful=0 :: Log in first.\n"
                          "## OTHERS\n")
    proposed = [{"op": "tag", "id": "shr-00001", "tag": "helpful"},
                {"op": "add", "section": "others", "content": "cd into the folder before mv"}]
    applied = book.apply(proposed, "s0/r0/t1")
    stream = tmp_path / "s0_r0"
    book.save(stream / "playbook")
    commit(stream, ("s0/r0/t1", applied))
    view = METHODS.get("ace").describe(stream)
    assert [(i.id, i.kind, i.numbers) for i in view.items] == [
        ("shr-00001", "strategies_and_hard_rules", {"helpful": 3, "harmful": 0}),
        ("misc-00002", "others", {"helpful": 0, "harmful": 0})]
    assert "[misc-00002]" in view.text
    (change,) = view.changes
    assert [i.id for i in change.added] == ["misc-00002"] and change.added[0].origin == "s0/r0/t1"
    assert change.increments == {"shr-00001": {"helpful": 1, "harmful": 0}}


def test_amem_tells_notes_links_updates_and_retrievals(tmp_path, embedder):
    from reme_cli.methods.amem.notes import Note, NoteStore

    store = NoteStore(embedder)
    first = Note("n1", "ls then cd", context="listing files", keywords=["ls"], source="t0")
    second = Note("n2", "mv needs the folder", context="moving files", links=["n1"], source="t1")
    events = [{"unit": "s0/r0/t1", "op": "retrieve", "ids": ["n1"]},
              {"unit": "s0/r0/t1", "op": "add", "note": asdict(second)},
              {"unit": "s0/r0/t1", "op": "update", "id": "n1", "by": "n2", "context": "files", "tags": ["fs"]}]
    store.apply([{"op": "add", "note": asdict(first)}])
    pool = tmp_path / "pool"
    store.save(pool)
    store.apply(events)
    stream = tmp_path / "s0_r0"
    store.save(stream / "store")
    commit(stream, ("s0/r0/t1", events))
    assert [i.id for i in METHODS.get("amem").describe(tmp_path).items] == ["n1"]  # the build dir's pool/
    view = METHODS.get("amem").describe(stream)
    notes = {i.id: i for i in view.items}
    assert notes["n1"].title == "files" and notes["n1"].numbers["retrievals"] == 1 and notes["n1"].fields["evolved"] == 1
    assert notes["n2"].fields["links"] == ["n1"] and view.summary["links"] == 1
    (change,) = view.changes
    assert ([i.id for i in change.added], change.updated, change.retrieved) == (["n2"], ["n1"], ["n1"])


def test_reasoningbank_tells_items_by_the_ids_units_retrieve(tmp_path, embedder):
    from reme_cli.methods.reasoningbank.items import ItemStore, Record

    record = Record.new("move a file", "s0/r0/t1", "failure",
                        [{"title": "Check the path", "description": "d", "content": "ls before mv"},
                         {"title": "Log in", "description": "d2", "content": "login first"}])
    events = [{"unit": "s0/r0/t1", "op": "add", "record": asdict(record)}]
    store = ItemStore(embedder)
    store.apply(events)
    stream = tmp_path / "s0_r0"
    store.save(stream / "store")
    commit(stream, ("s0/r0/t1", events))
    view = METHODS.get("reasoningbank").describe(stream)
    assert [i.id for i in view.items] == record.item_ids() == [i.id for i in view.changes[0].added]
    assert [(i.title, i.kind, i.text) for i in view.items] == [("Check the path", "failure", "ls before mv"),
                                                               ("Log in", "failure", "login first")]


def test_dc_tells_the_cheatsheet_its_rewrites_and_stored_pairs(tmp_path, embedder):
    from reme_cli.methods.dc.cheatsheet import Cheatsheet
    from reme_cli.methods.dc.pairs import Pair, PairStore
    from reme_cli.methods.dc.pool import DCPool

    DCPool(Cheatsheet("Version: 2\n- log in first", 2), PairStore(embedder, [Pair("t0", "move a file", "mv a b")]),
           {}).save(tmp_path / "pool", "cumulative")
    view = METHODS.get("dc").describe(tmp_path)
    assert view.text == "Version: 2\n- log in first" and view.summary["cheatsheet rewrites"] == 2
    assert [(i.id, i.title, i.text) for i in view.items] == [("t0", "move a file", "mv a b")]
    stream = tmp_path / "s0_r0"
    DCPool(Cheatsheet("Version: 3", 3), None, {}).save(stream / "state", "cumulative")
    commit(stream, ("s0/r0/t1", [{"op": "rewrite", "based_on": "x", "text": "Version: 3"}]),
           ("s0/r0/t2", [{"op": "pair", "id": "s0/r0/t2", "input": "q", "output": "o"}, {"op": "synthesized", "text": ""}]))
    changes = METHODS.get("dc").describe(stream).changes
    assert [c.updated for c in changes] == [["cheatsheet"], []]
    assert [i.id for i in changes[1].added] == ["s0/r0/t2"]


def test_langmem_tells_each_episode_once_as_its_last_put(tmp_path, embedder):
    pytest.importorskip("langgraph", reason="the baselines extra: pip install -e '.[baselines]'")
    from reme_cli.methods.langmem.store import EpisodeStore

    episode = {"observation": "moving files", "thoughts": "I check", "action": "I cd", "result": "done"}
    puts = [{"key": "e1", "value": {"kind": "Episode", "content": episode}},
            {"key": "e1", "value": {"kind": "Episode", "content": {**episode, "result": "better"}}}]
    store = EpisodeStore(embedder, puts)
    stream = tmp_path / "s0_r0"
    store.save(stream / "store")
    commit(stream, ("s0/r0/t1", [{"op": "put", **puts[1]}]))
    view = METHODS.get("langmem").describe(stream)
    (item,) = view.items
    assert (item.id, item.title) == ("e1", "moving files") and "Result: better" in item.text
    assert [i.id for i in view.changes[0].added] == ["e1"]


def test_langmem_prompt_names_each_version_as_units_record_it(tmp_path):
    from reme_cli.methods.langmem.prompt.optimizer import prompt_version

    stream = tmp_path / "s0_r0"
    stream.mkdir()
    (stream / "prompt.txt").write_text("Be careful.\n")
    commit(stream, ("s0/r0/t1", [{"task_id": "t1", "prompt_before": prompt_version("Be brief."),
                                  "prompt_after": prompt_version("Be careful."), "changed": True,
                                  "prompt": "Be careful."}]))
    view = METHODS.get("langmem_prompt").describe(stream)
    assert [i.id for i in view.items] == [prompt_version("Be careful.")] and view.text == "Be careful."
    (change,) = view.changes
    assert change.deleted == [prompt_version("Be brief.")]
    assert [i.id for i in change.added] == [prompt_version("Be careful.")]


def test_a_description_is_json(tmp_path):
    from reme_cli.methods.ace.playbook import Playbook

    Playbook.parse("## OTHERS\n[misc-00001] keep it short\n").save(tmp_path / "pool")
    data = METHODS.get("ace").describe(tmp_path).to_dict()
    assert json.loads(json.dumps(data))["items"][0]["id"] == "misc-00001"

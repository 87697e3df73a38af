"""A-Mem (memory=amem) through the real CLI: build-pool -> fixed -> dynamic, resume after a
kill, replay from the response cache, and on the embedded model.

The LLM is a test double (scripted server): BFCL ground-truth replay for the agent; for
A-Mem's calls it answers the analysis with words of the note and the evolution with "link
to the nearest note, retag every neighbour". Embeddings (all-MiniLM-L6-v2) and faiss are real.
"""

import json
import subprocess
from pathlib import Path

import pytest

from reme_cli.llm.embed import make_embedder
from reme_cli.methods.amem.notes import Note, NoteStore
from tests.conftest import reme_env, reme_popen, run_reme, scripted_server_process, without_timing
from tests.methods.reme.test_memory_flow import _kill_when, _trials

# One worker per stream: the tests below follow a stream task by task (BFCL's default is 4).
SCRIPTED = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "benchmark.release=current",
            "eval.dynamic_workers=1"]


def _notes(store: Path) -> dict[str, dict]:
    return {n["id"]: n for n in (json.loads(l) for l in (store / "notes.jsonl").read_text().splitlines())}


def _state(store: Path) -> list[tuple]:
    """What A-Mem's evolution decides: notes, their links, tags, context and history."""
    return sorted((i, n["content"], tuple(n["links"]), tuple(n["tags"]), n["context"], n["retrieval_count"],
                   len(n["evolution_history"])) for i, n in _notes(store).items())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("amem")


@pytest.fixture(scope="module")
def server():
    """A separate process with a small delay, so that a run can be killed mid-way."""
    with scripted_server_process("--policy", "bfcl-replay+summarizer", "--delay", "0.05") as url:
        yield url


def _reme(workdir: Path, server: str, *args: str, check: bool = True):
    return run_reme([*args, *SCRIPTED, f"llm.base_url={server}"], workdir, check=check)


@pytest.fixture(scope="module")
def built(workdir, server):
    _reme(workdir, server, "build-pool", "memory=amem", "benchmark.limit=4", "build.samples=2", "out_dir=built")
    return workdir / "built"


@pytest.mark.slow
def test_build_pool_turns_training_trajectories_into_linked_evolved_notes(built):
    report = json.loads((built / "build" / "report.json").read_text())
    assert report["method"] == "amem" and report["trajectories"] == 8 and report["unit_errors"] == 0
    notes = _notes(built / "pool")
    assert report["pool_size"] == len(notes) == 4  # build_notes=best: one per training task
    # Every note after the first was linked to its nearest note and retagged its neighbours.
    assert report["links"] == 3 and sum(len(n["links"]) for n in notes.values()) == 3
    assert all(link in notes for n in notes.values() for link in n["links"])
    assert sum(bool(n["evolution_history"]) for n in notes.values()) >= 3
    # The analysis saw the note's content: its keywords come from the trajectory text.
    assert all(set(n["keywords"]) & set(n["content"].split()) for n in notes.values())
    assert report["amem"]["llm_calls"] == 4 + 3  # 4 analyses, 3 evolutions (the first note has no neighbour)


@pytest.mark.slow
def test_fixed_mode_injects_the_retrieved_notes_and_replay_still_scores_100(workdir, server, built):
    _reme(workdir, server, "eval", "--mode", "fixed", "memory=amem", "memory.pool=built", "memory.top_k=2",
          "benchmark.limit=3", "eval.runs=1", "eval.seeds=1", "out_dir=fixed")
    notes = _notes(built / "pool")
    trials = _trials(workdir / "fixed")
    assert len(trials) == 3 and all(t["success"] for t in trials)
    for t in trials:
        assert len(t["retrieved_ids"]) == 2 and len(t["retrieval_scores"]) == 2
        for note_id in t["retrieved_ids"]:
            assert notes[note_id]["content"] in t["guidance"]
        assert t["guidance"].startswith("Some Related Experience to help you to complete the task:")
    assert _state(built / "pool") == _state(built / "pool")  # fixed mode never writes the pool
    assert not (workdir / "fixed" / "streams").exists()


@pytest.mark.slow
def test_dynamic_mode_adds_each_task_as_a_note_and_evolves_neighbours(workdir, server, built):
    _reme(workdir, server, "eval", "--mode", "dynamic", "memory=amem", "memory.pool=built", "benchmark.limit=3",
          "eval.runs=1", "eval.seeds=1", "out_dir=dyn")
    trials = sorted(_trials(workdir / "dyn"), key=lambda t: t["position"])
    store = _notes(workdir / "dyn" / "streams" / "s0_r0" / "store")
    assert len(store) == 4 + 3
    for t in trials:
        m = t["method"]
        assert m["note"] in store and m["links"] and set(m["updated_neighbors"]) <= set(store)
        assert m["amem"]["llm_calls"] == 2
    # The second task can retrieve the first task's note.
    first_note = trials[0]["method"]["note"]
    assert any(first_note in t["retrieved_ids"] for t in trials[1:])
    # Retrieval counts are part of the state: every retrieved id was counted.
    counted = sum(n["retrieval_count"] for n in store.values())
    assert counted == sum(len(t["retrieved_ids"]) for t in trials)
    assert _state(built / "pool") != _state(workdir / "dyn" / "streams" / "s0_r0" / "store")


def test_a_planted_note_is_found_by_its_own_query(workdir):
    embedder = make_embedder({"kind": "sentence_transformers", "model": "all-MiniLM-L6-v2",
                              "cache_dir": str(workdir / ".reme_cache" / "embeddings")})
    store = NoteStore(embedder)
    texts = ["Move the quarterly report into the archive folder, then sort its summary.",
             "Buy 100 shares of the cheapest tech stock and notify my broker.",
             "Book a flight from SFO to JFK and pay with my travel card."]
    store.apply([{"unit": "t", "op": "add", "note": Note(id=f"n{i}", content=c).__dict__}
                 for i, c in enumerate(texts)])
    for i, query in enumerate(["book a flight to new york", "purchase tech stock shares", "archive the report"]):
        (top, score), *_ = store.search(query, 3)
        assert top.id == f"n{2 - i}" and score > 0.3
    store.save(workdir / "planted")
    again = NoteStore.load(workdir / "planted", embedder)
    assert again.search(texts[1], 1)[0][0].id == "n1"


@pytest.mark.slow
def test_dynamic_resume_after_kill_matches_an_uninterrupted_run(workdir, server, built):
    common = ["eval", "--mode", "dynamic", "memory=amem", "memory.pool=built", "benchmark.limit=3", "eval.runs=2",
              "eval.seeds=1", "llm.cache=false", *SCRIPTED, f"llm.base_url={server}"]
    run_reme([*common, "out_dir=dyn_whole"], workdir, check=True)
    env = reme_env(workdir / ".reme_cache")
    proc = reme_popen([*common, "out_dir=dyn_killed"], cwd=workdir,
                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _kill_when(proc, workdir / "dyn_killed" / "trials.jsonl", 3)
    assert 3 <= len(_trials(workdir / "dyn_killed")) < 6
    run_reme([*common, "out_dir=dyn_killed"], workdir, check=True)
    trials = _trials(workdir / "dyn_killed")
    assert len(trials) == len({t["unit"] for t in trials}) == 6
    for stream in ("s0_r0", "s0_r1"):
        assert _state(workdir / "dyn_killed" / "streams" / stream / "store") == \
            _state(workdir / "dyn_whole" / "streams" / stream / "store")


@pytest.mark.slow
def test_with_the_response_cache_a_dynamic_run_replays_identically(workdir, server, built):
    args = ["eval", "--mode", "dynamic", "memory=amem", "memory.pool=built", "benchmark.limit=3", "eval.runs=1",
            "eval.seeds=1", "llm.cache=true"]
    _reme(workdir, server, *args, "out_dir=cached_a")
    _reme(workdir, server, *args, "out_dir=cached_b")
    a, b = (sorted(_trials(workdir / d), key=lambda t: t["unit"]) for d in ("cached_a", "cached_b"))
    assert [without_timing(t) for t in a] == [without_timing(t) for t in b]
    assert _state(workdir / "cached_a" / "streams" / "s0_r0" / "store") == \
        _state(workdir / "cached_b" / "streams" / "s0_r0" / "store")


@pytest.mark.slow
def test_a_pool_of_another_method_is_refused_in_one_line(workdir, server, built, tmp_path):
    proc = _reme(workdir, server, "eval", "--mode", "fixed", "memory=amem", f"memory.pool={tmp_path}",
                 "benchmark.limit=1", "eval.runs=1", "eval.seeds=1", f"out_dir={tmp_path / 'x'}", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith("`reme build-pool memory=amem` and give its output directory")
    proc = _reme(workdir, server, "eval", "--mode", "fixed", "memory=reme", "memory.pool=built",
                 "benchmark.limit=1", "eval.runs=1", "eval.seeds=1", f"out_dir={tmp_path / 'y'}", check=False)
    assert proc.returncode == 2 and "is a pool of memory=amem; run with memory=amem" in proc.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.slow
def test_the_embedded_model_builds_an_amem_pool_and_uses_it(reme, embedded_server):
    """On the embedded model: a build (notes from its successful trajectories only), A-Mem's
    two calls answered by it (the small model rarely solves a task, so they are also made
    directly), and a fixed eval that retrieves and injects such a note."""
    import asyncio

    from reme_cli.llm.client import ChatClient
    from reme_cli.methods.amem.agentic import AMemStats, construct, evolve
    from reme_cli.methods.summarizer import SummarizerSettings

    small = ["benchmark.task_ids=[multi_turn_base_1]", "benchmark.max_interactions=2", "llm.concurrency=1",
             f"llm.base_url={embedded_server.base_url}", "benchmark.release=current"]  # in this process
    reme("build-pool", "memory=amem", *small, "benchmark.split=test", "build.samples=1", "out_dir=built", check=True)
    report = json.loads((Path(reme.cwd) / "built" / "build" / "report.json").read_text())
    successes = sum(json.loads(l)["success"] for l in
                    (Path(reme.cwd) / "built" / "build" / "trials.jsonl").read_text().splitlines())
    assert report["unit_errors"] == 0 and report["pool_size"] == successes == report["amem"]["llm_calls"]

    texts = ["Task: move report.txt into the archive folder. Steps: cd documents; mv report.txt archive. Success.",
             "Task: copy notes.md into the backup folder. Steps: cd documents; cp notes.md backup. Success."]

    async def notes() -> tuple[list, AMemStats]:
        client = ChatClient(base_url=embedded_server.base_url, model=embedded_server.model_name, concurrency=1)
        summ = SummarizerSettings(client, "embedded", 0.0, 256, constrained=True, llama_cpp=True)
        stats, store = AMemStats(), NoteStore(make_embedder({"kind": "sentence_transformers",
                                                            "model": "all-MiniLM-L6-v2"}))
        events = []
        for i, text in enumerate(texts):
            note = await construct(summ, text, f"t{i}", f"t{i}", stats)
            new = await evolve(summ, store, note, 5, f"t{i}", stats)
            store.apply(new)
            events += new
        store.save(Path(reme.cwd) / "pool" / "pool")
        return events, stats

    events, stats = asyncio.run(notes())
    assert stats.llm_calls == 3  # 2 analyses, 1 evolution (the first note has no neighbour)
    assert [e["op"] for e in events if e["op"] == "add"] == ["add", "add"]
    reme("eval", "--mode", "fixed", "memory=amem", "memory.pool=pool", *small, "eval.runs=1", "eval.seeds=1",
         "memory.top_k=1", "out_dir=run", check=True)
    (trial,) = _trials(Path(reme.cwd) / "run")
    assert trial["error"] is None and len(trial["retrieved_ids"]) == 1
    assert _notes(Path(reme.cwd) / "pool" / "pool")[trial["retrieved_ids"][0]]["content"] in trial["guidance"]

"""ACE, Dynamic Cheatsheet and ReasoningBank on the embedded CPU model, one task each, end to
end through the CLI: the agent, then the method's own LLM calls answered by the same small
model (its answers held to each method's format by the server's grammar), and the memory
the task leaves behind. What a 135M model writes is not a useful memory; these runs show
that every part runs on the real model, not what the method is worth.

The outcome depends on neither sampling nor load. Each run starts its own embedded server, as
a user's run does, so what the server has cached when a request comes (its prompt cache:
llama.cpp's numbers differ with what it reuses) follows from that run's requests alone, not
from how three runs sharing one server happened to interleave. Every request samples with a
fixed seed (the executor's per unit; the summarizer sends none, and the embedded server gives
such a request seed 0, not llama.cpp's fresh random one). And every answer's format is
bounded, so a whole answer fits in summarizer.max_tokens whatever is sampled."""

import json
from pathlib import Path

import pytest

from tests.conftest import run_reme_together

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

# The pinned release (benchmark.release=current): the runs stay in the test process, where the
# paper's would re-execute reme; tests/llm/test_local_model_e2e.py runs the embedded model on it.
ONE_TASK = ["--mode", "dynamic", "benchmark.task_ids=[multi_turn_base_1]", "benchmark.max_interactions=2",
            "llm.concurrency=1", "eval.runs=1", "eval.seeds=1", "benchmark.release=current",
            # room for a whole answer: a 135M model cut off at 384 tokens answers nothing usable
            "summarizer.max_tokens=768"]


def _unit(run: Path) -> dict:
    (unit,) = [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines()]
    return unit


def _events(run: Path) -> list[dict]:
    (commit,) = [json.loads(l) for l in (run / "streams" / "s0_r0" / "commits.jsonl").read_text().splitlines()]
    return commit["events"]


def _answers(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())["summarizer_answers"]


def test_ace_dc_and_reasoningbank_each_learn_from_one_task_on_the_embedded_model(tmp_path):
    runs = {m: tmp_path / m for m in ("ace", "dc", "reasoningbank")}
    procs = run_reme_together(*((["eval", f"memory={m}", *ONE_TASK, f"out_dir={runs[m]}"], tmp_path)
                                for m in runs))
    for m, proc in zip(runs, procs):
        assert proc.returncode == 0, f"{m}: {proc.stderr[-3000:]}"
        unit = _unit(runs[m])
        assert unit["error"] is None and unit["stop_reason"] != "error"
        assert unit["retrieved_ids"] == []  # each starts empty: nothing to find yet
        assert all(a["calls"] == 1 and a["failed"] == 0 for a in _answers(runs[m]).values()), _answers(runs[m])

    # ACE: the Reflector and the Curator answered; the Curator's ADDs were merged by code
    # into the stream's playbook with fresh ids, in whitelisted sections.
    ace = _unit(runs["ace"])["method"]
    assert set(_answers(runs["ace"])) == {"ace_reflector", "ace_curator"}
    assert ace["ace"]["llm_calls"] == 2 and ace["ace"]["invalid_curations"] == 0
    adds = [e for e in _events(runs["ace"]) if e["op"] == "add"]
    assert adds and [e["id"] for e in adds] == ace["applied"]
    assert ace["playbook_after"]["bullets"] == ace["playbook"]["bullets"] + len(adds)
    playbook = (runs["ace"] / "streams" / "s0_r0" / "playbook" / "playbook.txt").read_text()
    assert all(f"[{e['id']}]" in playbook for e in adds)

    # DC-Cu: the curator's answer held a cheatsheet block, which replaced the empty one.
    dc = _unit(runs["dc"])["method"]
    assert set(_answers(runs["dc"])) == {"dc_curator"}
    assert dc["rewrite"]["usable"] and dc["cheatsheet_version"]["rewrites"] == 0
    assert dc["cheatsheet_after"]["rewrites"] == 1
    (rewrite,) = _events(runs["dc"])
    assert rewrite["op"] == "rewrite" and "<memory_item>" in rewrite["text"]

    # ReasoningBank: the judge gave a verdict, the matching prompt extracted items, and they
    # joined the stream's bank under the task's query.
    rb = _unit(runs["reasoningbank"])["method"]
    assert set(_answers(runs["reasoningbank"])) == {"reasoningbank_judge", "reasoningbank_extract"}
    assert rb["judge"]["valid"] and rb["extracted"]["prompt"] == rb["judge"]["verdict"]
    assert 1 <= rb["extracted"]["count"] == rb["bank_items"] <= 3
    (add,) = _events(runs["reasoningbank"])
    records = [json.loads(l) for l in
               (runs["reasoningbank"] / "streams" / "s0_r0" / "store" / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [add["record"]["id"]] and len(records[0]["items"]) == rb["bank_items"]

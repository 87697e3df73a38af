"""The authors' summarizer (memory.prompts=authors, the default): their v0.1.9 prompts shipped
verbatim, fed flowllm's step sequence of the trajectory as their agents recorded it, their
call selection, their answer reading and validation rule, and flowllm's request. In-process
with a recording test double for the LLM; the end-to-end build-pool test at the bottom runs
the real CLI against the scripted server (a TEST DOUBLE) and reads what it was sent."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re

import pytest

from reme_cli.agent.trajectory import Step, Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.llm.client import ChatResult
from reme_cli.methods.reme import authors_flow as af
from reme_cli.methods.reme.config import ReMeConfig
from reme_cli.methods.reme.step_sequence import (AGENT_SHAPES, COMPLETED, PYTHON_NOTE, authors_tool_schemas,
                                                 step_sequence, tool_prompt)
from reme_cli.methods.reme.summarize import summarize
from reme_cli.methods.summarizer import SummarizerSettings
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy
from tests.conftest import REPO, run_reme, script_module

PROMPTS = REPO / "reme_cli" / "methods" / "reme" / "authors_prompts"
BFCL, APPWORLD = AGENT_SHAPES["bfcl_v3"], AGENT_SHAPES["appworld"]
LONG_OUTPUT = "{'files': [" + ", ".join(f"'file_{i}.txt'" for i in range(200)) + "]}"  # > 600 chars
TASK = Task("multi_turn_base_9", [[{"role": "user", "content": "List my files."}],
                                  [{"role": "user", "content": "Now delete the first one."}]], "List my files.")
TRAJ = Trajectory(turns=[
    [Step("", [{"name": "ls", "arguments": '{"a": true}', "call": "ls(a=True)", "output": LONG_OUTPUT}],
          1, 1, 0.0, False, reasoning="I should list them."),
     Step("Here they are.", [], 1, 1, 0.0, False, reasoning="Done listing.")],
    [Step("Deleted.", [{"name": "rm", "arguments": '{"file_name": "file_0.txt"}', "call": "rm(...)", "output": "None"}],
          1, 1, 0.0, False),
     Step("All done.", [], 1, 1, 0.0, False)]])
GUIDANCE = "Some Related Experience to help you to complete the task:\nExperience 1 :\n When to use: w\n Content: c\n"


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_shipped_prompts_are_the_authors_files_byte_for_byte():
    lines = [ln.split() for ln in (PROMPTS / "NOTICE").read_text().splitlines() if ln.endswith(tuple("0123456789abcdef"))
             and ".yaml" in ln]
    assert {ln[1] for ln in lines} == {p.name for p in PROMPTS.glob("*.yaml")} and len(lines) == 5
    for sha, name, _, blob in lines:
        data = (PROMPTS / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha and git_blob(data) == blob, name
    assert "assess whether" in af.template("validation")  # v0.1.9's word (later "access")


def test_the_step_sequence_is_flowllms_rendering_of_the_bfcl_agents_messages():
    text = step_sequence(TASK, TRAJ, guidance=GUIDANCE, shape=BFCL)
    assert text == (
        "### step.0 role=user content=\nTask:\nList my files.\n\n" + GUIDANCE + "\n\n"  # experiences kept
        "### step.1 role=assistant content=\nI should list them.\n\n\n"
        ' - tool call=ls\n   params={"a": true}\n\n'
        "### step.2 role=tool tool call result=\n" + LONG_OUTPUT + "\n\n"  # not clipped
        "### step.3 role=assistant content=\nDone listing.\n\nHere they are.\n\n"
        "### step.4 role=user content=\nNow delete the first one.\n\n"
        "### step.5 role=assistant content=\n\n\nDeleted.\n"
        ' - tool call=rm\n   params={"file_name": "file_0.txt"}\n\n'
        "### step.6 role=tool tool call result=\nNone\n\n"
        "### step.7 role=assistant content=\n\n\nAll done.\n\n"
        f"### step.8 role=user content=\n{COMPLETED}\n")


def test_a_stopped_episode_has_no_completion_marker_and_appworld_strips_experiences():
    cut = Trajectory(turns=TRAJ.turns[:1], stop_reason="interaction_limit")
    assert COMPLETED not in step_sequence(TASK, cut, shape=BFCL)
    aw = Task("t_1", [[{"role": "user", "content": "Play my song."}]], "Play my song.",
              meta={"system_prompt": "You are a supervisor's agent.", "experience_label": "Experience {n}:"})
    code = Trajectory(turns=[[Step("```python\nprint(1)\n```", [{"name": "execute", "arguments": {"code": "print(1)"},
                                                                  "output": "1"}], 1, 1, 0.0, False,
                                   code="print(1)", code_output="1")]])
    text = step_sequence(aw, code, guidance=GUIDANCE, shape=APPWORLD)
    # step.0 is the system message, skipped but counted; the regex leaves "Task:\n".
    assert text == ("### step.1 role=user content=\nTask:\nPlay my song.\n\n"
                    "### step.2 role=assistant content=\n\n\nprint(1)\n\n"
                    "### step.3 role=user content=\nOutput:\n```\n1```\n\n\n")


def test_the_pool_builders_tool_block_has_one_python_note_and_no_response():
    tool = {"type": "function", "function": {"name": "ls", "description": "List." + PYTHON_NOTE * 2,
                                             "parameters": {"type": "object", "properties": {}}, "response": {}}}
    (schema,) = authors_tool_schemas([tool])
    assert schema["function"] == {"name": "ls", "description": "List." + PYTHON_NOTE,
                                  "parameters": {"type": "object", "properties": {}}}
    assert "response" in tool["function"]  # the environment's own schemas are untouched
    block = tool_prompt([schema])
    assert block.startswith("\n\n# Tools\n\nYou may call one or more functions") and json.dumps(schema) in block
    assert step_sequence(TASK, TRAJ, shape=BFCL, tools=[tool]).split("\n### step.1", 1)[0].endswith(
        "</tool_call>\n")


@pytest.mark.parametrize("rewards, chosen", [([1.0], [0]), ([0.0, 1.0], [0, 1]),
                                             ([1.0, 0.0, 1.0, 0.0], [1, 2]), ([1.0, 1.0, 1.0], [0, 2])])
def test_pool_building_posts_the_first_lowest_and_the_last_highest(rewards, chosen):
    assert af.pool_selection(rewards) == chosen


class Recorder:
    """TEST DOUBLE of the LLM: records each request, answers per prompt kind."""

    def __init__(self, answers: dict[str, str]):
        self.answers, self.calls = answers, []

    async def chat(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        text = messages[-1]["content"]
        kind = next(k for k, mark in (("validation", "validating the quality"), ("success", "reviewing successful"),
                                      ("failure", "reviewing failed"), ("comparative", "comparing higher-scoring"),
                                      ("trajectory", "# Execution Process")) if mark in text)
        return ChatResult(self.answers.get(kind, ""), [], None, 1, 1, 0.0, False)


ITEM = {"when_to_use": "When listing files", "experience": "Call ls first.", "tags": ["ls"], "confidence": 0.7,
        "step_type": "action", "tools_used": ["ls"]}


def _run(answers: dict[str, str], attempts, *, constrained=False, building=True, cfg=None):
    llm = Recorder(answers)
    summ = SummarizerSettings(llm, "qwen3-8b", 0.6, None, constrained=constrained, llama_cpp=constrained)
    kept, stats = asyncio.run(summarize(summ, cfg or ReMeConfig(), TASK, attempts, shape=BFCL, building=building))
    return llm, kept, stats


def block(value) -> str:
    return "Here you go:\n```json\n" + json.dumps(value) + "\n```"


def test_a_success_and_a_failure_get_three_analyses_and_each_memory_one_validation():
    attempts = [(TRAJ, Outcome(True, 1.0), None), (TRAJ, Outcome(False, 0.0), None), (TRAJ, Outcome(True, 1.0), None)]
    llm, kept, stats = _run({k: block([ITEM]) for k in ("success", "failure", "comparative")}
                            | {"validation": block({"is_valid": True, "score": 0.9})}, attempts)
    kinds = [m[-1]["content"].split("\n", 1)[0] for m, _ in llm.calls]
    assert sum("successful step sequences" in k for k in kinds) == 1  # posted: [failure, last success]
    assert sum("failed step sequences" in k for k in kinds) == 1
    assert sum("higher-scoring" in k for k in kinds) == 1 and sum("validating" in k for k in kinds) == 3
    success = next(m[-1]["content"] for m, _ in llm.calls if "reviewing successful" in m[-1]["content"])
    assert "# Original Query\n\n\n# Step Sequence Analysis\n### step.0 role=user content=\nList my files.\n" in success
    assert "# Context Information\nQuery: N/A\n\n\n# Outcome\nThis step sequence was part of a successful trajectory." \
        in success
    comparative = next(m[-1]["content"] for m, _ in llm.calls if "higher-scoring" in m[-1]["content"])
    assert "(Score: 1.00)" in comparative and "(Score: 0.00)" in comparative
    assert [e.source for e in kept] == ["success", "failure", "comparative"]
    e = kept[0]
    assert (e.keywords, e.tools_used, e.confidence, e.task_query) == (["ls"], ["ls"], 0.7, TASK.query)
    assert e.extra["metadata"]["step_type"] == "action" and e.extra["judge"]["score"] == 0.9
    assert stats.llm_calls == 6 and stats.candidates == {"success": 1, "failure": 1, "comparative": 1}


def test_two_successes_get_two_success_analyses_and_no_comparative():
    llm, kept, _ = _run({"success": block([ITEM])}, [(TRAJ, Outcome(True, 1.0), None)] * 2)
    assert sum("reviewing successful" in m[-1]["content"] for m, _ in llm.calls) == 2
    assert not any("higher-scoring" in m[-1]["content"] for m, _ in llm.calls)


def test_the_faq_services_request_one_user_message_no_seed_no_caps_no_json_mode():
    llm, _, _ = _run({"success": block([ITEM])}, [(TRAJ, Outcome(True, 1.0), None)])
    for messages, kwargs in llm.calls:
        assert [m["role"] for m in messages] == ["user"]
        assert kwargs == {"temperature": 0.6, "max_tokens": None, "seed": None, "top_p": None, "top_k": None,
                          "min_p": None}
    # summarizer.seed=42 sends flowllm 0.1.9's seed (base_llm.py:26) on every call.
    llm = Recorder({"success": block([ITEM])})
    summ = SummarizerSettings(llm, "qwen3-8b", None, None, seed=42)
    asyncio.run(summarize(summ, ReMeConfig(), TASK, [(TRAJ, Outcome(True, 1.0), None)], shape=BFCL, building=True))
    assert llm.calls and all(kwargs["seed"] == 42 for _, kwargs in llm.calls)
    # The embedded model keeps a grammar of the very format the prompt shows.
    llm, _, _ = _run({}, [(TRAJ, Outcome(True, 1.0), None)], constrained=True)
    (_, kwargs), = llm.calls
    assert kwargs["extra_body"]["grammar"] == af.EXTRACT_GRAMMAR and "top_p" not in kwargs


@pytest.mark.parametrize("answer, n", [
    (block([ITEM, {"condition": "c", "experience": "e"}, {"experience": "no condition"}, "junk"]), 2),
    (block(ITEM), 1),
    (json.dumps([ITEM, {"x": 1}]), 1),  # no block: the whole answer, unfiltered ({"x": 1} cannot be a memory)
    ("```json\n[{broken\n```", 0),
    ("I found nothing to extract.", 0)])
def test_answers_are_read_as_the_service_read_them(answer, n):
    _, kept, stats = _run({"success": answer, "validation": "Looks fine."}, [(TRAJ, Outcome(True, 1.0), None)])
    assert len(kept) == n
    if n == 0:
        assert stats.invalid_outputs == 1


@pytest.mark.parametrize("verdict, kept", [
    ("Looks fine, no JSON.", True),  # no block: is_valid True, score 0.5 >= 0.5
    (block({"is_valid": True, "score": 0.5}), True),
    (block({"is_valid": True, "score": 0.49}), False),
    (block({"is_valid": False, "score": 0.9}), False),
    (block({"is_valid": True, "score": "high"}), False),  # cannot be compared: rejected
    ("```json\n{not json}\n```", False),
    (block([1, 2]), False)])
def test_the_validation_rule(verdict, kept):
    _, memories, stats = _run({"success": block([ITEM]), "validation": verdict}, [(TRAJ, Outcome(True, 1.0), None)])
    assert bool(memories) is kept and stats.rejected_by_judge == (not kept)


def test_a_dynamic_trial_is_posted_alone_with_the_experiences_it_was_given():
    llm, _, _ = _run({"failure": block([ITEM])}, [(TRAJ, Outcome(False, 0.0), GUIDANCE)], building=False)
    (failure, _), *validations = llm.calls
    assert "This step sequence was part of a failed trajectory." in failure[0]["content"]
    assert "Task:\nList my files.\n\n" + GUIDANCE in failure[0]["content"] and len(validations) == 1


def test_trajectory_granularity_is_one_simple_summary_per_posted_trajectory_and_no_validation():
    cfg = ReMeConfig()
    cfg.granularity = "trajectory"
    answer = "```json\n[{\"when_to_use\": \"w\", \"memory\": \"m\"}, {\"when_to_use\": \"\", \"memory\": \"x\"}]\n```"
    llm, kept, _ = _run({"trajectory": answer}, [(TRAJ, Outcome(False, 0.0), None), (TRAJ, Outcome(True, 1.0), None)],
                        cfg=cfg)
    assert len(llm.calls) == 2 and [e.source for e in kept] == ["trajectory", "trajectory"]
    results = sorted(m[-1]["content"].split("# Result\n", 1)[1].split("\n", 1)[0] for m, _ in llm.calls)
    assert results == ["fail", "success"] and kept[0].content == "m"


def test_the_constrained_formats_are_read_by_the_same_reader():
    extract = ('```json\n[\n  {"when_to_use": "w", "experience": "e", "tags": ["a", "b"], "confidence": 0.8, '
               '"step_type": "action", "tools_used": []}\n]\n```')
    assert af.experience_items(extract)[0]["step_type"] == "action"
    assert af.read_validation('```json\n{"is_valid": true, "score": 0.6, "feedback": "ok"}\n```', 0.5)["is_valid"]
    assert af.simple_items('```json\n[\n  {"when_to_use": "w", "memory": "m"}\n]\n```') == [
        {"when_to_use": "w", "memory": "m"}]


def test_reme_prompts_stay_one_switch_away():
    cfg = ReMeConfig()
    cfg.prompts = "reme"
    llm = Recorder({})
    llm.chat = _reme_chat(llm)
    summ = SummarizerSettings(llm, "m", 0.6, None)
    asyncio.run(summarize(summ, cfg, TASK, [(TRAJ, Outcome(True, 1.0), None)], shape=BFCL, building=True))
    assert llm.calls and llm.calls[0][0][0]["role"] == "system"  # reme's system + user prompts


def _reme_chat(rec):
    async def chat(messages, **kwargs):
        rec.calls.append((messages, kwargs))
        return ChatResult("[]", [], None, 1, 1, 0.0, False)
    return chat


# ---------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def authors_build(tmp_path_factory):
    """A build on two training tasks, one of which always fails (the replay corrupts it): its
    folder and the summarizer's requests the scripted server (a TEST DOUBLE) received."""
    tmp_path = tmp_path_factory.mktemp("authors_build")
    policy = AgentAndSummarizerPolicy(BFCLReplayPolicy(corrupt={"multi_turn_base_3"}), ScriptedSummarizerPolicy())
    with ScriptedServer(policy) as srv:
        run_reme(["build-pool", "model=qwen3-8b", "embedding=minilm", "llm.model=replay", f"llm.base_url={srv.base_url}",
                  "benchmark.release=current", "benchmark.task_ids=[multi_turn_base_0,multi_turn_base_3]",
                  "benchmark.split=train", "build.samples=2", "out_dir=built"], tmp_path, check=True)
        summarizer = [r["body"] for r in srv.requests if not r["headers"].get("x-reme-task-id")]
    return tmp_path / "built", summarizer


@pytest.mark.slow
def test_build_pool_sends_the_authors_success_failure_and_validation_prompts(authors_build):
    """The scripted server receives the authors' prompts, filled as the service fills them."""
    built, summarizer = authors_build
    texts = [b["messages"][0]["content"] for b in summarizer]
    for name, key in (("success_extraction_prompt.yaml", "success_step_task_memory_prompt"),
                      ("failure_extraction_prompt.yaml", "failure_step_task_memory_prompt"),
                      ("memory_validation_prompt.yaml", "task_memory_validation_prompt")):
        head = af.prompt_file(name)[key].split("{", 1)[0]  # the template up to its first field
        assert any(t.startswith(head) for t in texts), name
    success = next(t for t in texts if "reviewing successful" in t)
    assert "# Step Sequence Analysis\n### step.0 role=user content=\n" in success
    assert "\n\n# Tools\n\nYou may call one or more functions" in success and PYTHON_NOTE in success
    # No temperature and no seed: the FAQ's service config sets neither (65971baf
    # reme/config/service.yaml:177-182, reme/core/llm/openai_llm.py:55-62).
    assert all(len(b["messages"]) == 1 and "seed" not in b and "temperature" not in b and "top_p" not in b
               and "max_tokens" not in b and "top_k" not in b and "response_format" not in b for b in summarizer)
    pool = [json.loads(ln) for ln in (built / "pool" / "experiences.jsonl").read_text().splitlines()]
    assert {e["source"] for e in pool} == {"success", "failure"}
    assert all(e["extra"]["metadata"]["step_type"] == "action" for e in pool)


@pytest.mark.script("compare_pools.py")
@pytest.mark.slow
def test_compare_pools_sets_a_built_pool_beside_the_released_one(authors_build, capsys):
    built, _ = authors_build
    pool = [json.loads(ln) for ln in (built / "pool" / "experiences.jsonl").read_text().splitlines()]
    # The script's own entry point, in this process: a Python of its own would import
    # sentence-transformers again (~9 s of CPU) to embed the released pool.
    compare = script_module("compare_pools.py")
    assert compare.main(["--released", "official:bfcl/qwen3-8b", "--built", str(built), "--dedup", "0.5"]) == 0
    rows = {line.split("|")[1].strip(): line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")}
    assert rows[f"built ({built.name})"].split("|")[2].strip() == str(len(pool))
    released = int(rows["official:bfcl/qwen3-8b"].split("|")[2])
    kept = {float(k): int(line.split("|")[2]) for k, line in rows.items() if re.fullmatch(r"[0-9.]+", k)}
    # De-duplication at 0.5 removes part of the released pool itself (issue #213's question).
    assert set(kept) == {0.5} and 0 < kept[0.5] < released


@pytest.mark.slow
def test_the_embedded_models_grammar_answers_go_through_the_authors_reading(embedded_server):
    """The real 135M model (briefly: one failure analysis and its validations): llama.cpp
    accepts the grammars and every answer parses as the service parses it. What it says is
    smoke-level."""
    from reme_cli.llm.client import ChatClient

    async def main():
        client = ChatClient(embedded_server.base_url, embedded_server.model_name, concurrency=1)
        try:
            summ = SummarizerSettings(client, "local", 0.6, 384, constrained=True, llama_cpp=True)
            rejected: list = []
            kept, stats = await summarize(summ, ReMeConfig(), TASK, [(TRAJ, Outcome(False, 0.0), None)],
                                          shape=BFCL, rejected=rejected)
            return kept + rejected, stats
        finally:
            await client.close()

    candidates, stats = asyncio.run(main())
    assert stats.invalid_outputs == 0 and candidates and stats.llm_calls == 1 + len(candidates)
    assert all(e.source == "failure" and e.extra["metadata"]["step_type"] in ("reasoning", "action", "observation",
                                                                                 "decision") for e in candidates)
    assert all("Parse error" not in e.extra["judge"]["reason"] for e in candidates)

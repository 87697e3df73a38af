"""Acquisition (distill / judge / reflect) and reuse (guidance / rerank / rewrite) against a
scripted summarizer: canned answers per prompt kind, no model."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from reme_cli.agent.trajectory import Step, Trajectory, with_guidance
from reme_cli.agent.render import render_trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.llm.client import ChatResult
from reme_cli.methods.reme.distill import (
    DistillStats,
    distill_task,
    judge,
    load_prompt,
    reflect,
    reflection_experience,
)
from reme_cli.methods.reme.experience import Experience
from reme_cli.llm.json_reply import parse_json
from reme_cli.methods.reme.reuse import GUIDANCE_HEADER, format_guidance, rerank, rewrite

# The heading each prompt's user part carries: how the test double tells prompts apart.
KIND_MARKERS = {
    "comparative": "# Higher-scoring trajectory",
    "success": "# Successful trajectory",
    "failure": "# Failed trajectory",
    "trajectory": "# Trajectory to summarize",
    "judge": "# Candidate experience",
    "reflection": "# Failed attempt",
    "rerank": "# Candidates",
    "rewrite": "# Retrieved experiences",
}


def kind_of(messages: list[dict[str, Any]]) -> str:
    user = messages[-1]["content"]
    for kind, marker in KIND_MARKERS.items():
        if marker in user:
            return kind
    raise AssertionError(f"unknown prompt: {user[:200]}")


class ScriptedSummarizer:
    """TEST DOUBLE for the LLM protocol: answers each prompt kind with canned text.

    `answers[kind]` is a string, or a callable(messages) -> string (used by the judge
    tests to answer per candidate). Every request is recorded in `calls`."""

    model = "scripted-summarizer"

    def __init__(self, answers: dict[str, Any]):
        self.answers = answers
        self.calls: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] = []

    async def chat(self, messages, **kwargs) -> ChatResult:
        kind = kind_of(messages)
        self.calls.append((kind, messages, kwargs))
        answer = self.answers[kind]
        content = answer(messages) if callable(answer) else answer
        return ChatResult(content=content, tool_calls=[], reasoning=None, prompt_tokens=0,
                          completion_tokens=0, latency_s=0.0, cached=False)

    def kinds(self) -> list[str]:
        return [k for k, _, _ in self.calls]


def run(coro):
    return asyncio.run(coro)


def item(when: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"when_to_use": when, "experience": content, "tags": ["files"], "confidence": 0.8,
            "tools_used": ["ls"], **extra}


def answer_list(*items: dict[str, Any]) -> str:
    return json.dumps(list(items))


TASK = Task(
    id="multi_turn_base_7",
    turns=[[{"role": "user", "content": "List the files in my home folder."}],
           [{"role": "user", "content": "Now move report.txt into archive/."}]],
    query="List the files in my home folder.",
)


def traj(marker: str) -> Trajectory:
    """A two-turn trajectory whose texts carry `marker`, to see which one a prompt holds."""
    call = {"name": "ls", "arguments": {"a": True}, "call": "ls(a=True)",
            "output": '{"current_directory_content": ["report.txt", "archive"]}', "error": False}
    bad = {"name": "mv", "arguments": '{"source": "x"}', "call": "",
           "output": "Error: missing argument destination", "error": True}
    return Trajectory(turns=[
        [Step(f"{marker}: listing", [call], 0, 0, 0.0, False), Step("Here are your files.", [], 0, 0, 0.0, False)],
        [Step(f"{marker}: moving", [bad], 0, 0, 0.0, False), Step("Done.", [], 0, 0, 0.0, False)],
    ], interactions=4)


WIN = Outcome(True, 1.0)
LOSS = Outcome(False, 0.0)

GOOD_ANSWERS = {
    "success": answer_list(item("When listing files before moving them", "Call ls first, then mv.")),
    "failure": answer_list(item("When moving a file", "Always pass destination to mv."),
                           item("When a call errors", "Read the error and retry with fixed arguments.")),
    "comparative": answer_list(item("When a task needs mv", "The better run named the destination.")),
    "trajectory": answer_list(item("File management tasks", "1. ls 2. mv with source and destination")),
}


# ------------------------------------------------------------------------ distillation
def test_keypoint_best_success_worst_failure_gives_all_three_analyses():
    llm = ScriptedSummarizer(GOOD_ANSWERS)
    attempts = [(traj("RUN0"), LOSS), (traj("RUN1"), WIN), (traj("RUN2"), LOSS), (traj("RUN3"), WIN)]
    exps, stats = run(distill_task(llm, TASK, attempts, author="qwen3-8b", seed=7))

    assert sorted(llm.kinds()) == ["comparative", "failure", "success"]
    assert [e.source for e in exps] == ["success", "failure", "failure", "comparative"]
    assert stats.candidates == {"success": 1, "failure": 2, "comparative": 1}
    assert stats.llm_calls == 3 and stats.invalid_outputs == 0 and stats.rejected_by_judge == 0
    # ties: best = first max (RUN1), worst = first min (RUN0)
    prompts = {k: m[-1]["content"] for k, m, _ in llm.calls}
    assert "RUN1" in prompts["success"] and "RUN0" not in prompts["success"]
    assert "RUN0" in prompts["failure"] and "RUN1" not in prompts["failure"]
    assert "RUN1" in prompts["comparative"] and "RUN0" in prompts["comparative"]
    assert prompts["comparative"].index("RUN1") < prompts["comparative"].index("RUN0")
    assert all(kw["seed"] == 7 and kw["temperature"] == 0.0 for _, _, kw in llm.calls)
    e = exps[0]
    assert e.origin_task == TASK.id and e.author == "qwen3-8b"
    assert e.task_query == TASK.query  # defaulted: the item gave none
    assert e.keywords == ["files"] and e.tools_used == ["ls"] and e.confidence == 0.8
    assert e.content == "Call ls first, then mv." and e.when_to_use == "When listing files before moving them"
    assert e.extra["distill"]["best_reward"] == 1.0 and e.extra["distill"]["worst_reward"] == 0.0


def test_system_prompts_are_constant_across_tasks_for_prefix_caching():
    other = Task(id="t2", turns=[[{"role": "user", "content": "cd somewhere {weird} $braces"}]], query="q2")
    llm = ScriptedSummarizer(GOOD_ANSWERS)
    run(distill_task(llm, TASK, [(traj("A"), WIN), (traj("B"), LOSS)], author="m"))
    run(distill_task(llm, other, [(traj("C"), WIN), (traj("D"), LOSS)], author="m"))
    systems: dict[str, set[str]] = {}
    for kind, messages, _ in llm.calls:
        assert messages[0]["role"] == "system"
        systems.setdefault(kind, set()).add(messages[0]["content"])
    assert all(len(s) == 1 for s in systems.values())
    assert any("{weird} $braces" in m[-1]["content"] for _, m, _ in llm.calls)


def test_all_succeed_with_equal_reward_gives_only_success():
    llm = ScriptedSummarizer(GOOD_ANSWERS)
    attempts = [(traj("A"), WIN), (traj("B"), WIN), (traj("C"), WIN)]
    exps, stats = run(distill_task(llm, TASK, attempts, author="m"))
    assert llm.kinds() == ["success"]
    assert [e.source for e in exps] == ["success"]
    assert stats.llm_calls == 1 and stats.candidates == {"success": 1}
    assert "A: listing" in llm.calls[0][1][-1]["content"]


def test_all_fail_with_equal_reward_gives_only_failure():
    llm = ScriptedSummarizer(GOOD_ANSWERS)
    exps, stats = run(distill_task(llm, TASK, [(traj("A"), LOSS), (traj("B"), LOSS)], author="m"))
    assert llm.kinds() == ["failure"]
    assert {e.source for e in exps} == {"failure"} and stats.candidates == {"failure": 2}


def test_partial_rewards_compare_without_failure_or_success_analysis():
    # both failed the checker but with different rewards: failure of worst + comparative
    llm = ScriptedSummarizer(GOOD_ANSWERS)
    attempts = [(traj("A"), Outcome(False, 0.5)), (traj("B"), Outcome(False, 0.2))]
    exps, stats = run(distill_task(llm, TASK, attempts, author="m"))
    assert sorted(llm.kinds()) == ["comparative", "failure"]
    assert stats.candidates == {"failure": 2, "comparative": 1} and len(exps) == 3
    assert "(reward 0.5)" in next(m[-1]["content"] for k, m, _ in llm.calls if k == "comparative")


def test_trajectory_granularity_summarizes_the_best_attempt_once():
    llm = ScriptedSummarizer(GOOD_ANSWERS)
    attempts = [(traj("A"), LOSS), (traj("B"), WIN)]
    exps, stats = run(distill_task(llm, TASK, attempts, granularity="trajectory", author="m"))
    assert llm.kinds() == ["trajectory"]
    prompt = llm.calls[0][1][-1]["content"]
    assert "B: listing" in prompt and "A: listing" not in prompt and "(successful)" in prompt
    assert [e.source for e in exps] == ["trajectory"]
    assert stats.candidates == {"trajectory": 1} and stats.llm_calls == 1


def test_no_attempts_and_bad_granularity():
    llm = ScriptedSummarizer(GOOD_ANSWERS)
    assert run(distill_task(llm, TASK, [], author="m")) == ([], DistillStats())
    with pytest.raises(ValueError, match="granularity"):
        run(distill_task(llm, TASK, [(traj("A"), WIN)], granularity="step", author="m"))


VALID = item("When renaming files", "Use mv with both source and destination.")
JUNK_CASES = [
    # (answer, expected experiences, expected invalid count)
    ("I could not find anything useful.", 0, 1),
    ("", 0, 1),
    ('{"note": "nothing"}', 0, 1),
    ("42", 0, 1),
    ('[{"when_to_use": "x"}]', 0, 1),  # missing experience
    ('[{"experience": "y"}]', 0, 1),  # missing when_to_use
    ('[{"when_to_use": "  ", "experience": "y"}]', 0, 1),  # empty
    ('[{"when_to_use": 3, "experience": "y"}]', 0, 1),
    ('[{"when_to_use": "x", "experience": {"a": 1}}]', 0, 1),
    ('[{"when_to_use": "x", "experience": "y", "tags": 5}]', 0, 1),
    ('[{"when_to_use": "x", "experience": "y", "tools_used": [1, 2]}]', 0, 1),
    ('[{"when_to_use": "x", "experience": "y", "confidence": 1.7}]', 0, 1),
    ('[{"when_to_use": "x", "experience": "y", "confidence": true}]', 0, 1),
    ('[{"when_to_use": "x", "experience": "y", "task_query": ["q"]}]', 0, 1),
    ('["use ls", "use mv"]', 0, 2),  # a list of strings: each item is invalid
    ("[]", 0, 0),  # nothing worth keeping is a valid answer
    ("Sure! Here they are:\n" + answer_list(VALID) + "\nHope this helps [1].", 1, 0),
    ("```json\n" + answer_list(VALID) + "\n```", 1, 0),
    ("<think>maybe [1, 2] or {\"a\": 1}</think>\n```json\n" + answer_list(VALID) + "\n```", 1, 0),
    ("reasoning without an opening tag</think>" + answer_list(VALID), 1, 0),
    (json.dumps({"experiences": [VALID]}), 1, 0),  # JSON-object mode wrapper
    (json.dumps(VALID), 1, 0),  # a single object
    (answer_list(VALID, {"when_to_use": "x"}, "junk"), 1, 2),
    ('[{"when_to_use": "x", "experience": "y", "tags": "a, b", "confidence": "0.5"}]', 1, 0),
    ("<think>never finished " + answer_list(VALID), 0, 1),
]


@pytest.mark.parametrize("answer,n_exps,n_invalid", JUNK_CASES)
def test_junk_outputs_are_skipped_and_counted(answer, n_exps, n_invalid):
    llm = ScriptedSummarizer({"success": answer})
    exps, stats = run(distill_task(llm, TASK, [(traj("A"), WIN)], author="m"))
    assert len(exps) == n_exps
    assert stats.invalid_outputs == n_invalid
    assert stats.candidates.get("success", 0) == n_exps
    assert stats.llm_calls == 1


def test_lenient_fields_are_normalized_and_unknown_fields_kept():
    answer = '[{"when_to_use": " x ", "experience": "y", "tags": "a, b", "confidence": "0.5", ' \
             '"step_type": "action", "task_query": "turn 2 request", "generalized_query": "move files"}]'
    llm = ScriptedSummarizer({"success": answer})
    (e,), _ = run(distill_task(llm, TASK, [(traj("A"), WIN)], author="m"))
    assert e.when_to_use == "x" and e.keywords == ["a", "b"] and e.confidence == 0.5
    assert e.task_query == "turn 2 request" and e.generalized_query == "move files"
    assert e.extra["llm_fields"] == {"step_type": "action"}


def test_stats_merge():
    a = DistillStats({"success": 1}, 2, 1, 3)
    a.merge(DistillStats({"success": 2, "failure": 1}, 1, 0, 2))
    assert a == DistillStats({"success": 3, "failure": 1}, 3, 1, 5)


# ------------------------------------------------------------------------ rendering
def test_render_trajectory_shows_turns_calls_errors_and_outcome():
    text = render_trajectory(TASK, traj("A"), LOSS)
    assert text.startswith("## Turn 1\n[user] List the files in my home folder.")
    assert "[call] ls(a=True)" in text
    assert '[output] {"current_directory_content"' in text
    assert '[call] mv({"source": "x"})' in text  # no canonical call: name(arguments)
    assert "[error] Error: missing argument destination" in text
    assert "[user] Now move report.txt into archive/." in text
    assert text.endswith("## Outcome: failure (reward 0)")


def test_render_trajectory_cuts_the_middle_and_notes_unreached_turns():
    long_out = {"name": "cat", "arguments": {}, "call": "cat()", "output": "x" * 500, "error": False}
    steps = [Step(f"step {i}", [long_out], 0, 0, 0.0, False) for i in range(60)]
    t = Trajectory(turns=[steps], interactions=60, stop_reason="interaction_limit")
    text = render_trajectory(TASK, t, None, max_chars=3000)
    assert len(text) <= 3000
    assert text.startswith("## Turn 1\n[user] List the files")
    assert re.search(r"\.\.\.\[\d+ chars omitted\]\.\.\.", text)
    assert text.endswith("(1 later user turn(s) never reached)\n(stopped: interaction_limit)")


def test_render_never_shows_injected_guidance():
    t = traj("A")
    t.messages = [{"role": "user", "content": "List the files.\n\n" + GUIDANCE_HEADER + ":\nExperience 1: ..."}]
    assert GUIDANCE_HEADER not in render_trajectory(TASK, t, WIN)


# ------------------------------------------------------------------------ judge
def cand(content: str, source: str = "success") -> Experience:
    return Experience(when_to_use="When moving files", content=content, source=source, origin_task=TASK.id)


VERDICTS = {
    "at-threshold": '{"actionable": 0.3, "accurate": 0.3, "relevant": 0.3, "clear": 0.3, "unique": 0.3, '
                    '"score": 0.3, "reason": "borderline"}',
    "below": '```json\n{"score": 0.29, "reason": "vague"}\n```',
    "high": '<think>good one</think>{"score": 0.9, "reason": "specific"}',
    "criteria-mean": '{"actionable": 0.3, "accurate": 0.3, "relevant": 0.3, "clear": 0.3, "unique": 0.3}',
    "garbled": "This experience looks fine to me.",
    "out-of-range": '{"score": 7, "reason": "on a 10 scale"}',
    "partial-criteria": '{"actionable": 0.9, "reason": "no overall"}',
}


def judge_answer(messages):
    user = messages[-1]["content"]
    content = re.search(r"^Content: (.*)$", user, re.MULTILINE).group(1)
    return VERDICTS[content]


def test_judge_keeps_exactly_scores_at_or_above_threshold():
    llm = ScriptedSummarizer({"judge": judge_answer})
    cands = [cand(k) for k in VERDICTS]
    kept, stats = run(judge(llm, TASK, cands, threshold=0.3, seed=1))
    assert [e.content for e in kept] == ["at-threshold", "high", "criteria-mean"]
    assert stats.rejected_by_judge == 1  # 0.29
    assert stats.invalid_outputs == 3  # garbled, out-of-range, partial criteria: unjudged, rejected
    assert stats.llm_calls == len(VERDICTS)
    by = {e.content: e for e in cands}
    assert by["at-threshold"].extra["judge"]["score"] == 0.3
    assert by["at-threshold"].extra["judge"]["criteria"]["unique"] == 0.3
    assert by["below"].extra["judge"] == {"score": 0.29, "reason": "vague", "criteria": {}, "threshold": 0.3}
    assert by["criteria-mean"].extra["judge"]["score"] == 0.3  # mean, rounded: float noise cannot flip it
    assert by["garbled"].extra["judge"]["error"] == "unparseable verdict"
    assert "When moving files" in llm.calls[0][1][-1]["content"]
    assert TASK.query in llm.calls[0][1][-1]["content"]


def test_judge_threshold_boundary_both_ways():
    llm = ScriptedSummarizer({"judge": judge_answer})
    kept, stats = run(judge(llm, TASK, [cand("at-threshold"), cand("below")], threshold=0.29))
    assert len(kept) == 2 and stats.rejected_by_judge == 0
    kept, stats = run(judge(llm, TASK, [cand("at-threshold"), cand("below")], threshold=0.31))
    assert kept == [] and stats.rejected_by_judge == 2
    assert run(judge(llm, TASK, [], threshold=0.3)) == ([], DistillStats())


# ------------------------------------------------------------------------ reflection
def test_reflect_returns_guidance_and_sees_previous_lessons():
    answer = '```json\n{"analysis": "mv lacked destination", "guidance": "Call mv(source, destination)."}\n```'
    llm = ScriptedSummarizer({"reflection": answer})
    got = run(reflect(llm, TASK, traj("A"), LOSS, ["Check the folder first.", "  "]))
    assert got == "Call mv(source, destination)."
    prompt = llm.calls[0][1][-1]["content"]
    assert "- Check the folder first." in prompt and "A: moving" in prompt
    llm2 = ScriptedSummarizer({"reflection": answer})
    run(reflect(llm2, TASK, traj("A"), LOSS, []))
    assert "(none)" in llm2.calls[0][1][-1]["content"]


@pytest.mark.parametrize("answer", ["I am not sure.", '{"analysis": "x"}', '{"guidance": ""}',
                                    '{"guidance": ["a"]}', "[1, 2]"])
def test_reflect_returns_none_on_unusable_output(answer):
    llm = ScriptedSummarizer({"reflection": answer})
    assert run(reflect(llm, TASK, traj("A"), LOSS, [])) is None


def test_reflection_experience():
    e = reflection_experience(TASK, "  Pass destination to mv. ", author="qwen3-8b")
    assert e.source == "reflection" and e.content == "Pass destination to mv."
    assert e.when_to_use == "When handling a request like: List the files in my home folder."
    assert e.task_query == TASK.query and e.origin_task == TASK.id and e.author == "qwen3-8b"
    long = Task(id="x", turns=[], query="word " * 200)
    assert len(reflection_experience(long, "l", "a").when_to_use) < 360


# ------------------------------------------------------------------------ reuse
EXPS = [Experience(when_to_use=f"when {i}", content=f"content {i}", source="success") for i in range(4)]


def official_first_message(query: str, memories: list[tuple[str, str]]) -> str:
    """FIXTURE, written from the official format strings (agentscope-ai/ReMe 65971baf), not
    from reme's code: the memory service formats each retrieved item as
    "Memory {i} :\\n When to use: ...\\n Content: ...\\n" joined by "\\n"; the BFCL agent
    renames "Memory" to "Experience" and sends
    "Task:\\n" + query + "\\n\\nSome Related Experience to help you to complete the task:\\n" + memory."""
    memory = "\n".join(f"Memory {i} :\n When to use: {w}\n Content: {c}\n" for i, (w, c) in enumerate(memories, 1))
    memory = memory.replace("Memory ", "Experience ")
    return "Task:\n" + query + "\n\nSome Related Experience to help you to complete the task:\n" + memory


def test_guidance_matches_the_official_text_byte_for_byte():
    assert format_guidance([]) is None
    assert with_guidance("List the files.", None) == "List the files."  # no memory: the query alone
    got = with_guidance("List the files.", format_guidance(EXPS[:2]))
    assert got == official_first_message("List the files.", [("when 0", "content 0"), ("when 1", "content 1")])
    assert "Experience 1 :\n When to use: when 0\n Content: content 0\n\nExperience 2 :" in got


def test_rerank_follows_the_llm_and_appends_the_rest():
    llm = ScriptedSummarizer({"rerank": '{"ranked_indices": [2, 0]}'})
    got = run(rerank(llm, "move a file", EXPS, top_k=3))
    assert [e.content for e in got] == ["content 2", "content 0", "content 1"]
    prompt = llm.calls[0][1][-1]["content"]
    assert "Candidate 3:\nWhen to use: when 3" in prompt and "move a file" in prompt
    assert llm.calls[0][2]["temperature"] == 0.0


@pytest.mark.parametrize("answer", ["no idea", '{"ranked_indices": "2,0"}', "[9, -1, true]", '{"x": 1}',
                                    "<think>[3, 2]</think>"])
def test_rerank_falls_back_to_input_order(answer):
    llm = ScriptedSummarizer({"rerank": answer})
    got = run(rerank(llm, "q", EXPS, top_k=2))
    assert got == EXPS[:2]


def test_rerank_edge_cases_and_sampling():
    llm = ScriptedSummarizer({"rerank": "```json\n[3, 3, 1]\n```"})
    assert run(rerank(llm, "q", EXPS, top_k=5, seed=3, temperature=0.5)) == [EXPS[3], EXPS[1], EXPS[0], EXPS[2]]
    assert llm.calls[0][2]["seed"] == 3 and llm.calls[0][2]["temperature"] == 0.5
    assert run(rerank(llm, "q", EXPS, top_k=0)) == []
    assert run(rerank(llm, "q", EXPS[:1], top_k=5)) == EXPS[:1]
    assert len(llm.calls) == 1  # no call for 0 or 1 candidates


def test_rewrite_and_its_fallbacks():
    llm = ScriptedSummarizer({"rewrite": '```json\n{"rewritten_context": "1. Call ls. 2. Call mv."}\n```'})
    assert run(rewrite(llm, "move a file", EXPS[:2])) == GUIDANCE_HEADER + ":\n1. Call ls. 2. Call mv."
    assert "Experience 2 :\n When to use: when 1" in llm.calls[0][1][-1]["content"]
    for junk in ["I rewrote them.", '{"rewritten_context": ""}', '{"rewritten_context": 5}', "[]"]:
        llm = ScriptedSummarizer({"rewrite": junk})
        assert run(rewrite(llm, "q", EXPS[:2])) == format_guidance(EXPS[:2])
    assert run(rewrite(ScriptedSummarizer({}), "q", [])) is None


# ------------------------------------------------------------------------ llm_json, prompts
def test_parse_json_cases():
    assert parse_json('{"a": 1}') == {"a": 1}
    assert parse_json("text [1] then {\"a\": [1, 2, 3]} end") == {"a": [1, 2, 3]}  # longest wins
    assert parse_json("text [1] then {\"a\": 1}", list) == [1]
    assert parse_json("```\n[1]\n```") == [1]
    assert parse_json("```python\nx = [1]\n```\n```json\n{\"a\": 2}\n```") == {"a": 2}
    assert parse_json("<THINK>{\"a\": 1}</THINK> no json") is None
    assert parse_json("{broken") is None
    assert parse_json(None) is None
    assert parse_json('"just a string"') is None


@pytest.mark.parametrize("name", ["success", "failure", "comparative", "trajectory", "judge", "reflection",
                                  "rerank", "rewrite"])
def test_every_prompt_loads_and_has_its_marker(name):
    p = load_prompt(name)
    assert p.system and "JSON" in p.system
    assert KIND_MARKERS[name] in p.user.template


# ------------------------------------------------------------------------ per-benchmark prompt families
# The substrings the scripted test server (ScriptedSummarizerPolicy) tells prompts apart by.
POLICY_MARKERS = {"judge": "strict reviewer of experiences", "reflection": "FAILED. It will retry",
                  "rerank": "Rank the candidates", "rewrite": "Rewrite them into short guidance",
                  "success": "SUCCESSFUL", "failure": "FAILED", "comparative": "two attempts",
                  "trajectory": "ONE reusable"}


@pytest.mark.parametrize("name", list(KIND_MARKERS))
def test_appworld_prompts_speak_of_code_and_api_calls_and_share_the_user_part(name):
    bfcl, aw = load_prompt(name), load_prompt(name, "appworld")
    assert "code and API calls" in aw.system and "function call" not in aw.system
    assert "code and API calls" not in bfcl.system
    assert "$" not in aw.system  # every family word filled in: the system prefix is constant
    assert aw.user.template == bfcl.user.template
    assert POLICY_MARKERS[name] in aw.system and POLICY_MARKERS[name] in bfcl.system


def test_an_unknown_prompt_family_is_refused():
    with pytest.raises(ValueError, match="unknown prompt family 'sql'.*function_calls, appworld"):
        load_prompt("judge", "sql")


AW_TASK = Task(id="toy0002_1", turns=[[{"role": "user", "content": "How many songs are in my queue?"}]],
               query="How many songs are in my queue?", prompt_family="appworld")


def code_traj() -> Trajectory:
    code = "print(apis.spotify.show_queue(access_token=token))"
    ok = Step(f"Let me look at the queue.\n```python\n{code}\n```", [
        {"name": "execute", "arguments": {"code": code}, "call": code, "output": "[1, 2, 3]", "error": False}],
        0, 0, 0.0, False, code=code, code_output="[1, 2, 3]")
    bad_code = "apis.supervisor.complete_task(answer=len(queue))"
    bad = Step(f"```python\n{bad_code}\n```", [
        {"name": "execute", "arguments": {"code": bad_code}, "call": bad_code,
         "output": "Execution failed. NameError: name 'queue' is not defined", "error": True}],
        0, 0, 0.0, False, code=bad_code, code_output="Execution failed. NameError: name 'queue' is not defined")
    return Trajectory(turns=[[ok, bad]], interactions=2)


def test_a_code_step_renders_as_its_thought_code_and_output():
    text = render_trajectory(AW_TASK, code_traj(), LOSS)
    assert ("[assistant] Let me look at the queue.\n[code]\nprint(apis.spotify.show_queue(access_token=token))\n"
            "[output] [1, 2, 3]") in text
    assert text.count("show_queue") == 1  # the reply's own copy of the block is not repeated
    assert "[code]\napis.supervisor.complete_task(answer=len(queue))\n[error] Execution failed. NameError" in text
    assert "[call]" not in text


def test_an_appworld_task_gets_the_appworld_words_in_every_summarizer_call():
    answers = {**GOOD_ANSWERS, "judge": '{"score": 0.9, "reason": "ok"}',
               "reflection": '{"guidance": "Paginate."}', "rerank": "[1, 0]",
               "rewrite": '{"rewritten_context": "Read the doc first."}'}
    llm = ScriptedSummarizer(answers)
    exps, _ = run(distill_task(llm, AW_TASK, [(code_traj(), WIN), (code_traj(), LOSS)], author="m"))
    run(judge(llm, AW_TASK, exps, threshold=0.3))
    run(reflect(llm, AW_TASK, code_traj(), LOSS, []))
    run(rerank(llm, AW_TASK.query, EXPS, top_k=2, family=AW_TASK.prompt_family))
    run(rewrite(llm, AW_TASK.query, EXPS[:2], family=AW_TASK.prompt_family))
    assert sorted(set(llm.kinds())) == sorted(KIND_MARKERS.keys() - {"trajectory"})
    for kind, messages, _ in llm.calls:
        assert messages[0]["content"] == load_prompt(kind, "appworld").system, kind
    distilled = [m for k, m, _ in llm.calls if k in ("success", "failure", "comparative")]
    assert all("[code]\nprint(apis.spotify.show_queue" in m[-1]["content"] for m in distilled)
    # A BFCL task keeps the tool-call words.
    bfcl = ScriptedSummarizer(GOOD_ANSWERS)
    run(distill_task(bfcl, TASK, [(traj("A"), WIN)], author="m"))
    assert bfcl.calls[0][1][0]["content"] == load_prompt("success").system
    assert "multi-turn task with function calls" in bfcl.calls[0][1][0]["content"]

"""memory=ace (ACE's playbook) through the real CLI on the scripted server: build-pool ->
fixed -> dynamic, the exact injected text of a planted playbook, a tag and an ADD after a
task, resume after kill -9, a cached rerun, and the context guard cutting a large playbook.

The LLM is a test double (never a model result): BFCL ground-truth replay for the agent
(one training task corrupted, so it fails); ACE's Reflector tags the first bullet it is shown
helpful and the second harmful, its Curator ADDs one bullet naming the task
(reme_cli/methods/ace/scripted.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reme_cli.methods.ace.playbook import Bullet, Playbook
from reme_cli.methods.context_guard import estimate_tokens
from tests.conftest import reme_env, reme_popen, run_reme, run_reme_together, scripted_server_process, without_timing
from tests.methods.reme.test_memory_flow import _kill_when, _trials

FAILS_TRAINING = "multi_turn_base_5"  # the first training task; the replayed agent gets it wrong
SCRIPTED = ["memory=ace", "model=qwen3-8b", "embedding=minilm", "llm.model=replay", "benchmark.release=current",
            "eval.dynamic_workers=1"]
FRAME_HEAD = ("You are also provided with a curated playbook of strategies, API-specific information, common "
              "mistakes, and proven solutions to help you solve the task effectively.\n\n**Playbook**: - Read the "
              "**Playbook** first, then execute the task by explicitly leveraging each relevant section:\n"
              "### PLAYBOOK BEGIN\n")


def _lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def _bullets(pool: Path) -> dict[str, dict]:
    return {b["id"]: b for b in json.loads((pool / "playbook.json").read_text())["bullets"]}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("ace")


@pytest.fixture(scope="module")
def server():
    """A separate process with a small delay, so that a run can be killed mid-way."""
    with scripted_server_process("--policy", "bfcl-replay+summarizer", "--corrupt", FAILS_TRAINING, "--delay", "0.05") as url:
        yield url


def _reme(workdir: Path, server: str, *args: str, check: bool = True):
    return run_reme([*args, *SCRIPTED, f"llm.base_url={server}"], workdir, check=check)


@pytest.fixture(scope="module")
def built(workdir, server):
    """ACE offline from the shared sampled trajectories (memory.offline_attempts=until_success)."""
    _reme(workdir, server, "build-pool", "benchmark.limit=3", "build.samples=2", "memory.offline_attempts=until_success",
          "out_dir=built")
    return workdir / "built"


@pytest.fixture(scope="module")
def planted(workdir):
    """A playbook written by hand: two sections, three bullets."""
    pb = Playbook(["## STRATEGIES AND HARD RULES", "## COMMON MISTAKES AND CORRECT STRATEGIES", "## OTHERS"],
                  [Bullet("shr-00001", "strategies_and_hard_rules", "Read every argument from the task text."),
                   Bullet("misc-00002", "others", "Call one tool at a time."),
                   Bullet("shr-00003", "strategies_and_hard_rules", "Check the state before changing it.")], 4)
    pb.save(workdir / "planted")
    return workdir / "planted"


@pytest.mark.slow
def test_build_pool_reflects_attempts_until_success_and_merges_the_adds(built):
    report = json.loads((built / "build" / "report.json").read_text())
    assert report["method"] == "ace" and report["trajectories"] == 6 and report["unit_errors"] == 0
    lines = _lines(built / "build" / "ace_build.jsonl")
    attempts = {line["unit"].split("/", 1)[1]: line["attempts"] for line in lines}
    # A task that succeeds at once is reflected once; the failing one through all its samples.
    assert len(attempts[FAILS_TRAINING]) == 2 and not any(a["success"] for a in attempts[FAILS_TRAINING])
    assert all(len(a) == 1 and a[0]["success"] for t, a in attempts.items() if t != FAILS_TRAINING)
    bullets = _bullets(built / "pool")
    # One scripted ADD per reflected attempt, numbered by one global counter, in commit order.
    assert report["ace"]["attempts_reflected"] == 4 == len(bullets) == report["pool_size"]
    assert list(bullets) == [f"cms-{i:05d}" for i in range(1, 5)]
    assert report["ace"]["llm_calls"] == 8 and report["ace"]["invalid_reflections"] == 0
    # Every attempt after the first saw the playbook: the first bullet was tagged helpful
    # three times, the second harmful twice (the reflector's ground truth: the checker).
    assert bullets["cms-00001"]["helpful"] == 3 and bullets["cms-00002"]["harmful"] == 2
    assert report["summarizer_answers"]["ace_curator"]["calls"] == 4
    text = (built / "pool" / "playbook.txt").read_text()
    assert "[cms-00001] helpful=3 harmful=0 :: Scripted insight for:" in text


@pytest.mark.slow
def test_live_offline_adaptation_retries_a_failing_task_with_its_reflection_and_resumes_after_kill(workdir, server):
    """The default build (memory.offline_attempts=live): ACE runs its own attempts, training
    tasks in split order, each until it passes, at most 5 times, every attempt reflected on
    and curated; a retry sees the playbook its earlier attempts grew and the last one's
    reflection. Killed after its first task, the rerun finishes the same playbook."""
    build = ["build-pool", "benchmark.limit=3", "llm.cache=false", *SCRIPTED, f"llm.base_url={server}"]
    env = reme_env(workdir / ".reme_cache")
    killed = reme_popen([*build, "out_dir=live_killed"], cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE)
    _kill_when(killed, workdir / "live_killed" / "build" / "trials.jsonl", 1)
    assert 1 <= len(_trials(workdir / "live_killed" / "build")) < 3
    run_reme_together(([*build, "out_dir=live"], workdir), ([*build, "out_dir=live_killed"], workdir), check=True)

    live = workdir / "live"
    report = json.loads((live / "build" / "report.json").read_text())
    assert report["unit_errors"] == 0 and report["trajectories"] == 3  # one unit per training task
    units = {t["task_id"]: t for t in _trials(live / "build")}
    failing = units.pop(FAILS_TRAINING)
    tries = failing["method"]["offline_attempts"]
    assert failing["attempts"] == len(tries) == 5 and not any(a["success"] for a in tries)  # memory.offline_max_attempts
    assert all(u["attempts"] == 1 and u["method"]["offline_attempts"][0]["success"] for u in units.values())
    for i, attempt in enumerate(tries[1:], 1):
        earlier = [b for a in tries[:i] for b in a["added"]]
        assert "In your previous attempt, the tool calls failed the checker's test of the task" in attempt["guidance"]
        assert "Scripted key insight." in attempt["guidance"]  # the failed attempt's reflection
        assert all(f"[{b}]" in attempt["guidance"] for b in earlier)  # the playbook those attempts grew
    bullets = _bullets(live / "pool")
    # One scripted ADD per attempt, 1 + 5 + 1, numbered in split order.
    assert list(bullets) == [f"cms-{i:05d}" for i in range(1, 8)] and report["pool_size"] == 7
    assert report["ace"]["attempts_reflected"] == 7 and report["summarizer_answers"]["ace_curator"]["calls"] == 7
    assert (workdir / "live_killed" / "pool" / "playbook.json").read_text() == (live / "pool" / "playbook.json").read_text()

    # A task that passes on its retry (the scripted agent gets it right once the prompt holds
    # the retry's reflection) stops there, and its passing attempt is the one scored.
    with scripted_server_process("--policy", "bfcl-replay+summarizer", "--corrupt", FAILS_TRAINING,
                                 "--heal-on-retry") as healing:
        run_reme(["build-pool", "benchmark.limit=1", *SCRIPTED, f"llm.base_url={healing}", "out_dir=healed"], workdir,
                 check=True)
    (healed,) = _trials(workdir / "healed" / "build")
    assert healed["task_id"] == FAILS_TRAINING and healed["success"] and healed["attempts"] == 2
    assert [a["success"] for a in healed["method"]["offline_attempts"]] == [False, True]
    assert list(_bullets(workdir / "healed" / "pool")) == ["cms-00001", "cms-00002"]


@pytest.fixture(scope="module")
def large(workdir):
    """Thirty long bullets: more than memory.max_context_share=0.02 lets in."""
    bullets = [Bullet(f"shr-{i:05d}", "strategies_and_hard_rules", f"Rule {i}: " + "check the arguments " * 5)
               for i in range(1, 31)]
    Playbook(["## STRATEGIES AND HARD RULES", "## OTHERS"], bullets, 31).save(workdir / "large")
    return bullets


def _eval_args(server: str, mode: str, out: str, *extra: str) -> list[str]:
    return ["eval", "--mode", mode, "benchmark.limit=2", "eval.runs=1", "eval.seeds=1", f"out_dir={out}", *extra,
            *SCRIPTED, f"llm.base_url={server}"]


@pytest.fixture(scope="module")
def fixed_runs(workdir, server, built, planted, large):
    """The fixed-mode runs side by side (independent; CI time is tight)."""
    before = (built / "pool" / "playbook.json").read_text()
    procs = run_reme_together(
        (_eval_args(server, "fixed", "fixed", "memory.pool=built"), workdir),
        (_eval_args(server, "fixed", "planted_fixed", "memory.pool=planted", "benchmark.limit=1"), workdir),
        (_eval_args(server, "fixed", "guarded", "memory.pool=large", "memory.max_context_share=0.02",
                    "benchmark.limit=1"), workdir),
        (_eval_args(server, "fixed", "nopool", "benchmark.limit=1"), workdir))
    assert [p.returncode for p in procs] == [0, 0, 0, 2], procs[-1].stderr[-2000:]
    return before, procs[-1]


@pytest.fixture(scope="module")
def dynamic_runs(workdir, server, built, planted):
    procs = run_reme_together(
        (_eval_args(server, "dynamic", "dyn", "memory.pool=built"), workdir),
        (_eval_args(server, "dynamic", "planted_dyn", "memory.pool=planted", "benchmark.limit=1"), workdir),
        (_eval_args(server, "dynamic", "online", "benchmark.limit=1"), workdir))
    assert all(p.returncode == 0 for p in procs), [p.stderr[-2000:] for p in procs]


@pytest.mark.slow
def test_fixed_mode_injects_the_built_playbook_whole_and_never_changes_it(workdir, built, fixed_runs):
    before, _ = fixed_runs
    trials = _trials(workdir / "fixed")
    assert len(trials) == 2 and all(t["success"] for t in trials)
    for t in trials:
        assert t["guidance"].startswith(FRAME_HEAD) and t["guidance"].endswith("### PLAYBOOK END")
        assert sorted(t["retrieved_ids"]) == sorted(_bullets(built / "pool"))
        assert t["method"]["context"]["truncated"] is False and t["method"]["injected"] == 4
        assert "tags" not in t["method"]
    assert (built / "pool" / "playbook.json").read_text() == before
    assert not (workdir / "fixed" / "streams").exists()


@pytest.mark.slow
def test_fixed_mode_without_a_pool_is_refused_in_one_line(fixed_runs):
    _, proc = fixed_runs
    assert "needs memory.pool=DIR" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_planted_playbook_is_injected_exactly(workdir, fixed_runs):
    (trial,) = _trials(workdir / "planted_fixed")
    assert trial["guidance"] == FRAME_HEAD + (
        "## STRATEGIES AND HARD RULES\n[shr-00001] Read every argument from the task text.\n"
        "[shr-00003] Check the state before changing it.\n\n"
        "## COMMON MISTAKES AND CORRECT STRATEGIES\n\n"
        "## OTHERS\n[misc-00002] Call one tool at a time.\n### PLAYBOOK END")
    assert trial["retrieved_ids"] == ["shr-00001", "shr-00003", "misc-00002"]
    assert trial["method"]["playbook"]["ops_applied"] == 0


@pytest.mark.slow
def test_after_a_task_the_reflector_tags_and_the_curator_adds(workdir, planted, dynamic_runs):
    (trial,) = _trials(workdir / "planted_dyn")
    m = trial["method"]
    # The reflector saw the playbook in its order: first bullet helpful, second harmful.
    assert m["tags"] == [{"op": "tag", "id": "shr-00001", "tag": "helpful"},
                         {"op": "tag", "id": "shr-00003", "tag": "harmful"}]
    assert m["applied"] == ["cms-00004"] and m["playbook_after"]["ops_applied"] == 3
    after = _bullets(workdir / "planted_dyn" / "streams" / "s0_r0" / "playbook")
    assert (after["shr-00001"]["helpful"], after["shr-00001"]["harmful"]) == (1, 0)
    assert (after["shr-00003"]["helpful"], after["shr-00003"]["harmful"]) == (0, 1)
    assert after["misc-00002"]["helpful"] == after["misc-00002"]["harmful"] == 0
    assert after["cms-00004"]["section"] == "common_mistakes_and_correct_strategies"
    assert after["cms-00004"]["content"].startswith("Scripted insight for:") and after["cms-00004"]["source"]
    assert _bullets(planted)["shr-00001"]["helpful"] == 0  # the pool is not written


@pytest.mark.slow
def test_dynamic_mode_grows_the_built_playbook_task_by_task(workdir, dynamic_runs):
    trials = sorted(_trials(workdir / "dyn"), key=lambda t: t["position"])
    assert [t["method"]["applied"] for t in trials] == [["cms-00005"], ["cms-00006"]]
    assert "cms-00005" in trials[1]["retrieved_ids"] and "cms-00005" not in trials[0]["retrieved_ids"]
    assert [t["method"]["playbook_bullets"] for t in trials] == [5, 6]
    assert len(_bullets(workdir / "dyn" / "streams" / "s0_r0" / "playbook")) == 6


@pytest.mark.slow
def test_dynamic_without_a_pool_starts_from_the_initial_playbook(workdir, dynamic_runs):
    (trial,) = _trials(workdir / "online")
    assert trial["retrieved_ids"] == [] and "## VERIFICATION CHECKLIST\n\n" in trial["guidance"]
    assert trial["method"]["applied"] == ["cms-00001"]



@pytest.mark.slow



def test_resume_after_kill_equals_an_uninterrupted_run_and_a_cached_rerun_is_identical(workdir, server, planted,
                                                                                     dynamic_runs):
    common = ["eval", "--mode", "dynamic", "memory.pool=planted", "benchmark.limit=2", "eval.runs=2", "eval.seeds=1",
              "llm.cache=false", *SCRIPTED, f"llm.base_url={server}"]
    env = reme_env(workdir / ".reme_cache")

    def start(*args: str) -> subprocess.Popen:
        return reme_popen(args, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    whole = start(*common, "out_dir=whole")
    again = start(*_eval_args(server, "dynamic", "planted_dyn_again", "memory.pool=planted", "benchmark.limit=1"))
    killed = start(*common, "out_dir=killed")
    _kill_when(killed, workdir / "killed" / "trials.jsonl", 1)
    assert 1 <= len(_trials(workdir / "killed")) < 4
    assert whole.wait() == 0 and again.wait() == 0
    run_reme([*common, "out_dir=killed"], workdir, check=True)
    assert len({t["unit"] for t in _trials(workdir / "killed")}) == len(_trials(workdir / "killed")) == 4
    for stream in ("s0_r0", "s0_r1"):
        w = workdir / "whole" / "streams" / stream / "playbook"
        k = workdir / "killed" / "streams" / stream / "playbook"
        assert (k / "playbook.json").read_text() == (w / "playbook.json").read_text()
        assert len(_bullets(w)) == 3 + 2
    # The planted dynamic run again, from the response cache: the same records and playbook.
    (a,), (b,) = _trials(workdir / "planted_dyn"), _trials(workdir / "planted_dyn_again")
    assert all(step["cached"] for turn in b["trajectory"]["turns"] for step in turn)
    assert without_timing(a) == without_timing(b)
    assert (workdir / "planted_dyn" / "streams" / "s0_r0" / "playbook" / "playbook.json").read_text() == \
        (workdir / "planted_dyn_again" / "streams" / "s0_r0" / "playbook" / "playbook.json").read_text()


@pytest.mark.slow
def test_a_playbook_too_large_for_its_share_is_cut_at_bullets_and_recorded(workdir, large, fixed_runs):
    bullets = large
    (trial,) = _trials(workdir / "guarded")
    context = trial["method"]["context"]
    kept = len(trial["retrieved_ids"])
    # qwen3-8b: (32768 - 8192) * 0.02 = 491 tokens for the playbook and its frame.
    assert context["truncated"] is True and context["budget"] == 491 > context["bullet_budget"]
    assert 0 < kept < 30 and context["dropped_items"] == 30 - kept
    assert trial["retrieved_ids"] == [b.id for b in bullets[:kept]]  # the first bullets win
    assert bullets[kept - 1].content in trial["guidance"] and bullets[kept].content not in trial["guidance"]
    assert estimate_tokens(trial["guidance"]) == context["prompt_tokens"] <= 491


def test_dedup_drops_an_add_too_similar_to_a_bullet_and_replays_without_embedding():
    pb = Playbook(["## STRATEGIES AND HARD RULES", "## OTHERS"],
                  [Bullet("shr-00001", "strategies_and_hard_rules", "alpha")], 2)
    vectors = {"alpha": [1.0, 0.0], "alpha again": [0.96, 0.28], "beta": [0.0, 1.0]}
    embed = lambda texts: [vectors[t] for t in texts]  # noqa: E731 - unit-norm rows, cosine = dot
    proposed = [{"op": "add", "section": "others", "content": "alpha again", "source": "u"},
                {"op": "add", "section": "others", "content": "beta", "source": "u"}]
    applied = pb.apply(proposed, "u", embed, 0.90)
    assert applied[0]["duplicate_of"] == "shr-00001" and "id" not in applied[0]
    assert applied[1]["id"] == "misc-00002" and [b.id for b in pb.bullets] == ["shr-00001", "misc-00002"]
    again = Playbook(["## STRATEGIES AND HARD RULES", "## OTHERS"],
                     [Bullet("shr-00001", "strategies_and_hard_rules", "alpha")], 2)
    again.replay(applied)  # the logged decision, no embedder
    assert again.render(show_counts=True) == pb.render(show_counts=True) and again.next_id == pb.next_id == 3


def test_function_calling_prompts_rewrite_only_the_code_action_lines():
    from reme_cli.methods.ace import texts

    for with_gt in (True, False):
        code, tools = texts.reflector(with_gt, True), texts.reflector(with_gt, False)
        assert "expert AppWorld coding agent" in code and "expert AppWorld coding agent" not in tools
        assert "function-calling (tool-use) agent" in tools and "bullet_tags" in code
        changed = [(a, b) for a, b in zip(code.splitlines(), tools.splitlines()) if a != b]
        assert len(code.splitlines()) == len(tools.splitlines()) and 0 < len(changed) <= 6
    assert texts.curator(False).count("For tool-calling tasks") == 1
    assert Playbook.parse(texts.initial_playbook(False)).bullets == []
    assert len(Playbook.parse(texts.initial_playbook(True)).bullets) == 8


def test_whether_the_agent_acts_with_code_is_asked_of_the_runs_protocol_not_the_benchmarks_name():
    """The authors' code-action prompts and initial playbook go with a code-action protocol
    (``benchmark.tool_protocol`` over ``model.tool_protocol``), on whatever benchmark: BFCL
    made to act with code gets them, AppWorld made to call tools does not."""
    from reme_cli.core.config import compose
    from reme_cli.methods.ace.method import initial

    def bullets(*overrides: str) -> int:
        return len(initial(compose(["memory=ace", "eval.mode=dynamic", *overrides])).bullets)

    assert bullets() == 0 and bullets("model.tool_protocol=json") == 0
    assert bullets("benchmark=appworld") == 8  # its config asks for code actions
    assert bullets("benchmark.tool_protocol=code") == 8
    assert bullets("benchmark=appworld", "benchmark.tool_protocol=openai") == 0


def _unbounded(schema: object, where: str = "") -> list[str]:
    """The strings and arrays of a JSON schema whose length nothing bounds."""
    if not isinstance(schema, dict):
        return []
    found = []
    if schema.get("type") == "string" and "maxLength" not in schema and "enum" not in schema \
            or schema.get("type") == "array" and "maxItems" not in schema:
        found.append(where or "(the answer)")
    for key, sub in (schema.get("properties") or {}).items():
        found += _unbounded(sub, f"{where}.{key}")
    return found + _unbounded(schema.get("items"), f"{where}[]")


def test_a_constrained_answer_is_bounded_so_that_sampling_cannot_run_it_past_the_cap():
    """A constrained (small local) summarizer's answer is held to these schemas by its server's
    grammar. A free string let the 135M model write on until summarizer.max_tokens cut the JSON
    off, on some samples and not others (tests/methods/test_methods_embedded.py failed so): every
    string and list is bounded, as the other methods' formats are."""
    from reme_cli.methods.ace.roles import CURATOR_SCHEMA, REFLECTOR_SCHEMA

    assert _unbounded(REFLECTOR_SCHEMA) == [] and _unbounded(CURATOR_SCHEMA) == []
    assert _unbounded({"type": "object", "properties": {"a": {"type": "string"}}}) == [".a"]  # the check sees one

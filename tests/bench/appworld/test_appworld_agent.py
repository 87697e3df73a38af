"""The authors' AppWorld agent (agentscope-ai/ReMe 65971baf, benchmark/appworld/): the
shipped prompt.py, the first request of an episode on the toy world, the code-action loop's
edge cases, and the dynamic protocol's carried summary. The scripted server is a TEST
DOUBLE: its answers are chosen code, not a model's."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from reme_cli.agent.loop import Sampling, run_episode
from reme_cli.agent.protocols import CodeProtocol
from reme_cli.bench.appworld import agent as appworld_agent
from reme_cli.bench.appworld.venv import default_venv
from reme_cli.bench.base import Outcome, Task, ToolResult
from reme_cli.llm.client import ChatClient
from reme_cli.bench.appworld.scripted import AppWorldGoldPolicy
from reme_cli.testing.scripted_server import ScriptedServer, StepsPolicy, make_policy

PROMPT_DIR = appworld_agent.AUTHORS_PROMPT.parent
HEADER = "Some Related Experience to help you to complete the task"


def test_the_shipped_prompt_is_the_authors_file_named_in_its_notice():
    notice = (PROMPT_DIR / "NOTICE").read_text()
    (digest,) = re.findall(r"^([0-9a-f]{64})  prompt\.py$", notice, re.M)
    assert hashlib.sha256(appworld_agent.AUTHORS_PROMPT.read_bytes()).hexdigest() == digest
    assert "benchmark/appworld/prompt.py" in notice and "65971bafe3221ae66e75f410324841f0c5582af5" in notice


def authors_messages(root: Path, task_id: str, experiences: list[dict[str, str]] | None = None) -> list[dict]:
    """The two messages the authors' prompt_messages builds, from AppWorld's own Task (loaded
    in AppWorld's venv) and NEW_PROMPT_TEMPLATE executed from the shipped file's text."""
    script = ("import json\nfrom appworld.task import Task\n"
              f"t = Task.load({task_id!r}, load_ground_truth=False)\n"
              "print(json.dumps({'supervisor': dict(t.supervisor), 'apps': t.app_descriptions, "
              "'instruction': t.instruction}, default=str))")
    out = subprocess.run([str(default_venv() / "bin" / "python"), "-c", script], capture_output=True, text=True,
                         check=True, env={"APPWORLD_ROOT": str(root)}, timeout=300).stdout
    task = json.loads(out.strip().splitlines()[-1])
    namespace: dict[str, Any] = {}
    exec(appworld_agent.AUTHORS_PROMPT.read_text(), namespace)  # the authors' file, as they import it
    # appworld_react_agent.py prompt_messages, lines 97-136
    app_descriptions = json.dumps([{"name": k, "description": v} for (k, v) in task["apps"].items()], indent=1)
    sys_prompt = jinja2.Template(namespace["NEW_PROMPT_TEMPLATE"].lstrip()).render(
        {"supervisor": task["supervisor"], "app_descriptions": app_descriptions})
    query = task["instruction"]
    if experiences:
        formatted = [f"Experience {i}:\n When to use: {m['when_to_use']}\n Content: {m['content']}\n"
                     for i, m in enumerate(experiences, 1)]
        query = "Task:\n" + query + f"\n\n{HEADER}:\n" + "\n".join(formatted)
    return [{"role": "system", "content": sys_prompt}, {"role": "user", "content": query}]


def common(root: Path, url: str, task_id: str) -> list[str]:
    return ["benchmark=appworld", f"benchmark.data_dir={root}", "benchmark.split=train",
            f"benchmark.task_ids=[{task_id}]", "model=qwen3-8b", "embedding=minilm", f"llm.base_url={url}",
            "llm.model=gold", "llm.cache=false", "eval.runs=1", "eval.seeds=1"]


def first_requests(srv: ScriptedServer, task_id: str) -> list[list[dict]]:
    """The messages of each episode's first agent request for `task_id`, in order."""
    return [r["body"]["messages"] for r in srv.requests
            if r["headers"].get("x-reme-task-id") == task_id
            and not any(m["role"] == "assistant" for m in r["body"]["messages"])]


@pytest.mark.slow
def test_the_first_request_carries_the_authors_system_and_user_message_with_and_without_guidance(reme, toy_world):
    """And benchmark.agent=compact sends reme's own words instead."""
    task_id = "toy0001_1"
    reme("pool", "import", "official:appworld/qwen3-8b", "--out", "pool", check=True)
    with ScriptedServer(AppWorldGoldPolicy(str(toy_world))) as srv:
        reme("eval", *common(toy_world, srv.base_url, task_id), "out_dir=plain", check=True)
        reme("eval", "--mode", "fixed", *common(toy_world, srv.base_url, task_id), "memory.pool=pool",
             "out_dir=fixed", check=True)
        reme("eval", *common(toy_world, srv.base_url, task_id), "benchmark.agent=compact", "out_dir=compact",
             check=True)
        plain, fixed, compact = first_requests(srv, task_id)
    assert plain == authors_messages(toy_world, task_id)
    assert compact[0] == {"role": "system", "content": appworld_agent.COMPACT_SYSTEM_PROMPT}
    assert compact[1]["content"].startswith("My name is: ") and compact[1]["content"].endswith(plain[1]["content"])
    (rec,) = map(json.loads, (reme.cwd / "fixed" / "trials.jsonl").read_text().splitlines())
    pool = {e["id"]: e for e in map(json.loads, (reme.cwd / "pool" / "experiences.jsonl").read_text().splitlines())}
    retrieved = [pool[i] for i in rec["retrieved_ids"]]
    assert len(retrieved) == 5 and rec["success"]
    assert fixed == authors_messages(toy_world, task_id, retrieved)
    assert "Experience 1:\n When to use:" in fixed[1]["content"] and "Experience 1 :" not in fixed[1]["content"]


@pytest.mark.slow
def test_a_later_trial_on_appworld_sees_the_earlier_trials_summary_as_experience_items(reme, toy_world):
    """Dynamic mode, a task that always fails (complete_task with a wrong answer): trials 2
    and 3 are guided by the previous trial's failure analysis, labelled as the authors'
    AppWorld agent labels it."""
    task_id = "toy0002_1"
    policy = make_policy("appworld-gold+summarizer", corrupt=[task_id], appworld_root=str(toy_world))
    reme("pool", "import", "official:appworld/qwen3-8b", "--out", "pool", check=True)
    with ScriptedServer(policy) as srv:
        # The scripted failure analysis names the task's own words (the authors' step text starts
        # with the instruction), which the released AppWorld pool's when_to_use also describe:
        # at 0.5 its lesson would be a duplicate of them and never reach the next trial.
        reme("eval", "--mode", "dynamic", *common(toy_world, srv.base_url, task_id), "memory.pool=pool",
             "memory.deletion.alpha=1", "memory.dedup_threshold=0.9", "out_dir=dyn", check=True)
        firsts = first_requests(srv, task_id)
    (rec,) = map(json.loads, (reme.cwd / "dyn" / "trials.jsonl").read_text().splitlines())
    trials = rec["method"]["trials"]
    assert not rec["method"]["added"]  # no trial scored 1: nothing enters the pool
    assert [t["success"] for t in trials] == [False, False, False]
    assert [t["guided_by"] for t in trials][1:] == ["previous_summary", "previous_summary"]
    # A deletion pass after every AppWorld trial (appworld_react_agent.py:234-236), 8 workers
    # per run: with alpha=1 the 5 experiences trial 1 retrieved (f=1, u=0) leave the pool.
    cfg = yaml.safe_load((reme.cwd / "dyn" / "config.yaml").read_text())
    assert (cfg["memory"]["deletion"]["every"], cfg["eval"]["dynamic_workers"]) == (1, 8)
    assert len(trials[0]["retrieved_ids"]) == 5
    assert sorted(rec["method"]["deleted"]) == sorted(trials[0]["retrieved_ids"])
    assert len(firsts) == 3
    assert "Scripted FAILED lesson" not in firsts[0][1]["content"]  # trial 1: retrieved from the pool
    for later in firsts[1:]:
        text = later[1]["content"]
        assert text.startswith("Task:\n") and f"\n\n{HEADER}:\nExperience 1:\n When to use: " in text
        assert "Scripted FAILED lesson" in text and "Experience 1 :" not in text


# ------------------------------------------------------------------ the loop, on a fake world


class FakeWorld:
    """Records the code it is given; the task completes when code calls complete_task."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def tools(self) -> list[dict[str, Any]]:
        return []

    async def execute(self, name: str, arguments: Any) -> ToolResult:
        code = arguments["code"]
        self.ran.append(code)
        return ToolResult(code, f"ran {len(self.ran)}\n", done="complete_task" in code)

    async def end_step(self) -> None:
        pass

    async def end_turn(self) -> None:
        pass

    async def evaluate(self) -> Outcome:
        return Outcome(False, 0.0)

    async def close(self) -> None:
        pass


TASK = Task(id="t1", turns=[[{"role": "user", "content": "Do it."}]], query="Do it.",
            meta={"system_prompt": "SYSTEM", "experience_label": appworld_agent.EXPERIENCE_LABEL})


def episode(steps: list[str], guidance: str | None = None, task: Task = TASK):
    world = FakeWorld()
    async def run(url: str):
        llm = ChatClient(base_url=url, model="steps")
        try:
            return await run_episode(llm, CodeProtocol(), world, task, Sampling(0.9, 1.0, 256, 0),
                                     guidance=guidance, max_interactions=30, max_steps_per_turn=None)
        finally:
            await llm.close()

    with ScriptedServer(StepsPolicy(steps)) as srv:
        traj = asyncio.run(run(srv.base_url))
        requests = [r["body"]["messages"] for r in srv.requests]
    return world, traj, requests


def test_the_first_block_runs_only_the_code_is_kept_and_the_output_is_wrapped():
    world, traj, requests = episode(["Plan.\n```python\nx = 1\n```\nThen:\n```python\nx = 2\n```\n",
                                     "```python\napis.supervisor.complete_task()\n```"])
    assert world.ran == ["x = 1", "apis.supervisor.complete_task()"]
    assert requests[0] == [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "Do it."}]
    assert requests[1][2:] == [{"role": "assistant", "content": "x = 1"},
                               {"role": "user", "content": "Output:\n```\nran 1\n```\n\n"}]
    assert len(requests) == 2 and traj.stop_reason == "answered"  # complete_task ends the episode
    step = traj.turns[0][0]
    assert step.code == "x = 1" and "Then:" in step.text and step.code_output == "ran 1\n"


def test_a_reply_without_a_block_runs_as_it_is_and_the_episode_goes_on():
    world, traj, requests = episode(["print('no fence')", "I am not sure what to do.",
                                     "```python\napis.supervisor.complete_task()\n```"])
    assert world.ran == ["print('no fence')", "I am not sure what to do.", "apis.supervisor.complete_task()"]
    assert requests[2][4] == {"role": "assistant", "content": "I am not sure what to do."}
    assert traj.interactions == 3


def test_an_unterminated_block_is_closed_and_its_code_runs():
    world, _, _ = episode(["Let me look.\n```python\nprint(apis.api_docs.show_app_descriptions())\n",
                           "Start:\n```python\n",
                           "```python\napis.supervisor.complete_task()"])
    assert world.ran == ["print(apis.api_docs.show_app_descriptions())", "Start:\n```python\n```",
                         "apis.supervisor.complete_task()"]


def test_thirty_interactions_at_most_when_the_task_never_completes():
    world, traj, requests = episode([f"```python\nstep = {i}\n```" for i in range(40)])
    assert len(requests) == 30 and len(world.ran) == 30 and world.ran[-1] == "step = 29"
    assert traj.stop_reason == "interaction_limit"


def test_guidance_is_labelled_as_the_authors_appworld_agent_labels_it_and_bfcl_keeps_its_own():
    guidance = f"{HEADER}:\nExperience 1 :\n When to use: a\n Content: b\n\nExperience 2 :\n When to use: c\n Content: d\n"
    _, _, requests = episode(["```python\napis.supervisor.complete_task()\n```"], guidance)
    assert requests[0][1]["content"] == (f"Task:\nDo it.\n\n{HEADER}:\nExperience 1:\n When to use: a\n Content: b\n"
                                         "\nExperience 2:\n When to use: c\n Content: d\n")
    bfcl_like = Task(id="t2", turns=TASK.turns, query="Do it.")
    _, _, requests = episode(["```python\napis.supervisor.complete_task()\n```"], guidance, bfcl_like)
    assert requests[0] == [{"role": "user", "content": f"Task:\nDo it.\n\n{guidance}"}]


def test_the_compact_agent_and_the_summarizer_words_are_switches(tmp_path):
    from reme_cli.bench.appworld.config import AppWorldConfig
    from reme_cli.core.errors import UserError

    assert AppWorldConfig().agent == "authors" and AppWorldConfig().prompt_family == "function_calls"
    with pytest.raises(UserError, match="benchmark.agent='react' is not allowed"):
        AppWorldConfig(agent="react").check()
    with pytest.raises(UserError, match="benchmark.prompt_family"):
        AppWorldConfig(prompt_family="bfcl").check()

"""memory=langmem: LangMem's episodic memory with storage, as the guide the ReMe authors
followed defines it (tests/fixtures/langmem_episodic_guide: the guide's own text), through
the real CLI on the scripted server (a test double; never a model result)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from reme_cli.methods.langmem import episodes
from reme_cli.methods.langmem.config import LangMemConfig
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy
from tests.conftest import REPO, reme_env, reme_popen, run_reme, scripted_popen
from tests.methods.reme.test_memory_flow import _kill_when

GUIDE = REPO / "tests" / "fixtures" / "langmem_episodic_guide"
FAILS = "multi_turn_base_2"  # an eval task the replayed agent gets wrong
FAILS_TRAINING = "multi_turn_base_5"  # ... and a training task
SCRIPTED = ["memory=langmem", "model=qwen3-8b", "embedding=minilm", "benchmark.release=current", "llm.model=replay",
            "eval.dynamic_workers=1"]


def _lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def _guide_episode() -> type[BaseModel]:
    """The guide's Episode class, built from its own text."""
    scope = {"BaseModel": BaseModel, "Field": Field}
    exec((GUIDE / "episode_schema.py.txt").read_text(), scope)  # noqa: S102 - shipped, hash-checked text
    return scope["Episode"]


def test_the_shipped_guide_excerpts_are_the_ones_the_notice_names():
    notice = (GUIDE / "NOTICE").read_text()
    recorded = dict(reversed(l.split()) for l in notice.splitlines() if re.fullmatch(r"[0-9a-f]{64}  \S+", l))
    assert set(recorded) == {"episode_schema.py.txt", "store_manager.py.txt", "episode_prompt.py.txt"}
    for name, digest in recorded.items():
        assert hashlib.sha256((GUIDE / name).read_bytes()).hexdigest() == digest, name
    assert "langchain-ai/langmem" in notice and "MIT License" in notice and "c4de781e" in notice


def test_schema_instructions_and_namespace_are_the_guides():
    guide = _guide_episode()
    assert episodes.Episode.model_json_schema() == guide.model_json_schema()
    assert episodes.Episode.__doc__ == guide.__doc__
    call = (GUIDE / "store_manager.py.txt").read_text()
    assert f'instructions="{episodes.INSTRUCTIONS}"' in call and LangMemConfig().instructions == episodes.INSTRUCTIONS
    assert f"namespace={episodes.NAMESPACE!r}".replace("'", '"') in call and "enable_inserts=True" in call
    prompt = (GUIDE / "episode_prompt.py.txt").read_text()
    assert episodes.HEADER in prompt
    text = episodes.render([{"observation": "O", "thoughts": "T", "action": "A", "result": "R"}])
    assert text == "### EPISODIC MEMORY:\n\nEpisode 1:\nWhen: O\nThought: T\nDid: A\nResult: R\n"
    for line in ("When: {episode['observation']}", "Thought: {episode['thoughts']}",
                 "Did: {episode['action']}", "Result: {episode['result']}"):
        assert line in prompt


# --------------------------------------------------------------------------- through the CLI


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("langmem_episodic")


@pytest.fixture(scope="module")
def server():
    policy = AgentAndSummarizerPolicy(BFCLReplayPolicy(corrupt={FAILS, FAILS_TRAINING}), ScriptedSummarizerPolicy())
    with ScriptedServer(policy) as srv:
        yield srv


def _reme(workdir: Path, server, *args: str, check: bool = True):
    return run_reme([*args, *SCRIPTED, f"llm.base_url={server.base_url}"], workdir, check=check)


def _manager_requests(server, since: int = 0) -> list[dict]:
    return [r["body"] for r in server.requests[since:] if not r["headers"].get("x-reme-task-id")
            and _session(r["body"]) is not None]


def _session(body: dict) -> str | None:
    """The manager's request message: the instructions, then the conversation as a session."""
    return next((m["content"] for m in body["messages"] if "<session_" in str(m.get("content"))), None)


@pytest.fixture(scope="module")
def built(workdir, server):
    since = len(server.requests)
    _reme(workdir, server, "build-pool", "benchmark.limit=4", "build.samples=1", "out_dir=built")
    return workdir / "built", _manager_requests(server, since)


@pytest.mark.slow
def test_build_pool_extracts_episodes_of_successful_trajectories_with_the_guides_schema(built):
    out, requests = built
    trials = _lines(out / "build" / "trials.jsonl")
    succeeded = {t["task_id"] for t in trials if t["success"]}
    assert len(trials) == 4 and FAILS_TRAINING not in succeeded and len(succeeded) == 3
    # One manager call per successful task; none for the failed one.
    assert len(requests) == 3
    guide = _guide_episode().model_json_schema()
    for body in requests:
        (tool,) = [t["function"] for t in body["tools"] if t["function"]["name"] == "Episode"]
        assert tool["description"] == guide["description"]
        assert {k: v["description"] for k, v in tool["parameters"]["properties"].items()} == \
            {k: v["description"] for k, v in guide["properties"].items()}
        assert _session(body).startswith(episodes.INSTRUCTIONS)
        assert re.search(r"<session_[0-9a-f]{32}>", _session(body))  # no uuid4: cache replays
    pool = _lines(out / "pool" / "episodes.jsonl")
    assert len(pool) == 3 and all(p["value"]["kind"] == "Episode" for p in pool)
    assert set(pool[0]["value"]["content"]) == {"observation", "thoughts", "action", "result"}
    report = json.loads((out / "build" / "report.json").read_text())
    assert report["pool_size"] == 3 and report["langmem"]["invalid_extractions"] == 0


def _rendered(pool: dict[str, dict], ids: list[str]) -> str:
    return episodes.render([pool[i]["content"] for i in ids])


@pytest.mark.slow
def test_fixed_mode_injects_exactly_the_episodes_found_by_the_task_query(workdir, server, built):
    out, _ = built
    before = (out / "pool" / "episodes.jsonl").read_text()
    _reme(workdir, server, "eval", "--mode", "fixed", "memory.pool=built", "memory.top_k=2", "benchmark.limit=3",
          "eval.runs=1", "eval.seeds=1", "out_dir=fixed")
    pool = {p["key"]: p["value"] for p in _lines(out / "pool" / "episodes.jsonl")}
    trials = _lines(workdir / "fixed" / "trials.jsonl")
    assert len(trials) == 3
    for t in trials:
        assert len(t["retrieved_ids"]) == 2 and t["guidance"] == _rendered(pool, t["retrieved_ids"])
        assert t["retrieval_scores"] == sorted(t["retrieval_scores"], reverse=True)
    # ... and the agent saw it in its first user message.
    first = next(r for r in server.requests if r["headers"].get("x-reme-task-id") == trials[0]["task_id"])
    assert trials[0]["guidance"].strip() in next(m for m in first["body"]["messages"] if m["role"] == "user")["content"]
    assert (out / "pool" / "episodes.jsonl").read_text() == before  # fixed mode never writes the pool


@pytest.mark.slow
def test_dynamic_mode_adds_after_a_success_and_not_after_a_failure(workdir, server, built):
    out, _ = built
    since = len(server.requests)
    _reme(workdir, server, "eval", "--mode", "dynamic", "memory.pool=built", "benchmark.limit=3", "eval.runs=1",
          "eval.seeds=1", "out_dir=dyn")
    trials = sorted(_lines(workdir / "dyn" / "trials.jsonl"), key=lambda t: t["position"])
    store = _lines(workdir / "dyn" / "streams" / "s0_r0" / "store" / "episodes.jsonl")
    pool = _lines(out / "pool" / "episodes.jsonl")
    assert store[:len(pool)] == pool
    added = [p["key"] for p in store[len(pool):]]
    for t in trials:
        if t["task_id"] == FAILS:
            assert not t["success"] and t["method"]["added"] == [] and t["method"]["llm_calls"] == 0
        else:
            assert t["success"] and len(t["method"]["added"]) == 1 and t["method"]["llm_calls"] == 1
    assert added == [k for t in trials for k in t["method"]["added"]] and len(added) == 2
    assert len(_manager_requests(server, since)) == 2
    # A later task can find an episode an earlier one added.
    assert any(k in t["retrieved_ids"] for i, t in enumerate(trials) for k in added
               if k in [a for p in trials[:i] for a in p["method"]["added"]])


@pytest.mark.slow
def test_dynamic_resume_after_kill_matches_an_uninterrupted_run(workdir, built):
    proc = scripted_popen(["--policy", "bfcl-replay+summarizer", "--corrupt", FAILS, FAILS_TRAINING, "--delay", "0.05"],
                          stdout=subprocess.PIPE, text=True, cwd=REPO)
    url = proc.stdout.readline().strip()
    try:
        common = ["eval", "--mode", "dynamic", "memory.pool=built", "benchmark.limit=3", "eval.runs=2",
                  "eval.seeds=1", "llm.cache=false", *SCRIPTED, f"llm.base_url={url}"]
        run_reme([*common, "out_dir=whole"], workdir, check=True)
        env = reme_env(workdir / ".reme_cache")
        killed = reme_popen([*common, "out_dir=killed"], cwd=workdir,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _kill_when(killed, workdir / "killed" / "trials.jsonl", 3)
        assert 3 <= len(_lines(workdir / "killed" / "trials.jsonl")) < 6
        run_reme([*common, "out_dir=killed"], workdir, check=True)
    finally:
        proc.terminate()
        proc.wait()
    def view(run: str) -> list:
        return sorted((t["unit"], t["success"], tuple(t["retrieved_ids"]), t["guidance"], tuple(t["method"]["added"]))
                      for t in _lines(workdir / run / "trials.jsonl"))
    assert view("killed") == view("whole") and len(view("whole")) == 6
    for stream in ("s0_r0", "s0_r1"):
        assert (workdir / "killed" / "streams" / stream / "store" / "episodes.jsonl").read_text() == \
            (workdir / "whole" / "streams" / stream / "store" / "episodes.jsonl").read_text()


@pytest.mark.slow
def test_a_pool_of_another_method_is_refused_in_one_line(workdir, server, built, tmp_path):
    proc = _reme(workdir, server, "eval", "--mode", "fixed", f"memory.pool={tmp_path}", "benchmark.limit=1",
                 "eval.runs=1", "eval.seeds=1", f"out_dir={tmp_path / 'x'}", check=False)
    assert proc.returncode == 2 and "is not a LangMem episodic pool" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_the_embedded_model_builds_a_langmem_pool_and_uses_it(tmp_path, embedded_server):
    small = ["benchmark.max_interactions=2", "llm.concurrency=1", f"llm.base_url={embedded_server.base_url}",
             "benchmark.task_ids=[multi_turn_base_1]", "benchmark.release=current"]  # in this process
    run_reme(["build-pool", "memory=langmem", "benchmark.split=test", "build.samples=1", *small, "out_dir=lm"],
             tmp_path, check=True, timeout=900)
    report = json.loads((tmp_path / "lm" / "build" / "report.json").read_text())
    trials = _lines(tmp_path / "lm" / "build" / "trials.jsonl")
    assert report["unit_errors"] == 0 and len(trials) == 1
    # The manager is called only for a successful trajectory; what the small model extracts
    # is its own business, but every episode stored is a whole Episode.
    assert report["langmem"]["tasks"] == sum(t["success"] for t in trials)
    pool = _lines(tmp_path / "lm" / "pool" / "episodes.jsonl")
    assert all(set(p["value"]["content"]) == set(episodes.Episode.model_fields) for p in pool)
    run_reme(["eval", "--mode", "fixed", "memory=langmem", "memory.pool=lm", "eval.runs=1", "eval.seeds=1", *small,
              "out_dir=ev"], tmp_path, check=True, timeout=900)
    (trial,) = _lines(tmp_path / "ev" / "trials.jsonl")
    assert trial["error"] is None and len(trial["retrieved_ids"]) == len(pool)
    assert trial["guidance"] == _rendered({p["key"]: p["value"] for p in pool}, trial["retrieved_ids"])


@pytest.mark.slow
def test_the_manager_runs_on_the_embedded_model(tmp_path, embedded_server):
    """The agent replays (so its trajectories succeed) and the manager's calls go to the
    embedded model: LangMem's extraction request, served by a real llama.cpp server."""
    with ScriptedServer(BFCLReplayPolicy()) as agent:
        run_reme(["build-pool", *SCRIPTED, f"llm.base_url={agent.base_url}", "benchmark.limit=2", "build.samples=1",
                  "summarizer.name=embedded", f"summarizer.base_url={embedded_server.base_url}",
                  # The Qwen3 config sends no cap (as the authors); the 135M model at its
                  # temperature may then write to the end of its context, minutes on 2 cores.
                  "summarizer.max_tokens=256",
                  f"summarizer.model={embedded_server.model_name}", "out_dir=lm"], tmp_path, check=True, timeout=900)
    report = json.loads((tmp_path / "lm" / "build" / "report.json").read_text())
    assert report["unit_errors"] == 0 and report["langmem"]["tasks"] == 2  # both successes reached the manager
    assert report["langmem"]["llm_calls"] >= 2
    assert report["summarizer_answers"]["langmem_episodes"]["calls"] == 2
    pool = _lines(tmp_path / "lm" / "pool" / "episodes.jsonl")
    assert all(set(p["value"]["content"]) == set(episodes.Episode.model_fields) for p in pool)

"""The LangMem baseline (memory=langmem_prompt) through the real CLI: build-pool -> fixed ->
dynamic, planted prompt, resume after kill, cached replay, the embedded model, and the
one-line message without the extra.

The LLM is a test double (scripted server): BFCL ground-truth replay for the agent; for
LangMem's optimizer it fills the requested JSON schema, its free-text fields made of words
from the trajectories the request quotes (``schema_fill``). So a prompt holding a training
task's words proves the trajectories reached the optimizer through reme's client.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_cli.agent.trajectory import GUIDANCE_HEADER
from reme_cli.core.errors import UserError
from reme_cli.llm.client import ChatResult, ContextOverflow
from reme_cli.methods.langmem.prompt.config import LangMemPromptConfig
from reme_cli.methods.langmem.prompt.method import format_guidance
from reme_cli.methods.langmem.prompt.optimizer import INSTALL_HINT, optimize, prompt_version
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy
from tests.conftest import REPO, reme_env, reme_popen, reme_process, run_reme, scripted_popen

INSTALL = "bash scripts/install.sh --baselines"


def _lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def _trials(run: Path) -> list[dict]:
    return _lines(run / "trials.jsonl")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("langmem")


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())) as srv:
        yield srv


def _args(url: str, *extra: str) -> list[str]:
    # One worker per stream: the tests follow a stream task by task (BFCL's default is 4).
    return ["memory=langmem_prompt", "model=qwen3-8b", "embedding=minilm", "benchmark.release=current", "llm.model=replay",
            "eval.dynamic_workers=1",
            f"llm.base_url={url}", *extra]


def reme(workdir, *args, **kw):
    return run_reme(list(args), workdir, check=True, **kw)


def _summarizer_requests(server, since: int = 0) -> list[dict]:
    return [r for r in server.requests[since:] if not r["headers"].get("x-reme-task-id")]


def _questions(server) -> dict[str, str]:
    """Each task's first user message as the agent saw it (before any guidance)."""
    out = {}
    for r in server.requests:
        task = r["headers"].get("x-reme-task-id")
        if task:
            first = next(m for m in r["body"]["messages"] if m["role"] == "user")["content"]
            out.setdefault(task, first.split("\n\n" + GUIDANCE_HEADER)[0])
    return out


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_build_pool_then_fixed_then_dynamic(workdir, server):
    before = len(server.requests)
    proc = reme(workdir, "build-pool", *_args(server.base_url, "benchmark.limit=3", "build.samples=2",
                                              "memory.batch_size=2", "out_dir=built"))
    assert proc.stdout.strip().splitlines()[-1] == "built"
    steps = _lines(workdir / "built" / "build" / "langmem_steps.jsonl")
    # 3 tasks x 2 samples in batches of 2: three sequential steps, one LLM call each.
    assert [s["step"] for s in steps] == [0, 1, 2] and all(s["llm_calls"] == 1 and not s["error"] for s in steps)
    assert all(a["after"] == b["before"] for a, b in zip(steps, steps[1:]))
    assert steps[0]["before"] == prompt_version(LangMemPromptConfig().initial_prompt)
    summ = _summarizer_requests(server, before)
    assert len(summ) == 3  # every optimizer call went through reme's client to the server
    assert all(r["body"]["response_format"]["type"] == "json_schema" for r in summ)
    assert all("<trajectory 0>" in r["body"]["messages"][-1]["content"] for r in summ)

    pool = json.loads((workdir / "built" / "pool" / "langmem_prompt.json").read_text())
    assert pool["method"] == "langmem_prompt" and pool["kind"] == "prompt_memory" and pool["steps"] == 3
    assert pool["prompt"] == steps[-1]["prompt"] and pool["version"] == prompt_version(pool["prompt"])
    assert json.loads((workdir / "built" / "pool" / "manifest.json").read_text())["method"] == "langmem_prompt"
    # The optimizer's prompt quotes the last batch's training task: its trajectories reached it.
    last_task = steps[-1]["items"][0].split("#")[0]
    question = _questions(server)[last_task]
    task_words = re.findall(r"[A-Za-z][A-Za-z_]{2,}", pool["prompt"].split("Human Message", 1)[1])
    assert len(task_words) >= 5 and " ".join(task_words) in " ".join(re.findall(r"[A-Za-z][A-Za-z_]{2,}", question))

    # fixed: memory.pool accepts the build-pool dir; every task gets the pool's prompt.
    before = len(server.requests)
    reme(workdir, "eval", "--mode", "fixed", *_args(server.base_url, "memory.pool=built", "benchmark.limit=2",
                                                    "eval.runs=1", "eval.seeds=1", "out_dir=fixed"))
    trials = _trials(workdir / "fixed")
    assert len(trials) == 2 and all(t["success"] for t in trials)  # the replay still scores 100%
    for t in trials:
        assert t["guidance"] == f"{GUIDANCE_HEADER}:\n{pool['prompt']}\n"
        assert t["retrieved_ids"] == [pool["version"]]
        assert t["method"] == {"kind": "prompt_memory", "prompt_version": pool["version"]}
    assert not _summarizer_requests(server, before)  # fixed mode learns nothing
    metrics = json.loads((workdir / "fixed" / "metrics.json").read_text())
    assert metrics["avg@1"]["mean"] == 1.0

    # dynamic: each stream refines its own copy, task by task.
    reme(workdir, "eval", "--mode", "dynamic", *_args(server.base_url, "memory.pool=built/pool", "benchmark.limit=3",
                                                      "eval.runs=2", "eval.seeds=1", "out_dir=dyn"))
    run = workdir / "dyn"
    trials = _trials(run)
    assert len(trials) == 6 and all(t["success"] for t in trials)
    for stream in ("s0_r0", "s0_r1"):
        r = int(stream[-1])
        mine = sorted((t for t in trials if t["run"] == r), key=lambda t: t["position"])
        versions = [mine[0]["method"]["prompt_before"]] + [t["method"]["prompt_after"] for t in mine]
        assert versions[0] == pool["version"] and len(set(versions)) == 4  # changed after every task
        for prev, t in zip(versions, mine):
            assert t["method"]["prompt_before"] == prev and t["retrieved_ids"] == [prev]
            assert t["method"]["changed"] and t["method"]["llm_calls"] == 1 and t["method"]["optimizer_error"] is None
        log = [{"unit": l["unit"], **l["events"][0]} for l in _lines(run / "streams" / stream / "commits.jsonl")]
        assert [l["unit"] for l in log] == [t["unit"] for t in mine]
        for line, t in zip(log, mine):
            assert prompt_version(line["prompt"]) == t["method"]["prompt_after"]
        for line, t in zip(log, mine[1:]):  # a unit is given the prompt the previous one left
            assert t["guidance"] == format_guidance(line["prompt"])
        assert (run / "streams" / stream / "prompt.txt").read_text() == log[-1]["prompt"] + "\n"


def test_pools_of_other_methods_are_refused_in_one_line(workdir, server):
    fake_reme = workdir / "reme_pool"
    fake_reme.mkdir()
    (fake_reme / "experiences.jsonl").write_text("")
    (fake_reme / "manifest.json").write_text(json.dumps({"format": "reme-pool"}))
    for pool, memory in ((str(fake_reme), "langmem"), ("built", "reme"), ("built/pool", "reme")):
        args = _args(server.base_url, f"memory.pool={pool}", "benchmark.limit=1", "eval.runs=1", "eval.seeds=1",
                     "out_dir=refused")
        args[0] = f"memory={memory}"
        proc = run_reme(["eval", "--mode", "fixed", *args], workdir)
        errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
        assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert ("not a LangMem pool" in errors[0]) if memory == "langmem_prompt" else ("pool" in errors[0])


@pytest.mark.slow
def test_a_planted_prompt_is_exactly_what_is_injected(workdir, server):
    planted = "PLANTED rule: cd into the folder first, then call mv {source, destination} — never guess names."
    pool = workdir / "planted" / "pool"
    pool.mkdir(parents=True)
    (pool / "langmem_prompt.json").write_text(json.dumps({"method": "langmem_prompt", "prompt": planted}))
    before = len(server.requests)
    reme(workdir, "eval", "--mode", "fixed", *_args(server.base_url, "memory.pool=planted", "benchmark.limit=1",
                                                    "eval.runs=1", "eval.seeds=1", "out_dir=planted_run"))
    (trial,) = _trials(workdir / "planted_run")
    assert trial["guidance"] == f"{GUIDANCE_HEADER}:\n{planted}\n"
    assert trial["retrieved_ids"] == [prompt_version(planted)]
    firsts = [next(m for m in r["body"]["messages"] if m["role"] == "user")["content"]
              for r in server.requests[before:] if r["headers"].get("x-reme-task-id")]
    assert firsts and all(f.startswith("Task:\n") and f.endswith("\n\n" + trial["guidance"]) for f in firsts)


@pytest.mark.slow
def test_cached_dynamic_run_replays_identically(workdir, server):
    common = ["eval", "--mode", "dynamic", *_args(server.base_url, "memory.pool=built", "benchmark.limit=2",
                                                  "eval.runs=2", "eval.seeds=1", "memory.batch_size=1")]
    reme(workdir, *common, "out_dir=cache_a")
    n = len(server.requests)
    reme(workdir, *common, "out_dir=cache_b")
    assert len(server.requests) == n  # nothing reached the server: every answer came from the cache
    a, b = workdir / "cache_a", workdir / "cache_b"
    mb = json.loads((b / "metrics.json").read_text())["llm_usage"]
    assert mb["cached_calls"] == mb["calls"] > 0

    def comparable(t: dict) -> tuple:
        return t["unit"], t["success"], t["guidance"], t["retrieved_ids"], json.dumps(t["method"], sort_keys=True)
    assert sorted(map(comparable, _trials(a))) == sorted(map(comparable, _trials(b)))
    for stream in ("s0_r0", "s0_r1"):
        assert (a / "streams" / stream / "commits.jsonl").read_text() == \
            (b / "streams" / stream / "commits.jsonl").read_text()


# --------------------------------------------------------------------------- resume after kill


@pytest.fixture(scope="module")
def slow_url():
    """A separate process with a delay, so a run can be killed mid-way."""
    proc = scripted_popen(["--policy", "bfcl-replay+summarizer", "--delay", "0.05"], stdout=subprocess.PIPE, text=True,
                          cwd=REPO)
    yield proc.stdout.readline().strip()
    proc.kill()
    proc.wait()


@pytest.mark.slow
def test_dynamic_resume_after_kill_matches_an_uninterrupted_run(workdir, server, slow_url):
    def args(out: str) -> list[str]:
        return ["eval", "--mode", "dynamic",
                *_args(slow_url, "memory.pool=built", "benchmark.limit=4", "eval.runs=2", "eval.seeds=1",
                       "llm.cache=false", f"out_dir={out}")]
    env = reme_env(workdir / ".reme_cache")
    whole = reme_process(args("resume_whole"), cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr[-2000:]

    proc = reme_popen(args("resume_killed"), cwd=workdir, env=env, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    trials_file = workdir / "resume_killed" / "trials.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        if trials_file.exists() and len(trials_file.read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 3 <= len(_trials(workdir / "resume_killed")) < 8

    done = reme_process(args("resume_killed"), cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    trials = _trials(workdir / "resume_killed")
    assert len(trials) == 8 and len({t["unit"] for t in trials}) == 8  # every unit exactly once
    by_unit = {t["unit"]: t for t in _trials(workdir / "resume_whole")}
    for t in trials:
        assert t["method"] == by_unit[t["unit"]]["method"] and t["guidance"] == by_unit[t["unit"]]["guidance"]
    for stream in ("s0_r0", "s0_r1"):
        killed = _lines(workdir / "resume_killed" / "streams" / stream / "commits.jsonl")
        assert len(killed) == 4 == len({l["unit"] for l in killed})
        assert killed == _lines(workdir / "resume_whole" / "streams" / stream / "commits.jsonl")
        assert (workdir / "resume_killed" / "streams" / stream / "prompt.txt").read_text() == \
            (workdir / "resume_whole" / "streams" / stream / "prompt.txt").read_text()


# --------------------------------------------------------------------------- failures


class _Summarizer:
    """SummarizerSettings' shape over a fake client."""

    def __init__(self, llm):
        self.llm, self.temperature, self.max_tokens = llm, 0.0, 256

    @staticmethod
    def schema_format(name, schema):
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


class _FakeLLM:
    def __init__(self, reply=None, error=None):
        self.reply, self.error, self.calls = reply, error, 0

    async def chat(self, messages, **kw):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return ChatResult(self.reply, [], None, 1, 1, 0.0, False, "stop")


def _batch():
    from reme_cli.agent.trajectory import Step, Trajectory
    from reme_cli.bench.base import Outcome, Task

    task = Task("t1", [[{"role": "user", "content": "Move report.txt into archive"}]], "Move report.txt into archive")
    step = Step("", [{"name": "mv", "arguments": '{"source": "report.txt"}', "output": "No such file",
                      "error": True}], 1, 1, 0.0, False)
    outcome = Outcome(False, 0.0, {"error_type": "multi_turn:state_mismatch", "error_message": "wrong state"})
    return [(task, Trajectory(turns=[[step]]), outcome)]


def test_an_unparsable_answer_keeps_the_prompt_and_is_recorded():
    import asyncio

    llm = _FakeLLM(reply="I think the prompt is fine.")
    step = asyncio.run(optimize("P0", _batch(), LangMemPromptConfig(), _Summarizer(llm)))
    assert step.prompt == "P0" and not step.changed and llm.calls == 1
    assert step.error.startswith("OutputParserException")


@pytest.mark.parametrize("kind", ["prompt_memory", "metaprompt", "gradient"])
def test_transport_errors_are_never_swallowed(kind):
    """trustcall turns any model exception into a repair turn: the error must still surface."""
    import asyncio

    cfg = LangMemPromptConfig(kind=kind)
    llm = _FakeLLM(error=ContextOverflow("maximum context length is 8192 tokens"))
    with pytest.raises(ContextOverflow):
        asyncio.run(optimize("P0", _batch(), cfg, _Summarizer(llm)))
    assert llm.calls == 1  # and nothing more was sent once it broke


@pytest.mark.slow
def test_without_the_extra_memory_langmem_says_how_to_install_in_one_line(tmp_path):
    code = ("import sys, runpy; sys.modules['langmem'] = None; "
            "import reme_cli.methods.langmem.prompt.method as m; "  # the module imports without LangMem
            "sys.argv = ['reme'] + sys.argv[1:]; runpy.run_module('reme_cli.cli', run_name='__main__')")
    for cmd in (["eval", "--mode", "fixed", "memory=langmem_prompt", "memory.pool=nowhere"],
                ["build-pool", "memory=langmem_prompt", "benchmark.limit=1"]):
        proc = subprocess.run([sys.executable, "-c", code, *cmd], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")})
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
        assert lines[0].startswith("error: ") and INSTALL in lines[0] and "baselines" in lines[0]
        assert not (tmp_path / "runs").exists()  # refused before anything was written
    probe = subprocess.run([sys.executable, "-c", "import sys; sys.modules['langmem'] = None\n"
                            "from reme_cli.methods.langmem.prompt.optimizer import require_langmem\n"
                            "require_langmem()"], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 1 and "UserError" in probe.stderr and INSTALL in probe.stderr
    assert INSTALL in INSTALL_HINT and issubclass(UserError, Exception)


# --------------------------------------------------------------------------- the embedded model


@pytest.mark.slow
def test_embedded_model_builds_a_langmem_pool_and_evaluates_with_it(tmp_path, embedded_server):
    small = ["benchmark.max_interactions=2", "llm.concurrency=1", f"llm.base_url={embedded_server.base_url}",
             "benchmark.release=current"]  # in this process
    run_reme(["build-pool", "memory=langmem_prompt", "benchmark.limit=1", "build.samples=1", *small, "out_dir=lm"],
             tmp_path, check=True, timeout=900)
    steps = _lines(tmp_path / "lm" / "build" / "langmem_steps.jsonl")
    assert len(steps) == 1 and steps[0]["llm_calls"] == 1  # prompt_memory: one grammar-constrained call
    pool = json.loads((tmp_path / "lm" / "pool" / "langmem_prompt.json").read_text())
    assert pool["method"] == "langmem_prompt" and pool["prompt"].strip()
    run_reme(["eval", "--mode", "fixed", "memory=langmem_prompt", "memory.pool=lm", "benchmark.task_ids=[multi_turn_base_1]",
              "eval.runs=1", "eval.seeds=1", *small, "out_dir=ev"], tmp_path, check=True, timeout=900)
    (trial,) = _trials(tmp_path / "ev")
    assert trial["error"] is None and trial["guidance"] == format_guidance(pool["prompt"])


def test_a_tool_choice_keeps_the_models_own_request_extras():
    """The summarizer adds the model's extras (Qwen3's thinking switch) under the caller's
    own, so LangMem's forced tool_choice does not switch thinking back on."""
    import asyncio

    from reme_cli.llm.endpoint import WithDefaults

    seen: list[dict] = []

    class _Capture:
        model, usage = "m", None

        async def chat(self, messages, **kwargs):
            seen.append(kwargs)

    llm = WithDefaults(_Capture(), {"chat_template_kwargs": {"enable_thinking": False}})
    asyncio.run(llm.chat([], extra_body={"tool_choice": "required"}))
    asyncio.run(llm.chat([]))
    assert seen[0]["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}, "tool_choice": "required"}
    assert seen[1]["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}}

"""ReMe memory through the real CLI: fixed and dynamic eval, build-pool, resume after kill.

The LLM is a test double (scripted server): BFCL ground-truth replay for the agent, canned
JSON for the summarizer/judge. Embeddings (all-MiniLM-L6-v2) and faiss are real.
"""

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from reme_cli.methods.reme.config import ReMeConfig
from reme_cli.llm.embed import make_embedder
from reme_cli.methods.reme.events import apply_events
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.pool import Pool
from reme_cli.methods.reme.method import deletable
from reme_cli.methods.reme import scripted as reme_script  # ReMe's scripted answers (TEST DOUBLE)
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy
from tests.conftest import REPO, reme_env, reme_popen, reme_process, run_reme, scripted_popen

CORRUPT = "multi_turn_base_2"  # fails until the retry is guided by what its failure taught
# The paper's text (reflection lessons, one task after another), with a de-duplication loose
# enough that the scripted lesson is not a duplicate of the scripted success experience.
PAPER_TEXT = ["experiment=paper_text", "memory.dedup_text=key_content", "memory.dedup_threshold=0.85"]


def _trials(run: Path) -> list[dict]:
    return [json.loads(l) for l in (run / "trials.jsonl").read_text().splitlines() if l.strip()]


def _events(stream: Path) -> list[dict]:
    """A stream's events in commit order, each with its unit (from the seam's commit log)."""
    lines = [json.loads(l) for l in (stream / "commits.jsonl").read_text().splitlines()]
    return [{"unit": line["unit"], **e} for line in lines for e in line["events"]]


def _pool_state(path: Path) -> list[tuple]:
    rows = [json.loads(l) for l in (path / "experiences.jsonl").read_text().splitlines()]
    return sorted((r["id"], r["source"], r["f"], r["u"], r["content"]) for r in rows)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("memflow")


@pytest.fixture(scope="module")
def embedder(workdir):
    return make_embedder({"kind": "sentence_transformers", "model": "all-MiniLM-L6-v2",
                          "cache_dir": str(workdir / ".reme_cache" / "embeddings")})


@pytest.fixture(scope="module")
def base_pool(workdir, embedder):
    pool = Pool.create(workdir / "base_pool", embedder)
    pool.add([
        Experience(when_to_use="When moving or copying files between directories", source="success",
                   content="cd into the folder first, then use mv or cp with names relative to it."),
        Experience(when_to_use="When sending a message to another user", source="failure",
                   content="Log in with message_login before send_message."),
        Experience(when_to_use="When buying or selling stocks", source="success",
                   content="Look up the symbol with get_symbol_by_name before place_order."),
        Experience(when_to_use="When creating a ticket for a support issue", source="comparative",
                   content="Authenticate with ticket_login, then create_ticket with all fields."),
    ])
    pool.save()
    return pool.path


@pytest.fixture(scope="module")
def server():
    policy = AgentAndSummarizerPolicy(BFCLReplayPolicy(corrupt={CORRUPT}, heal_on_retry=True),
                                      ScriptedSummarizerPolicy())
    with ScriptedServer(policy) as srv:
        yield srv


def _args(server, *extra):
    # benchmark.release=current: the replay server replays the pinned release's ground truth
    return ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", f"llm.base_url={server.base_url}",
            "benchmark.release=current", *extra]


def reme(workdir, *args, **kw):
    return run_reme(list(args), workdir, check=True, **kw)


def test_deletion_rule_at_its_boundaries():
    paper, code = ReMeConfig(), ReMeConfig()
    paper.deletion.rule = "le"

    def exp(f, u):
        return Experience(when_to_use="w", content="c", source="success", f=f, u=u)

    assert not deletable(exp(4, 0), paper)  # f < alpha: never
    assert deletable(exp(5, 0), paper)
    assert deletable(exp(6, 3), paper) and not deletable(exp(6, 3), code)  # u/f == beta: le vs lt
    assert not deletable(exp(6, 4), paper)
    off = ReMeConfig()
    off.deletion.enabled = False
    assert not deletable(exp(9, 0), off)


@pytest.mark.slow
def test_fixed_mode_records_retrieval_and_injects_guidance(workdir, base_pool, server):
    before = len(server.requests)
    reme(workdir, "eval", "--mode", "fixed", *_args(server, f"memory.pool={base_pool}", "memory.top_k=2",
         "benchmark.limit=2", "eval.runs=1", "eval.seeds=1", "out_dir=fixed"))
    trials = _trials(workdir / "fixed")
    assert len(trials) == 2
    for t in trials:
        assert len(t["retrieved_ids"]) == 2
        assert t["guidance"].startswith("Some Related Experience to help you to complete the task:")
    # The exact guidance reached the model, after the task text of the first user message.
    firsts = [next(m for m in r["body"]["messages"] if m["role"] == "user")["content"]
              for r in server.requests[before:] if r["headers"].get("x-reme-task-id")]
    assert any(t["guidance"] in text and not text.startswith(t["guidance"]) for t in trials for text in firsts)


@pytest.mark.slow
def test_dynamic_refines_deterministically_and_events_rebuild_the_pool(workdir, base_pool, server, embedder):
    """The paper's text (reflection lessons, one task after another): a cached rerun makes
    the same pool. (With several workers the commit order varies from run to run.)"""
    common = ["--mode", "dynamic", *_args(server, f"memory.pool={base_pool}", "benchmark.limit=4",
              "eval.runs=2", "eval.seeds=1", "memory.deletion.alpha=2", *PAPER_TEXT)]
    reme(workdir, "eval", *common, "out_dir=dyn_a")
    # Same command, other directory: every response now comes from the cache.
    reme(workdir, "eval", *common, "out_dir=dyn_b")
    a, b = workdir / "dyn_a", workdir / "dyn_b"
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (a, b))
    # (A's own streams share some temperature-0 summarizer prompts, hence some hits in A.)
    assert ma["llm_usage"]["cached_calls"] < ma["llm_usage"]["calls"]
    assert mb["llm_usage"]["cached_calls"] == mb["llm_usage"]["calls"]
    for key in ("avg@2", "pass@2", "first_attempt"):
        assert ma[key] == mb[key]
    assert ma["avg@2"]["mean"] == 1.0 and ma["first_attempt"]["avg@2"]["mean"] == 0.75

    trials = {t["unit"]: t for t in _trials(a)}
    retried = trials[f"s0/r0/{CORRUPT}"]
    assert retried["first_success"] is False and retried["success"] is True and retried["attempts"] == 2
    assert retried["method"]["lessons"] == [reme_script.LESSON]  # the method records its own fields

    for stream in ("s0_r0", "s0_r1"):
        final_a = _pool_state(a / "streams" / stream / "pool")
        assert final_a == _pool_state(b / "streams" / stream / "pool")
        events = _events(a / "streams" / stream)
        ops = {e["op"] for e in events}
        assert {"retrieve", "use", "add", "trials"} <= ops and ops <= {"retrieve", "use", "add", "delete", "trials"}
        assert any(e["op"] == "add" and e["source"] == "reflection" for e in events)
        for e in events:
            if e["op"] == "delete":
                assert e["f"] >= 2 and e["u"] / e["f"] <= 0.5
        # Starting pool + the event log = the stream's final pool.
        rebuilt = Pool.load(base_pool, embedder).copy_to(workdir / f"rebuilt_{stream}")
        apply_events(rebuilt, events)
        rebuilt.save()
        assert _pool_state(rebuilt.path) == final_a
        # Every unit of the stream is in the log, in the stream's order.
        units = [e["unit"] for e in events if e["op"] == "retrieve"]
        assert len(units) == 4 and len(set(units)) == 4


def _kill_when(proc, path: Path, lines: int, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _kill_then_resume(workdir: Path, args: list[str], out: str, at: int, total: int) -> None:
    """Run ``args``, SIGKILL it once ``at`` units are recorded in ``out``, then run it again."""
    env = reme_env(workdir / ".reme_cache")
    proc = reme_popen(args, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _kill_when(proc, workdir / out / "trials.jsonl", at)
    assert at <= len(_trials(workdir / out)) < total
    done = reme_process(args, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def slow_server():
    """A separate process with a delay, so a run can be killed mid-way."""
    proc = scripted_popen(
        ["--policy", "bfcl-replay+summarizer",
         "--corrupt", CORRUPT, "--heal-on-retry", "--delay", "0.1"], stdout=subprocess.PIPE, text=True, cwd=REPO)
    url = proc.stdout.readline().strip()

    class S:
        base_url = url
    yield S
    proc.kill()
    proc.wait()


@pytest.mark.slow
def test_dynamic_resume_after_kill_matches_an_uninterrupted_run(workdir, base_pool, slow_server):
    args = ["eval", "--mode", "dynamic",
            *_args(slow_server, f"memory.pool={base_pool}", "benchmark.limit=4", "eval.runs=2", "eval.seeds=1",
                   "memory.deletion.alpha=2", *PAPER_TEXT, "llm.cache=false", "out_dir=dyn_killed")]
    _kill_then_resume(workdir, args, "dyn_killed", at=3, total=8)
    trials = _trials(workdir / "dyn_killed")
    assert sorted(t["unit"] for t in trials) == sorted({t["unit"] for t in trials}) and len(trials) == 8
    for stream in ("s0_r0", "s0_r1"):
        # Same pool as the uninterrupted run of the previous test (stable ids, same script).
        assert _pool_state(workdir / "dyn_killed" / "streams" / stream / "pool") == \
            _pool_state(workdir / "dyn_a" / "streams" / stream / "pool")


def _credited_by_hand(trials: list[dict]) -> dict[str, tuple[int, int]]:
    """The f and u each experience should end with, from what every recorded trial
    retrieved and whether that trial succeeded (the authors' per-trial credit)."""
    fu: dict[str, tuple[int, int]] = {}
    for t in trials:
        for trial in t["method"]["trials"]:
            for i in trial["retrieved_ids"]:
                f, u = fu.get(i, (0, 0))
                fu[i] = (f + 1, u + int(trial["success"]))
    return fu


@pytest.mark.slow
def test_authors_protocol_with_four_workers_survives_kill_and_resume(workdir, base_pool, slow_server):
    """FAQ num_trials=3 and run_bfcl.py's 4 workers sharing one run's pool, killed with
    SIGKILL mid-run and resumed: the failing task's first trial fails and its failure
    analysis guides the second, which is scored; every other task needs one trial; f/u
    equal what the records say was retrieved; the pool is the start plus the commit log."""
    args = ["eval", "--mode", "dynamic",
            *_args(slow_server, f"memory.pool={base_pool}", "benchmark.limit=8", "eval.runs=1", "eval.seeds=1",
                   "memory.top_k=2", "llm.cache=false", "out_dir=authors_killed")]
    _kill_then_resume(workdir, args, "authors_killed", at=3, total=8)
    out = workdir / "authors_killed"
    assert yaml.safe_load((out / "config.yaml").read_text())["eval"]["dynamic_workers"] == 4  # BFCL's default
    trials = _trials(out)
    assert len(trials) == len({t["unit"] for t in trials}) == 8
    for t in trials:
        guided = [trial["guided_by"] for trial in t["method"]["trials"]]
        if t["task_id"] == CORRUPT:
            assert (t["first_success"], t["success"], t["attempts"]) == (False, True, 2)
            assert guided == ["retrieval", "previous_summary"]
            assert reme_script.FAILURE_LESSON in t["method"]["trials"][1]["guidance"]
        else:
            assert (t["success"], t["attempts"], guided) == (True, 1, ["retrieval"])

    lines = [json.loads(l) for l in (out / "streams" / "s0_r0" / "commits.jsonl").read_text().splitlines()]
    assert sorted(line["seq"] for line in lines) == list(range(8))
    assert {line["unit"] for line in lines} == {t["unit"] for t in trials}
    counted = [e for line in lines for e in line["events"] if e["op"] == "trials"]
    assert {e["worker"] for e in counted} == {0, 1, 2, 3} and sum(e["n"] for e in counted) == 9
    assert not [e for line in lines for e in line["events"] if e["op"] == "delete"]  # no f reaches 5 at u/f < 0.5

    final = [json.loads(l) for l in (out / "streams" / "s0_r0" / "pool" / "experiences.jsonl").read_text().splitlines()]
    start = [json.loads(l)["id"] for l in (base_pool / "experiences.jsonl").read_text().splitlines()]
    added = [e["experience"]["id"] for line in lines for e in line["events"] if e["op"] == "add"]
    assert [e["id"] for e in final] == start + added and added  # successes added what dedup kept
    by_hand = _credited_by_hand(trials)
    assert {e["id"]: (e["f"], e["u"]) for e in final if (e["f"], e["u"]) != (0, 0)} == by_hand

    # Killed after the last record but before the stream's final pool was written: the
    # pool left is the start's copy. Rerunning the finished run writes it again from the log.
    pool_dir = out / "streams" / "s0_r0" / "pool"
    (pool_dir / "experiences.jsonl").write_text((base_pool / "experiences.jsonl").read_text())
    again = reme_process(args, cwd=workdir, capture_output=True, text=True, timeout=300,
                         env=reme_env(workdir / ".reme_cache"))
    assert again.returncode == 0, again.stderr[-2000:]
    def untimed(rows):  # a replay stamps its own update times
        return [{k: v for k, v in r.items() if k not in ("created_at", "updated_at")} for r in rows]
    restored = [json.loads(l) for l in (pool_dir / "experiences.jsonl").read_text().splitlines()]
    assert untimed(restored) == untimed(final)


@pytest.mark.slow
def test_experiment_scope_shares_one_pool_across_runs_and_resumes(workdir, base_pool, slow_server):
    """eval.scope=experiment: run 1 starts from the pool run 0 left."""
    common = [*_args(slow_server, f"memory.pool={base_pool}", "benchmark.limit=3", "eval.runs=2", "eval.seeds=1",
                     "memory.deletion.alpha=2", "eval.scope=experiment", *PAPER_TEXT)]
    args = ["eval", "--mode", "dynamic", *common, "out_dir=exp_killed"]
    env = reme_env(workdir / ".reme_cache")
    reme(workdir, "eval", "--mode", "dynamic", *common, "out_dir=exp_whole")
    whole = workdir / "exp_whole"
    assert sorted(p.name for p in (whole / "streams").iterdir()) == ["s0_r0"]  # one pool for both runs
    events = _events(whole / "streams" / "s0_r0")
    assert {e["unit"].split("/")[1] for e in events} == {"r0", "r1"}
    by_pos = sorted(_trials(whole), key=lambda t: t["position"])
    assert [t["run"] for t in by_pos] == [0, 0, 0, 1, 1, 1]
    proc = reme_popen(args, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _kill_when(proc, workdir / "exp_killed" / "trials.jsonl", 2)
    done = reme_process(args, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(_trials(workdir / "exp_killed")) == 6
    assert _pool_state(workdir / "exp_killed" / "streams" / "s0_r0" / "pool") == \
        _pool_state(whole / "streams" / "s0_r0" / "pool")


@pytest.mark.slow
def test_build_pool_survives_junk_and_its_pool_serves_fixed_eval(workdir, server):
    with ScriptedServer(ScriptedSummarizerPolicy(junk_every=3)) as summarizer:
        proc = reme(workdir, "build-pool", *_args(server, "benchmark.limit=3", "build.samples=2",
                    "summarizer.name=scripted", f"summarizer.base_url={summarizer.base_url}",
                    # every 3rd answer junk is more than the answer-health gate lets pass
                    # (tests/methods/test_summarizer_answers.py tests the gate)
                    "summarizer.max_failed_share=0.5", "out_dir=built"))
    out = workdir / "built"
    assert proc.stdout.strip().splitlines()[-1] == "built"
    report = json.loads((out / "build" / "report.json").read_text())
    assert report["trajectories"] == 6 and report["tasks_distilled"] == 3
    assert report["invalid_llm_outputs"] > 0  # junk was skipped and counted
    assert report["pool_size"] == len((out / "pool" / "experiences.jsonl").read_text().splitlines()) > 0
    assert report["pool_size"] + report["removed_as_duplicates"] + report["rejected_by_judge"] \
        + report["invalid_llm_outputs"] >= sum(report["candidates_by_source"].values())
    # memory.pool accepts the build-pool output directory.
    reme(workdir, "eval", "--mode", "fixed", *_args(server, "memory.pool=built", "benchmark.limit=1",
         "eval.runs=1", "eval.seeds=1", "out_dir=fixed_built"))
    assert _trials(workdir / "fixed_built")[0]["retrieved_ids"]


@pytest.mark.slow
def test_build_pool_resume_after_kill(workdir, slow_server):
    args = ["build-pool",
            *_args(slow_server, "benchmark.limit=3", "build.samples=3", "llm.cache=false",
                   "out_dir=built_killed")]
    env = reme_env(workdir / ".reme_cache")
    proc = reme_popen(args, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _kill_when(proc, workdir / "built_killed" / "build" / "trials.jsonl", 3)
    assert not (workdir / "built_killed" / "pool").exists()
    done = reme_process(args, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    trials = _trials(workdir / "built_killed" / "build")
    assert len(trials) == len({t["unit"] for t in trials}) == 9
    report = json.loads((workdir / "built_killed" / "build" / "report.json").read_text())
    assert report["trajectories"] == 9 and report["pool_size"] > 0

"""BFCL-v3 benchmark: split, tasks, episodes and the official checker (no mocks)."""

from __future__ import annotations

import ast
import copy
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from bfcl_eval.constants.enums import ModelStyle
from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

from reme_cli.bench.bfcl import benchmark as bfcl
from reme_cli.bench.bfcl.benchmark import NOT_RUN, BFCLBenchmark, BFCLEnv
from reme_cli.core.errors import UserError

SPLIT_FILE = Path(bfcl.__file__).parent / "split.json"
ALL = BFCLBenchmark(split="all")


def replay(env: BFCLEnv, calls, as_json: bool = False) -> None:
    """Feed ground-truth calls through the env the way an agent would: one step per turn."""
    for turn in calls:
        for name, args in turn:
            result = env.execute(name, json.dumps(args) if as_json else args)
            assert not result.call.endswith("(...)"), result
        env.end_step()
        env.end_turn()


def checker_keys() -> set[str]:
    return set(vars(multi_turn_utils))


# ------------------------------------------------------------------- split/tasks


def test_split_counts_order_and_source():
    split = json.loads(SPLIT_FILE.read_text())
    train = BFCLBenchmark(split="train").task_ids()
    test = BFCLBenchmark(split="test").task_ids()
    assert (len(train), len(test)) == (50, 150)
    assert train == split["train"] and test == split["test"]
    assert not set(train) & set(test)
    assert set(train) | set(test) == set(ALL.task_ids())
    assert len(ALL.task_ids()) == 200


def test_limit_and_explicit_ids():
    test = BFCLBenchmark(split="test").task_ids()
    assert BFCLBenchmark(split="test", limit=7).task_ids() == test[:7]
    assert BFCLBenchmark(split="test", limit=0).task_ids() == []
    ids = ["multi_turn_base_43", "multi_turn_base_40"]
    assert BFCLBenchmark(split="test", task_ids=ids).task_ids() == ids
    assert BFCLBenchmark(task_ids=ids, limit=1).task_ids() == ids[:1]


def test_bad_inputs_are_user_errors():
    with pytest.raises(UserError, match="multi_turn_base_999"):
        BFCLBenchmark(task_ids=["multi_turn_base_1", "multi_turn_base_999"])
    with pytest.raises(UserError, match="split"):
        BFCLBenchmark(split="dev")
    with pytest.raises(UserError, match="category"):
        BFCLBenchmark(category="multi_turn_miss_func")
    with pytest.raises(UserError, match="limit"):
        BFCLBenchmark(limit=-1)
    with pytest.raises(UserError, match="nope"):
        ALL.load("nope")


def test_load_task_shape():
    task = ALL.load("multi_turn_base_0")
    assert task.id == "multi_turn_base_0"
    assert len(task.turns) == 4 and task.turns[0][0]["role"] == "user"
    assert task.query == task.turns[0][0]["content"]
    assert sorted(task.meta["involved_classes"]) == ["GorillaFileSystem", "TwitterAPI"]
    assert "GorillaFileSystem" in task.meta["initial_config"]
    assert task.meta["ground_truth"] == ALL.ground_truth("multi_turn_base_0")
    assert all(isinstance(c, str) for turn in task.meta["ground_truth"] for c in turn)
    # every load is a fresh copy
    task.turns[0][0]["content"] = "changed"
    assert ALL.load("multi_turn_base_0").query != "changed"


def test_tasks_40_and_43_are_distinct():
    a, b = ALL.load("multi_turn_base_40"), ALL.load("multi_turn_base_43")
    assert a.query == b.query  # same first question...
    assert a.id != b.id and a != b  # ...different tasks
    assert a.meta["ground_truth"] != b.meta["ground_truth"] or a.turns != b.turns


def test_ground_truth_calls_name_positional_arguments():
    # ground truth has positional calls such as cd('temp'); they must be named by signature
    for task_id in ALL.task_ids():
        for turn, raw_turn in zip(
            ALL.ground_truth_calls(task_id), ALL.ground_truth(task_id), strict=True
        ):
            for (name, args), raw in zip(turn, raw_turn, strict=True):
                assert raw.startswith(name + "(")
                assert all(re.fullmatch(r"[a-z_A-Z]\w*", k) for k in args)


# ------------------------------------------------------------------------ tools


def _bfcl_convert_to_tool():
    """bfcl's own convert_to_tool, compiled from the installed source (its module
    imports parsers and SDKs that are not installed)."""
    path = Path(multi_turn_utils.__file__).parents[2] / "model_handler" / "utils.py"
    tree = ast.parse(path.read_text())
    wanted = [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name in ("_cast_to_openai_type", "convert_to_tool")
    ]
    assert len(wanted) == 2
    namespace = {
        "copy": copy,
        "re": re,
        "json": json,
        "ModelStyle": ModelStyle,
        "GORILLA_TO_OPENAPI": GORILLA_TO_OPENAPI,
    }
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(path), "exec"), namespace)
    return namespace["convert_to_tool"]


def test_tools_match_bfcl_openai_handler_and_are_stable():
    convert = _bfcl_convert_to_tool()
    for task_id in [
        "multi_turn_base_0",
        "multi_turn_base_60",
        "multi_turn_base_120",
        "multi_turn_base_199",
    ]:
        task = ALL.load(task_id)
        docs = [d for cls in task.meta["involved_classes"] for d in bfcl._func_docs(cls)]
        expected = convert(docs, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
        env1, env2 = ALL.episode(task, "tools-1"), ALL.episode(task, "tools-2")
        t1, t2 = env1.tools(), env2.tools()
        assert t1 == expected
        assert json.dumps(t1) == json.dumps(t2)  # byte-identical prefix across episodes
        t1[0]["function"]["name"] = "mutated"
        assert env2.tools()[0]["function"]["name"] != "mutated"
        assert env1.tools() == expected


# --------------------------------------------------------------------- episodes


def test_replaying_ground_truth_succeeds_for_all_200_tasks():
    start = time.perf_counter()
    failures = []
    for i, task_id in enumerate(ALL.task_ids()):
        env = ALL.episode(ALL.load(task_id), f"replay-{task_id}")
        replay(env, ALL.ground_truth_calls(task_id), as_json=bool(i % 2))
        outcome = env.evaluate()
        env.close()
        if not (outcome.success and outcome.reward == 1.0):
            failures.append((task_id, outcome.details["error_type"]))
        json.dumps(outcome.details)  # always JSON-safe
    elapsed = time.perf_counter() - start
    print(f"\nreplayed 200 tasks in {elapsed:.2f}s")
    assert failures == []


def test_altering_one_argument_fails_only_that_episode():
    task_id = "multi_turn_base_0"
    calls = ALL.ground_truth_calls(task_id)
    name, args = calls[0][0]
    key = next(iter(args))
    bad = copy.deepcopy(calls)
    bad[0][0][1][key] = args[key] + "_x"
    env_bad = ALL.episode(ALL.load(task_id), "bad")
    replay(env_bad, bad)
    outcome = env_bad.evaluate()
    assert not outcome.success and outcome.reward == 0.0
    assert outcome.details["error_type"].startswith("multi_turn:")
    assert outcome.details["error_message"]
    assert outcome.details["decoded_calls"][0][0][0].startswith(f"{name}(")
    json.dumps(outcome.details)
    env_ok = ALL.episode(ALL.load(task_id), "ok")
    replay(env_ok, calls)
    assert env_ok.evaluate().success


def test_interleaved_episodes_of_one_task_do_not_leak():
    task_id = "multi_turn_base_0"
    task = ALL.load(task_id)
    a, b = ALL.episode(task, "same-key"), ALL.episode(task, "same-key")  # even with equal keys
    for t, turn in enumerate(ALL.ground_truth_calls(task_id)):
        for name, args in turn:
            a.execute(name, args)
            # b wanders off: directories a never sees, a cwd a never has
            b.execute("mkdir", {"dir_name": f"b_only_{t}"})
            b.execute("cd", {"folder": f"b_only_{t}"})
            assert "b_only" not in a.execute("pwd", {}).output
            assert "b_only" in b.execute("pwd", {}).output
        a.end_turn()
        b.end_turn()
    a_outcome, b_outcome = a.evaluate(), b.evaluate()
    assert a_outcome.success and not b_outcome.success
    assert not any(
        "b_only" in c for turn in a_outcome.details["decoded_calls"] for s in turn for c in s
    )


def test_concurrent_threads_each_get_their_own_verdict():
    task_id = "multi_turn_base_5"
    calls = ALL.ground_truth_calls(task_id)
    bad = copy.deepcopy(calls)
    t, i = next((t, i) for t, turn in enumerate(bad) for i, (_, a) in enumerate(turn) if a)
    k = next(iter(bad[t][i][1]))
    bad[t][i][1][k] = "zz_wrong"
    barrier = threading.Barrier(8)

    def run(n: int) -> bool:
        env = ALL.episode(ALL.load(task_id), f"thread-{n}")
        barrier.wait()
        replay(env, calls if n % 2 == 0 else bad)
        return env.evaluate().success

    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(run, range(8)))
    assert verdicts == [n % 2 == 0 for n in range(8)]


def test_checker_globals_are_removed_after_evaluate():
    before = checker_keys()
    task_id = "multi_turn_base_10"
    env = ALL.episode(ALL.load(task_id), "cleanup/ep:1")
    replay(env, ALL.ground_truth_calls(task_id))
    assert env.evaluate().success
    env2 = ALL.episode(ALL.load(task_id), "cleanup/ep:2")
    assert not env2.evaluate().success  # failing path
    assert checker_keys() == before


def test_checker_exception_is_a_failed_outcome_and_still_cleans_up():
    before = checker_keys()
    task = ALL.load("multi_turn_base_0")
    meta = dict(task.meta, ground_truth=[[123]] + task.meta["ground_truth"][1:])
    broken = type(task)(id=task.id, turns=task.turns, query=task.query, meta=meta)
    env = ALL.episode(broken, "broken")
    env.execute("pwd", {})
    env.end_turn()
    outcome = env.evaluate()
    assert not outcome.success
    assert outcome.details["error_type"] == "reme:checker_exception"
    assert "Traceback" in outcome.details["error_message"]
    assert checker_keys() == before


def test_steps_turns_and_padding():
    task_id = "multi_turn_base_0"
    env = ALL.episode(ALL.load(task_id), "steps")
    env.end_step()  # a step without calls is not recorded
    env.execute("pwd", {})
    env.execute("no_such_tool", {})  # unknown: recorded as the authors' agent did, fails in the checker
    env.end_step()
    env.execute("ls", '{"a": true}')
    env.end_step()
    env.end_turn()
    env.end_turn()  # a turn with no steps
    assert env.decoded_calls() == [[["pwd()", "no_such_tool()"], ["ls(a=True)"]], []]
    outcome = env.evaluate()
    assert not outcome.success
    assert outcome.details["turns_recorded"] == 2
    assert outcome.details["turns_expected"] == 4
    assert outcome.details["decoded_calls"] == [[["pwd()", "no_such_tool()"], ["ls(a=True)"]], []]
    assert outcome.details["irrelevance"]["valid"] is True
    # calls of a turn that was never ended still count
    env2 = ALL.episode(ALL.load(task_id), "pending")
    env2.execute("pwd", {})
    assert env2.decoded_calls() == [[["pwd()"]]]


def test_too_many_turns_fails_like_force_termination():
    env = ALL.episode(ALL.load("multi_turn_base_0"), "extra")
    for _ in range(5):
        env.end_turn()
    outcome = env.evaluate()
    assert not outcome.success and outcome.details["error_type"] == "multi_turn:force_terminated"


def test_execute_results_are_formatted_like_bfcl():
    env = ALL.episode(ALL.load("multi_turn_base_0"), "fmt")
    pwd = env.execute("pwd", {})
    assert not pwd.error and json.loads(pwd.output) == {"current_working_directory": "/workspace"}
    assert pwd.call == "pwd()"
    bad = env.execute("cd", {"folder": "nowhere"})
    assert "nowhere" in bad.output  # the backend's own error dict, not an exception
    typo = env.execute("cd", {"fodler": "document"})
    assert typo.error and typo.output.startswith("Error during execution:")
    assert typo.call == "cd(fodler='document')"  # a valid-looking call: recorded, as bfcl would


def test_irrelevance_is_reported_and_optionally_gated():
    # find a task with an empty ground-truth turn
    task_id = next(t for t in ALL.task_ids() if any(not turn for turn in ALL.ground_truth(t)))
    calls = ALL.ground_truth_calls(task_id)
    empty = next(i for i, turn in enumerate(calls) if not turn)
    noisy = copy.deepcopy(calls)
    noisy[empty] = (
        [("pwd", {})] if "GorillaFileSystem" in ALL.load(task_id).meta["involved_classes"] else []
    )
    env = ALL.episode(ALL.load(task_id), "irr")
    replay(env, calls)
    outcome = env.evaluate()
    assert outcome.success and outcome.details["irrelevance"]["valid"]
    if noisy[empty]:
        gated = BFCLBenchmark(split="all", irrelevance_gate=True)
        env2 = gated.episode(gated.load(task_id), "irr-gated")
        replay(env2, noisy)
        out2 = env2.evaluate()
        assert not out2.details["irrelevance"]["valid"]
        assert not out2.success and out2.details["error_type"].startswith("multi_turn:irrelevance")


def test_close_is_idempotent_and_blocks_execution():
    env = ALL.episode(ALL.load("multi_turn_base_0"), "close")
    env.execute("pwd", {})
    env.close()
    env.close()
    result = env.execute("pwd", {})
    assert result.error and "closed" in result.output
    assert env.decoded_calls() == [[["pwd()"]]]


def test_runaway_math_is_refused_and_recorded_as_a_call_that_fails():
    task_id = next(t for t in ALL.task_ids() if "MathAPI" in ALL.load(t).meta["involved_classes"])
    env = ALL.episode(ALL.load(task_id), "math")
    start = time.perf_counter()
    r1 = env.execute("power", {"base": 99999, "exponent": 10**9})
    r2 = env.execute("logarithm", {"value": 10, "base": 2, "precision": 10**9})
    r3 = env.execute("power", {"base": 2, "exponent": 10})
    assert time.perf_counter() - start < 1
    assert r1.error and r2.error and not r3.error
    [[[c1, c2, c3]]] = env.decoded_calls()  # the refused ones as stand-ins the checker cannot run
    assert c1.startswith(NOT_RUN + "(") and c2.startswith(NOT_RUN + "(") and c3 == "power(base=2,exponent=10)"


# ------------------------------------------------- calls the authors' agent recorded as they came


def bfcl_answer(task_id: str, call_text: str) -> str:
    """What bfcl's own multi-turn executor answers ``call_text`` (the string the authors' agent
    builds, bfcl_utils.py:303-327) in a fresh episode of ``task_id``: only texts it fails on
    without side effects go here."""
    meta = ALL.load(task_id).meta
    name = f"reme_texts_{abs(hash(call_text)) % 10**8}"
    try:
        [out], _ = multi_turn_utils.execute_multi_turn_func_call(
            [call_text], meta["initial_config"], meta["involved_classes"], name, task_id)
    finally:
        for key in [k for k in checker_keys() if name in k]:
            vars(multi_turn_utils).pop(key)
    return out


@pytest.mark.parametrize("name, raw, authors_text", [
    ("no_such_tool", '{"city": "Paris"}', "no_such_tool(city='Paris')"),  # a function the task lacks
    ("cd", "{not json", "cd()"),  # arguments that do not decode: the authors' agent sends name()
    ("cd", '["document"]', "cd()"),  # not an object of names: the same
    ("exit", "{}", "exit()"),  # bfcl refuses a few names before its eval
    ("cd", '{"a b": 1}', "cd(a b=1)"),  # a parameter name that is no identifier: bfcl's SyntaxError
])
def test_calls_reme_would_not_run_get_bfcls_own_answer_and_reach_the_checker(name, raw, authors_text):
    task_id = "multi_turn_base_0"
    env = ALL.episode(ALL.load(task_id), f"texts-{name}")
    result = env.execute(name, raw)
    assert result.error and result.output == bfcl_answer(task_id, authors_text)
    env.end_turn()
    [[[recorded]]] = env.decoded_calls()
    assert recorded == authors_text or recorded.startswith(NOT_RUN + "(")


def test_a_turn_of_unknown_calls_is_a_turn_with_calls_for_the_checker():
    """empty_turns=drop (the authors' extract_multi_turn_responses) leaves out a turn without
    calls; a turn whose only call was to a function the task lacks had one, as the authors'
    agent recorded it, so the checker scores it in its place."""
    task = ALL.load("multi_turn_base_0")
    env = BFCLEnv(task, "unknown-turn", empty_turns="drop")
    env.execute("no_such_tool", {})
    env.end_turn()
    for _ in task.meta["ground_truth"][1:]:
        env.end_turn()
    outcome = env.evaluate()
    assert outcome.details["turns_scored"] == 1 and outcome.details["decoded_calls"][0] == [["no_such_tool()"]]

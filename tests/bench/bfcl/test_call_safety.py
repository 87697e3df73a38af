"""Model output must never become code: not in our env, not in the official checker."""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path

import pytest
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

from reme_cli.bench.bfcl.benchmark import NOT_RUN, BFCLBenchmark, authors_arguments, checker_safe
from reme_cli.bench.bfcl.calls import (
    MAX_ARGUMENT_CHARS,
    canonical_call,
    decode_arguments,
    parse_call_string,
)

BENCH = BFCLBenchmark(split="all")
TASK = "multi_turn_base_0"  # GorillaFileSystem + TwitterAPI


def payloads(sentinel: Path) -> list[str]:
    cmd = f"touch {sentinel}"
    return [
        # expression-form injections: these DO run under eval if quoted naively
        # (see test_positive_control_naive_formatting_would_execute)
        f"' + str(__import__('os').system('{cmd}')) + '",
        f'" + str(__import__("os").system("{cmd}")) + "',
        f"'+__import__('os').system('{cmd}').__str__()+'",
        f"'); __import__('os').system('{cmd}'); ('",
        f'"); __import__("os").system("{cmd}"); ("',
        f"''' + __import__('os').system('{cmd}') + '''",
        f'""" + __import__("os").system("{cmd}") + """',
        f"\\'); __import__('os').system('{cmd}'); ('",
        f"x\\\\'); __import__('os').system('{cmd}'); #",
        f"{{__import__('os').system('{cmd}')}}",
        f"\n__import__('os').system('{cmd}')\n",
        # method names followed by "(" inside a string: the checker's regex rewrites
        # these even inside literals; \t + "ouch(" puts the rewrite right after a backslash
        f"\touch(__import__('os').system('{cmd}'))",
        f"cd(__import__('os').system('{cmd}'))",
        f"\\x'); exec('import os; os.system(\"{cmd}\")'); ('",
    ]


HOSTILE_NAMES = [
    "__import__",
    "__class__",
    "__init__",
    "_load_scenario",
    "eval",
    "exec",
    "open",
    "os.system",
    "os",
    "system",
    "cd.__globals__",
    "cd()",
    "cd(folder='x')",
    "cd; rm",
    "",
    " cd",
    "cd ",
    "ls\n",
    "lambda",
    "getattr",
    "globals",
    "breakpoint",
    None,
    42,
    ["cd"],
    {"name": "cd"},
]


@pytest.fixture()
def sentinel(tmp_path: Path):
    path = tmp_path / "pwned"
    pwned_tmp = Path("/tmp/pwned")
    existed = pwned_tmp.exists()
    yield path
    assert not path.exists(), "model output was executed as code"
    assert existed or not pwned_tmp.exists()


def open_env(key: str):
    return BENCH.episode(BENCH.load(TASK), key)


def fails_in_the_checker(call: str) -> bool:
    """A recorded call the checker's eval cannot run: a plain call of literals of a name that
    neither bfcl's module nor Python defines (reme's stand-in, or the model's unknown name)."""
    tree = ast.parse(call, mode="eval").body
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and not tree.args):
        return False
    for keyword in tree.keywords:
        ast.literal_eval(keyword.value)  # raises on anything but a literal
    return tree.func.id == NOT_RUN or checker_safe(tree.func.id)


def test_hostile_names_are_never_run_and_the_checker_sees_calls_that_fail(sentinel):
    env = open_env("names")
    for name in HOSTILE_NAMES:
        for args in ({}, {"command": f"touch {sentinel}"}, '{"folder": "x"}'):
            result = env.execute(name, args)
            assert result.error, (name, result)
            assert result.output.startswith("Error during execution:")
        env.end_step()
    env.end_turn()
    # Every call is recorded, as the authors' agent recorded it, but none the checker could run.
    recorded = [c for step in env.decoded_calls()[0] for c in step]
    assert len(recorded) == 3 * len(HOSTILE_NAMES)
    assert all(fails_in_the_checker(c) for c in recorded), recorded
    assert not env.evaluate().success


def test_hostile_argument_strings_stay_data_in_env_and_checker(sentinel):
    env = open_env("strings")
    for text in payloads(sentinel):
        for name, args in [
            ("cd", {"folder": text}),
            ("mkdir", {"dir_name": text}),
            ("touch", {"file_name": text}),
            ("echo", {"content": text, "file_name": "notes.txt"}),
            ("grep", {"file_name": text, "pattern": text}),
            ("post_tweet", {"content": text, "tags": [text], "mentions": [text]}),
        ]:
            for raw in (args, json.dumps(args)):
                result = env.execute(name, raw)
                # the canonical call is a plain call of literals
                tree = ast.parse(result.call, mode="eval").body
                assert isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name)
                assert tree.func.id == name and not tree.args
                assert {k.arg: ast.literal_eval(k.value) for k in tree.keywords} == args
        env.end_step()
    env.end_turn()
    outcome = env.evaluate()  # the official checker evals every recorded string
    assert not outcome.success
    json.dumps(outcome.details)


def test_canonical_strings_through_the_official_checker_directly(sentinel):
    task = BENCH.load(TASK)
    entry = {
        "id": TASK,
        "initial_config": task.meta["initial_config"],
        "involved_classes": task.meta["involved_classes"],
    }
    decoded = [
        [
            [
                canonical_call(n, a)
                for n, a in [
                    ("echo", {"content": p, "file_name": "a.txt"}),
                    ("mkdir", {"dir_name": p}),
                    ("post_tweet", {"content": p}),
                ]
            ]
            for p in payloads(sentinel)
        ]
    ]
    decoded += [[] for _ in task.meta["ground_truth"][1:]]
    name = "reme_safety_probe"
    try:
        result = multi_turn_checker(
            decoded, task.meta["ground_truth"], entry, "multi_turn_base", name
        )
    finally:
        for key in [k for k in list(vars(multi_turn_utils)) if name in k]:
            vars(multi_turn_utils).pop(key)
    assert result["valid"] is False


def test_positive_control_naive_formatting_would_execute(tmp_path):
    """Proves the sentinel checks above can fail: a naively quoted call string does run
    code inside the official checker."""
    control = tmp_path / "control"
    task = BENCH.load(TASK)
    entry = {
        "id": TASK,
        "initial_config": task.meta["initial_config"],
        "involved_classes": task.meta["involved_classes"],
    }
    naive = "cd(folder='" + payloads(control)[0] + "')"
    decoded = [[[naive]]] + [[] for _ in task.meta["ground_truth"][1:]]
    name = "reme_safety_control"
    try:
        multi_turn_checker(decoded, task.meta["ground_truth"], entry, "multi_turn_base", name)
    finally:
        for key in [k for k in list(vars(multi_turn_utils)) if name in k]:
            vars(multi_turn_utils).pop(key)
    assert control.exists()
    safe = canonical_call("cd", {"folder": payloads(control)[0]})
    control.unlink()
    name = "reme_safety_control2"
    try:
        multi_turn_checker(
            [[[safe]]] + decoded[1:], task.meta["ground_truth"], entry, "multi_turn_base", name
        )
    finally:
        for key in [k for k in list(vars(multi_turn_utils)) if name in k]:
            vars(multi_turn_utils).pop(key)
    assert not control.exists()


@pytest.mark.parametrize(
    "raw",
    [
        {"a b": 1},
        {"1x": 1},
        {"": 1},
        {"class": 1},
        {"x=1)\nimport os\n(": 1},
        {"folder=__import__('os')": 1},
        {"földer": 1},
        {"ｆolder": 1},
        {1: "x"},
        '{"a b": 1}',
        '{"lambda": 1}',
        "[1, 2]",
        '"folder"',
        "null",
        "42",
        "not json",
        "{'folder': 'x'}",
        "{",
        '{"folder": NaN}',
        '{"folder": Infinity}',
        '{"folder": 1e400}',
        '{"folder": -Infinity}',
        '{"n": ' + "9" * 5000 + "}",
        "[" * 100_000 + "]" * 100_000,
        '{"folder": "' + "x" * (MAX_ARGUMENT_CHARS + 1) + '"}',
        {"folder": "x" * (MAX_ARGUMENT_CHARS + 1)},
        {"folder": 10**400},
        {"folder": float("nan")},
        {"folder": (1, 2)},
        {"folder": {1, 2}},
        {"folder": b"bytes"},
        {"folder": object()},
        {"folder": {1: "non-str key"}},
        42,
        4.2,
        ["folder", "x"],
        object(),
        b"\xff\xfe",
    ],
)
def test_bad_arguments_are_refused_with_a_readable_message(raw, sentinel):
    with pytest.raises(ValueError) as info:
        decode_arguments(raw)
    assert str(info.value)
    env = open_env("bad-args")
    result = env.execute("cd", raw)
    assert result.error and result.output.startswith("Error during execution:")
    env.end_step()
    if authors_arguments(raw) == {}:  # not an object of names: the authors' agent ran cd()
        assert env.decoded_calls() == [[["cd()"]]]
        assert "missing 1 required positional argument" in result.output
    else:  # past reme's bounds: not run, and the checker sees a call that fails as bfcl's eval did
        [[[recorded]]] = env.decoded_calls()
        assert recorded.startswith(NOT_RUN + "(") and fails_in_the_checker(recorded)


def test_nested_deep_and_huge_values(sentinel):
    nested = {"folder": {"a": [{"b": payloads(sentinel)[0]}, [1, 2.5, None, True]]}}
    env = open_env("nested")
    result = env.execute("cd", nested)
    assert result.error  # the backend raises on a dict folder; harmless
    assert result.call == canonical_call("cd", nested)
    too_deep = {"folder": json.loads("[" * 40 + "]" * 40)}
    assert env.execute("cd", too_deep).error
    big_ok = {"content": "y" * 50_000, "file_name": "big.txt"}
    assert not env.execute("echo", big_ok).error
    env.end_turn()
    outcome = env.evaluate()
    nested_call, deep_call, echo_call = outcome.details["decoded_calls"][0][0]  # too_deep: a stand-in
    assert deep_call.startswith(NOT_RUN + "(") and echo_call.startswith("echo(")


def test_empty_and_missing_arguments():
    assert decode_arguments(None) == {}
    assert decode_arguments("") == {}
    assert decode_arguments("  ") == {}
    assert decode_arguments("{}") == {}
    assert decode_arguments(b'{"a": 1}') == {"a": 1}


def test_canonical_call_round_trips_random_json():
    rng = random.Random(7)
    alphabet = "ab'\"\\\n\t(){}[];#é€\x00 "

    def value(depth: int = 0):
        kind = rng.randrange(7 if depth < 3 else 5)
        if kind == 0:
            return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
        if kind == 1:
            return rng.randint(-(10**12), 10**12)
        if kind == 2:
            return rng.uniform(-1e6, 1e6)
        if kind == 3:
            return rng.choice([True, False, None])
        if kind == 4:
            return ""
        if kind == 5:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {
            "".join(rng.choice(alphabet) for _ in range(3)): value(depth + 1)
            for _ in range(rng.randrange(4))
        }

    for _ in range(500):
        args = {f"k{i}": value() for i in range(rng.randrange(4))}
        text = canonical_call("f", args)
        assert parse_call_string(text) == ("f", args)
        assert canonical_call("f", json.loads(json.dumps(args))) == text


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('touch /tmp/pwned')",
        "cd(folder=__import__('os').getcwd())",
        "cd(**{'folder': 'x'})",
        "cd(*['x'])",
        "cd(folder='a')\nimport os",
        "cd(folder=(lambda: 1)())",
        "os.system('x')",
        "cd(folder='a'); exec('x')",
        "cd(folder=f'{1}')",
        "cd(folder=[x for x in 'ab'])",
        "cd",
        "cd(folder='x', folder='y')",
        "",
    ],
)
def test_parse_call_string_accepts_literals_only(text):
    with pytest.raises(ValueError):
        parse_call_string(text, {"cd": ["folder"]})


def test_parse_call_string_names_positional_arguments():
    assert parse_call_string("cd('temp')", {"cd": ["folder"]}) == ("cd", {"folder": "temp"})
    assert parse_call_string("mean([1, 2.5])", lambda n: ["numbers"]) == (
        "mean",
        {"numbers": [1, 2.5]},
    )
    with pytest.raises(ValueError, match="parameter names"):
        parse_call_string("cd('temp')")
    with pytest.raises(ValueError, match="too many"):
        parse_call_string("cd('a', 'b')", {"cd": ["folder"]})

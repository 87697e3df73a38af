"""What an AppWorld supervisor accepts from its episode's process (issue 55): each line is
checked against its schema (``protocol.parse``), since the model's code in that process can
find the socket and write anything on it. Whatever is not the schema is ``Malformed``, which
the supervisor turns into the episode's own failure (tests/bench/appworld/test_appworld_kernel_bounds.py
runs that against the real sandbox)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from reme_cli.bench.appworld.processes import SCRIPTS


@pytest.fixture(scope="module")
def protocol():
    """The venv program as AppWorld's interpreter loads it (standard library only)."""
    spec = importlib.util.spec_from_file_location("reme_test_venv_protocol", SCRIPTS / "protocol.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.mark.parametrize("line, why", [
    ({}, "no 'output'"),
    ([], "a list, not an object"),
    ("ok", "a str, not an object"),
    (None, "a NoneType, not an object"),
    ({"output": 5}, "'output' is a int"),
    ({"output": "x", "done": "yes"}, "'done' is a str"),
    ({"output": "x", "done": 1}, "'done' is a int"),
    ({"output": "x", "hit": "root"}, "'hit' is 'root', not one of memory, disk"),
    ({"output": "x", "cut": ["output"]}, "'cut' is a list"),
    ({"output": "x", "answer": 42}, "an unknown key 'answer'"),
])
def test_a_step_answer_that_is_not_its_schema_is_malformed_saying_why(protocol, line, why):
    with pytest.raises(protocol.Malformed) as malformed:
        protocol.parse(protocol.StepDone, line)
    assert str(malformed.value) == why


def test_answers_that_are_their_schema_parse(protocol):
    assert protocol.parse(protocol.StepDone, {"output": "x"}) == protocol.StepDone("x")
    assert protocol.parse(protocol.StepDone, {"output": "", "done": True, "cut": "output", "hit": None}) == \
        protocol.StepDone("", done=True, cut="output")
    assert protocol.parse(protocol.Opened, {"cpu_s": 1, "cpu_limit_s": 301.0}) == protocol.Opened(1, 301.0)
    with pytest.raises(protocol.Malformed, match="'cpu_s' is a bool"):
        protocol.parse(protocol.Opened, {"cpu_s": True})

"""The rule that keeps the fast tier fast (tests/tiers.py) can fail: in a planted test file, a
test that starts a process, and every test using a fixture that started one, fails unless it
is marked ``slow``; a test that starts none passes unmarked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # it runs pytest in a process of its own

REPO = Path(__file__).resolve().parent.parent

PLANTED = '''
import subprocess, sys, pytest

@pytest.fixture(scope="module")
def server():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    yield "up"

def test_starts_one():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_first_user_of_a_spawning_fixture(server):
    assert server == "up"

def test_second_user_of_a_spawning_fixture(server):
    assert server == "up"

def test_asks_for_it_while_running(request):
    assert request.getfixturevalue("server") == "up"

@pytest.mark.slow
def test_marked(server):
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_pure():
    assert 1 + 1 == 2
'''


def _outcomes(tmp_path: Path, *args: str) -> dict[str, str]:
    (tmp_path / "test_planted.py").write_text(PLANTED)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-n", "0", "-p", "no:cacheprovider",
                           "-p", "tests.tiers", *args, "test_planted.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    found = {}
    for line in proc.stdout.splitlines():
        outcome, _, rest = line.partition(" ")
        if outcome in ("PASSED", "FAILED") and "::" in rest:
            found[rest.split("::")[1].split(" ")[0]] = outcome
    return found


def test_an_unmarked_test_that_starts_a_process_fails_with_the_hint(tmp_path):
    assert _outcomes(tmp_path) == {
        "test_starts_one": "FAILED",
        "test_first_user_of_a_spawning_fixture": "FAILED",  # its fixture's setup started one
        "test_second_user_of_a_spawning_fixture": "FAILED",  # the fixture is shared, not started again
        "test_asks_for_it_while_running": "FAILED",  # request.getfixturevalue counts too
        "test_marked": "PASSED",
        "test_pure": "PASSED",
    }


def test_the_fast_tier_leaves_out_what_is_marked(tmp_path):
    found = _outcomes(tmp_path, "-m", "not slow", "-k", "marked or pure")
    assert found == {"test_pure": "PASSED"}

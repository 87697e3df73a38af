"""The two test tiers, and the rule that keeps them apart.

``pytest -q`` is the whole suite (the README's command, CI's). ``pytest -q -m "not slow"`` is
the fast tier, the inner loop: every test that needs no process of its own. A test is
``slow`` when it, or a fixture it uses, starts a process: the embedded model's server, the
scripted server (a test double, but a process), an AppWorld worker, a browser, ``reme`` or a
script in a process of its own. That is decided by what the test does, not by memory:

- every process start in a test worker is seen (``subprocess.Popen``, which the fork server,
  asyncio and Playwright go through; ``os.fork``, ``os.posix_spawn`` and the fork-exec that
  multiprocessing uses);
- a test that starts one while it runs, or whose own setup does, and is not marked ``slow``
  fails, naming what it started and the marker;
- a fixture that starts one is remembered, and every test that uses it must be marked
  ``slow`` too (a module-scoped server is started by the first of its tests only; the others
  would otherwise pass here and fail in the fast tier, where that first test is deselected).

So the full suite (CI) checks the marks, and a new test that starts a process cannot land
unmarked. Mark a whole file with ``pytestmark = pytest.mark.slow``, one test with
``@pytest.mark.slow``.
"""

from __future__ import annotations

import _posixsubprocess
import os
import platform
import subprocess
import sys
import threading

import pytest

MARK = "slow"
HINT = f'mark it @pytest.mark.{MARK} (or the file: pytestmark = pytest.mark.{MARK}); docs/testing.md, "Two tiers"'

_lock = threading.Lock()
_started: list[str] = []  # every process start in this worker, in order (what, briefly)


def _note(what: str) -> None:
    with _lock:
        _started.append(what[:160])


def _count() -> int:
    with _lock:
        return len(_started)


def _since(mark: int) -> list[str]:
    with _lock:
        return _started[mark:]


def _watch() -> None:
    """Wrap every way a process starts in this interpreter (once per worker)."""
    popen_init = subprocess.Popen.__init__

    def init(self, args, *a, **kw):
        _note(" ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args))
        popen_init(self, args, *a, **kw)

    subprocess.Popen.__init__ = init

    def wrap(owner, name: str, label: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        def started(*a, **kw):
            if not _in_popen():
                _note(label)
            return original(*a, **kw)

        setattr(owner, name, started)

    wrap(os, "fork", "os.fork()")
    wrap(os, "posix_spawn", "os.posix_spawn()")
    wrap(os, "posix_spawnp", "os.posix_spawnp()")
    wrap(_posixsubprocess, "fork_exec", "a fork-exec (multiprocessing)")


def _in_popen() -> bool:
    """Whether a Popen of this thread is on the stack (its fork-exec is counted already)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "_execute_child":
            return True
        frame = frame.f_back
    return False


# ---------------------------------------------------------------------------- the hooks
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}: starts a process (a server, AppWorld, a browser, reme): "
                                       f"the full suite only; the fast tier is -m 'not {MARK}' (tests/tiers.py)")
    # The openai client's first request reads the platform, whose processor Python finds by
    # running `uname -p`: read once here, before the watch, so the first test in a worker to
    # ask an in-process server something is not taken for one that starts a process.
    platform.uname().processor
    _watch()


# The fixture definitions that started a process when they were set up, in this worker.
_spawning: dict[object, str] = {}


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    before = _count()
    result = yield
    started = _since(before)
    if started:
        _spawning[fixturedef] = started[0]
    return result


def _slow(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARK) is not None


def _spawning_fixtures(item: pytest.Item) -> list[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    used = {fixturedef: name for name, defs in info.name2fixturedefs.items() for fixturedef in defs}
    # and what the test asked for while it ran (request.getfixturevalue)
    used.update({d: name for name, d in getattr(getattr(item, "_request", None), "_fixture_defs", {}).items()})
    return [f"fixture {name!r} (it started {_spawning[d]})" for d, name in used.items() if d in _spawning]


_mark_key = pytest.StashKey[int]()  # how many processes this worker had started when the test began


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    item.stash[_mark_key] = _count()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.when != "call" or _slow(item) or not report.passed:
        return report
    why = [f"it started {what}" for what in _since(item.stash.get(_mark_key, _count()))[:1]]
    why += _spawning_fixtures(item)
    if why:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} starts a process but is not marked {MARK!r}: {'; '.join(why)}. {HINT}"
    return report

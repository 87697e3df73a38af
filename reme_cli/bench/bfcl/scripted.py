"""TEST DOUBLE: the BFCL replay policy of the scripted server (``bfcl-replay``), found
through ``reme_cli.core.registry.REPLAY_POLICIES``. Never used for results.

``BFCLReplayPolicy(corrupt, heal_on_retry)`` replays BFCL ground truth for the task named in
the ``X-Reme-Task-Id`` header; tasks in ``corrupt`` get one argument changed so that they
fail the official checker (with ``heal_on_retry``, only until the prompt carries a
reflection lesson).
"""

from __future__ import annotations

import argparse
import copy
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from reme_cli.bench.replay import (DONE_TEXT, TASK_HEADER, Call, PolicyError, Reply, conversation_position,
                                   has_lessons)


def _strings_in(value: Any, out: dict[str, None]) -> dict[str, None]:
    """Every string (keys and values) in a task's initial state, in first-seen order."""
    if isinstance(value, str):
        out.setdefault(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _strings_in(k, out)
            _strings_in(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings_in(v, out)
    return out


def _variants(value: Any, domain: list[str]) -> list[Any]:
    """Wrong values to try for one argument, mildest first. ``domain`` holds strings from
    the task's state: an unknown name is sometimes a silent no-op (adding an unknown
    stock to a watchlist), while another valid name changes the outcome."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, str):
        return [value + "_corrupted", "corrupted", ""] + [d for d in domain if d != value]
    if isinstance(value, int):
        return [value + 1, value * 10 + 7, -value - 1]
    if isinstance(value, float):
        return [value + 1.0, value * 10 + 7.5, -value - 1.0]
    if isinstance(value, list):
        return [value[:-1], value + value[:1]] if value else [["corrupted"]]
    if isinstance(value, dict):
        return [{**value, "corrupted": True}]
    return ["corrupted"]


class BFCLReplayPolicy:
    """Answers with the BFCL ground truth of the task named in ``X-Reme-Task-Id``.

    Step 0 of a turn: all ground-truth calls of the turn, as parallel tool calls. Later
    steps, and turns whose ground truth is empty: the text "Done.".
    """

    name = "bfcl-replay"

    def __init__(self, corrupt: Iterable[str] = (), benchmark: Any = None, heal_on_retry: bool = False):
        if benchmark is None:
            from reme_cli.bench.bfcl.benchmark import BFCLBenchmark  # lazy: bfcl-eval is slow to import

            benchmark = BFCLBenchmark(split="all")
        self.benchmark = benchmark
        self.corrupt = frozenset(corrupt)
        # A corrupt task answers correctly once the prompt carries a reflection lesson:
        # exercises "a retry after reflection succeeds" deterministically.
        self.heal_on_retry = heal_on_retry
        for task_id in self.corrupt:
            self.benchmark.ground_truth(task_id)  # UserError for an unknown id
        self._plans: dict[str, list[list[Call]]] = {}
        self._corruptions: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--heal-on-retry", action="store_true",
                            help="corrupt tasks answer correctly once the prompt carries a reflection lesson "
                                 "(bfcl-replay policies)")

    @classmethod
    def from_options(cls, corrupt: Iterable[str] = (), heal_on_retry: bool = False, **_: Any) -> BFCLReplayPolicy:
        return cls(corrupt=corrupt, heal_on_retry=heal_on_retry)

    def plan(self, task_id: str) -> list[list[Call]]:
        """The calls this policy will answer with, per turn (a copy)."""
        with self._lock:
            if task_id not in self._plans:
                calls = self.benchmark.ground_truth_calls(task_id)
                if task_id in self.corrupt:
                    calls, info = self._corrupt(task_id, calls)
                    self._corruptions[task_id] = info
                self._plans[task_id] = calls
            return copy.deepcopy(self._plans[task_id])

    def corruption(self, task_id: str) -> dict[str, Any] | None:
        """What was changed for a corrupt task: turn, call index, name, arg, old, new."""
        if task_id not in self.corrupt:
            return None
        self.plan(task_id)
        return copy.deepcopy(self._corruptions[task_id])

    def _corrupt(
        self, task_id: str, calls: list[list[Call]]
    ) -> tuple[list[list[Call]], dict[str, Any]]:
        # Start with the first argument of the first call of the first non-empty turn. Some
        # changes leave the verdict unchanged (ls(a=False) in a folder without hidden
        # files), so each candidate is checked with the official checker and the first one
        # that fails wins; later calls/arguments are tried only when needed.
        positions = [(t, i) for t, turn in enumerate(calls) for i in range(len(turn))]
        domain = list(_strings_in(self.benchmark.load(task_id).meta["initial_config"], {}))
        for t, i in positions:
            name, args = calls[t][i]
            for arg, old in args.items():
                for new in _variants(old, domain):
                    candidate = copy.deepcopy(calls)
                    candidate[t][i][1][arg] = new
                    if not self._passes(task_id, candidate):
                        info = {
                            "turn": t,
                            "index": i,
                            "name": name,
                            "arg": arg,
                            "old": old,
                            "new": new,
                        }
                        return candidate, info
        raise PolicyError(f"no single-argument change makes {task_id} fail the checker")

    def _passes(self, task_id: str, calls: list[list[Call]]) -> bool:
        task = self.benchmark.load(task_id)
        env = self.benchmark.episode(task, f"scripted-corrupt-{task_id}")
        try:
            for turn in calls:
                for name, args in turn:
                    env.execute(name, args)
                env.end_turn()
            return env.evaluate().success
        finally:
            env.close()

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        task_id = headers.get(TASK_HEADER)
        if not task_id:
            raise PolicyError(f"the {TASK_HEADER} header is required by the bfcl-replay policy")
        try:
            plan = self.plan(task_id)
        except Exception as exc:  # unknown id -> UserError; say which
            raise PolicyError(f"cannot replay task {task_id!r}: {exc}") from exc
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise PolicyError("'messages' must be a list")
        if self.heal_on_retry and task_id in self.corrupt and has_lessons(messages):
            plan = self.benchmark.ground_truth_calls(task_id)
        turn, step = conversation_position(messages)
        if step > 0 or turn >= len(plan) or not plan[turn]:
            return Reply(content=DONE_TEXT)
        return Reply(tool_calls=plan[turn])

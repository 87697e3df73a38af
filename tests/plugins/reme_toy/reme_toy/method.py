"""A toy memory method written against reme's seam: it remembers the last successful
answer and shows it to the next task. It supplies only its own part (state, retrieve,
learn as events, replay, save); the seam gives each dynamic stream its copy, shares it
among the stream's workers, logs commits and replays them on resume."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reme_cli.bench.base import Task
from reme_cli.core.plugin import Section
from reme_cli.methods.base import Learned, Memory, Retrieval, Tried
from reme_cli.methods.state_view import StateView
from reme_toy.describe import describe as describe_state

HEADER = "Last time this worked:"


@dataclass
class ToyMemoryConfig(Section):
    name: str = "toy"


class ToyMemory(Memory):
    config_class = ToyMemoryConfig

    def __init__(self, last: str | None = None):
        self.last = last

    @classmethod
    def describe(cls, where: Path) -> StateView | None:
        return describe_state(where)

    def fork(self, where: Path) -> ToyMemory:
        return ToyMemory(self.last)

    def replay(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.last = event["last"]

    def save(self, where: Path) -> None:
        (where / "toy_memory.json").write_text(json.dumps({"last": self.last}))

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        return Retrieval(f"{HEADER} {self.last}", ["last"], [1.0]) if self.last else Retrieval()

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str) -> Learned:
        final = tried.attempts[-1]
        answer = final.trajectory.turns[-1][-1].text if final.outcome.success else None
        return Learned({"remembered": answer}, [{"last": answer}] if answer else [])

"""A toy memory method: it remembers the last successful answer and shows it to the next
task. Its state is one JSON file per stream under the run directory, written on commit,
so a resumed run continues from what the finished units taught it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reme_cli.bench.base import Task
from reme_cli.methods.base import Attempt, MethodContext, MethodFactory, OneAttempt, Retrieval

HEADER = "Last time this worked:"


@dataclass
class ToyMemoryConfig:
    name: str = "toy"


class ToyMemory(OneAttempt):
    config_class = ToyMemoryConfig

    def __init__(self, path: Path, learns: bool):
        self.path, self.learns = path, learns
        self.last: str | None = json.loads(path.read_text())["last"] if path.exists() else None
        self._pending: str | None = None

    @classmethod
    def factory(cls, ctx: MethodContext) -> MethodFactory:
        learns = ctx.cfg.eval.mode == "dynamic"
        return lambda stream: cls(ctx.run_path / f"toy_memory_s{stream[0]}_r{stream[1]}.json", learns)

    async def retrieve(self, task: Task, unit: str) -> Retrieval:
        return Retrieval(f"{HEADER} {self.last}", ["last"], [1.0]) if self.last else Retrieval()

    async def learn(self, task: Task, attempts: list[Attempt], retrieval: Retrieval, unit: str) -> dict[str, Any]:
        final = attempts[-1]
        if self.learns and final.outcome.success:
            self._pending = final.trajectory.turns[-1][-1].text
        return {"remembered": self._pending}

    def commit(self) -> None:
        if self._pending is not None:
            self.last, self._pending = self._pending, None
            self.path.write_text(json.dumps({"last": self.last}))

    def discard(self) -> None:
        self._pending = None

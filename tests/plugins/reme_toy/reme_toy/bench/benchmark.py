"""The toy benchmark: one counter per episode; a task succeeds when the counter ends at
its target. This module, its package's metrics and scripted answers, and one config file
(docs/extending.md, "Adding a benchmark")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reme_cli.bench.base import Benchmark, BenchmarkConfig, InProcessEnv, Outcome, Task, ToolResult
from reme_cli.core.config import check_choices
from reme_toy.bench.metrics import LABELS, METRICS

TOOLS = [{"type": "function", "function": {"name": name, "description": desc,
                                            "parameters": {"type": "object", "properties": {}}}}
         for name, desc in (("increment", "Add one to the counter."), ("read", "Read the counter."))]


@dataclass
class ToyConfig(BenchmarkConfig):
    name: str = "toy"
    tasks: int = 3

    def check(self) -> None:
        check_choices("benchmark", self, {"split": {"test"}}, {"tasks": 1, "max_interactions": 1})


class CounterEnv:
    def __init__(self, target: int):
        self.target, self.value = target, 0

    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def execute(self, name: str, arguments: Any) -> ToolResult:
        if name == "increment":
            self.value += 1
            return ToolResult("increment()", str(self.value))
        if name == "read":
            return ToolResult("read()", str(self.value))
        return ToolResult(f"{name}()", f"unknown tool {name!r}", error=True)

    def end_step(self) -> None:
        pass

    def end_turn(self) -> None:
        pass

    def evaluate(self) -> Outcome:
        return Outcome(self.value == self.target, float(self.value == self.target),
                       {"counter": self.value, "target": self.target})

    def close(self) -> None:
        pass


class ToyBenchmark(Benchmark):
    name = "toy"
    config_class = ToyConfig
    max_steps_per_turn = None
    packages = ("reme-toy",)  # its manifests record its own version; nothing in reme lists it
    metrics = METRICS  # Avg@k, Pass@k, and its own: progress, success per target
    labels = LABELS

    def __init__(self, cfg: ToyConfig):
        self.cfg = cfg

    @classmethod
    def from_config(cls, cfg: ToyConfig) -> ToyBenchmark:
        return cls(cfg)

    def task_ids(self) -> list[str]:
        ids = self.cfg.task_ids or [f"toy_{i}" for i in range(self.cfg.tasks)]
        return ids[: self.cfg.limit] if self.cfg.limit else ids

    def load(self, task_id: str) -> Task:
        target = int(task_id.rsplit("_", 1)[1]) + 1
        text = f"Increase the counter to {target}."
        return Task(id=task_id, turns=[[{"role": "user", "content": text}]], query=text, meta={"target": target})

    async def open(self, task: Task, episode_key: str) -> InProcessEnv:
        return InProcessEnv(CounterEnv(task.meta["target"]))

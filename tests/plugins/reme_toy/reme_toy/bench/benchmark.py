"""The toy benchmark: one counter per episode; a task succeeds when the counter ends at
its target. This module, its package's metrics, simulated user and scripted answers, and one
config file (docs/extending.md, "Adding a benchmark").

Its user is the task's one fixed turn ("Increase the counter to N."), or with
``benchmark.user=simulated`` an LLM that knows the target and asks for one increment at a
time (``user.py``), served by reme as the summarizer is (``benchmark.user_model``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from reme_cli.bench.base import Benchmark, BenchmarkConfig, InProcessEnv, Outcome, Task, ToolResult
from reme_cli.bench.users import User, UserModelCfg
from reme_cli.core.config import check_choices
from reme_toy.bench.metrics import LABELS, METRICS
from reme_toy.bench.user import ToyUser

TOOLS = [{"type": "function", "function": {"name": name, "description": desc,
                                            "parameters": {"type": "object", "properties": {}}}}
         for name, desc in (("increment", "Add one to the counter."), ("read", "Read the counter."))]


@dataclass
class ToyConfig(BenchmarkConfig):
    name: str = "toy"
    tasks: int = 3
    user: str = "fixed"  # fixed: the task's one turn | simulated: an LLM asking for one increment at a time
    user_model: UserModelCfg = field(default_factory=UserModelCfg)  # the simulated user's LLM

    def check(self) -> None:
        check_choices("benchmark", self, {"split": {"test"}, "user": {"fixed", "simulated"}},
                      {"tasks": 1, "max_interactions": 1})


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

    def user_model(self) -> Optional[UserModelCfg]:
        return self.cfg.user_model if self.cfg.user == "simulated" else None

    def user(self, task: Task, llm: Any) -> User:
        return ToyUser(task.meta["target"], llm) if self.cfg.user == "simulated" else super().user(task, llm)

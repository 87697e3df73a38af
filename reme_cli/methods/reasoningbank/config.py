"""`memory=reasoningbank`: ReasoningBank's keys (reme_cli/methods/reasoningbank/configs/memory/reasoningbank.yaml),
a module of its own so that validating a config loads them without the method
(core.registry.Registry.section)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reme_cli.core.config import check_choices
from reme_cli.core.plugin import Section


@dataclass
class ReasoningBankConfig(Section):
    name: str = "reasoningbank"
    pool: Optional[str] = None  # a `reme build-pool memory=reasoningbank` output dir (or its pool/)
    top_k: int = 1  # past tasks whose items are injected (the authors' run.py: select_memory(n=1))
    # llm: the method's own LLM judge decides which prompt extracts (the paper's default);
    # checker: the benchmark's verdict decides (the authors' `--criteria gt`). Both are recorded.
    judge: str = "llm"
    # first: one training trajectory per task (the authors' pipeline runs each task once) |
    # all: every sampled trajectory is judged and mined.
    build_trajectories: str = "first"
    max_items: int = 3  # items kept per trajectory ("at most 3", as the prompts say)
    trajectory_max_chars: int = 12000  # the rendered trajectory the judge and extractor read

    def check(self) -> None:
        check_choices("memory", self, {"judge": {"llm", "checker"}, "build_trajectories": {"first", "all"}},
                      {"top_k": 0, "max_items": 1, "trajectory_max_chars": 500})

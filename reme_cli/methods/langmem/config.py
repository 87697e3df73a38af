"""`memory=langmem`: LangMem's episodic memory with storage (reme_cli/methods/langmem/configs/memory/langmem.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reme_cli.core.config import check_choices
from reme_cli.core.plugin import Section
from reme_cli.methods.langmem.episodes import INSTRUCTIONS
from reme_cli.methods.langmem.install import check_installed


@dataclass
class LangMemConfig(Section):
    name: str = "langmem"
    pool: Optional[str] = None  # a `reme build-pool memory=langmem` output dir (or its pool/)
    # Episodes searched per task: ReMe's K (the guide's example uses 1; the authors' value
    # is not published, and the issue asks for the same K as ReMe unless evidence says otherwise).
    top_k: int = 5
    instructions: str = INSTRUCTIONS  # the guide's "With storage" instructions
    query_limit: int = 5  # existing episodes the manager sees (create_memory_store_manager's default)
    # best: one manager call per training task (its first successful trajectory) | all: every
    # successful trajectory. Failed trajectories are never shown to the manager.
    build_episodes: str = "best"

    def check(self) -> None:
        check_choices("memory", self, {"build_episodes": {"best", "all"}}, {"top_k": 0, "query_limit": 1})
        check_installed()  # before any work: build-pool samples trajectories first

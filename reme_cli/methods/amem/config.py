"""`memory=amem`: A-Mem's keys (reme_cli/methods/amem/configs/memory/amem.yaml), a module of its own
so that validating a config loads them without the method (core.registry.Registry.section)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reme_cli.core.config import check_choices
from reme_cli.core.plugin import Section


@dataclass
class AMemConfig(Section):
    name: str = "amem"
    pool: Optional[str] = None  # a `reme build-pool memory=amem` output dir (or its pool/)
    top_k: int = 5  # notes retrieved per task (A-Mem's default k)
    # Also consider the notes linked from the retrieved ones; as in search_agentic, one
    # search returns at most top_k notes in total (hits first), so links only fill a short list.
    linked: bool = True
    neighbors: int = 5  # nearest notes shown to the evolution call (the code's k=5)
    # best: one note per training task (its first successful trajectory) | all: every successful
    # trajectory. A task without a success gives no note (memory grows from successes only).
    build_notes: str = "best"
    note_max_chars: int = 3000  # a trajectory note longer than this is cut in the middle

    def check(self) -> None:
        check_choices("memory", self, {"build_notes": {"best", "all"}},
                      {"top_k": 0, "neighbors": 0, "note_max_chars": 200})

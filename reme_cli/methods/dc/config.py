"""`memory=dc`: Dynamic Cheatsheet's keys (reme_cli/methods/dc/configs/memory/dc.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reme_cli.core.config import check_choices
from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Section

VARIANTS = {"cumulative", "retrieval_synthesis"}


@dataclass
class DCConfig(Section):
    name: str = "dc"
    # cumulative (DC-Cu): one cheatsheet, rewritten after every task, shown whole;
    # retrieval_synthesis (DC-RS): a cheatsheet synthesized per task from the nearest past pairs.
    variant: str = "cumulative"
    pool: Optional[str] = None  # a `reme build-pool memory=dc` output dir (or its pool/)
    top_k: int = 3  # DC-RS: pairs retrieved per task (the authors' retrieve_top_k)
    # Share of the context (n_ctx - max_tokens) the injected cheatsheet may take; items past it
    # are cut and the cut is recorded (the prompts ask for ~2000-2500 words, ~5k tokens).
    max_context_share: float = 0.25
    # A trajectory shown to the curator (as the model's answer, or as a pair's output) is cut
    # in the middle past this many characters: the curator's prompt must fit its context too.
    trajectory_max_chars: int = 3000
    # DC learns without labels (the curator judges the answer itself). true: the trajectory
    # shown to the curator ends with the checker's verdict, as ACE's "with ground truth" runs.
    show_outcome: bool = False

    def check(self) -> None:
        check_choices("memory", self, {"variant": VARIANTS}, {"top_k": 1, "trajectory_max_chars": 200},
                      {"max_context_share": 1.0})
        if not self.max_context_share > 0:
            raise UserError(f"memory.max_context_share={self.max_context_share} must be > 0")

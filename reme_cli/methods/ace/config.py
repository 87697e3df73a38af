"""`memory=ace`: ACE's keys (reme_cli/methods/ace/configs/memory/ace.yaml), a module of its own
so that validating a config loads them without the method (core.registry.Registry.section)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from reme_cli.core.config import check_choices
from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Section


@dataclass
class AceConfig(Section):
    name: str = "ace"
    # A `reme build-pool memory=ace` output dir (or its pool/). Fixed mode needs one; dynamic
    # mode without one starts from the initial playbook (the paper's "ACE online" setting).
    pool: Optional[str] = None
    initial_playbook: Optional[str] = None  # a playbook file; null: the authors' (see texts.initial_playbook)
    epochs: int = 1  # passes over the training tasks (ace-appworld's adaptation: one)
    # The authors' offline loop (StarAgent.solve_task_with_gt, num_retries = 5): training tasks
    # in split order, each attempted live with the current playbook until its unit tests pass,
    # at most offline_max_attempts times; every attempt is reflected on and curated, and a failed
    # attempt's reflection opens the next one. live: build-pool runs that loop (ACE's own
    # episodes, not the trajectories sampled for every method). until_success / all: a task's
    # shared sampled trajectories (drawn without a playbook) stand for its attempts, read in
    # order until the first success / all of them.
    offline_attempts: str = "live"
    offline_max_attempts: int = 5
    offline_ground_truth: bool = True  # ACE offline "with GT": the Reflector sees the checker's verdict
    online_ground_truth: bool = False  # ACE online (ACE_online_no_GT.jsonnet): it does not
    # Embedding de-duplication of ADDs (ace-agent/ace's BulletpointAnalyzer, off by default there
    # and absent from ace-appworld); 0.90 is its threshold.
    dedup: bool = False
    dedup_threshold: float = 0.90
    max_context_share: float = 0.5  # the playbook's share of the context (methods/context_guard.py)
    show_counts: bool = False  # render "[id] helpful=X harmful=Y :: content" (ace-agent/ace) instead of "[id] content"
    trajectory_max_chars: int = 12000  # the trajectory text the Reflector and Curator read

    def check(self) -> None:
        check_choices("memory", self, {"offline_attempts": {"live", "until_success", "all"}},
                      {"epochs": 1, "offline_max_attempts": 1, "dedup_threshold": 0.0, "max_context_share": 0.01,
                       "trajectory_max_chars": 200}, {"dedup_threshold": 1.0, "max_context_share": 1.0})
        if self.initial_playbook and not Path(self.initial_playbook).is_file():
            raise UserError(f"memory.initial_playbook={self.initial_playbook} is not a file")

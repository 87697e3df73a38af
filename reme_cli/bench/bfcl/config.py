"""``BFCLConfig``: the ``benchmark.*`` keys of ``benchmark=bfcl_v3`` (reme_cli/bench/bfcl/configs/benchmark/bfcl_v3.yaml),
validated before anything runs (bfcl-eval is not imported for it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from reme_cli.bench.base import BenchmarkConfig
from reme_cli.bench.bfcl.release import check_release
from reme_cli.bench.bfcl.tool_notes import TOOL_NOTES
from reme_cli.core.config import check_choices


@dataclass
class BFCLConfig(BenchmarkConfig):
    """The defaults are BFCL as the ReMe authors' agent ran it (agentscope-ai/ReMe 65971baf,
    benchmark/bfcl/); the fidelity ledger (docs/fidelity.md) names each source."""

    name: str = "bfcl_v3"
    # The authors' run_bfcl.py: 4 Ray workers, worker i taking task_ids[i::4], one shared pool.
    dynamic_workers: ClassVar[int] = 4
    # Model calls per user turn. None: no cap, only max_interactions over the task (the
    # authors' agent); 20 is bfcl-eval's own runner's limit.
    max_steps_per_turn: Optional[int] = None
    # Whose data, backends and checker: the authors' (paper: bfcl-eval 2025.7.17), the
    # pinned bfcl-eval (current) or any bfcl-eval version (reme_cli/bench/bfcl/release.py).
    release: str = "paper"
    # bfcl's "Note that the provided function is in Python 3 syntax." on each description:
    # per_turn (turn k carries it k times, as the authors' compile_tools did), once (bfcl-eval's
    # own handlers), none.
    tool_note: str = "per_turn"
    # Each tool's response schema: drop (the authors' extract_tool_schema), keep (bfcl-eval's
    # OpenAI handler sends it).
    tool_response: str = "drop"
    # A user turn in which the model called nothing: drop (the authors' extract_multi_turn_
    # responses leaves it out and later turns move up), keep (bfcl-eval's runner: an empty turn).
    empty_turns: str = "drop"

    def check(self) -> None:
        check_choices("benchmark", self, {"split": {"train", "test"}, "tool_note": set(TOOL_NOTES),
                                          "tool_response": {"drop", "keep"}, "empty_turns": {"drop", "keep"}},
                      {"limit": 1, "max_interactions": 1, "max_steps_per_turn": 1})
        check_release(self.release)

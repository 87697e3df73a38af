"""A method's counters summed over units (reme_cli/core/counts.py)."""

from dataclasses import dataclass, field

from reme_cli.core.counts import Counts
from reme_cli.methods.ace.roles import AceStats
from reme_cli.methods.reme.distill import DistillStats


@dataclass
class _Stats(Counts):
    calls: int = 0
    share: float = 0.0
    per_kind: dict[str, int] = field(default_factory=dict)


def test_merge_adds_numbers_by_field_and_dicts_by_key():
    total = _Stats(2, 0.5, {"a": 1})
    total.merge(_Stats(3, 0.25, {"a": 2, "b": 5}))
    assert total == _Stats(5, 0.75, {"a": 3, "b": 5})


def test_the_methods_stats_merge_every_counter():
    ace = AceStats(llm_calls=2, proposed_adds=1)
    ace.merge(AceStats(llm_calls=1, invalid_curations=1, tags={"helpful": 2, "harmful": 0, "neutral": 1}))
    assert (ace.llm_calls, ace.invalid_curations, ace.proposed_adds) == (3, 1, 1)
    assert ace.tags == {"helpful": 2, "harmful": 0, "neutral": 1}
    distill = DistillStats({"success": 1}, invalid_outputs=1, llm_calls=2)
    distill.merge(DistillStats({"success": 2, "failure": 1}, rejected_by_judge=1, llm_calls=3))
    assert distill == DistillStats({"success": 3, "failure": 1}, 1, 1, 5)

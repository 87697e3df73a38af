"""Counters of what a step did (LLM calls, invalid answers, items per kind), summed over the
units of a run or the tasks of a build: a method's stats dataclass subclasses ``Counts``."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class Counts:
    def merge(self, other: Counts) -> None:
        """Add ``other``'s counts to these: numbers field by field, dicts of numbers key by key."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, dict):
                for key, n in theirs.items():
                    mine[key] = mine.get(key, 0) + n
            else:
                setattr(self, f.name, mine + theirs)

"""A departure from the authors' setup as the fidelity column names it (docs/fidelity.md),
with how far it may move a number: the column shows the text, and the clean-cell count
(``N of M cells free of medium/high departures``) reads the level. Both come from the same
list, so the count is what the column shows, measured.

Levels:

- ``low``: what reme keeps apart on purpose where it cannot move the paper's numbers at its
  scale, or what the authors' own setup left open the same way (exact search on pools of a
  few hundred items, exact f/u counts, a seed per unit where the authors' provider did not
  repeat itself, a pool built here that they never released, built with their summarizer);
- ``medium``: a setting the authors ran otherwise (a ledger key off their value, a stand-in
  embedding, a shorter context, a pool built where they released one);
- ``high``: what the authors never published, so no setting here can be theirs (a baseline's
  settings, a retrieval key or prompt without a public recipe), or a model the paper did not run.

A departure is a ``str`` (its text), so every reader that joins or compares texts keeps
working; a plain string from a plug-in that names no level counts as ``medium``.
"""

from __future__ import annotations

from collections.abc import Iterable

LEVELS = ("low", "medium", "high")


class Departure(str):
    """One departure's text and level (``LEVELS``)."""

    level: str

    def __new__(cls, text: str, level: str = "medium") -> Departure:
        if level not in LEVELS:
            raise ValueError(f"departure level {level!r}: choose one of {LEVELS}")
        out = super().__new__(cls, text)
        out.level = level
        return out

    def format(self, *args: object, **kwargs: object) -> Departure:  # type: ignore[override]
        """The text filled in, at the same level (a template kept as a ``Departure``)."""
        return Departure(str.format(self, *args, **kwargs), self.level)


def level_of(found: str) -> str:
    """A departure's level; a plain string (no level named) counts as medium."""
    return getattr(found, "level", "medium")


def is_clean(found: Iterable[str]) -> bool:
    """Whether a run's departures are all low: its cells count as free of medium/high ones."""
    return all(level_of(d) == "low" for d in found)

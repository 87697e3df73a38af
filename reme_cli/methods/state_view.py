"""What a method's saved state holds, told in one shape for every method (``Memory.describe``).

A method keeps its memory in files of its own (ReMe's experiences, A-Mem's notes, ACE's
playbook, ...). Readers that are not the method (``reme view``, ``reme pool stats|show``)
ask the method to describe a saved state instead of parsing its files:

- ``items``: one ``StateItem`` per memory item (an experience, a note, a bullet, an episode),
  with the text a reader wants (``title``: what it is for, e.g. ReMe's when-to-use; ``text``:
  the memory itself), its ``kind`` (ReMe's source, ACE's section), ``numbers`` (counters and
  scores: ReMe's f, u and confidence, ACE's helpful and harmful, A-Mem's retrievals) and
  where it came from;
- ``summary``: free-form statistics for a table (sizes, counts by kind);
- ``text``: a state that is one text as the agent sees it (a cheatsheet, a playbook), if any;
- ``changes``: for a dynamic stream's folder, what each committed unit did to the state
  (``StateChange``), in commit order, read from the seam's commit log.

Everything is JSON-ready (``to_dict``) and read from files alone: no embedder, no LLM.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from reme_cli.core.run_log import read_commits, read_pool_header


@dataclass
class StateItem:
    id: str
    text: str  # the memory itself (ReMe: content; A-Mem: the note; ACE: the bullet)
    title: str = ""  # what it is for (ReMe: when to use; A-Mem: context; ReasoningBank: title)
    kind: str = ""  # ReMe: source; ACE: section; ReasoningBank: the judge's verdict
    numbers: dict[str, float] = field(default_factory=dict)  # f, u, confidence, helpful, ...
    origin: str = ""  # the task, unit or training trajectory it came from
    created_at: str = ""
    fields: dict[str, Any] = field(default_factory=dict)  # the rest a reader may want (keywords, links)


@dataclass
class StateChange:
    """What one committed unit did to a dynamic stream's state."""

    unit: str
    seq: int
    added: list[StateItem] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)  # items the unit changed (rewritten, tagged)
    retrieved: list[str] = field(default_factory=list)  # what the log says it read (where it says)
    # What the unit added to items' numbers: {id: {name: delta}} (ReMe: f and u; ACE: helpful).
    increments: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class StateView:
    method: str
    items: list[StateItem] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    changes: list[StateChange] | None = None  # a dynamic stream's commits; None for a pool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stream_changes(where: Path, read: Callable[[str, int, list[dict[str, Any]]], StateChange]
                   ) -> list[StateChange] | None:
    """The changes of the stream whose folder is ``where``, each commit-log line turned into a
    ``StateChange`` by ``read(unit, seq, events)``, in commit order; None if ``where`` has no
    commit log (it is a pool, not a stream)."""
    commits = read_commits(where)
    return None if commits is None else [read(c.unit, c.seq, c.events) for c in commits]


def method_dir(where: Path, method: str, *subdirs: str) -> Path | None:
    """The folder under ``where`` holding a pool of ``method`` (its manifest names it): ``where``
    itself, its ``pool/`` (a ``reme build-pool`` directory), or one of ``subdirs`` (where the
    method's dynamic streams save their state, e.g. ``store``)."""
    header = read_pool_header(where, *subdirs, method=method)
    return header.path if header else None


def describe_folder(where: Path, method: str, subdirs: tuple[str, ...],
                    change: Callable[[str, int, list[dict[str, Any]]], StateChange],
                    read: Callable[[Path], tuple[list[StateItem], dict[str, Any], str | None]],
                    locate: Callable[[Path], Path | None] | None = None) -> StateView | None:
    """The usual ``describe``: the method's folder under ``where`` (``locate(where)``, by
    default ``method_dir``) read by ``read(folder)`` into (items, summary, text), the stream's
    changes by ``change``; None when ``where`` holds neither."""
    folder = locate(where) if locate is not None else method_dir(where, method, *subdirs)
    changes = stream_changes(where, change)
    if folder is None and changes is None:
        return None
    items, summary, text = read(folder) if folder is not None else ([], {}, None)
    return StateView(method, items, summary, text, changes)

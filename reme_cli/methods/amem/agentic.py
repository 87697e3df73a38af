"""A-Mem's two LLM operations, as events on a NoteStore: note construction (keywords,
context, tags) and link generation + memory evolution against the nearest notes.

A bad answer is handled as the authors' code handles it: analysis falls back to no
keywords, context "General", no tags; a bad evolution answer evolves nothing. Both are
counted. Transport failures are not caught: they stop the run (reme's client decides).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from reme_cli.core.counts import Counts
from reme_cli.methods.amem import prompts
from reme_cli.methods.amem.notes import Note, NoteStore
from reme_cli.llm import answer_health
from reme_cli.llm.client import ChatResult
from reme_cli.llm.json_reply import parse_json


@dataclass
class AMemStats(Counts):
    llm_calls: int = 0
    invalid_analyses: int = 0
    invalid_evolutions: int = 0
    evolved: int = 0
    links_added: int = 0
    neighbors_updated: int = 0


def note_id(source: str, content: str) -> str:
    """From where a note came from and what it says (not uuid4), so that cached responses
    rebuild the same store, ids included."""
    return hashlib.sha256(f"{source}|{content}".encode()).hexdigest()[:32]


async def _ask(summ: Any, prompt: str, name: str, schema: dict[str, Any]) -> tuple[Any, ChatResult]:
    result = await summ.llm.chat(
        [{"role": "system", "content": prompts.SYSTEM}, {"role": "user", "content": prompt}],
        temperature=summ.temperature, max_tokens=summ.max_tokens,
        response_format=summ.schema_format(name, schema))
    return parse_json(result.content, dict), result


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    return None


async def construct(summ: Any, content: str, source: str, timestamp: str, stats: AMemStats) -> Note:
    """Note construction: one call for K, G and X (the analyze_content prompt)."""
    stats.llm_calls += 1
    parsed, answer = await _ask(summ, prompts.ANALYZE + content, "response", prompts.ANALYZE_SCHEMA)
    note = Note(id=note_id(source, content), content=content, source=source, timestamp=timestamp)
    keywords = _strings((parsed or {}).get("keywords"))
    tags = _strings((parsed or {}).get("tags"))
    context = (parsed or {}).get("context")
    invalid = keywords is None or tags is None or not isinstance(context, str) or not context.strip()
    answer_health.note("amem_note", answer, valid=not invalid)
    if invalid:
        stats.invalid_analyses += 1
        return note
    note.keywords, note.tags, note.context = keywords, tags, context.strip()
    return note


def _neighbor_text(neighbors: list[Note]) -> str:
    return "\n".join(prompts.NEIGHBOR_LINE.format(
        i=i, time=n.timestamp, content=n.content, context=n.context, keywords=n.keywords, tags=n.tags)
        for i, n in enumerate(neighbors))


def _resolve(ref: Any, neighbors: list[Note]) -> str | None:
    """A suggested connection: a neighbour's index as shown ("0", "memory index:0") or its id."""
    text = str(ref).strip().rsplit(":", 1)[-1].strip()
    if text.isdigit() and int(text) < len(neighbors):
        return neighbors[int(text)].id
    return next((n.id for n in neighbors if n.id == text), None)


async def evolve(summ: Any, store: NoteStore, note: Note, n_neighbors: int, unit: str,
                 stats: AMemStats, search: Any = None) -> list[dict[str, Any]]:
    """Link generation and memory evolution in one call; returns the events: the note's
    ``add`` (with its links and tags) and an ``update`` per rewritten neighbour. ``search``
    replaces ``store.search`` (a guarded read when workers share the store)."""
    # The neighbours are searched by the note's content (find_related_memories(note.content)).
    hits = await asyncio.to_thread(search or store.search, note.content, n_neighbors)
    neighbors = [n for n, _ in hits]
    if not neighbors:
        return [{"unit": unit, "op": "add", "note": asdict(note)}]
    stats.llm_calls += 1
    prompt = prompts.EVOLVE.format(context=note.context, content=note.content, keywords=note.keywords,
                                   nearest_neighbors_memories=_neighbor_text(neighbors),
                                   neighbor_number=len(neighbors))
    parsed, answer = await _ask(summ, prompt, "response", prompts.EVOLVE_SCHEMA)
    updates: list[dict[str, Any]] = []
    usable = isinstance(parsed, dict) and isinstance(parsed.get("should_evolve"), bool)
    answer_health.note("amem_evolve", answer, valid=usable)
    if not usable:
        stats.invalid_evolutions += 1
    elif parsed["should_evolve"]:
        stats.evolved += 1
        actions = _strings(parsed.get("actions")) or []
        if "strengthen" in actions:
            links = [r for r in (_resolve(c, neighbors) for c in parsed.get("suggested_connections") or []) if r]
            note.links = list(dict.fromkeys(note.links + links))
            stats.links_added += len(links)
            note.tags = _strings(parsed.get("tags_to_update")) or note.tags
        if "update_neighbor" in actions:
            contexts = parsed.get("new_context_neighborhood") or []
            tag_lists = parsed.get("new_tags_neighborhood") or []
            for i, neighbor in enumerate(neighbors):
                tags = _strings(tag_lists[i]) if i < len(tag_lists) else None
                context = contexts[i] if i < len(contexts) and isinstance(contexts[i], str) else None
                if tags is None and context is None:
                    continue
                updates.append({"unit": unit, "op": "update", "id": neighbor.id, "by": note.id,
                                "context": context or neighbor.context, "tags": tags or neighbor.tags})
            stats.neighbors_updated += len(updates)
    return [{"unit": unit, "op": "add", "note": asdict(note)}, *updates]

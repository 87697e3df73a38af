"""A-Mem's memory: notes with keywords, context, tags and links, their vectors, and the
events that change them, as a directory.

    <dir>/manifest.json   method "amem", embedding model and dim, note count, and the
                          sha256/line count of the two files below (checked on load)
    <dir>/notes.jsonl     one note per line, in insertion order
    <dir>/vectors.npy     (n, dim) float32, L2-normalized, row i = note i

Every change is an event (``add``, ``update``, ``retrieve``) so that a build or a dynamic
stream can be rebuilt from a starting store and the events of its finished units.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from reme_cli.core import integrity
from reme_cli.core.errors import UserError
from reme_cli.core.io import now, read_lines, write_json_atomic
from reme_cli.methods.vector_store import VectorIndex, require_embedding

METHOD = "amem"
FORMAT = "reme-amem-pool"
MANIFEST, NOTES, VECTORS = "manifest.json", "notes.jsonl", "vectors.npy"


@dataclass
class Note:
    id: str
    content: str
    keywords: list[str] = field(default_factory=list)
    context: str = "General"  # the code's default when analysis fails
    tags: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    source: str = ""  # the task it came from
    timestamp: str = ""
    retrieval_count: int = 0
    evolution_history: list[dict[str, Any]] = field(default_factory=list)

    def embed_text(self) -> str:
        """concat(c, X, K, G): the paper's note embedding input."""
        return (f"{self.content} context: {self.context} keywords: {', '.join(self.keywords)} "
                f"tags: {', '.join(self.tags)}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Note:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class NoteStore:
    def __init__(self, embedder: Any, notes: list[Note] | None = None, vectors: np.ndarray | None = None,
                 built_by: dict[str, Any] | None = None):
        self.embedder = embedder
        self.notes: dict[str, Note] = {n.id: n for n in notes or []}
        self._index = VectorIndex(embedder.dim, vectors)
        self.built_by = built_by or {}

    def __len__(self) -> int:
        return len(self.notes)

    # ------------------------------------------------------------------ persistence
    @staticmethod
    def check(path: Path) -> dict[str, Any]:
        """The manifest, if the files are what it records (else a one-line refusal)."""
        try:
            manifest = json.loads((path / MANIFEST).read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"{path / MANIFEST} is unreadable ({exc}); rebuild the A-Mem pool") from None
        fix = "rebuild it with `reme build-pool memory=amem` or restore the file from a copy"
        if "files" in manifest:
            integrity.verify(path, manifest["files"], (NOTES, VECTORS), fix)
        notes = len(read_lines(path / NOTES))
        if isinstance(manifest.get("notes"), int) and notes != manifest["notes"]:
            raise UserError(f"pool {path} is damaged: {NOTES} holds {notes} notes, its manifest records "
                            f"{manifest['notes']}; {fix}")
        return manifest

    @classmethod
    def load(cls, path: Path, embedder: Any) -> NoteStore:
        manifest = cls.check(path)
        require_embedding(path, manifest, embedder, "A-Mem")
        notes = [Note.from_dict(d) for d in read_lines(path / NOTES)]
        vectors = np.load(path / VECTORS) if notes else None
        if vectors is not None and len(vectors) != len(notes):
            raise UserError(f"{path} is inconsistent ({len(notes)} notes, {len(vectors)} vectors); rebuild it")
        return cls(embedder, notes, vectors, manifest.get("built_by"))

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        tmp = path / (NOTES + ".tmp")
        tmp.write_text("".join(json.dumps(asdict(n), ensure_ascii=False) + "\n" for n in self.notes.values()))
        tmp.replace(path / NOTES)
        self._index.save_vectors(path / VECTORS)
        write_json_atomic(path / MANIFEST, {
            "format": FORMAT, "method": METHOD, "files": integrity.record(path, (NOTES, VECTORS)),
            "notes": len(self.notes), "links": sum(len(n.links) for n in self.notes.values()),
            "embedding_model": self.embedder.name, "dim": self.embedder.dim,
            "built_by": self.built_by, "updated_at": now()})

    def copy(self) -> NoteStore:
        return NoteStore(self.embedder, [Note.from_dict(asdict(n)) for n in self.notes.values()],
                         self._index.vectors.copy(), dict(self.built_by))

    # ------------------------------------------------------------------ search
    def search(self, text: str, k: int) -> list[tuple[Note, float]]:
        """The k notes nearest to ``text`` by cosine similarity, best first."""
        if not self.notes or k <= 0:
            return []
        ordered = list(self.notes.values())
        return [(ordered[r], s) for r, s in self._index.search(self.embedder.embed([text]), k)[0]]

    def with_links(self, hits: list[Note], k: int) -> list[Note]:
        """The hits, then the notes they link to (new ones only, at most k of them)."""
        seen = {n.id for n in hits}
        linked: list[Note] = []
        for note in hits:
            for link in note.links:
                if link in self.notes and link not in seen and len(linked) < k:
                    linked.append(self.notes[link])
                    seen.add(link)
        return hits + linked

    # ------------------------------------------------------------------ events
    def apply(self, events: list[dict[str, Any]]) -> None:
        """Bring the store to the state after ``events`` (changed notes are re-embedded,
        since their metadata is part of what is embedded)."""
        touched: set[str] = set()
        for e in events:
            op = e["op"]
            if op == "add":
                note = Note.from_dict(e["note"])
                self.notes[note.id] = note
                touched.add(note.id)
            elif op == "update" and e["id"] in self.notes:
                note = self.notes[e["id"]]
                note.evolution_history.append({"context": note.context, "tags": note.tags, "by": e.get("by")})
                note.context, note.tags = e["context"], e["tags"]
                touched.add(note.id)
            elif op == "retrieve":
                for i in e["ids"]:
                    if i in self.notes:
                        self.notes[i].retrieval_count += 1
        if touched:
            self._reembed(touched)

    def _reembed(self, ids: set[str]) -> None:
        ordered = list(self.notes.values())
        rows = [i for i, n in enumerate(ordered) if n.id in ids]
        self._index.set_rows(rows, self.embedder.embed([ordered[i].embed_text() for i in rows]))

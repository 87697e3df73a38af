"""A-Mem's memory: notes with keywords, context, tags and links, their vectors, and the
events that change them, as a directory.

    <dir>/manifest.json   method "amem", embedding model and dim, note count, and the
                          sha256/line count of the two files below (checked on load;
                          ``vector_store.PoolFiles`` reads and writes the three)
    <dir>/notes.jsonl     one note per line, in insertion order
    <dir>/vectors.npy     (n, dim) float32, L2-normalized, row i = note i

Every change is an event (``add``, ``update``, ``retrieve``) so that a build or a dynamic
stream can be rebuilt from a starting store and the events of its finished units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reme_cli.core.errors import UserError
from reme_cli.core.reading import required_of, shape_of
from reme_cli.methods.vector_store import PoolFiles, RecordStore, StoredRecord

METHOD = "amem"
NOTES = "notes.jsonl"


@dataclass
class Note(StoredRecord):
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


FILES = PoolFiles("reme-amem-pool", METHOD, NOTES, "A-Mem",
                  "rebuild it with `reme build-pool memory=amem` or restore the file from a copy",
                  record_shape=shape_of(Note), record_keys=required_of(Note), manifest_shape={"notes": int, "links": int})


class NoteStore(RecordStore[Note]):
    files = FILES
    record = Note

    @property
    def notes(self) -> dict[str, Note]:
        return self.by_id

    # ------------------------------------------------------------------ persistence
    @classmethod
    def check(cls, path: Path) -> dict[str, Any]:
        """The manifest, if the files are what it records (else a one-line refusal)."""
        manifest = FILES.read_manifest(path)
        if "files" in manifest:  # the first manifests recorded none
            FILES.verify(path, manifest)
        notes = len(FILES.read_records(path))
        if isinstance(manifest.get("notes"), int) and notes != manifest["notes"]:
            raise UserError(f"pool {path} is damaged: {NOTES} holds {notes} notes, its manifest records "
                            f"{manifest['notes']}; {FILES.fix}")
        return manifest

    def manifest_fields(self) -> dict[str, Any]:
        return {"notes": len(self.notes), "links": sum(len(n.links) for n in self.notes.values())}

    # ------------------------------------------------------------------ search
    def search(self, text: str, k: int) -> list[tuple[Note, float]]:
        """The k notes nearest to ``text`` by cosine similarity, best first."""
        return self.nearest(text, k)

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

"""ReasoningBank's memory: one record per judged trajectory (its task query, the judge's
verdict, and the up to 3 items {title, description, content} extracted from it), each
record embedded by its query, as a directory.

    <dir>/manifest.json   method "reasoningbank", embedding model and dim, record and item
                          counts, and the sha256/line count of the two files below
    <dir>/records.jsonl   one record per line, in insertion order
    <dir>/vectors.npy     (n, dim) float32, L2-normalized, row i = record i's query

As the authors' memory_management.py: the bank is searched by the similarity of the new
task's query to the queries of past tasks, and what comes back are the items extracted from
the top-k past tasks. Every change is an ``add`` event, so a build or a dynamic stream is
rebuilt from its starting store and the events of its finished units.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from reme_cli.core import integrity
from reme_cli.core.errors import UserError
from reme_cli.core.io import now, read_lines, write_json_atomic
from reme_cli.methods.vector_store import VectorIndex, require_embedding

METHOD = "reasoningbank"
FORMAT = "reme-reasoningbank-pool"
MANIFEST, RECORDS, VECTORS = "manifest.json", "records.jsonl", "vectors.npy"


@dataclass
class Record:
    id: str
    query: str  # what the record is found by
    source: str  # the unit or training trajectory it came from
    verdict: str  # the judge's (or checker's) "success" | "failure": which prompt extracted the items
    items: list[dict[str, str]] = field(default_factory=list)  # {title, description, content}

    def item_ids(self) -> list[str]:
        return [f"{self.id}.{j}" for j in range(len(self.items))]

    @classmethod
    def new(cls, query: str, source: str, verdict: str, items: list[dict[str, str]]) -> Record:
        """Named after its source and query (not uuid4): cached answers rebuild the same store."""
        rid = hashlib.sha256(f"{source}|{query}".encode()).hexdigest()[:16]
        return cls(rid, query, source, verdict, items)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class ItemStore:
    def __init__(self, embedder: Any, records: list[Record] | None = None, vectors: np.ndarray | None = None,
                 built_by: dict[str, Any] | None = None):
        self.embedder = embedder
        self.records: dict[str, Record] = {r.id: r for r in records or []}
        self._index = VectorIndex(embedder.dim, vectors)
        self.built_by = built_by or {}

    def __len__(self) -> int:
        return len(self.records)

    @property
    def item_count(self) -> int:
        return sum(len(r.items) for r in self.records.values())

    # ------------------------------------------------------------------ persistence
    @staticmethod
    def check(path: Path) -> dict[str, Any]:
        """The manifest, if the files are what it records (else a one-line refusal)."""
        fix = "rebuild it with `reme build-pool memory=reasoningbank` or restore the file from a copy"
        try:
            manifest = json.loads((path / MANIFEST).read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"{path / MANIFEST} is unreadable ({exc}); {fix}") from None
        integrity.verify(path, manifest.get("files"), (RECORDS, VECTORS), fix)
        return manifest

    @classmethod
    def load(cls, path: Path, embedder: Any) -> ItemStore:
        manifest = cls.check(path)
        require_embedding(path, manifest, embedder, "ReasoningBank")
        records = [Record.from_dict(d) for d in read_lines(path / RECORDS)]
        vectors = np.load(path / VECTORS) if records else None
        if vectors is not None and len(vectors) != len(records):
            raise UserError(f"{path} is inconsistent ({len(records)} records, {len(vectors)} vectors); rebuild it")
        return cls(embedder, records, vectors, manifest.get("built_by"))

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        tmp = path / (RECORDS + ".tmp")
        tmp.write_text("".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in self.records.values()))
        tmp.replace(path / RECORDS)
        self._index.save_vectors(path / VECTORS)
        write_json_atomic(path / MANIFEST, {
            "format": FORMAT, "method": METHOD, "files": integrity.record(path, (RECORDS, VECTORS)),
            "records": len(self.records), "items": self.item_count,
            "embedding_model": self.embedder.name, "dim": self.embedder.dim,
            "built_by": self.built_by, "updated_at": now()})

    def copy(self) -> ItemStore:
        return ItemStore(self.embedder, [Record.from_dict(asdict(r)) for r in self.records.values()],
                         self._index.vectors.copy(), dict(self.built_by))

    # ------------------------------------------------------------------ search
    def search(self, query: str, k: int) -> list[tuple[Record, float]]:
        """The k records whose query is nearest to ``query`` (cosine), best first."""
        if not self.records or k <= 0:
            return []
        ordered = list(self.records.values())
        return [(ordered[r], s) for r, s in self._index.search(self.embedder.embed([query]), k)[0]]

    # ------------------------------------------------------------------ events
    def apply(self, events: list[dict[str, Any]]) -> None:
        """Add the records of ``add`` events (a known id is not added twice)."""
        new = [Record.from_dict(e["record"]) for e in events if e.get("op") == "add"]
        new = [r for r in new if r.id not in self.records]
        if not new:
            return
        for record in new:
            self.records[record.id] = record
        self._index.add(self.embedder.embed([r.query for r in new]))

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
from dataclasses import dataclass, field
from typing import Any

from reme_cli.core.reading import required_of, shape_of
from reme_cli.methods.vector_store import PoolFiles, RecordStore, StoredRecord

METHOD = "reasoningbank"
RECORDS = "records.jsonl"


@dataclass
class Record(StoredRecord):
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


FILES = PoolFiles("reme-reasoningbank-pool", METHOD, RECORDS, "ReasoningBank",
                  "rebuild it with `reme build-pool memory=reasoningbank` or restore the file from a copy",
                  record_shape=shape_of(Record), record_keys=required_of(Record),
                  manifest_shape={"records": int, "items": int})


class ItemStore(RecordStore[Record]):
    files = FILES
    record = Record

    @property
    def records(self) -> dict[str, Record]:
        return self.by_id

    @property
    def item_count(self) -> int:
        return sum(len(r.items) for r in self.records.values())

    def manifest_fields(self) -> dict[str, Any]:
        return {"records": len(self.records), "items": self.item_count}

    # ------------------------------------------------------------------ search
    def search(self, query: str, k: int) -> list[tuple[Record, float]]:
        """The k records whose query is nearest to ``query`` (cosine), best first."""
        return self.nearest(query, k)

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

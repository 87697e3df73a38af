"""The methods' one embedded vector store: rows of unit vectors searched by cosine.

Every embedder returns L2-normalised float32 rows (``llm/embed.py``), so the inner product
is the cosine and a faiss ``IndexFlatIP`` is an exact cosine search. A method keeps its own
records (experiences, notes, items, pairs) in a list whose row i is row i here, and asks
``search`` for (row, score) pairs. Equal scores come in the order faiss's flat search gives
them (deterministic for the same rows), as every method searched before this module.

Persistence is to files of a folder the method owns, whose manifest records the embedding
(``embedding_identity``; ``require_embedding`` refuses a pool of another space):
``save_vectors`` / ``read_vectors`` for the rows, and
optionally ``save_index`` / ``load_index`` for the index (derived: a missing or stale one
is rebuilt from the rows, so a hand-copied index over other vectors is never searched).
A pool that is a manifest, a JSON-lines file of records and their vectors (A-Mem's notes,
ReasoningBank's records, DC's pairs) is read and written by ``PoolFiles``; ``RecordStore``
holds such records by id with their vectors (A-Mem, ReasoningBank).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import faiss
import numpy as np

from reme_cli.core import integrity
from reme_cli.core.errors import UserError
from reme_cli.core.io import now, write_json_atomic
from reme_cli.core.reading import JsonFile, Shape
from reme_cli.core.staging import fsync_path

MANIFEST, VECTORS = "manifest.json", "vectors.npy"


def embedding_identity(embedder: Any) -> dict[str, Any]:
    """What a pool records about the vector space it was embedded in (and refuses to mix)."""
    return {"name": embedder.name, "dim": embedder.dim}


def require_embedding(path: Path, manifest: dict[str, Any], embedder: Any, pool: str) -> None:
    """Refuse, in one line, a pool whose manifest (``embedding_model``, ``dim``) names another
    vector space than ``embedder``'s: its vectors and the queries' would not compare."""
    if manifest.get("embedding_model") != embedder.name or manifest.get("dim") != embedder.dim:
        raise UserError(f"{path} was embedded with {manifest.get('embedding_model')} (dim {manifest.get('dim')}); "
                        f"run with that embedding, or rebuild the {pool} pool")


class VectorIndex:
    """(n, dim) float32 rows and a flat inner-product index over them.

    The faiss index is built on the first search after a change that is not an append
    (an append extends it in place), so a method may edit rows freely between searches."""

    def __init__(self, dim: int, vectors: np.ndarray | None = None):
        self.dim = dim
        rows = np.zeros((0, dim), np.float32) if vectors is None else vectors
        # A copy: the caller's array (another store's read-only view) is never edited through this one.
        self._vecs = np.array(rows, dtype=np.float32, order="C").reshape(len(rows), dim)
        self._index: faiss.IndexFlatIP | None = None

    def __len__(self) -> int:
        return len(self._vecs)

    @property
    def vectors(self) -> np.ndarray:
        """Read-only view, row i = the owner's i-th record."""
        view = self._vecs.view()
        view.flags.writeable = False
        return view

    def copy(self) -> VectorIndex:
        return VectorIndex(self.dim, self._vecs.copy())

    # ---- changes ---------------------------------------------------------------------

    def add(self, vectors: np.ndarray) -> None:
        new = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        self._vecs = np.concatenate([self._vecs, new])
        if self._index is not None:
            self._index.add(new)

    def keep(self, rows: list[int]) -> None:
        """Keep only ``rows`` (in that order), e.g. after removing records."""
        self._vecs = np.ascontiguousarray(self._vecs[rows])
        self._index = None  # a flat rebuild is a memcpy of n*dim floats: simpler than id remapping

    def set_rows(self, rows: list[int], vectors: np.ndarray) -> None:
        """Replace the vectors of ``rows`` (a record whose embedded text changed); rows past
        the end are appended as zeros first."""
        if rows and max(rows) >= len(self._vecs):
            self.add(np.zeros((max(rows) + 1 - len(self._vecs), self.dim), np.float32))
        self._vecs[rows] = vectors
        self._index = None

    # ---- search ----------------------------------------------------------------------

    def _flat(self) -> faiss.IndexFlatIP:
        if self._index is None:
            self._index = faiss.IndexFlatIP(self.dim)
            if len(self._vecs):
                self._index.add(self._vecs)
        return self._index

    def raw_search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """faiss's (scores, rows), each (len(queries), k); needs 0 < k <= len(self)."""
        return self._flat().search(np.ascontiguousarray(queries, dtype=np.float32), k)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """For each query row, up to k (row, cosine) pairs, most similar first."""
        if k <= 0 or not len(self._vecs):
            return [[] for _ in range(len(queries))]
        scores, rows = self.raw_search(queries, min(k, len(self._vecs)))
        return [[(int(i), float(s)) for s, i in zip(srow, irow, strict=True) if i >= 0]
                for srow, irow in zip(scores, rows, strict=True)]

    # ---- persistence -----------------------------------------------------------------

    def save_vectors(self, path: Path) -> None:
        """The rows as a .npy file, on disk before this returns."""
        with open(path, "wb") as fh:
            np.save(fh, self._vecs, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())

    def save_index(self, path: Path) -> None:
        faiss.write_index(self._flat(), str(path))
        fsync_path(path)

    def load_index(self, path: Path) -> bool:
        """Use the index saved at ``path`` if it holds exactly these rows (a flat index
        stores them verbatim); False when it is missing or stale (rebuilt on demand)."""
        index = _read_flat(path, self._vecs)
        self._index = index
        return index is not None


def read_vectors(path: Path, shape: tuple[int, int]) -> np.ndarray | None:
    """The float32 rows saved at ``path`` if they have ``shape``, else None."""
    try:
        vecs = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if vecs.dtype != np.float32 or vecs.shape != shape:
        return None
    return vecs


def _read_flat(path: Path, vecs: np.ndarray) -> faiss.IndexFlatIP | None:
    if not path.is_file():
        return None
    try:
        index = faiss.read_index(str(path))
    except RuntimeError:
        return None
    if not isinstance(index, faiss.IndexFlatIP) or index.d != vecs.shape[1] or index.ntotal != len(vecs):
        return None
    if len(vecs) and not np.array_equal(index.reconstruct_n(0, len(vecs)), vecs):
        return None
    return index


# What every PoolFiles manifest holds (``save``), and the JSON types its readers rely on
# (a pool without records, e.g. DC-Cu's, records no embedding).
_MANIFEST_SHAPE = {"format": str, "method": str, "files": dict, "embedding_model": (str, type(None)),
                   "dim": (int, type(None)), "built_by": dict, "updated_at": str}


@dataclass(frozen=True)
class PoolFiles:
    """A pool kept as ``manifest.json`` (format, method, the files' sha256/line counts, the
    embedding), one JSON record per line (``records``) and ``vectors.npy`` (row i: record i's
    vector): how it is read, checked and written, each damage refused in one line with ``fix``."""

    format: str  # the manifest's "format"
    method: str  # the manifest's "method" (``pool_dirs.find_pool`` finds a pool by it)
    records: str  # the JSON-lines file, e.g. "notes.jsonl"
    label: str  # the method as a message names it, e.g. "A-Mem"
    fix: str  # what to do about a damaged pool
    record_shape: Shape = field(default_factory=dict)  # a record's keys -> their JSON types
    manifest_shape: Shape = field(default_factory=dict)  # the method's own manifest keys -> their JSON types
    record_keys: tuple[str, ...] = ()  # the keys every record has
    manifest_file: JsonFile = field(init=False)
    records_file: JsonFile = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "manifest_file", JsonFile(f"{self.label}'s pool manifest.json", fix=self.fix,
                                                           shape={**_MANIFEST_SHAPE, **self.manifest_shape}))
        object.__setattr__(self, "records_file", JsonFile(f"{self.label}'s pool {self.records}", fix=self.fix,
                                                          lines=True, shape=self.record_shape,
                                                          required=self.record_keys))

    def read_manifest(self, path: Path) -> dict[str, Any]:
        manifest = self.manifest_file.read(path / MANIFEST)
        if manifest is None:
            raise UserError(f"{path / MANIFEST} is missing; {self.fix}")
        return manifest

    def read_records(self, path: Path, strict: bool = True) -> list[dict[str, Any]]:
        """The records (``strict``: a damaged line refuses the pool; else it is left out with a
        warning, as describing a pool for `reme pool show` does)."""
        return self.records_file.records(path / self.records, strict=strict)

    def verify(self, path: Path, manifest: dict[str, Any], names: Iterable[str] | None = None) -> None:
        """Refuse the pool if ``names`` (default: the records and their vectors) are not what
        its manifest records."""
        integrity.verify(path, manifest.get("files"), (self.records, VECTORS) if names is None else names, self.fix)

    def check(self, path: Path) -> dict[str, Any]:
        """The manifest, if the files are what it records (else a one-line refusal)."""
        manifest = self.read_manifest(path)
        self.verify(path, manifest)
        return manifest

    def load(self, path: Path, manifest: dict[str, Any], embedder: Any) -> tuple[list[dict[str, Any]], np.ndarray | None]:
        """The records and their vectors, embedded with ``embedder``'s model (else refused)."""
        require_embedding(path, manifest, embedder, self.label)
        records = self.read_records(path)
        vectors = np.load(path / VECTORS, allow_pickle=False) if records else None
        if vectors is not None and len(vectors) != len(records):
            raise UserError(f"{path} is inconsistent ({len(records)} records, {len(vectors)} vectors); {self.fix}")
        return records, vectors

    def save(self, path: Path, records: Iterable[dict[str, Any]] | None, index: VectorIndex | None,
             fields: dict[str, Any], extra: Iterable[str] = ()) -> None:
        """Write the records and their vectors (``index``; None for both: a pool without
        them) and the manifest (``fields`` after its format, method and files; ``extra``: more
        files the method wrote into ``path`` that the manifest records)."""
        path.mkdir(parents=True, exist_ok=True)
        names = list(extra)
        if records is not None:
            tmp = path / (self.records + ".tmp")
            tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
            tmp.replace(path / self.records)
            names[:0] = [self.records]
        if index is not None:
            index.save_vectors(path / VECTORS)
            names.insert(1, VECTORS)
        write_json_atomic(path / MANIFEST, {"format": self.format, "method": self.method,
                                            "files": integrity.record(path, names), **fields, "updated_at": now()})


class StoredRecord:
    """Base of a ``RecordStore``'s record dataclass: read back from its JSON line, keys the
    dataclass no longer has left out."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})  # type: ignore[attr-defined]


R = TypeVar("R", bound=StoredRecord)


class RecordStore(Generic[R]):
    """Records (dataclasses with an ``id`` and ``from_dict``) by id in insertion order, row i of
    the vector index embedding record i, saved as ``files``. A subclass adds how events change
    it and what its manifest counts (``manifest_fields``)."""

    files: ClassVar[PoolFiles]
    record: ClassVar[type[StoredRecord]]

    def __init__(self, embedder: Any, records: list[R] | None = None, vectors: np.ndarray | None = None,
                 built_by: dict[str, Any] | None = None):
        self.embedder = embedder
        self.by_id: dict[str, R] = {r.id: r for r in records or []}  # type: ignore[attr-defined]
        self._index = VectorIndex(embedder.dim, vectors)
        self.built_by = built_by or {}

    def __len__(self) -> int:
        return len(self.by_id)

    def nearest(self, text: str, k: int) -> list[tuple[R, float]]:
        """The k records whose vectors are nearest to ``text``'s (cosine), best first."""
        if not self.by_id or k <= 0:
            return []
        ordered = list(self.by_id.values())
        return [(ordered[r], s) for r, s in self._index.search(self.embedder.embed([text]), k)[0]]

    def copy(self) -> RecordStore[R]:
        return type(self)(self.embedder, [self.record.from_dict(asdict(r)) for r in self.by_id.values()],  # type: ignore[call-overload]
                          self._index.vectors.copy(), dict(self.built_by))

    # ------------------------------------------------------------------ persistence
    @classmethod
    def check(cls, path: Path) -> dict[str, Any]:
        """The manifest, if the files are what it records (else a one-line refusal)."""
        return cls.files.check(path)

    @classmethod
    def load(cls, path: Path, embedder: Any) -> RecordStore[R]:
        manifest = cls.check(path)
        records, vectors = cls.files.load(path, manifest, embedder)
        return cls(embedder, [cls.record.from_dict(d) for d in records], vectors, manifest.get("built_by"))

    def manifest_fields(self) -> dict[str, Any]:
        """What the manifest counts of the records, before the embedding and ``built_by``."""
        return {}

    def save(self, path: Path) -> None:
        self.files.save(path, (asdict(r) for r in self.by_id.values()), self._index,  # type: ignore[call-overload]
                        {**self.manifest_fields(), "embedding_model": self.embedder.name, "dim": self.embedder.dim,
                         "built_by": self.built_by})

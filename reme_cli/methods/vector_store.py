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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from reme_cli.core.errors import UserError
from reme_cli.core.staging import fsync_path


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

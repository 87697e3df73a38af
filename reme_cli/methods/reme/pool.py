"""An experience pool: experiences, their retrieval vectors and a faiss index, as a directory.

    <pool>/manifest.json      embedding name/dim, retrieval key, counts, built_by, times,
                              format version, sha256 and line count of the data files
                              (a pool whose experiences disagree with them is refused)
    <pool>/experiences.jsonl  one Experience per line
    <pool>/embeddings.npy     float32 rows aligned with experiences.jsonl (retrieval key text)
    <pool>/index.faiss        IndexFlatIP over those rows; derived, rebuilt when missing/stale

The vectors and their index are the methods' one vector store (``methods/vector_store.py``).
Saves are all-or-nothing (``core/staging.replace_dir``): the new state is written complete
into a sibling directory and swapped in by two renames. A crash between the renames leaves
the previous pool under a `.<name>.old-*` sibling, which `load` moves back. One writer per
pool; readers may come and go. Other files or folders someone keeps inside the pool directory (e.g. an event
log) are carried over to each new version by hard link, so a save never drops them.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import faiss  # noqa: F401  (the crash tests patch faiss.write_index through this module)
import numpy as np

from reme_cli.core import integrity
from reme_cli.core.errors import UserError
from reme_cli.core.reading import JsonFile, shape_of
from reme_cli.core.staging import clean_backups, clean_stale, recover_swap, replace_dir
from reme_cli.llm.embed import Embedder
from reme_cli.methods.reme.experience import RETRIEVAL_KEYS, SOURCES, Experience, now_iso
from reme_cli.methods.vector_store import VectorIndex, embedding_identity, read_vectors

FORMAT = "reme-pool"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
EXPERIENCES = "experiences.jsonl"
EMBEDDINGS = "embeddings.npy"

_FIX = "rebuild the pool (reme build-pool, reme pool import) or restore it from a copy"
POOL_MANIFEST = JsonFile("a ReMe pool's manifest.json", fix=_FIX, shape={
    "format": str, "format_version": int, "method": str, "embedding": dict, "retrieval_key": str, "created_at": str,
    "size": int, "files": dict, "built_by": dict})
POOL_LINES = JsonFile("a ReMe pool's experiences.jsonl", fix=_FIX, lines=True, shape=shape_of(Experience),
                      required=("id", "when_to_use", "content", "source"))
INDEX = "index.faiss"
_POOL_FILES = (MANIFEST, EXPERIENCES, EMBEDDINGS, INDEX)


class Pool:
    """Use `Pool.create` / `Pool.load`; the constructor assumes consistent arguments."""

    def __init__(
        self,
        path: Path,
        embedder: Embedder,
        retrieval_key: str,
        built_by: dict[str, Any],
        created_at: str,
        items: list[Experience],
        vectors: np.ndarray,
        updated_at: str | None = None,
        copied_from: str | None = None,
        store: VectorIndex | None = None,
    ):
        self.path = path
        self.embedder = embedder
        self.retrieval_key = retrieval_key
        self.built_by = built_by
        self.created_at = created_at
        self.updated_at = updated_at or created_at
        self.copied_from = copied_from
        # What load() had to fix in memory (persisted by the next save); for the CLI to show.
        self.repairs: list[str] = []
        # Candidates the last add() dropped as near-duplicates: (candidate, id it matched, cosine).
        self.last_dropped: list[tuple[Experience, str, float]] = []
        self._lock = threading.RLock()
        self._items = items
        self._store = store if store is not None else VectorIndex(embedder.dim, vectors)
        self._pos = {e.id: i for i, e in enumerate(items)}

    # ---- construction -------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | Path,
        embedder: Embedder,
        retrieval_key: str = "usage_scenario",
        built_by: dict[str, Any] | None = None,
    ) -> Pool:
        path = Path(path)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise UserError(f"{path} already exists and is not empty; choose another pool path or delete it")
        if retrieval_key not in RETRIEVAL_KEYS:
            raise UserError(f"unknown retrieval key {retrieval_key!r}; choose one of {', '.join(RETRIEVAL_KEYS)}")
        built_by = dict(built_by or {})
        json.dumps(built_by)  # fail here, not at the first save, if it is not JSON
        pool = cls(path, embedder, retrieval_key, built_by, now_iso(), [], np.zeros((0, embedder.dim), np.float32))
        pool.save()
        return pool

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder) -> Pool:
        path = Path(path)
        _recover_interrupted_save(path)
        manifest = _read_manifest(path)
        emb = manifest["embedding"]
        if emb["name"] != embedder.name or emb["dim"] != embedder.dim:
            raise UserError(
                f"pool {path} was embedded with {emb['name']} ({emb['dim']}-d) but the configured embedder is "
                f"{embedder.name} ({embedder.dim}-d); pick the pool's model with embedding=..., "
                "or re-embed it with memory.reembed=true"
            )
        items = _read_checked_experiences(path, manifest)
        repairs: list[str] = []
        vectors = _read_vectors(path, manifest, len(items), embedder.dim)
        if vectors is None:
            # The data files no longer match what the last save wrote (hand edit, lost file):
            # re-embed rather than search with vectors of other text.
            repairs.append(f"{EMBEDDINGS} missing or out of date: re-embedded {len(items)} experiences")
            vectors = embedder.embed([e.retrieval_text(manifest["retrieval_key"]) for e in items])
        store = VectorIndex(embedder.dim, vectors)
        if not store.load_index(path / INDEX):
            repairs.append(f"{INDEX} missing or stale: rebuilt from the embeddings")
        pool = cls(
            path,
            embedder,
            manifest["retrieval_key"],
            manifest.get("built_by", {}),
            manifest["created_at"],
            items,
            vectors,
            updated_at=manifest.get("updated_at"),
            copied_from=manifest.get("copied_from"),
            store=store,
        )
        pool.repairs = repairs
        return pool

    @staticmethod
    def experiences_at(path: str | Path) -> tuple[list[Experience], str]:
        """A pool's experiences and retrieval key, whatever embedder wrote it (to re-embed)."""
        path = Path(path)
        manifest = _read_manifest(path)
        return _read_checked_experiences(path, manifest), manifest["retrieval_key"]

    @staticmethod
    def check(path: str | Path) -> None:
        """Refuse a damaged pool (cheap: no embedder, no vectors), e.g. before a run starts."""
        path = Path(path)
        _recover_interrupted_save(path)
        _read_checked_experiences(path, _read_manifest(path))

    def copy_to(self, path: str | Path, overwrite: bool = False) -> Pool:
        """An independent pool at `path` (e.g. one per dynamic-mode stream)."""
        path = Path(path)
        if path.exists() and (not path.is_dir() or any(path.iterdir())) and not overwrite:
            raise UserError(f"{path} already exists; choose another path or allow overwriting")
        with self._lock:
            other = Pool(
                path,
                self.embedder,
                self.retrieval_key,
                copy.deepcopy(self.built_by),
                self.created_at,
                copy.deepcopy(self._items),
                self._store.vectors.copy(),
                updated_at=self.updated_at,
                copied_from=str(self.path),
            )
        other.save()
        return other

    # ---- reading ------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, exp_id: object) -> bool:
        return exp_id in self._pos

    def __iter__(self) -> Iterator[Experience]:
        # Copies throughout: mutating a returned experience must not silently desync it
        # from its vector or bypass update_counts().
        with self._lock:
            items = copy.deepcopy(self._items)
        return iter(items)

    def get(self, exp_id: str) -> Experience | None:
        with self._lock:
            i = self._pos.get(exp_id)
            return None if i is None else copy.deepcopy(self._items[i])

    @property
    def vectors(self) -> np.ndarray:
        """Read-only (len, dim) view of the retrieval vectors, row i = i-th experience."""
        return self._store.vectors

    def search(self, query: str, top_k: int) -> list[tuple[Experience, float]]:
        """Top-k experiences by cosine between `query` and the pool's retrieval key."""
        return self.search_many([query], top_k)[0]

    def search_many(self, queries: list[str], top_k: int) -> list[list[tuple[Experience, float]]]:
        if top_k <= 0 or not self._items or not queries:
            return [[] for _ in queries]
        qv = self.embedder.embed(list(queries))
        with self._lock:
            return [[(copy.deepcopy(self._items[i]), s) for i, s in hits] for hits in self._store.search(qv, top_k)]

    # ---- writing ------------------------------------------------------------------

    def add(self, experiences: Iterable[Experience], dedup_threshold: float | None = None,
            dedup_text: str = "key") -> list[Experience]:
        """Embed and add; returns the experiences actually added.

        With a threshold, a candidate whose cosine to any pool member or to an earlier
        kept candidate of the same batch is above it is dropped (see `last_dropped`).
        ``dedup_text`` says which texts are compared (``ReMeConfig.dedup_text``).
        """
        cands = list(experiences)
        with self._lock:
            self.last_dropped = []
            seen = set(self._pos)
            for c in cands:
                if c.id in seen:
                    raise ValueError(f"experience id {c.id} is already in the pool or repeated in the batch")
                seen.add(c.id)
            if not cands:
                return []
            vecs = self.embedder.embed([c.retrieval_text(self.retrieval_key) for c in cands])
            keep = self._novel(cands, vecs, dedup_threshold, dedup_text)
            kept = [copy.deepcopy(cands[i]) for i in keep]
            start = len(self._items)
            self._items.extend(kept)
            self._pos.update({e.id: start + j for j, e in enumerate(kept)})
            self._store.add(vecs[keep])
            return copy.deepcopy(kept)

    def novel(self, experiences: Iterable[Experience], dedup_threshold: float,
              dedup_text: str = "key") -> list[Experience]:
        """The candidates ``add`` would keep, without adding them (nor touching `last_dropped`)."""
        cands = list(experiences)
        if not cands:
            return []
        with self._lock:
            dropped = self.last_dropped
            try:
                vecs = self.embedder.embed([c.retrieval_text(self.retrieval_key) for c in cands])
                return [cands[i] for i in self._novel(cands, vecs, dedup_threshold, dedup_text)]
            finally:
                self.last_dropped = dropped

    def _novel(self, cands: list[Experience], vecs: np.ndarray, threshold: float | None,
               dedup_text: str) -> list[int]:
        if threshold is None or dedup_text == "key":
            return self._select_novel(cands, vecs, threshold)
        # An empty retrieval key (a lesson under generalized_query / keywords) would make
        # every such candidate a duplicate of the others: key and content together.
        text = lambda e: f"{e.retrieval_text(self.retrieval_key)} {e.content}"  # noqa: E731
        cand_vecs = self.embedder.embed([text(c) for c in cands])
        if dedup_text == "key_content_vs_key":
            # The authors' memory_deduplication_op: the new memory's "when_to_use content"
            # against the stored nodes, which embed when_to_use alone (the retrieval vectors).
            return self._select_novel(cands, cand_vecs, threshold)
        pool_vecs = self.embedder.embed([text(e) for e in self._items]) if self._items else None
        return self._select_novel(cands, cand_vecs, threshold, pool_vecs)

    def _select_novel(self, cands: list[Experience], vecs: np.ndarray, threshold: float | None,
                      pool_vecs: np.ndarray | None = None) -> list[int]:
        """``pool_vecs``: the members' vectors in the same space as ``vecs`` (default: the
        retrieval index)."""
        if threshold is None:
            return list(range(len(cands)))
        best_sim = np.full(len(cands), -np.inf, dtype=np.float32)
        best_id: list[str | None] = [None] * len(cands)
        if self._items and pool_vecs is not None:
            sims = vecs @ pool_vecs.T
            rows = sims.argmax(axis=1)
            best_sim = sims[np.arange(len(cands)), rows].astype(np.float32)
            best_id = [self._items[r].id for r in rows]
        elif self._items:
            sims, rows = self._store.raw_search(vecs, 1)
            best_sim = sims[:, 0].copy()
            best_id = [self._items[r].id for r in rows[:, 0]]
        within = vecs @ vecs.T
        keep: list[int] = []
        for i in range(len(cands)):
            if keep:
                j = keep[int(np.argmax(within[i, keep]))]
                if within[i, j] > best_sim[i]:
                    best_sim[i], best_id[i] = within[i, j], cands[j].id
            if best_sim[i] > threshold:  # strictly above, as the authors' op (#213)
                self.last_dropped.append((copy.deepcopy(cands[i]), str(best_id[i]), float(best_sim[i])))
            else:
                keep.append(i)
        return keep

    def remove(self, ids: Iterable[str]) -> list[Experience]:
        """Remove by id (KeyError for an unknown one); returns the removed experiences."""
        with self._lock:
            drop = {self._index_of(i) for i in ids}
            if not drop:
                return []
            removed = [self._items[i] for i in sorted(drop)]
            keep = [i for i in range(len(self._items)) if i not in drop]
            self._items = [self._items[i] for i in keep]
            self._store.keep(keep)
            self._pos = {e.id: i for i, e in enumerate(self._items)}
            return removed

    def update_counts(self, ids: Iterable[str], *, retrieved: bool = True, success: bool = False) -> list[Experience]:
        """Refinement bookkeeping after a task: f += 1 if retrieved, u += 1 if the task succeeded."""
        with self._lock:
            rows = [self._index_of(i) for i in ids]
            stamp = now_iso()
            for r in rows:
                e = self._items[r]
                e.f += int(retrieved)
                e.u += int(success)
                e.updated_at = stamp
            return [copy.deepcopy(self._items[r]) for r in rows]

    def _index_of(self, exp_id: str) -> int:
        try:
            return self._pos[exp_id]
        except KeyError:
            raise KeyError(f"no experience {exp_id!r} in pool {self.path}") from None

    def save(self) -> None:
        with self._lock:
            self.updated_at = now_iso()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            replace_dir(self.path, self._write, kind="saving")
            # Safe once a save went through: this process is the pool's one writer.
            clean_stale(self.path, "saving")
            clean_backups(self.path, _is_pool)

    def _write(self, staging: Path) -> None:
        """The complete new pool, into ``staging``."""
        lines = "".join(json.dumps(e.to_dict(), ensure_ascii=False) + "\n" for e in self._items)
        _write_bytes(staging / EXPERIENCES, lines.encode("utf-8"))
        self._store.save_vectors(staging / EMBEDDINGS)
        self._store.save_index(staging / INDEX)
        _carry_foreign_entries(self.path, staging)
        # Written last: a folder with a manifest is a complete pool.
        _write_bytes(staging / MANIFEST, json.dumps(self._manifest(staging), indent=2).encode("utf-8"))

    def _manifest(self, staging: Path) -> dict[str, Any]:
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "embedding": embedding_identity(self.embedder),
            "retrieval_key": self.retrieval_key,
            "size": len(self._items),
            "counts_by_source": _counts_by_source(self._items),
            "built_by": self.built_by,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "files": integrity.record(staging, (EXPERIENCES, EMBEDDINGS)),
        }
        if self.copied_from:
            manifest["copied_from"] = self.copied_from
        return manifest

    # ---- summary ------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        with self._lock:
            items = list(self._items)
        conf = np.array([e.confidence for e in items], dtype=float)
        f = np.array([e.f for e in items], dtype=int)
        u = np.array([e.u for e in items], dtype=int)
        used = f > 0
        return {
            "size": len(items),
            "counts_by_source": _counts_by_source(items),
            "embedding": {"name": self.embedder.name, "dim": self.embedder.dim},
            "retrieval_key": self.retrieval_key,
            "confidence": _summary(conf),
            "f": {**(_summary(f) or {}), "histogram": _histogram(f)},
            "u": {**(_summary(u) or {}), "histogram": _histogram(u)},
            # The deletion rule looks at u/f; only defined once an experience was retrieved.
            "u_over_f": _summary(u[used] / f[used]),
            "never_retrieved": int((~used).sum()),
        }


# ---- helpers: reading ----------------------------------------------------------------


def _read_manifest(path: Path) -> dict[str, Any]:
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise UserError(f"{path} is not an experience pool (no {MANIFEST}); build or import a pool there first")
    manifest = POOL_MANIFEST.read(mpath)
    if manifest is None or manifest.get("format") != FORMAT:
        raise UserError(f"{mpath} is not a reme pool manifest; rebuild the pool")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UserError(f"pool {path} has format version {version!r}; this reme reads up to {FORMAT_VERSION}")
    emb = manifest.get("embedding")
    if not (isinstance(emb, dict) and isinstance(emb.get("name"), str) and isinstance(emb.get("dim"), int)):
        raise UserError(f"{mpath} lacks embedding name/dim; rebuild the pool")
    if manifest.get("retrieval_key") not in RETRIEVAL_KEYS or not isinstance(manifest.get("created_at"), str):
        raise UserError(f"{mpath} has no valid retrieval_key/created_at; rebuild the pool")
    return manifest


def _read_experiences(path: Path) -> list[Experience]:
    if not path.is_file():
        raise UserError(f"{path} is missing; the pool is incomplete, rebuild it")
    items: list[Experience] = []
    seen: set[str] = set()
    for n, record in POOL_LINES.numbered(path, strict=True):  # a pool is all its lines, or refused
        try:
            exp = Experience.from_dict(record)
        except ValueError as exc:
            raise UserError(f"{path} line {n}: {exc}; fix the line or rebuild the pool") from None
        if exp.id in seen:
            raise UserError(f"{path} line {n}: duplicate id {exp.id}; fix the file or rebuild the pool")
        seen.add(exp.id)
        items.append(exp)
    return items


def _read_checked_experiences(path: Path, manifest: dict[str, Any]) -> list[Experience]:
    """The experiences, if they are what the last save wrote: an emptied, cut or edited
    file is refused rather than used as a smaller pool."""
    fix = "rebuild it (`reme build-pool`, `reme pool import`) or restore the file from a copy"
    integrity.verify(path, manifest.get("files"), (EXPERIENCES,), fix)
    items = _read_experiences(path / EXPERIENCES)
    if isinstance(manifest.get("size"), int) and manifest["size"] != len(items):
        raise UserError(f"pool {path} is damaged: {EXPERIENCES} holds {len(items)} experiences, its manifest "
                        f"records {manifest['size']}; {fix}")
    return items


def _read_vectors(path: Path, manifest: dict[str, Any], n: int, dim: int) -> np.ndarray | None:
    """The saved vectors if they still belong to the saved experiences, else None."""
    if integrity.damage(path, manifest.get("files") or {}, (EMBEDDINGS,)):
        return None
    return read_vectors(path / EMBEDDINGS, (n, dim))


# ---- helpers: atomic save ------------------------------------------------------------


def _is_pool(folder: Path) -> bool:
    """A complete pool (what a save's backup is): its manifest is written last."""
    return (folder / MANIFEST).is_file()


def _recover_interrupted_save(target: Path) -> None:
    recover_swap(target, _is_pool)


def _carry_foreign_entries(src: Path, dst: Path) -> None:
    if not src.is_dir():
        return
    for entry in src.iterdir():
        if entry.name in _POOL_FILES:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, dst / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, dst / entry.name)


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    # A hard link shares the inode, so a writer holding the file open keeps appending to it.
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def _write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        _flush(fh)


def _flush(fh: Any) -> None:
    fh.flush()
    os.fsync(fh.fileno())


# ---- helpers: stats ------------------------------------------------------------------


def _counts_by_source(items: Iterable[Experience]) -> dict[str, int]:
    counts: Counter[str] = Counter(e.source for e in items)
    return {s: counts.get(s, 0) for s in SOURCES}


def _summary(values: np.ndarray) -> dict[str, float] | None:
    if values.size == 0:
        return None
    q = np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])
    return {
        "mean": float(values.mean()),
        "min": float(q[0]),
        "p25": float(q[1]),
        "median": float(q[2]),
        "p75": float(q[3]),
        "max": float(q[4]),
    }


def _histogram(values: np.ndarray) -> dict[str, int]:
    uniq, counts = np.unique(values, return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(uniq, counts, strict=True)}

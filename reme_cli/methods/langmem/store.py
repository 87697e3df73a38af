"""LangMem's episodic store: a LangGraph ``InMemoryStore`` with an embedding index (the
guide's setup), embedded by reme's embedder, kept on disk as the puts that built it.

    <dir>/manifest.json   method "langmem", embedding model and dim, episode count, sha256
                          (written and checked by ``vector_store.PoolFiles``)
    <dir>/episodes.jsonl  one put per line ({"key", "value"}), in the order applied

Loading replays the puts into a fresh store, so a pool, a dynamic stream's state and a
resumed stream are the same store whenever they hold the same puts in the same order.
``Proposing`` is the store the manager writes to while learning: it reads the real store
and keeps the writes as events, which the seam applies when the unit commits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reme_cli.methods.langmem.episodes import NAMESPACE
from reme_cli.methods.vector_store import PoolFiles, require_embedding

METHOD = "langmem"
EPISODES = "episodes.jsonl"
FILES = PoolFiles("reme-langmem-episodes", METHOD, EPISODES, "LangMem",
                  "rebuild it with `reme build-pool memory=langmem` or restore the file from a copy",
                  record_shape={"key": str, "value": dict}, record_keys=("key", "value"),
                  manifest_shape={"namespace": list, "episodes": int, "puts": int})


class EpisodeStore:
    def __init__(self, embedder: Any, puts: Iterable[dict[str, Any]] = (), built_by: dict[str, Any] | None = None):
        from langgraph.store.memory import InMemoryStore

        self.embedder = embedder
        # The guide's index: the whole value embedded ("fields" left at its default).
        self.store = InMemoryStore(index={"dims": embedder.dim, "embed": self._embed})
        self.puts: list[dict[str, Any]] = []
        self.built_by = built_by or {}
        self.apply(list(puts))

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed(list(texts)).tolist()

    def __len__(self) -> int:
        return len({p["key"] for p in self.puts})

    def apply(self, puts: list[dict[str, Any]]) -> None:
        for put in puts:
            self.store.put(NAMESPACE, put["key"], put["value"])
            self.puts.append({"key": put["key"], "value": put["value"]})

    def search(self, query: str, limit: int) -> list[Any]:
        """``store.search(("memories", "episodes"), query=..., limit=...)``, as the guide."""
        return self.store.search(NAMESPACE, query=query, limit=limit) if limit > 0 else []

    def copy(self) -> EpisodeStore:
        return EpisodeStore(self.embedder, self.puts, dict(self.built_by))

    # ------------------------------------------------------------------ persistence
    @classmethod
    def load(cls, path: Path, embedder: Any) -> EpisodeStore:
        """The store the puts saved at ``path`` rebuild (no vectors kept: replaying embeds)."""
        manifest = FILES.read_manifest(path)
        FILES.verify(path, manifest, (EPISODES,))
        require_embedding(path, manifest, embedder, FILES.label)
        return cls(embedder, FILES.read_records(path), manifest.get("built_by"))

    def save(self, path: Path) -> None:
        FILES.save(path, self.puts, None, {
            "namespace": list(NAMESPACE), "episodes": len(self), "puts": len(self.puts),
            "embedding_model": self.embedder.name, "dim": self.embedder.dim, "built_by": self.built_by})


def proposing_store(real: EpisodeStore, read: Any) -> Any:
    """A LangGraph store for the manager: reads go to ``real`` through ``read`` (a guarded
    call), writes are kept in ``.written`` and never reach ``real``."""
    from langgraph.store.base import BaseStore, PutOp

    class Proposing(BaseStore):
        def __init__(self) -> None:
            self.written: list[PutOp] = []

        def batch(self, ops: Iterable[Any]) -> list[Any]:
            ops = list(ops)
            results: list[Any] = [None] * len(ops)
            reads = [(i, op) for i, op in enumerate(ops) if not isinstance(op, PutOp)]
            self.written += [op for op in ops if isinstance(op, PutOp)]
            if reads:
                for (i, _), r in zip(reads, read(real.store.batch, [op for _, op in reads])):
                    results[i] = r
            return results

        async def abatch(self, ops: Iterable[Any]) -> list[Any]:
            return await asyncio.to_thread(self.batch, list(ops))

    return Proposing()

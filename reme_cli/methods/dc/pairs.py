"""DC-RS's memory: past (input, output) pairs and the vectors of their inputs, searched by
cosine similarity (the authors: ``cosine_similarity`` of the inputs' embeddings, top k).
Vectors are the project's embedder's (unit rows) in the methods' vector store, whose inner
product is the cosine."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from reme_cli.methods.vector_store import VectorIndex


@dataclass
class Pair:
    id: str  # the training task or the unit it came from
    input: str  # the task's query: what is embedded
    output: str  # the agent's trajectory as text


class PairStore:
    def __init__(self, embedder: Any, pairs: list[Pair] | None = None, vectors: np.ndarray | None = None):
        self.embedder = embedder
        self.pairs: list[Pair] = []
        self.index = VectorIndex(embedder.dim)
        if pairs:
            self._add(pairs, vectors if vectors is not None else embedder.embed([p.input for p in pairs]))

    def __len__(self) -> int:
        return len(self.pairs)

    def _add(self, pairs: list[Pair], vectors: np.ndarray) -> None:
        self.pairs += pairs
        self.index.add(vectors)

    def add(self, pairs: list[Pair]) -> None:
        if pairs:
            self._add(pairs, self.embedder.embed([p.input for p in pairs]))

    def vectors(self) -> np.ndarray:
        return self.index.vectors

    def copy(self) -> PairStore:
        return PairStore(self.embedder, [Pair(**asdict(p)) for p in self.pairs], self.vectors())

    def search(self, text: str, k: int) -> list[tuple[Pair, float]]:
        """The k pairs whose inputs are nearest to ``text``, most similar first."""
        if not self.pairs or k <= 0:
            return []
        return [(self.pairs[r], s) for r, s in self.index.search(self.embedder.embed([text]), k)[0]]

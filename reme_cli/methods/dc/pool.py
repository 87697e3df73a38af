"""A Dynamic Cheatsheet pool (also a dynamic stream's saved state), as a directory:

    <dir>/manifest.json    method "dc", the variant it was built for, the cheatsheet's version,
                           embedding model and dim, and the files below (checked on load)
    <dir>/cheatsheet.txt   DC-Cu's cheatsheet (absent in a pool built for DC-RS)
    <dir>/pairs.jsonl      every training (input, output) pair, in split order
    <dir>/vectors.npy      (n, dim) float32: row i embeds pair i's input

Both variants store the pairs (no LLM needed), so a DC-RS run can use a DC-Cu pool.
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
from reme_cli.methods.dc.cheatsheet import Cheatsheet
from reme_cli.methods.dc.pairs import Pair, PairStore
from reme_cli.methods.pool_dirs import find_pool
from reme_cli.methods.vector_store import require_embedding

METHOD = "dc"
FORMAT = "reme-dc-pool"
MANIFEST, CHEATSHEET, PAIRS, VECTORS = "manifest.json", "cheatsheet.txt", "pairs.jsonl", "vectors.npy"
FIX = "rebuild it with `reme build-pool memory=dc` or restore the file from a copy"


@dataclass
class DCPool:
    cheatsheet: Cheatsheet | None  # None: built for DC-RS only
    pairs: PairStore | None  # None: a DC-Cu stream's state (it never reads pairs)
    built_by: dict[str, Any] = field(default_factory=dict)

    def save(self, path: Path, variant: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        names = []
        if self.pairs is not None:
            rows = "".join(json.dumps(asdict(p), ensure_ascii=False) + "\n" for p in self.pairs.pairs)
            (path / PAIRS).write_text(rows, encoding="utf-8")
            np.save(path / VECTORS, self.pairs.vectors())
            names += [PAIRS, VECTORS]
        if self.cheatsheet is not None:
            (path / CHEATSHEET).write_text(self.cheatsheet.text, encoding="utf-8")
            names.append(CHEATSHEET)
        write_json_atomic(path / MANIFEST, {
            "format": FORMAT, "method": METHOD, "variant": variant, "files": integrity.record(path, names),
            "cheatsheet": self.cheatsheet.version() if self.cheatsheet is not None else None,
            "pairs": len(self.pairs) if self.pairs is not None else None,
            "embedding_model": self.pairs.embedder.name if self.pairs is not None else None,
            "dim": self.pairs.embedder.dim if self.pairs is not None else None,
            "built_by": self.built_by, "updated_at": now()})


def resolve(path: str | Path) -> Path:
    return find_pool(path, METHOD, "a Dynamic Cheatsheet pool")


def manifest_of(pool: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((pool / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{pool / MANIFEST} is unreadable ({exc}); {FIX}") from None
    names = ([PAIRS, VECTORS] if manifest.get("pairs") is not None else []) + \
        ([CHEATSHEET] if manifest.get("cheatsheet") else [])
    integrity.verify(pool, manifest.get("files"), names, FIX)
    return manifest


def check(path: str | Path, variant: str) -> Path:
    """The pool at ``path``, refused in one line if damaged or without what ``variant`` reads."""
    pool = resolve(path)
    manifest = manifest_of(pool)
    if variant != "cumulative" and manifest.get("pairs") is None:
        raise UserError(f"memory.pool={path} holds no input/output pairs; give a pool made by `reme build-pool memory=dc`")
    if variant == "cumulative" and not manifest.get("cheatsheet"):
        raise UserError(f"memory.pool={path} was built for memory.variant={manifest.get('variant')} and holds no "
                        "cheatsheet; build one with `reme build-pool memory=dc memory.variant=cumulative`")
    return pool


def load(path: str | Path, variant: str, embedder: Any | None) -> DCPool:
    """The pool; its pairs only with an ``embedder`` (DC-Cu reads none, and loads no model)."""
    pool = check(path, variant)
    manifest = manifest_of(pool)
    sheet = None
    if manifest.get("cheatsheet"):
        sheet = Cheatsheet((pool / CHEATSHEET).read_text(encoding="utf-8"), int(manifest["cheatsheet"]["rewrites"]))
    if embedder is None:
        return DCPool(sheet, None, manifest.get("built_by") or {})
    require_embedding(pool, manifest, embedder, "DC")
    pairs = [Pair(**row) for row in read_lines(pool / PAIRS)]
    vectors = np.load(pool / VECTORS) if pairs else None
    if vectors is not None and len(vectors) != len(pairs):
        raise UserError(f"{pool} is inconsistent ({len(pairs)} pairs, {len(vectors)} vectors); {FIX}")
    return DCPool(sheet, PairStore(embedder, pairs, vectors), manifest.get("built_by") or {})

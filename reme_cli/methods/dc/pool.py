"""A Dynamic Cheatsheet pool (also a dynamic stream's saved state), as a directory:

    <dir>/manifest.json    method "dc", the variant it was built for, the cheatsheet's version,
                           embedding model and dim, and the files below (checked on load)
    <dir>/cheatsheet.txt   DC-Cu's cheatsheet (absent in a pool built for DC-RS)
    <dir>/pairs.jsonl      every training (input, output) pair, in split order
    <dir>/vectors.npy      (n, dim) float32: row i embeds pair i's input

Both variants store the pairs (no LLM needed), so a DC-RS run can use a DC-Cu pool.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reme_cli.core.errors import UserError
from reme_cli.methods.dc.cheatsheet import Cheatsheet
from reme_cli.methods.dc.pairs import Pair, PairStore
from reme_cli.methods.pool_dirs import find_pool
from reme_cli.core.reading import required_of, shape_of
from reme_cli.methods.vector_store import VECTORS, PoolFiles

METHOD = "dc"
CHEATSHEET, PAIRS = "cheatsheet.txt", "pairs.jsonl"


@dataclass
class DCPool:
    cheatsheet: Cheatsheet | None  # None: built for DC-RS only
    pairs: PairStore | None  # None: a DC-Cu stream's state (it never reads pairs)
    built_by: dict[str, Any] = field(default_factory=dict)

    def save(self, path: Path, variant: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if self.cheatsheet is not None:
            (path / CHEATSHEET).write_text(self.cheatsheet.text, encoding="utf-8")
        pairs = self.pairs
        FILES.save(path, (asdict(p) for p in pairs.pairs) if pairs is not None else None,
                   pairs.index if pairs is not None else None, {
                       "variant": variant, "cheatsheet": self.cheatsheet.version() if self.cheatsheet is not None else None,
                       "pairs": len(pairs) if pairs is not None else None,
                       "embedding_model": pairs.embedder.name if pairs is not None else None,
                       "dim": pairs.embedder.dim if pairs is not None else None, "built_by": self.built_by},
                   extra=[CHEATSHEET] if self.cheatsheet is not None else [])


FILES = PoolFiles("reme-dc-pool", METHOD, PAIRS, "DC",
                  "rebuild it with `reme build-pool memory=dc` or restore the file from a copy",
                  record_shape=shape_of(Pair), record_keys=required_of(Pair),
                  manifest_shape={"variant": str, "cheatsheet": (dict, type(None)), "pairs": (int, type(None))})


def resolve(path: str | Path) -> Path:
    return find_pool(path, METHOD, "a Dynamic Cheatsheet pool")


def manifest_of(pool: Path) -> dict[str, Any]:
    manifest = FILES.read_manifest(pool)
    names = ([PAIRS, VECTORS] if manifest.get("pairs") is not None else []) + \
        ([CHEATSHEET] if manifest.get("cheatsheet") else [])
    FILES.verify(pool, manifest, names)
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
    records, vectors = FILES.load(pool, manifest, embedder)
    return DCPool(sheet, PairStore(embedder, [Pair(**row) for row in records], vectors), manifest.get("built_by") or {})

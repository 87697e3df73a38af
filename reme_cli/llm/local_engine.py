"""Which llama.cpp engine serves the embedded model: its command line and its identity.

Two engines serve the bundled GGUF behind the same OpenAI-compatible HTTP API:

- ``xllamacpp`` (PyPI, by xorbitsai, MIT): a prebuilt wheel of llama.cpp's own C++ server,
  built portable (AVX2/FMA/F16C, no AVX-512 or AMX), embedded in Python and started by
  ``python -m reme_cli.llm.xllama_server``. It installs in seconds.
- ``llama-cpp-python``: llama.cpp's Python bindings and their server
  (``python -m llama_cpp.server``). PyPI has no wheel of it, so scripts/install.sh compiles it
  portable (~5 min on 2 cores): the fallback where the xllamacpp wheel does not install or
  fails the smoke check, or the engine ``REME_LLAMA_ENGINE=source`` asks for.

``REME_LLAMA_ENGINE`` (``auto``, the default: xllamacpp where it is installed; ``xllamacpp``;
``source``) picks the engine where both are installed, at install time and at run time alike.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from importlib import metadata

from reme_cli.core.errors import UserError

ENGINE_ENV = "REME_LLAMA_ENGINE"
_CHOICES = "auto, xllamacpp or source"


@dataclass(frozen=True)
class Engine:
    name: str  # as recorded in a run's manifest
    module: str  # what `python -m` starts
    import_name: str  # whose presence means the engine is installed
    distribution: str  # whose version is recorded
    # Arguments only this engine's server takes, after the common ones.
    own_args: tuple[str, ...] = ()

    def installed(self) -> bool:
        return importlib.util.find_spec(self.import_name) is not None

    def version(self) -> str | None:
        try:
            return metadata.version(self.distribution)
        except metadata.PackageNotFoundError:
            return None

    def identity(self) -> dict[str, str | None]:
        return {"engine": self.name, "engine_version": self.version()}

    def command(self, python: str, model_path: str, alias: str, host: str, port: int, n_ctx: int,
                n_threads: int | None = None) -> list[str]:
        threads = [] if n_threads is None else ["--n_threads", str(n_threads), "--n_threads_batch", str(n_threads)]
        return [python, "-m", self.module, "--model", model_path, "--model_alias", alias, "--host", host,
                "--port", str(port), "--n_ctx", str(n_ctx), *threads, *self.own_args]


XLLAMACPP = Engine("xllamacpp", "reme_cli.llm.xllama_server", "xllamacpp", "xllamacpp")
LLAMA_CPP_PYTHON = Engine(
    "llama-cpp-python", "llama_cpp.server", "llama_cpp", "llama_cpp_python",
    own_args=(
        # Per-token logits for the whole prompt are never used and cost ~20% of prompt speed
        # plus memory (llama.cpp's C++ server keeps none).
        "--logits_all", "false",
        # Concurrent episodes interleave on one KV cache; the RAM prompt cache restores an
        # episode's prefix instead of recomputing it (7.7 s -> 1.3 s for a 3.2k-token BFCL
        # prompt). The xllamacpp launcher always caches (cache_prompt + cache_ram_mib).
        "--cache", "true"))


def choose() -> Engine:
    """The engine ``REME_LLAMA_ENGINE`` names, else xllamacpp if installed, else llama-cpp-python
    (whether that is installed is for the caller to check: ``Engine.installed``)."""
    wanted = os.environ.get(ENGINE_ENV) or "auto"  # the same words scripts/install_llama.sh takes
    if wanted == "auto":
        return XLLAMACPP if XLLAMACPP.installed() else LLAMA_CPP_PYTHON
    if wanted == "xllamacpp":
        return XLLAMACPP
    if wanted == "source":
        return LLAMA_CPP_PYTHON
    raise UserError(f"{ENGINE_ENV}={wanted!r} is not an engine; use {_CHOICES}")

"""How far a run is from the authors' setup: the fidelity column of `reme ablate --dry-run`
and of `reme report`.

The authors' setup is reme's default configuration for the run's benchmark and method with a
Qwen3 model (what the fidelity ledger, docs/fidelity.md, lists and tests/report/test_fidelity_ledger.py
holds the configs to), plus what no key holds (e.g. the embedding the authors used). A run
departs on each ledger key that matters to it and differs from that reference, unless the key
is what its table varies. Which keys matter and what a method departs in on purpose (the
ledger's "Named, not changed") the method says (``Memory.fidelity``: by default, that the
authors never published its settings), so no run reads "authors' setup" while one remains.
Each departure carries its level (``core/departure.py``): a run whose departures are all low
has cells free of medium/high departures, the count the dry-run and the report print.

Beside it, what else a reader must know of a run's numbers: where its pool came from
(``pool_origin``); whether a test double scored it, its manifest says (``Manifest.test_double``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reme_cli.core.config import context_length
from reme_cli.core.departure import Departure, is_clean
from reme_cli.core.run_log import flatten, read_config, read_pool_header
from reme_cli.methods.base import Memory, find_method
from reme_cli.methods.hooks import AUTHORS_EMBEDDING, Fidelity, RunFacts

AUTHORS = "authors' setup"
PAPER_MODELS = {"qwen3-8b", "qwen3-14b", "qwen3-32b"}

# The ledger's keys (docs/fidelity.md) every run has; a method names its own (``Memory.fidelity``).
EVERY_RUN = ("model.sampling.temperature", "model.tool_choice", "benchmark.max_interactions", "benchmark.release")
# What decides the context a run's executor gets (``core.config.context_length``).
CONTEXT_KEYS = ("model.kind", "model.n_ctx", "model.max_model_len", "benchmark.context")

# What reme departs in on purpose (docs/fidelity.md, "Named, not changed"), as a run's column says it.
AUTHORS_SEED = 0  # bfcl_agent.py:255, appworld_react_agent.py:86 (the hosted configs send it too)
# Low: the authors' provider did not repeat itself under seed=0 (the paper's No-Memory cells:
# Avg@4 differs from Pass@4), so their k runs sampled apart as these do.
SEED = Departure(f"seed: one per unit and trial (authors: seed={AUTHORS_SEED} on every request)", "low")

# Ledger keys whose departure at these values moves no number (docs/fidelity.md): "auto" is
# what vLLM and llama.cpp's server apply when a request with tools names no tool_choice (and
# OpenAI's default, whose API DashScope's compatible mode follows); a
# summarizer's seed fixes sampling only for a prompt sent twice, and each summary's prompt holds
# its own trajectory. Any other departure of a key is medium.
LOW_WHEN = {"model.tool_choice": lambda v: v == "auto", "summarizer.seed": lambda v: isinstance(v, int)}


# What no default holds: the authors' BFCL release (a plain `reme eval` defaults to the
# pinned bfcl-eval; the paper-table suites set it).
AUTHORS_VALUES = {"benchmark.release": "paper"}


@functools.cache
def _reference(benchmark: str, method: str) -> dict[str, Any]:
    """The authors' values for ``benchmark`` run with ``method`` at its defaults (none for a
    benchmark the paper did not run; without the method where it cannot be composed here)."""
    from reme_cli.core.config import compose, to_dict
    from reme_cli.core.errors import UserError

    from reme_cli.report.paper import paper_benchmarks

    if benchmark not in paper_benchmarks():
        return {}
    for memory in dict.fromkeys((method, "none")):
        try:
            ref = flatten(to_dict(compose([f"benchmark={benchmark}", "model=qwen3-8b", f"memory={memory}"])))
        except UserError:
            continue
        return {**ref, **{k: v for k, v in AUTHORS_VALUES.items() if k in ref}}
    return {}


def paper_model(params: Mapping[str, Any]) -> str:
    """The paper's model a run's config serves (``model.same_as``: a hosted copy's)."""
    return RunFacts(params, "").paper_model


def embedding_name(params: Mapping[str, Any]) -> str:
    """The embedding a run used, as its caption names it."""
    model, dim = params.get("embedding.model"), params.get("embedding.dim")
    stand_in = "" if model == AUTHORS_EMBEDDING else ", a stand-in for the authors' text-embedding-v4"
    return f"{model} ({dim}-d{stand_in})"


def _stance(run: RunFacts) -> Fidelity:
    """What the run's method answers (``Memory.fidelity``); a plug-in not installed here has
    its settings unpublished, as every baseline's."""
    plugin = find_method(run.method)
    return (plugin or Memory).fidelity(run)


def departures(params: Mapping[str, Any], *, pool: str | None = None, varied: Iterable[str] = (),
               pool_params: Mapping[str, Any] | None = None) -> list[str]:
    """Where a run (its flattened resolved config) departs from the authors' setup.

    ``pool``: ``released`` or ``built`` (None: no pool); ``varied``: the keys its table
    varies (not departures); ``pool_params``: a built pool's build config, whose summarizer
    settings then count too."""
    mode = str(params.get("eval.mode", "none"))
    run = RunFacts({**params, "memory.name": "none"} if mode == "none" else params, mode, pool, pool_params or {})
    varied = set(varied)
    out: list[str] = []
    if paper_model(params) not in PAPER_MODELS:
        out.append(Departure(f"model: {params.get('model.name')} (the paper: Qwen3-8B/14B/32B)", "high"))
    stance = _stance(run)
    keys = [*EVERY_RUN, *stance.keys]
    out += stance.notes
    ref = _reference(str(params.get("benchmark.name")), run.method)
    for key in keys:
        if key in varied or key not in params or key not in ref:
            continue
        if params[key] != ref[key]:
            out.append(_key_departure(key, params[key], ref[key]))
    if pool == "built" and pool_params:
        for key in stance.pool_keys:
            if key in varied or key in keys or key not in pool_params or key not in ref:
                continue
            if pool_params[key] != ref[key]:
                out.append(_key_departure(key, pool_params[key], ref[key], "pool built with "))
        out += stance.pool_notes
    out += _context(params, ref)
    seed = params.get("model.sampling.seed")
    if seed is None:  # vLLM's default: one seed per unit and trial
        out.append(SEED)
    elif seed != AUTHORS_SEED:
        out.append(Departure(f"model.sampling.seed={seed} on every request (authors: {AUTHORS_SEED})"))
    return out


def _context(params: Mapping[str, Any], ref: Mapping[str, Any]) -> list[Departure]:
    """A served context shorter than the one the authors' runs had (docs/fidelity.md, row
    "context length"): a server reme runs or is pointed at; a hosted provider applies its own
    limit, the authors' provider's."""
    if params.get("model.kind") == "openai" or not ref:
        return []
    served, wanted = (context_length(*(of.get(k) for k in CONTEXT_KEYS)) for of in (params, ref))
    if not isinstance(served, int) or not isinstance(wanted, int) or served >= wanted:
        return []
    return [Departure(f"context: {served:,} tokens (authors: their provider's, past 32k on this benchmark; "
                      f"benchmark.context serves {wanted:,})", "medium")]


def _key_departure(key: str, value: Any, authors: Any, prefix: str = "") -> Departure:
    low = key in LOW_WHEN and LOW_WHEN[key](value)
    return Departure(f"{prefix}{key}={_show(value)} (authors: {_show(authors)})", "low" if low else "medium")


@dataclass(frozen=True)
class CellCount:
    """Cells of a table free of medium/high departures (``core/departure.py``), of all its
    cells: a run fills two (Avg@k and Pass@k of its row and model/benchmark group)."""

    clean: int = 0
    cells: int = 0

    @classmethod
    def of(cls, found: Iterable[str], cells: int = 2) -> CellCount:
        """The cells of one run, given its departures."""
        return cls(cells if is_clean(found) else 0, cells)

    def __add__(self, other: CellCount) -> CellCount:
        return CellCount(self.clean + other.clean, self.cells + other.cells)

    def text(self) -> str:
        return f"{self.clean} of {self.cells} cells free of medium/high departures"


def fidelity_text(found: list[str]) -> str:
    return "; ".join(dict.fromkeys(found)) if found else AUTHORS


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def pool_built_by(cfg: Mapping[str, Any], mode: str) -> dict[str, Any] | None:
    """The ``built_by`` record of a run's starting pool (a pool directory or a `reme
    build-pool` folder holding ``pool/``): who made it, from what; None without a pool, or
    where its manifest cannot be read."""
    pool = (cfg.get("memory") or {}).get("pool") if mode != "none" else None
    header = read_pool_header(pool) if pool else None
    return header.built_by if header else None


def pool_origin(cfg: Mapping[str, Any], mode: str) -> dict[str, Any]:
    """Where a run's starting pool came from, for the fidelity column: ``pool_start``
    released (imported from the authors' file) or built (here; ``pool_params``: the build's
    flattened config, when its build directory is still there), None without a pool."""
    from reme_cli.core.errors import UserError

    built_by = pool_built_by(cfg, mode)
    if built_by is None:
        return {"pool_start": None, "pool_params": None}
    if built_by.get("kind") == "import_official":
        return {"pool_start": "released", "pool_params": None}
    try:
        params = read_config(Path(built_by["run"]), check=False).flat() if built_by.get("run") else None
    except UserError:  # the build's directory is gone or damaged
        params = None
    return {"pool_start": "built", "pool_params": params}

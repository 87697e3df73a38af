"""How far a run is from the authors' setup: the fidelity column of `reme ablate --dry-run`
and of `reme report`.

The authors' setup is reme's default configuration for the run's benchmark and method with a
Qwen3 model (what the fidelity ledger, docs/fidelity.md, lists and tests/report/test_fidelity_ledger.py
holds the configs to), plus what no key holds (e.g. the embedding the authors used). A run
departs on each ledger key that matters to it and differs from that reference, unless the key
is what its table varies. Which keys matter and what a method departs in on purpose (the
ledger's "Named, not changed") the method says (``Memory.fidelity``: by default, that the
authors never published its settings), so no run reads "authors' setup" while one remains.

Beside it, what else a reader must know of a run's numbers: where its pool came from
(``pool_origin``); whether a test double scored it, its manifest says (``Manifest.test_double``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from reme_cli.core.run_log import flatten, read_config, read_pool_header
from reme_cli.methods.base import Memory, find_method
from reme_cli.methods.hooks import AUTHORS_EMBEDDING, Fidelity, RunFacts

AUTHORS = "authors' setup"
PAPER_MODELS = {"qwen3-8b", "qwen3-14b", "qwen3-32b"}

# The ledger's keys (docs/fidelity.md) every run has; a method names its own (``Memory.fidelity``).
EVERY_RUN = ("model.sampling.temperature", "benchmark.max_interactions", "benchmark.release")

# What reme departs in on purpose (docs/fidelity.md, "Named, not changed"), as a run's column says it.
AUTHORS_SEED = 0  # bfcl_agent.py:255, appworld_react_agent.py:86 (the hosted configs send it too)
SEED = f"seed: one per unit and trial (authors: seed={AUTHORS_SEED} on every request)"


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
        out.append(f"model: {params.get('model.name')} (the paper: Qwen3-8B/14B/32B)")
    stance = _stance(run)
    keys = [*EVERY_RUN, *stance.keys]
    out += stance.notes
    ref = _reference(str(params.get("benchmark.name")), run.method)
    for key in keys:
        if key in varied or key not in params or key not in ref:
            continue
        if params[key] != ref[key]:
            out.append(f"{key}={_show(params[key])} (authors: {_show(ref[key])})")
    if pool == "built" and pool_params:
        for key in stance.pool_keys:
            if key in varied or key in keys or key not in pool_params or key not in ref:
                continue
            if pool_params[key] != ref[key]:
                out.append(f"pool built with {key}={_show(pool_params[key])} (authors: {_show(ref[key])})")
        out += stance.pool_notes
    seed = params.get("model.sampling.seed")
    if seed is None:  # vLLM's default: one seed per unit and trial
        out.append(SEED)
    elif seed != AUTHORS_SEED:
        out.append(f"model.sampling.seed={seed} on every request (authors: {AUTHORS_SEED})")
    return out


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

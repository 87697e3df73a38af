"""How far a run is from the authors' setup: the fidelity column of `reme ablate --dry-run`
and of `reme report`.

The authors' setup is reme's default configuration for the run's benchmark with a Qwen3 model
(what the fidelity ledger, docs/fidelity.md, lists and tests/test_fidelity_ledger.py holds the
configs to), plus what no key holds: the authors embedded with text-embedding-v4, and ran their
tables' ReMe rows from the pools they released. A run departs on each ledger key that matters
in its mode and differs from that reference, unless the key is what its table varies; a
baseline's settings in the authors' runs were never published, and a trajectory-level pool's
prompt neither. What reme departs in on purpose (the ledger's "Named, not changed") is named
wherever a run has it, so no run reads "authors' setup" while one remains.

Beside it, what else a reader must know of a run's numbers: where its pool came from
(``pool_origin``); whether a test double scored it, its manifest says (``Manifest.test_double``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from reme_cli.core.run_log import flatten, read_config, read_pool_header

AUTHORS = "authors' setup"
AUTHORS_EMBEDDING = "text-embedding-v4"  # FAQ:14, issue #57: DashScope's, 1024-d
PAPER_MODELS = {"qwen3-8b", "qwen3-14b", "qwen3-32b"}

# The ledger's keys (docs/fidelity.md), by the runs they matter to.
EVERY_RUN = ("model.sampling.temperature", "benchmark.max_interactions", "benchmark.release")
RETRIEVAL = ("memory.top_k", "memory.rerank", "memory.rewrite", "memory.retrieval_key")
DYNAMIC = ("memory.reflection.max_retries", "memory.reflection.style", "memory.u_credit", "memory.addition",
           "memory.deletion.rule", "memory.deletion.counts", "memory.deletion.every", "memory.deletion.alpha",
           "memory.deletion.beta", "eval.dynamic_workers", "eval.dynamic_batches", "eval.scope",
           "memory.dedup_at_commit")
# What the summarizer is and how it distils: a dynamic run's trials, and any built pool.
SUMMARIZER = ("memory.prompts", "memory.judge_threshold", "memory.dedup_threshold", "memory.dedup_text",
              "summarizer.name", "summarizer.temperature", "summarizer.max_tokens", "summarizer.thinking")
# A built pool's sampling (docs/fidelity.md, "Other knobs") and whether it was de-duplicated.
BUILD = ("build.samples", "build.temperature", "memory.build_dedup")
LEDGER_KEYS = EVERY_RUN + RETRIEVAL + DYNAMIC + SUMMARIZER

# What reme departs in on purpose (docs/fidelity.md, "Named, not changed"), as a run's column says it.
AUTHORS_SEED = 0  # bfcl_agent.py:255, appworld_react_agent.py:86 (the hosted configs send it too)
SEED = f"seed: one per unit and trial (authors: seed={AUTHORS_SEED} on every request)"
EXACT_SEARCH = "retrieval: exact cosine (authors: Elasticsearch kNN, approximate)"
EXACT_COUNTS = "f/u: exact at commit (authors' service: the retrieval-time copy + 1, updates lost under concurrency)"
KEY_NEVER_PUBLISHED = "retrieval by {key}: how the authors retrieved by it was never published"
FULL_ADDITION = "memory.addition=full: no code path in the authors' agents (the paper's words)"
TRAJECTORY_NEVER_PUBLISHED = "trajectory-level prompt never published (nearest public: v0.1.9 simple_summary)"


# What no default holds: the authors' BFCL release (a plain `reme eval` defaults to the
# pinned bfcl-eval; the paper-table suites set it).
AUTHORS_VALUES = {"benchmark.release": "paper"}


@functools.cache
def _reference(benchmark: str) -> dict[str, Any]:
    """The authors' values for ``benchmark`` (none for a benchmark the paper did not run)."""
    from reme_cli.core.config import compose, to_dict
    from reme_cli.core.errors import UserError

    from reme_cli.report.paper import paper_benchmarks

    if benchmark not in paper_benchmarks():
        return {}
    try:
        ref = flatten(to_dict(compose([f"benchmark={benchmark}", "model=qwen3-8b", "memory=reme"])))
    except UserError:
        return {}
    return {**ref, **{k: v for k, v in AUTHORS_VALUES.items() if k in ref}}


def released_kind(params: Mapping[str, Any]) -> bool:
    """Whether the authors released a pool like the one this build config makes: keypoint
    experiences, summarized by the executor itself, for a model and benchmark they released."""
    from reme_cli.core.errors import UserError
    from reme_cli.core.registry import METHODS
    from reme_cli.methods.base import memory_class

    if params.get("memory.granularity") != "keypoint" or params.get("summarizer.name") != "same":
        return False
    name = str(params.get("memory.name") or "reme")
    releases = memory_class(name, METHODS.get(name)).releases()
    if releases is None:
        return False
    try:
        releases.name_for(str(params.get("benchmark.name")), paper_model(params))
    except UserError:  # none released for this benchmark and model
        return False
    return True


def paper_model(params: Mapping[str, Any]) -> str:
    """The paper's model a run's config serves (``model.same_as``: a hosted copy's)."""
    return str(params.get("model.same_as") or params.get("model.name"))


def embedding_name(params: Mapping[str, Any]) -> str:
    """The embedding a run used, as its caption names it."""
    model, dim = params.get("embedding.model"), params.get("embedding.dim")
    stand_in = "" if model == AUTHORS_EMBEDDING else ", a stand-in for the authors' text-embedding-v4"
    return f"{model} ({dim}-d{stand_in})"


def departures(params: Mapping[str, Any], *, pool: str | None = None, varied: Iterable[str] = (),
               pool_params: Mapping[str, Any] | None = None) -> list[str]:
    """Where a run (its flattened resolved config) departs from the authors' setup.

    ``pool``: ``released`` or ``built`` (None: no pool); ``varied``: the keys its table
    varies (not departures); ``pool_params``: a built pool's build config, whose summarizer
    settings then count too."""
    mode = params.get("eval.mode", "none")
    method = "none" if mode == "none" else params.get("memory.name")
    varied = set(varied)
    out: list[str] = []
    if paper_model(params) not in PAPER_MODELS:
        out.append(f"model: {params.get('model.name')} (the paper: Qwen3-8B/14B/32B)")
    keys: list[str] = list(EVERY_RUN)
    if method not in ("none", "reme"):
        out.append(f"{method}: its settings in the authors' runs were never published")
    elif method == "reme":
        keys += RETRIEVAL
        if "embedding.model" in params and params["embedding.model"] != AUTHORS_EMBEDDING:
            out.append(f"embedding: local stand-in ({params.get('embedding.model')})")
        if mode == "dynamic":
            keys += DYNAMIC + SUMMARIZER
        if pool == "built":
            out.append("pool: built here (authors: their released pool)" if released_kind(pool_params or params)
                       else "pool: built here (the authors released none like it)")
        out += _named_reme(params, mode, pool, pool_params or {})
    ref = _reference(str(params.get("benchmark.name")))
    for key in keys:
        if key in varied or key not in params or key not in ref:
            continue
        if params[key] != ref[key]:
            out.append(f"{key}={_show(params[key])} (authors: {_show(ref[key])})")
    if pool == "built" and pool_params:
        for key in SUMMARIZER + BUILD:
            if key in varied or key in keys or key not in pool_params or key not in ref:
                continue
            if pool_params[key] != ref[key]:
                out.append(f"pool built with {key}={_show(pool_params[key])} (authors: {_show(ref[key])})")
        if pool_params.get("memory.granularity") == "trajectory" and pool_params.get("memory.prompts") == "authors":
            out.append(TRAJECTORY_NEVER_PUBLISHED)
    seed = params.get("model.sampling.seed")
    if seed is None:  # vLLM's default: one seed per unit and trial
        out.append(SEED)
    elif seed != AUTHORS_SEED:
        out.append(f"model.sampling.seed={seed} on every request (authors: {AUTHORS_SEED})")
    return out


def _named_reme(params: Mapping[str, Any], mode: str, pool: str | None, pool_params: Mapping[str, Any]) -> list[str]:
    """What a ReMe run departs in on purpose (docs/fidelity.md, "Named, not changed")."""
    out = []
    key = params.get("memory.retrieval_key")
    if params.get("memory.top_k") != 0:
        out.append(EXACT_SEARCH)
        if key not in (None, "usage_scenario"):
            out.append(KEY_NEVER_PUBLISHED.format(key=key))
    if mode == "dynamic":
        out.append(EXACT_COUNTS)
        if params.get("memory.addition") == "full":
            out.append(FULL_ADDITION)
    if pool == "built":  # what the benchmark says a pool built on it departs in (its training tasks' text)
        from reme_cli.bench.scoring import benchmark_class

        notes = getattr(benchmark_class(str(pool_params.get("benchmark.name", params.get("benchmark.name")))),
                        "built_pool_notes", None)
        out += notes(pool_params) if notes is not None else []
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

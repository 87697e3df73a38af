"""Where a ReMe run stands against the authors' setup (``Memory.fidelity``): the ledger keys
that matter in its mode (docs/fidelity.md) and what reme departs in on purpose wherever a run
has it (the ledger's "Named, not changed"), so no run reads "authors' setup" while one remains.

The authors ran their tables' ReMe rows from the pools they released, embedded with
text-embedding-v4; a trajectory-level pool's prompt was never published.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reme_cli.core.departure import Departure
from reme_cli.core.errors import UserError
from reme_cli.methods.base import Releases
from reme_cli.methods.hooks import AUTHORS_EMBEDDING, BUILD_KEYS, SUMMARIZER_KEYS, Fidelity, RunFacts

# The ledger's keys (docs/fidelity.md), by the runs they matter to.
RETRIEVAL = ("memory.top_k", "memory.rerank", "memory.rewrite", "memory.retrieval_key")
DYNAMIC = ("memory.reflection.max_retries", "memory.reflection.style", "memory.u_credit", "memory.addition",
           "memory.deletion.rule", "memory.deletion.counts", "memory.deletion.every", "memory.deletion.alpha",
           "memory.deletion.beta", "eval.dynamic_workers", "eval.dynamic_batches", "eval.scope",
           "memory.dedup_at_commit")
# How the summarizer distils: a dynamic run's trials, and any built pool.
SUMMARIZER = ("memory.prompts", "memory.judge_threshold", "memory.dedup_threshold", "memory.dedup_text",
              *SUMMARIZER_KEYS)
# A built pool's sampling (docs/fidelity.md, "Other knobs") and whether it was de-duplicated.
BUILD = (*BUILD_KEYS, "memory.build_dedup")

# What reme departs in on purpose (docs/fidelity.md, "Named, not changed"), as a run's column
# says it, with its level (core/departure.py): low where the difference cannot move the
# paper's numbers at its scale, high where the authors published no recipe to follow.
EXACT_SEARCH = Departure("retrieval: exact cosine (authors: Elasticsearch kNN, approximate)", "low")
EXACT_COUNTS = Departure("f/u: exact at commit (authors' service: the retrieval-time copy + 1, updates lost under "
                         "concurrency)", "low")
KEY_NEVER_PUBLISHED = Departure("retrieval by {key}: how the authors retrieved by it was never published", "high")
FULL_ADDITION = Departure("memory.addition=full: no code path in the authors' agents (the paper's words)", "high")
TRAJECTORY_NEVER_PUBLISHED = Departure("trajectory-level prompt never published (nearest public: v0.1.9 "
                                       "simple_summary)", "high")
# A pool built here: medium where the authors released one like it; low where they released
# none, so building it with their summarizer is the nearest anyone can come.
BUILT_FOR_RELEASED = Departure("pool: built here (authors: their released pool)", "medium")
BUILT_UNRELEASED = Departure("pool: built here (the authors released none like it)", "low")


def fidelity(run: RunFacts, releases: Releases) -> Fidelity:
    params, mode = run.params, run.mode
    out = Fidelity(keys=RETRIEVAL + (DYNAMIC + SUMMARIZER if mode == "dynamic" else ()), pool_keys=SUMMARIZER + BUILD)
    if "embedding.model" in params and params["embedding.model"] != AUTHORS_EMBEDDING:
        out.notes.append(Departure(f"embedding: local stand-in ({params.get('embedding.model')})", "medium"))
    if run.pool == "built":
        out.notes.append(BUILT_FOR_RELEASED if released_kind(run.pool_params or params, releases)
                         else BUILT_UNRELEASED)
    out.notes += _named(run)
    if run.pool == "built" and run.pool_params.get("memory.granularity") == "trajectory" \
            and run.pool_params.get("memory.prompts") == "authors":
        out.pool_notes.append(TRAJECTORY_NEVER_PUBLISHED)
    return out


def released_kind(params: Mapping[str, Any], releases: Releases) -> bool:
    """Whether the authors released a pool like the one this build config makes: keypoint
    experiences, summarized by the executor itself, for a model and benchmark they released."""
    if params.get("memory.granularity") != "keypoint" or params.get("summarizer.name") != "same":
        return False
    try:
        releases.name_for(str(params.get("benchmark.name")), RunFacts(params, "").paper_model)
    except UserError:  # none released for this benchmark and model
        return False
    return True


def _named(run: RunFacts) -> list[str]:
    """What a ReMe run departs in on purpose (docs/fidelity.md, "Named, not changed")."""
    from reme_cli.bench.scoring import benchmark_class

    params, out = run.params, []
    key = params.get("memory.retrieval_key")
    if params.get("memory.top_k") != 0:
        out.append(EXACT_SEARCH)
        if key not in (None, "usage_scenario"):
            out.append(KEY_NEVER_PUBLISHED.format(key=key))
    if run.mode == "dynamic":
        out.append(EXACT_COUNTS)
        if params.get("memory.addition") == "full":
            out.append(FULL_ADDITION)
    if run.pool == "built":  # what the benchmark says a pool built on it departs in (its training tasks' text)
        bench = benchmark_class(str(run.pool_params.get("benchmark.name", params.get("benchmark.name"))))
        out += bench.built_pool_notes(run.pool_params) if bench is not None else []
    return out

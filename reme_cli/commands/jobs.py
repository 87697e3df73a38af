"""Override lists -> jobs: the one sweep mechanism behind `reme eval -m`, `reme build-pool
-m` and `reme ablate` (Hydra's own override grammar and sweeper split)."""

from __future__ import annotations

import re

from reme_cli.core.errors import UserError

SWEEPER = "hydra/sweeper"  # `-m hydra/sweeper=optuna`: a search of the runs (commands/optuna_sweep.py)


def search_requested(overrides: list[str]) -> bool:
    """Whether the overrides ask for reme's Optuna sweeper (``hydra/sweeper=optuna``), a
    search, rather than a grid of every combination. Asked before anything heavy is imported."""
    return any(o.partition("=")[0] == SWEEPER for o in overrides)


def expand(overrides: list[str], sweep: bool = True) -> list[list[str]]:
    """One override list per point of the sweep (comma-separated values, ``range(...)``,
    ``choice(...)``), in Hydra's order; without ``sweep`` the list itself."""
    if any(o.partition("=")[0].startswith(("hydra/sweeper", "hydra.sweeper.")) for o in overrides):
        raise UserError("hydra/sweeper=optuna searches the runs of `reme eval -m` (its objective is a run's metric)"
                        if sweep else "hydra/sweeper=optuna is a sweep: add -m (reme eval -m hydra/sweeper=optuna ...)")
    if not sweep:
        return [list(overrides)]
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from reme_cli.core.config import quoting_hint

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception as exc:
        raise UserError(quoting_hint(overrides) or f"bad override: {str(exc).splitlines()[0]}") from None
    batches = BasicSweeper.split_arguments(parsed, None)
    return [list(job) for batch in batches for job in batch]


def job_label(base: str, job: list[str], swept: list[str]) -> str:
    """A directory-safe name for one point of a swept variant: ``ab-alpha3-beta0.3``."""
    if not swept:
        return base
    parts = []
    for override in job:
        key, _, value = override.partition("=")
        if key in swept:
            parts.append(f"{key.rsplit('.', 1)[-1]}{value}")
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", "-".join([base, *parts]))


def swept_keys(overrides: list[str]) -> list[str]:
    """The keys an override list sweeps over (those with more than one value)."""
    points = expand(overrides)
    keys = []
    for override in overrides:
        key = override.partition("=")[0]
        values = {o.partition("=")[2] for job in points for o in job if o.partition("=")[0] == key}
        if len(values) > 1:
            keys.append(key)
    return keys

"""Environment variables reme sets for its own use, kept apart from the user's.

reme sets a few variables in its own process (``HF_HUB_OFFLINE`` for the bundled embedder,
``BFCL_PROJECT_ROOT``, LangSmith's tracing switches, a re-execution's ``PYTHONPATH``). They
must not reach a server reme starts (vLLM would stop downloading its model under
``HF_HUB_OFFLINE=1``). Each one set through here is named in ``REME_OWN_ENV``, which reme
processes started by reme inherit with the variables themselves, so ``user_env()`` removes
them in every process of the tree. A variable the user had already set is theirs and is kept.
"""

from __future__ import annotations

import os

OWN_ENV = "REME_OWN_ENV"


def own_names() -> set[str]:
    return {n for n in os.environ.get(OWN_ENV, "").split(",") if n} | {OWN_ENV}


def _record(name: str) -> None:
    os.environ[OWN_ENV] = ",".join(sorted(own_names() - {OWN_ENV} | {name}))


def set_default(name: str, value: str) -> None:
    """``os.environ.setdefault`` for reme's own use: the user's value, if any, stays theirs."""
    if name not in os.environ:
        os.environ[name] = value
        _record(name)


def set_own(name: str, value: str) -> None:
    """Set ``name`` for reme's own use, whatever the user had (a server gets neither value)."""
    os.environ[name] = value
    _record(name)


def own_env(values: dict[str, str]) -> dict[str, str]:
    """``os.environ`` with ``values`` set for reme's own use: the environment of a reme
    process started by reme (a re-execution), which must know these are not the user's."""
    names = own_names() - {OWN_ENV} | set(values)
    return {**os.environ, **values, OWN_ENV: ",".join(sorted(names))}


def user_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a server reme starts: the user's variables, none of reme's own,
    plus ``extra`` (e.g. ``CUDA_VISIBLE_DEVICES``)."""
    own = own_names()
    return {**{k: v for k, v in os.environ.items() if k not in own}, **(extra or {})}

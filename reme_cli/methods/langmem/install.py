"""LangMem is an optional extra: the one-line refusal when it is missing, shared by
``memory=langmem`` and ``memory=langmem_prompt``."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from reme_cli.core.environ import set_own
from reme_cli.core.errors import UserError

INSTALL_HINT = ("memory=langmem and memory=langmem_prompt need LangMem, an optional extra: bash scripts/install.sh "
                "--baselines (or pip install -e '.[baselines]' from the reme checkout)")


def check_installed() -> None:
    """Before any work (build-pool samples trajectories first): a cheap look-up, no import."""
    if importlib.util.find_spec("langmem") is None:
        raise UserError(INSTALL_HINT)


def require(module: str, name: str) -> Any:
    """``module.name`` from the extra, or a one-line UserError saying how to install it."""
    # No hosted tracing: LangMem traces through langsmith, which posts runs when enabled.
    set_own("LANGSMITH_TRACING", "false")
    set_own("LANGCHAIN_TRACING_V2", "false")
    try:
        import langchain_core  # noqa: F401

        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        missing = f"; missing: {exc.name}" if getattr(exc, "name", None) else ""
        raise UserError(f"{INSTALL_HINT}{missing}") from None

"""API keys come from the environment, by the name a config gives (``llm.api_key_env``,
``embedding.api_key_env``); a config, a manifest, a log or a cache key never holds one."""

from __future__ import annotations

import os

from reme_cli.core.errors import UserError

NO_KEY = "EMPTY"  # what a local server is sent


def key_from_env(name: str | None, what: str, setting: str) -> str:
    """The key in the variable ``name`` (``NO_KEY`` when no variable is named); a one-line
    error naming ``what`` needs it and the ``setting`` that names the variable if it is unset."""
    if not name:
        return NO_KEY
    value = os.environ.get(name, "").strip()
    if not value:
        raise UserError(f"{what} needs an API key in the environment variable {name}: "
                        f"export {name}=<your key> ({setting} names the variable)")
    return value


def llm_key(cfg) -> str:
    """The executor's (and a summarizer endpoint's) key: ``llm.api_key_env``'s variable, else
    ``llm.api_key`` (a local server's placeholder: the config refuses anything else)."""
    if cfg.llm.api_key_env:
        return key_from_env(cfg.llm.api_key_env, f"model={cfg.model.name}", "llm.api_key_env")
    return cfg.llm.api_key

"""API keys come from the environment, by the name a config gives (``llm.api_key_env``,
``embedding.api_key_env``); a config, a manifest, a log or a cache key never holds one.

No key is a valid setting: ``llm.api_key_env=null`` (``embedding.api_key_env``'s default)
sends none, and a server on this machine (a loopback address: llama.cpp's or vLLM's server
of your own) is sent none when the variable a config names (model=openai-compatible's
OPENAI_API_KEY) is unset. Anywhere else an unset variable is refused before anything runs."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from reme_cli.core.errors import UserError
from reme_cli.core.hosts import is_loopback

NO_KEY = "EMPTY"  # what a local server is sent


def on_this_machine(urls: list[str]) -> bool:
    """Whether every URL is a loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
    return bool(urls) and all(is_loopback(urlsplit(url).hostname or "") for url in urls)


def key_from_env(name: str | None, what: str, setting: str, keyless: bool = False) -> str:
    """The key in the variable ``name`` (``NO_KEY`` when no variable is named, or when it is
    unset and ``keyless``: a server that may take none); a one-line error naming ``what``
    needs it and the ``setting`` that names the variable if it is unset."""
    if not name:
        return NO_KEY
    value = os.environ.get(name, "").strip()
    if not value:
        if keyless:
            return NO_KEY
        raise UserError(f"{what} needs an API key in the environment variable {name}: "
                        f"export {name}=<your key> ({setting} names the variable; "
                        f"{setting}=null for a server that takes no key)")
    return value


def llm_key(cfg) -> str:
    """The executor's (and a summarizer endpoint's) key: ``llm.api_key_env``'s variable (none
    when it is unset and the server is on this machine), else ``llm.api_key`` (a local
    server's placeholder: the config refuses anything else)."""
    if cfg.llm.api_key_env:
        urls = [cfg.llm.base_url] if isinstance(cfg.llm.base_url, str) else list(cfg.llm.base_url or [])
        return key_from_env(cfg.llm.api_key_env, f"model={cfg.model.name}", "llm.api_key_env",
                            keyless=on_this_machine(urls))
    return cfg.llm.api_key

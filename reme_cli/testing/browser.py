"""Headless Chromium for the tests and benchmarks of `reme view`: the system's browser (Debian's
``chromium`` package), driven by Playwright (the ``dev`` extra), which brings its own driver
and never downloads a browser here (no ``playwright install``).

    with chromium() as browser:
        page = browser.new_page()
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

# What lets Chromium run headless in a container without calling home.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
HOW_TO_GET = ("install Chromium (Debian/Ubuntu: apt-get install -y chromium) and reme's dev extra "
              "(pip install -e '.[dev]'), or point REME_CHROMIUM at a Chromium binary")


def chromium_path() -> str | None:
    """The Chromium to drive: $REME_CHROMIUM, else the first of chromium, chromium-browser on PATH."""
    named = os.environ.get("REME_CHROMIUM")
    if named:
        return named if os.access(named, os.X_OK) else None
    return next(filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser"))), None)


def missing() -> str | None:
    """Why no browser can be driven here (None: one can), with the way to get one."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"Playwright is not installed: {HOW_TO_GET}"
    if chromium_path() is None:
        return f"no Chromium found: {HOW_TO_GET}"
    return None


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (a Playwright ``Browser``); each context it makes starts with a fresh profile."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()

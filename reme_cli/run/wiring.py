"""What a memory method is given in a started session, wired once for `reme eval` and
`reme build-pool` (so the two cannot wire a method differently): the run's client, the
summarizer (its own client when ``summarizer.*`` names another endpoint), the run directory
and the units already finished there."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from reme_cli.core.config import Config
from reme_cli.methods.base import MethodContext
from reme_cli.methods.summarizer import summarizer_settings
from reme_cli.run.lifecycle import Session


@contextlib.asynccontextmanager
async def method_context(cfg: Config, session: Session, summarizer: bool = True) -> AsyncIterator[MethodContext]:
    """The ``MethodContext`` for ``session``; the summarizer's own client (if it has one) is
    closed on exit (the lifecycle owns ``session.client``). ``summarizer=False``: a method
    that makes no summarizer calls gets none (and no client is opened for it)."""
    settings, own = summarizer_settings(cfg, session.client) if summarizer else (None, None)
    try:
        yield MethodContext(cfg=cfg, llm=session.client, summarizer=settings, run_path=session.run_dir.path,
                            finished_units=session.run_dir.finished_units())
    finally:
        if own is not None:
            await own.close()

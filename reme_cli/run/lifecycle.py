"""One run's lifecycle, written once for `reme eval` and `reme build-pool`.

``with RunLifecycle(...) as life`` holds the directory's lock (one writer, from before the
first write to after the last); ``life.run`` brings the endpoint up, opens the run directory,
marks the manifest "running", and runs the command's work with a client and a progress line;
``life.finish`` writes the command's result file and the final status. Whatever stops the
work (Ctrl-C, SIGTERM, a dead server) leaves the manifest "interrupted": finished units are
kept and the same command resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from reme_cli.bench.base import Benchmark
from reme_cli.core.config import Config, config_hash, to_dict
from reme_cli.core.errors import RunAborted, UserError, os_error_message
from reme_cli.core.io import write_json_atomic
from reme_cli.llm.client import ChatClient
from reme_cli.llm.embed import EMBED_SPEND
from reme_cli.llm.embed import identity as embedding_identity
from reme_cli.llm.endpoint import Endpoint, endpoint, make_client
from reme_cli.llm.spend import Prices
from reme_cli.run.lock import DirLock
from reme_cli.run.progress import RunProgress
from reme_cli.run.records import RunDir
from reme_cli.methods.base import MethodFactory
from reme_cli.run.runner import EpisodeSettings, Runner
from reme_cli.run.settings import episode_settings, request_record
from reme_cli.run.user_model import UserModel, serve_user_model

T = TypeVar("T")


@dataclass(frozen=True)
class RunResult:
    path: Path
    errors: int  # units that ended in an error: the command exits non-zero if any
    # Set when too many of the summarizer's answers failed (llm.answer_health): exit 3 too.
    summarizer_failure: str | None = None


@dataclass(frozen=True)
class Session:
    """What a command's work gets while the endpoint is up."""

    ep: Endpoint
    client: ChatClient  # closed by the lifecycle after the work
    run_dir: RunDir
    settings: EpisodeSettings
    progress: RunProgress
    bench: Benchmark
    user_model: UserModel | None = None  # the benchmark's simulated user's LLM, if it asked for one

    def runner(self, method_for: MethodFactory, concurrency: int, *, env_concurrency: int | None = None,
               batch_size: int | None = None, whole_trajectories: bool = False) -> Runner:
        """The runner of this session's units (`reme eval`'s and `reme build-pool`'s alike):
        ``method_for`` gives each stream its method, ``concurrency`` streams go at once;
        ``whole_trajectories`` keeps trajectories uncut (a learn phase reads them back)."""
        settings = replace(self.settings, whole_trajectories=True) if whole_trajectories else self.settings
        return Runner(self.bench, self.client, settings, self.run_dir, method_for, concurrency, self.progress,
                      health=self.ep.health, env_concurrency=env_concurrency, batch_size=batch_size,
                      user_model=self.user_model)


def sandbox_fields(bench: Benchmark) -> dict[str, Any]:
    """The manifest's record of where model-written code ran (benchmarks that run it): the
    kind, and its details (which bwrap binary, its version, the bounds) when the benchmark
    gives them."""
    return ({"sandbox": bench.sandbox} if bench.sandbox else {}) | \
        ({"sandbox_detail": bench.sandbox_detail} if bench.sandbox_detail else {})


class RunLifecycle:
    """Lock, endpoint, run directory, client and manifest status of one run in ``run_path``;
    ``lock`` is the directory held (default: ``run_path``; build-pool holds the folder
    around its ``build/`` and ``pool/``)."""

    def __init__(self, cfg: Config, bench: Benchmark, console: Console, run_path: Path, kind: str, *,
                 lock: Path | None = None, wait: bool = False):
        self.cfg, self.bench, self.console = cfg, bench, console
        self.run_path, self.kind = run_path, kind
        if run_path.exists() and not run_path.is_dir():  # said before any lock, server or write
            raise UserError(f"{run_path} is a file, not a directory: choose another out_dir")
        self._lock = DirLock(run_path if lock is None else lock, wait=wait)
        self._run_dir: RunDir | None = None
        self.usage: dict[str, Any] = {}  # the client's LLM usage over the whole work

    def __enter__(self) -> RunLifecycle:
        self._lock.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._lock.__exit__(*exc)

    @property
    def run_dir(self) -> RunDir:
        if self._run_dir is None:
            raise RuntimeError("RunLifecycle.run_dir before run()")
        return self._run_dir

    def run(self, title: str, work: Callable[[Session], Awaitable[T]], manifest: dict[str, Any],
            temperature: float | None = None, on_open: Callable[[RunDir], None] | None = None) -> T:
        """``work`` with the endpoint up; ``manifest`` adds to the "running" manifest and
        ``temperature`` overrides the model's sampling temperature; ``on_open`` is told the
        run directory once it says "running", before the work (an experiment tracker)."""
        cfg = self.cfg
        with endpoint(cfg) as ep:
            run_dir = self._run_dir = RunDir.open(self.run_path, to_dict(cfg), config_hash(cfg), kind=self.kind,
                                                  packages=self.bench.packages)
            # From here on a stop (a SIGTERM from a dying parent arrives at any line) leaves
            # "interrupted", never the "created" or "running" of a run that looks alive.
            try:
                summarizer = {"summarizer_server": ep.summarizer_identity} if ep.summarizer_identity else {}
                run_dir.update_manifest(status="running", server=ep.identity, **summarizer,
                                        embedding=embedding_identity(cfg), requests=request_record(cfg, temperature),
                                        **manifest, **sandbox_fields(self.bench))
                if on_open is not None:
                    on_open(run_dir)
                settings = episode_settings(cfg, self.bench, temperature=temperature)
                progress = RunProgress(self.console, title)
                try:
                    return asyncio.run(self._with_client(work, ep, run_dir, settings, progress))
                finally:
                    progress.stop()
            except BaseException:
                with contextlib.suppress(OSError):  # a full disk: the first error is the one to say
                    run_dir.update_manifest(status="interrupted")
                raise

    async def _with_client(self, work: Callable[[Session], Awaitable[T]], ep: Endpoint, run_dir: RunDir,
                           settings: EpisodeSettings, progress: RunProgress) -> T:
        client = make_client(self.cfg, ep)
        meter = client.meter
        if meter is not None:  # a resumed run's budget counts what its earlier sessions spent
            meter.resume(run_dir.manifest().get("spend") or {})
            progress.spend = lambda: meter.spent
            embedding = Prices.of(self.cfg.embedding.price, input_only=True)
            if self.cfg.embedding.kind == "openai" and embedding is not None:
                meter.require_usd(embedding, "embedding.price")
                EMBED_SPEND.set((meter, embedding))  # this task's context: the run's work inherits it
        progress.rates = client.throughput.line
        # Spend and what answered go to the manifest as units end, so a kill -9 loses little of it.
        progress.on_advance = lambda: self._record_llm(run_dir, client)
        user_model, own = None, None
        try:
            user_model, own = serve_user_model(self.cfg, self.bench, client)
            return await work(Session(ep, client, run_dir, settings, progress, self.bench, user_model))
        finally:
            await self.bench.aclose()  # a benchmark's processes end with the run's loop
            if own is not None:
                await own.close()
            await client.close()
            u = client.usage
            self.usage = {"calls": u.calls, "cached_calls": u.cached_calls, "prompt_tokens": u.prompt_tokens,
                          "completion_tokens": u.completion_tokens, "latency_s": round(u.latency_s, 3)}
            self._record_llm(run_dir, client)

    def _record_llm(self, run_dir: RunDir, client: ChatClient) -> None:
        """The manifest's ``spend`` (at model.price, this run's sessions together),
        ``served`` (the models and fingerprints that answered this session, and whether
        either changed) and ``throughput`` (requests in flight, requests and tokens a minute
        against llm.rpm / llm.tpm, 429s)."""
        fields: dict[str, Any] = {"served": client.usage.served(), "throughput": client.throughput.record()}
        if client.meter is not None:
            fields["spend"] = client.meter.record()
        with contextlib.suppress(OSError):  # a full disk: the unit records are what counts
            run_dir.update_manifest(**fields)

    def finish(self, file: str, record: dict[str, Any], complete: bool, what: str,
               manifest: dict[str, Any] | None = None) -> None:
        """Write the run's result ``file`` (``what`` names it in an error) and the final status
        (with ``manifest``'s fields)."""
        run_dir = self.run_dir
        try:
            write_json_atomic(run_dir.path / file, record)
        except OSError as exc:  # a full disk: every unit is kept, the rerun writes them
            with contextlib.suppress(OSError):
                run_dir.update_manifest(status="interrupted")
            raise RunAborted(f"cannot write {what}: {os_error_message(exc)}; then rerun the same "
                             "command (finished units are kept)") from None
        run_dir.update_manifest(status="complete" if complete else "incomplete", **(manifest or {}))

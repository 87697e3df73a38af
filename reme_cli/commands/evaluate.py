"""`reme eval`: plan, run and score one evaluation; resumable from its run directory."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from reme_cli.bench.registry import make_benchmark, prepare_benchmark
from reme_cli.bench.scoring import declared_metrics
from reme_cli.core.config import Config, config_hash
from reme_cli.llm.embed import check_key_for
from reme_cli.llm.inflight import most_in_flight
from reme_cli.llm.keys import llm_key
from reme_cli.llm.answer_health import failure_message, summary_line
from reme_cli.methods.base import Memory, method_class
from reme_cli.methods.streams import MemoryStreams
from reme_cli.run.lifecycle import RunLifecycle, RunResult, Session
from reme_cli.run.metrics import final_metrics
from reme_cli.run.plan import Unit, plan_streams
from reme_cli.run.records import METRICS_FILE
from reme_cli.run.summary import (errors_summary, identical_runs, identical_runs_note, metrics_table, replay_notes,
                                  sandbox_notes)
from reme_cli.run.runner import Runner
from reme_cli.run.wiring import method_context
from reme_cli.track.run import RunTracking

SMOKE_NOTE = ("Embedded 135M CPU model: smoke-level scores, not model results. "
              "Real numbers need Qwen3 on vLLM (see README).")


def run_dir_for(cfg: Config) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    name = f"{cfg.benchmark.name}-{cfg.model.name}-{cfg.eval.mode}-{config_hash(cfg)}"
    return Path(cfg.runs_root) / cfg.experiment / name


def method_plugin(cfg: Config) -> type[Memory]:
    """The memory method the run uses: ``--mode none`` is the paper's No Memory row,
    whatever ``memory`` says."""
    return method_class("none" if cfg.eval.mode == "none" else cfg.memory.name)


def evaluate(cfg: Config, console: Console, wait: bool = False) -> RunResult:
    bench = make_benchmark(cfg.benchmark)
    task_ids = bench.task_ids()  # bad ids fail here, before anything is written
    streams = eval_streams(cfg, task_ids)
    prepare_benchmark(bench)  # e.g. AppWorld's sandbox: refused here, before anything is written
    llm_key(cfg)  # a hosted model's key missing from the environment: one line, nothing written
    if cfg.eval.mode != "none":  # only a memory embeds
        check_key_for(cfg)
    method_plugin(cfg).preflight(cfg)  # e.g. a missing pool: bad input, refused before anything is written
    units_total = sum(len(s) for s in streams)

    with RunLifecycle(cfg, bench, console, run_dir_for(cfg), kind="eval", wait=wait) as life, \
            RunTracking(cfg.tracker, console, run_dir_for(cfg).name) as track:
        life.run(f"{cfg.benchmark.name} {cfg.model.name} {cfg.eval.mode}",
                 lambda session: _run(cfg, session, streams),
                 manifest={"task_ids": task_ids,
                           "streams": [[u.key for u in s] for s in streams] if cfg.eval.mode == "dynamic" else None,
                           "units_total": units_total}, on_open=track.opened)
        run_dir = life.run_dir
        metrics = final_metrics(run_dir.trials(), cfg.eval.runs, cfg.eval.mode, declared_metrics(bench))
        metrics["llm_usage"] = life.usage
        if cfg.model.sampling.seed is not None:  # one seed on every call: did the k runs repeat?
            metrics["identical_runs"] = identical_runs(run_dir.trials(), cfg.eval.runs)
        life.finish(METRICS_FILE, metrics, what="the metrics",
                    complete=metrics["units"] == units_total and metrics["errors"] == 0,
                    manifest={"summary_failures": metrics["summary_failures"]})
        track.finished()
    console.print(metrics_table(metrics, f"{cfg.experiment}: {cfg.benchmark.name} / {cfg.model.name} / "
                                         f"mode={cfg.eval.mode}", metrics.get("variants"),
                                notes=[*sandbox_notes(bench), *replay_notes(life.usage),
                                       *filter(None, [summary_line(metrics["summarizer_answers"])]),
                                       *identical_runs_note(metrics.get("identical_runs"), cfg.eval.runs,
                                                            cfg.model.sampling.seed)]))
    if cfg.model.kind == "local" and not cfg.llm.base_url:
        console.print(f"[yellow]{SMOKE_NOTE}[/yellow]")
    if metrics["errors"]:
        console.print(errors_summary(run_dir.trials()), soft_wrap=True, highlight=False, markup=False)
        console.print(f"[red]{metrics['errors']} unit(s) failed with an error (tracebacks in "
                      f"{run_dir.path / 'trials.jsonl'}); rerun the same command to retry them.[/red]")
    failure = failure_message(metrics["summarizer_answers"], cfg.summarizer.max_failed_share)
    if failure:
        console.print(f"[red]{escape(failure)}[/red]", soft_wrap=True, highlight=False)
    return RunResult(run_dir.path, metrics["errors"], failure)


async def _run(cfg: Config, session: Session, streams: list[list[Unit]]) -> None:
    async with eval_runner(cfg, session, streams) as runner:
        await runner.run(streams)


def eval_streams(cfg: Config, task_ids: list[str]) -> list[list[Unit]]:
    """The units of an evaluation of ``task_ids``, as the streams the runner walks."""
    return plan_streams(task_ids, cfg.eval.seeds, cfg.eval.runs, cfg.eval.seed_base,
                        sequential=cfg.eval.mode == "dynamic", scope=cfg.eval.scope,
                        workers=cfg.eval.dynamic_workers, order=cfg.eval.task_order)


def chains_at_once(cfg: Config, streams: list) -> int:
    """Streams the runner walks at once. In dynamic mode every worker chain of every stream
    (AppWorld: 3 seeds x 4 runs x 8 workers = 96): a stream's workers must run together, as the
    authors' did, or the pool they share evolves otherwise, and a chain held back until another
    finished would start on a pool that had moved on. ``llm.concurrency`` still bounds the
    requests in flight (the client queues the rest, first come first served), and
    ``env.concurrency`` / AppWorld's ``benchmark.workers`` the open environments. Independent
    units: ``llm.concurrency`` at once."""
    return max(1, len(streams)) if cfg.eval.mode == "dynamic" else most_in_flight(cfg.llm.concurrency)


@contextlib.asynccontextmanager
async def eval_runner(cfg: Config, session: Session, streams: list[list[Unit]]) -> AsyncIterator[Runner]:
    """The runner `reme eval` drives in a started session (``RunLifecycle.run``) over ``streams``:
    the configured memory method behind the seam (``run/wiring.py``). The harness benchmarks
    (scripts/bench_*.py) build theirs here too, so they time what a user runs and cannot drift
    from it."""
    plugin = method_plugin(cfg)
    async with method_context(cfg, session, summarizer=plugin.needs_summarizer) as ctx:
        yield session.runner(MemoryStreams(plugin, ctx).method_for, chains_at_once(cfg, streams),
                             env_concurrency=cfg.env.concurrency, batch_size=batch_size(cfg))


def batch_size(cfg: Config) -> int | None:
    """Units of a dynamic stream run in batches of this many (``eval.dynamic_batches``: the
    authors' AppWorld script), each batch after the one before it; None: no batches."""
    if cfg.eval.mode != "dynamic" or not cfg.eval.dynamic_batches or cfg.eval.dynamic_workers <= 1:
        return None
    return cfg.eval.dynamic_workers

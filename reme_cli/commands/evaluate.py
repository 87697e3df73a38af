"""`reme eval`: plan, run and score one evaluation; resumable from its run directory."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from reme_cli.agent.protocols import make_protocol
from reme_cli.bench.registry import make_benchmark
from reme_cli.core.config import Config, config_hash, to_dict
from reme_cli.core.errors import RunAborted, os_error_message
from reme_cli.llm.client import ChatClient
from reme_cli.llm.endpoint import endpoint, make_client, request_extra_body
from reme_cli.bench.base import PLAIN_TOOLS, Benchmark
from reme_cli.core.registry import METHODS
from reme_cli.methods.base import MethodContext, memory_class
from reme_cli.methods.streams import MemoryStreams
from reme_cli.run.metrics import compute_metrics
from reme_cli.run.plan import plan_streams
from reme_cli.run.progress import RunProgress
from reme_cli.run.lock import DirLock
from reme_cli.run.records import RunDir
from reme_cli.run.summary import errors_summary, metrics_table
from reme_cli.run.runner import EpisodeSettings, Runner

UNSANDBOXED_NOTE = "sandbox: none (benchmark.sandbox=none: the model's code ran on the host)"
SMOKE_NOTE = ("Embedded 135M CPU model: smoke-level scores, not model results. "
              "Real numbers need Qwen3 on vLLM (see README).")


@dataclass(frozen=True)
class RunResult:
    path: Path
    errors: int  # units that ended in an error: the command exits non-zero if any


def run_dir_for(cfg: Config) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    name = f"{cfg.benchmark.name}-{cfg.model.name}-{cfg.eval.mode}-{config_hash(cfg)}"
    return Path(cfg.runs_root) / cfg.experiment / name


def method_plugin(cfg: Config) -> Any:
    """The memory method the run uses: ``--mode none`` is the paper's No Memory row,
    whatever ``memory`` says."""
    name = "none" if cfg.eval.mode == "none" else cfg.memory.name
    return memory_class(name, METHODS.get(name))


def make_method_factory(cfg: Config, run_path: Path, client: ChatClient, finished: set[str]):
    """A function (seed, run) -> Method, and a client to close afterwards (or None)."""
    plugin = method_plugin(cfg)
    summarizer, own_client = None, None
    if getattr(plugin, "needs_summarizer", False):
        from reme_cli.methods.summarizer import summarizer_settings

        summarizer, own_client = summarizer_settings(cfg, client)
    ctx = MethodContext(cfg=cfg, llm=client, summarizer=summarizer, run_path=run_path, finished_units=finished)
    return MemoryStreams(plugin, ctx).method_for, own_client


def episode_settings(cfg: Config, bench: Benchmark, temperature: float | None = None) -> EpisodeSettings:
    return EpisodeSettings(
        protocol=make_protocol(cfg.benchmark.tool_protocol or cfg.model.tool_protocol,
                               getattr(bench, "tool_dialect", PLAIN_TOOLS)),
        temperature=cfg.model.sampling.temperature if temperature is None else temperature,
        top_p=cfg.model.sampling.top_p,
        max_tokens=cfg.model.sampling.max_tokens,
        seed_base=cfg.eval.seed_base,
        extra_body=request_extra_body(cfg),
        system_prompt=cfg.benchmark.system_prompt or getattr(bench, "system_prompt", None),
        max_interactions=cfg.benchmark.max_interactions,
        max_steps_per_turn=_step_limit(bench.max_steps_per_turn, cfg.model.max_steps_per_turn),
        max_stored_chars=cfg.eval.max_stored_chars,
    )


def _step_limit(*limits: int | None) -> int | None:
    """The tightest of the benchmark's and the model's per-turn limits (None: none)."""
    given = [x for x in limits if x]
    return min(given) if given else None


def evaluate(cfg: Config, console: Console, wait: bool = False) -> RunResult:
    bench = make_benchmark(cfg.benchmark)
    task_ids = bench.task_ids()  # bad ids fail here, before anything is written
    streams = plan_streams(task_ids, cfg.eval.seeds, cfg.eval.runs, cfg.eval.seed_base,
                           sequential=cfg.eval.mode == "dynamic", scope=cfg.eval.scope,
                           workers=cfg.eval.dynamic_workers)
    path = run_dir_for(cfg)
    preflight = getattr(method_plugin(cfg), "preflight", None)
    if preflight is not None:
        preflight(cfg)  # e.g. ReMe's missing pool: bad input, refused before anything is written

    # One writer per run directory, from before its first write to after its last.
    with DirLock(path, wait=wait):
        with endpoint(cfg) as ep:
            run_dir = RunDir.open(path, to_dict(cfg), config_hash(cfg), kind="eval")
            run_dir.update_manifest(
                status="running",
                server=ep.identity,
                task_ids=task_ids,
                streams=[[u.key for u in s] for s in streams] if cfg.eval.mode == "dynamic" else None,
                units_total=sum(len(s) for s in streams),
                **sandbox_fields(bench),
            )
            settings = episode_settings(cfg, bench)
            progress = RunProgress(console, f"{cfg.benchmark.name} {cfg.model.name} {cfg.eval.mode}")
            try:
                usage = asyncio.run(_run(cfg, ep, bench, settings, run_dir, progress, streams))
            except BaseException:
                with contextlib.suppress(OSError):  # a full disk: the first error is the one to say
                    run_dir.update_manifest(status="interrupted")
                raise
            finally:
                progress.stop()

        metrics = summarize(run_dir, cfg.eval.runs, cfg.eval.mode)
        metrics["llm_usage"] = usage
        try:
            run_dir.write_metrics(metrics)
        except OSError as exc:  # a full disk: every unit is kept, the rerun writes them
            with contextlib.suppress(OSError):
                run_dir.update_manifest(status="interrupted")
            raise RunAborted(f"cannot write the metrics: {os_error_message(exc)}; then rerun the same "
                             "command (finished units are kept)") from None
        complete = metrics["units"] == sum(len(s) for s in streams) and metrics["errors"] == 0
        run_dir.update_manifest(status="complete" if complete else "incomplete")
    console.print(metrics_table(metrics, f"{cfg.experiment}: {cfg.benchmark.name} / {cfg.model.name} / "
                                         f"mode={cfg.eval.mode}", metrics.get("variants"),
                                notes=sandbox_notes(bench)))
    if cfg.model.kind == "local" and not cfg.llm.base_url:
        console.print(f"[yellow]{SMOKE_NOTE}[/yellow]")
    if metrics["errors"]:
        console.print(errors_summary(run_dir.trials()), soft_wrap=True, highlight=False, markup=False)
        console.print(f"[red]{metrics['errors']} unit(s) failed with an error (tracebacks in "
                      f"{run_dir.path / 'trials.jsonl'}); rerun the same command to retry them.[/red]")
    return RunResult(run_dir.path, metrics["errors"])


def sandbox_fields(bench: Benchmark) -> dict[str, str]:
    """The manifest's record of where model-written code ran (benchmarks that run it)."""
    kind = getattr(bench, "sandbox", None)
    return {"sandbox": kind} if kind else {}


def sandbox_notes(bench: Benchmark) -> list[str]:
    """A line for the final table when model-written code ran on the host, unsandboxed."""
    return [UNSANDBOXED_NOTE] if getattr(bench, "sandbox", None) == "none" else []


def summarize(run_dir: RunDir, k: int, mode: str) -> dict[str, Any]:
    trials = run_dir.trials()
    metrics = compute_metrics(trials, k)
    if mode == "dynamic":  # retries make first-attempt and final success differ
        metrics["first_attempt"] = compute_metrics(trials, k, success_key="first_success")
        metrics["variants"] = {"final": metrics.copy(), "first attempt": metrics["first_attempt"]}
    return metrics


async def _run(cfg, ep, bench, settings, run_dir, progress, streams) -> dict[str, Any]:
    client = make_client(cfg, ep)
    own_client = None
    try:
        method_for, own_client = make_method_factory(cfg, run_dir.path, client, run_dir.finished_units())
        runner = Runner(bench, client, settings, run_dir, method_for, cfg.llm.concurrency, progress,
                        health=ep.health, env_concurrency=cfg.env.concurrency)
        await runner.run(streams)
    finally:
        await client.close()
        if own_client is not None:
            await own_client.close()
    u = client.usage
    return {"calls": u.calls, "cached_calls": u.cached_calls, "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens, "latency_s": round(u.latency_s, 3)}

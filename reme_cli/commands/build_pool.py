"""`reme build-pool`: ReMe acquisition on the training split, in three resumable phases.

1. sample: N trajectories per training task at the build temperature (``build/trials.jsonl``,
   the same unit records and resume rules as `reme eval`);
2. distill: per task, success / failure / comparative analysis of the best and worst
   trajectory, then the LLM judge (``build/distill.jsonl``, one line per finished task);
3. assemble: embedding dedup in task order into ``pool/`` (rebuilt from phase 2's file each
   time, so it is cheap and never half-written), plus ``build/report.json``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reme_cli.agent.loop import Trajectory
from reme_cli.bench.base import Benchmark, Outcome
from reme_cli.bench.registry import make_benchmark
from reme_cli.core.config import Config, config_hash, to_dict
from reme_cli.llm.endpoint import endpoint, make_client
from reme_cli.methods.base import NoMemory
from reme_cli.methods.reme.distill import DistillStats, distill_task, judge
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.pool import Pool
from reme_cli.methods.reme.method import assign_stable_ids, make_embedder_for
from reme_cli.methods.summarizer import summarizer_settings
from reme_cli.run.plan import plan_streams
from reme_cli.run.progress import RunProgress
from reme_cli.run.lock import DirLock
from reme_cli.core.io import append_lines, write_json_atomic
from reme_cli.run.records import RunDir
from reme_cli.commands.evaluate import RunResult, episode_settings
from reme_cli.run.summary import errors_summary
from reme_cli.run.runner import EpisodeSettings, Runner

DISTILL_FILE = "distill.jsonl"
REPORT_FILE = "report.json"


def pool_dir_for(cfg: Config) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    return Path(cfg.runs_root) / cfg.experiment / f"pool-{cfg.benchmark.name}-{cfg.model.name}-{config_hash(cfg)}"


def build_pool(cfg: Config, console: Console, wait: bool = False) -> RunResult:
    bench = make_benchmark(cfg.benchmark)
    task_ids = bench.task_ids()
    streams = plan_streams(task_ids, seeds=1, runs=cfg.build.samples, seed_base=cfg.eval.seed_base,
                           sequential=False)
    out = pool_dir_for(cfg)
    embedder = make_embedder_for(cfg)  # fail on a bad embedding config before any LLM time

    with DirLock(out, wait=wait):  # one writer for build/ and pool/
        with endpoint(cfg) as ep:
            run_dir = RunDir.open(out / "build", to_dict(cfg), config_hash(cfg), kind="build-pool")
            run_dir.update_manifest(status="running", server=ep.identity, task_ids=task_ids)
            settings = episode_settings(cfg, bench, temperature=cfg.build.temperature)
            progress = RunProgress(console, f"sample {cfg.build.samples}/task")
            try:
                asyncio.run(_sample_and_distill(cfg, ep, bench, settings, run_dir, progress, streams, task_ids))
            except BaseException:
                run_dir.update_manifest(status="interrupted")
                raise
            finally:
                progress.stop()

        report = assemble(cfg, run_dir, task_ids, out / "pool", embedder)
        write_json_atomic(run_dir.path / REPORT_FILE, report)
        run_dir.update_manifest(status="complete" if not report["unit_errors"] else "incomplete")
    console.print(report_table(report, out))
    if report["unit_errors"]:
        console.print(errors_summary(run_dir.trials()), soft_wrap=True, highlight=False, markup=False)
    return RunResult(out, report["unit_errors"])


async def _sample_and_distill(cfg: Config, ep, bench: Benchmark, settings: EpisodeSettings, run_dir: RunDir,
                              progress: RunProgress, streams, task_ids: list[str]) -> None:
    client = make_client(cfg, ep)
    summarizer, own = summarizer_settings(cfg, client)
    try:
        plain = NoMemory()
        runner = Runner(bench, client, settings, run_dir, lambda _: plain, cfg.llm.concurrency, progress,
                        health=ep.health)
        await runner.run(streams)
        progress.stop()

        attempts: dict[str, list[tuple[Trajectory, Outcome]]] = defaultdict(list)
        for t in sorted(run_dir.trials(), key=lambda t: t.run):
            if t.ok and t.trajectory is not None:
                attempts[t.task_id].append((Trajectory.from_dict(t.trajectory), Outcome(t.success, t.reward, t.checker)))
        done = {rec["task_id"] for rec in _read_distilled(run_dir)}
        slots = asyncio.Semaphore(cfg.llm.concurrency)
        fmt = summarizer.formats

        async def distill_one(task_id: str) -> None:
            async with slots:
                task = bench.load(task_id)
                common = {"temperature": summarizer.temperature, "max_tokens": summarizer.max_tokens}
                cands, stats = await distill_task(
                    summarizer.llm, task, attempts[task_id], granularity=cfg.memory.granularity,
                    author=summarizer.author, response_format=fmt.get("distill"), **common)
                kept, judged = await judge(summarizer.llm, task, cands, threshold=cfg.memory.judge_threshold,
                                           response_format=fmt.get("judge"), **common)
                stats.merge(judged)
                assign_stable_ids(kept, task_id)
                outcomes = [o for _, o in attempts[task_id]]
                await asyncio.to_thread(append_lines, run_dir.path / DISTILL_FILE, [{
                    "task_id": task_id,
                    "trajectories": len(outcomes),
                    "successes": sum(o.success for o in outcomes),
                    "stats": stats.to_dict(),
                    "experiences": [e.to_dict() for e in kept],
                }])

        await asyncio.gather(*(distill_one(t) for t in task_ids if t not in done and attempts.get(t)))
    finally:
        await client.close()
        if own is not None:
            await own.close()


def _read_distilled(run_dir: RunDir) -> list[dict[str, Any]]:
    path = run_dir.path / DISTILL_FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # torn last line: that task is distilled again
            continue
    return out


def assemble(cfg: Config, run_dir: RunDir, task_ids: list[str], pool_path: Path, embedder) -> dict[str, Any]:
    """Dedup the judged candidates into a fresh pool, in the split's task order."""
    by_task = {rec["task_id"]: rec for rec in _read_distilled(run_dir)}
    stats = DistillStats()
    candidates: list[Experience] = []
    for task_id in task_ids:
        rec = by_task.get(task_id)
        if rec is None:
            continue
        stats.merge(DistillStats(**rec["stats"]))
        candidates += [Experience.from_dict(e) for e in rec["experiences"]]

    staging = pool_path.parent / f".{pool_path.name}.building-{uuid.uuid4().hex[:8]}"
    try:
        pool = Pool.create(staging, embedder, retrieval_key=cfg.memory.retrieval_key, built_by={
            "kind": "build-pool", "run": str(run_dir.path), "config_hash": config_hash(cfg),
            "model": cfg.model.name, "summarizer": cfg.summarizer.name,
            "granularity": cfg.memory.granularity, "judge_threshold": cfg.memory.judge_threshold,
            "dedup_threshold": cfg.memory.dedup_threshold, "samples": cfg.build.samples})
        added = pool.add(candidates, dedup_threshold=cfg.memory.dedup_threshold)
        pool.save()
        # Swap the new pool in whole; the old one (a previous build) goes only after.
        old = pool_path.with_name(f".{pool_path.name}.old-{uuid.uuid4().hex[:8]}")
        if pool_path.exists():
            pool_path.rename(old)
        staging.rename(pool_path)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    trials = run_dir.trials()
    per_task = {t: by_task[t]["trajectories"] for t in by_task}
    return {
        "tasks": len(task_ids),
        "tasks_distilled": len(by_task),
        "trajectories": len([t for t in trials if t.ok]),
        "trajectories_per_task": per_task,
        "unit_errors": len([t for t in trials if not t.ok]),
        "trajectory_success_rate": (sum(t.success for t in trials) / len(trials)) if trials else 0.0,
        "candidates_by_source": stats.candidates,
        "invalid_llm_outputs": stats.invalid_outputs,
        "rejected_by_judge": stats.rejected_by_judge,
        "removed_as_duplicates": len(candidates) - len(added),
        "pool_size": len(added),
        "pool_by_source": {s: sum(e.source == s for e in added) for s in sorted({e.source for e in added})},
        "summarizer_llm_calls": stats.llm_calls,
    }


def report_table(report: dict[str, Any], out: Path) -> Table:
    table = Table(title=f"build-pool: {out}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    rows = [
        ("training tasks (distilled)", f"{report['tasks']} ({report['tasks_distilled']})"),
        ("trajectories", str(report["trajectories"])),
        ("trajectory success rate", f"{100 * report['trajectory_success_rate']:.1f}%"),
        ("unit errors", str(report["unit_errors"])),
        ("candidates by source", ", ".join(f"{k} {v}" for k, v in sorted(report["candidates_by_source"].items()))
         or "0"),
        ("invalid LLM outputs (skipped)", str(report["invalid_llm_outputs"])),
        ("rejected by judge", str(report["rejected_by_judge"])),
        ("removed as duplicates", str(report["removed_as_duplicates"])),
        ("pool size", str(report["pool_size"])),
    ]
    for what, value in rows:
        table.add_row(what, value)
    return table

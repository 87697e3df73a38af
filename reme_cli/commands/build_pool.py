"""`reme build-pool`: a memory method learns from training-task trajectories, in three
resumable phases joined by files.

1. sample: N trajectories per training task at the build temperature (``build/trials.jsonl``,
   the same unit records and resume rules as `reme eval`); the same for every method. A
   method that adapts on the training tasks itself (``Memory.adapts_on_training``: ACE's
   offline loop with live retries) runs instead, as one stream in split order through the
   seam (its units in ``build/trials.jsonl``, its commit log and final state under
   ``build/streams/s0_r0/``);
2. learn: the method's LLM phase over those trajectories (ReMe: distill and judge), writing
   its own resumable files under ``build/``;
3. assemble: the method writes its pool from phase 2's files into a fresh directory that
   replaces ``pool/`` whole (cheap, no LLM, never half-written), plus ``build/report.json``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reme_cli.llm.inflight import most_in_flight
from reme_cli.llm.keys import llm_key
from reme_cli.agent.trajectory import Trajectory
from reme_cli.bench.base import Benchmark, Outcome
from reme_cli.bench.registry import make_benchmark, prepare_benchmark
from reme_cli.core.config import Config, config_hash
from reme_cli.core.errors import UserError
from reme_cli.core.registry import METHODS
from reme_cli.core.staging import clean_stale, replace_dir
from reme_cli.methods.base import BuildContext, BuildResult, PoolBuilder, find_method, method_class
from reme_cli.methods.pool_dirs import is_pool
from reme_cli.methods.streams import no_memory, training_stream
from reme_cli.llm.embed import make_embedder_for
from reme_cli.llm.answer_health import SUMMARY, answer_tally, failure_message, merge, summary_failures, total
from reme_cli.run.lifecycle import RunLifecycle, RunResult, Session
from reme_cli.run.plan import plan_passes, plan_streams
from reme_cli.run.records import CONFIG_FILE, REPORT_FILE, RunDir
from reme_cli.run.wiring import method_context
from reme_cli.run.summary import errors_summary, replay_notes, sandbox_notes
from reme_cli.track.run import RunTracking


def pool_dir_for(cfg: Config) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    return Path(cfg.runs_root) / cfg.experiment / f"pool-{cfg.benchmark.name}-{cfg.model.name}-{config_hash(cfg)}"


def pool_builder(cfg: Config) -> Any:
    plugin = method_class(cfg.memory.name)
    if not isinstance(plugin, PoolBuilder):
        builders = [n for n in METHODS.names() if isinstance(find_method(n), PoolBuilder)]
        raise UserError(f"memory={cfg.memory.name} has no pool to build; build one for a memory method "
                        f"that builds pools (memory={' | '.join(builders)})")
    return plugin


def build_pool(cfg: Config, console: Console, wait: bool = False) -> RunResult:
    method = pool_builder(cfg)
    bench = make_benchmark(cfg.benchmark)
    task_ids = bench.task_ids()
    prepare_benchmark(bench)  # e.g. AppWorld's sandbox: refused here, before anything is written
    llm_key(cfg)  # a hosted model's key missing from the environment: one line, nothing written
    adapts = method.adapts_on_training(cfg)
    if adapts:
        passes = method.build_episodes(cfg, 1.0)[0]
        streams, label = plan_passes(task_ids, passes), f"adapt {passes} pass(es)"
    else:
        streams = plan_streams(task_ids, seeds=1, runs=cfg.build.samples, seed_base=cfg.eval.seed_base,
                               sequential=False)
        label = f"sample {cfg.build.samples}/task"
    out = pool_dir_for(cfg)
    check_out_dir(out)  # again under the lock; first here, before the embedding model loads
    embedder = make_embedder_for(cfg)  # fail on a bad embedding config before any LLM time

    with RunLifecycle(cfg, bench, console, out / "build", kind="build-pool", lock=out, wait=wait) as life, \
            RunTracking(cfg.tracker, console, out.name) as track:  # one writer for build/ and pool/
        check_out_dir(out)
        clean_stale(out / "pool", "building")  # left by a killed earlier build of this pool
        ctx, sampling_llm, session_answers = life.run(
            label, lambda session: _sample_and_learn(cfg, session, bench, streams, task_ids, method, embedder, adapts),
            manifest={"task_ids": task_ids}, temperature=cfg.build.temperature, on_open=track.opened)
        run_dir = life.run_dir
        built: BuildResult = replace_dir(out / "pool", lambda staging: method.assemble_pool(ctx, staging))
        report = {**sampling_report(run_dir, task_ids), "sampling_llm": sampling_llm, "method": cfg.memory.name,
                  **built.report}
        # A method that keeps its counts per task (ReMe) reports every session's; otherwise
        # this session's learn phase is what was seen.
        report.setdefault("summarizer_answers", session_answers)
        life.finish(REPORT_FILE, report, complete=not report["unit_errors"], what="the build report",
                    manifest={"summary_failures": summary_failures(report["summarizer_answers"])})
        track.finished()
    console.print(report_table(report, built.rows, out, [*sandbox_notes(bench), *replay_notes(life.usage)]))
    if report["unit_errors"]:
        console.print(errors_summary(run_dir.trials()), soft_wrap=True, highlight=False, markup=False)
    failure = failure_message(report["summarizer_answers"], cfg.summarizer.max_failed_share)
    if failure:
        console.print(f"[red]{escape(failure)}[/red]", soft_wrap=True, highlight=False)
    return RunResult(out, report["unit_errors"], failure)


def check_out_dir(out: Path) -> None:
    """Refuse (before any work) an out_dir whose ``pool/`` reme would replace but did not make,
    or that is some other folder of the user's: build-pool only replaces its own pool."""
    pool = out / "pool"
    if pool.exists() and not is_pool(pool) and (not pool.is_dir() or any(pool.iterdir())):
        raise UserError(f"out_dir={out}: {pool} holds files that are not a reme pool (no pool manifest); "
                        "choose another out_dir, or move them away")
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(f"out_dir={out} is a file; choose another out_dir")
    ours = {"build", "pool"}
    foreign = [p for p in out.iterdir() if p.name not in ours and not p.name.startswith(".pool.")]
    if foreign and not (out / "build" / CONFIG_FILE).is_file():
        raise UserError(f"out_dir={out} exists and is not a reme build-pool directory (it holds "
                        f"{foreign[0].name}); choose another out_dir")


async def _sample_and_learn(cfg: Config, session: Session, bench: Benchmark, streams, task_ids: list[str],
                            method: Any, embedder: Any,
                            adapts: bool) -> tuple[BuildContext, dict[str, int], dict[str, Any]]:
    client, run_dir, progress = session.client, session.run_dir, session.progress
    async with method_context(cfg, session) as method_ctx:
        state = training_stream(method, method_ctx) if adapts else no_memory()
        # The learn phase summarizes the trajectories read back from the records: kept whole.
        runner = session.runner(lambda _: state, most_in_flight(cfg.llm.concurrency), whole_trajectories=True)
        await runner.run(streams)
        progress.stop()
        # Before the method's own calls: what sampling cost, and how much of it the response
        # cache replayed (all of it when another method's pool sampled the same units).
        sampling_llm = {"calls": client.usage.calls, "cached_calls": client.usage.cached_calls}

        attempts: dict[str, list[tuple[Trajectory, Outcome]]] = defaultdict(list)
        for t in sorted(run_dir.trials(), key=lambda t: t.run):
            if t.ok and t.trajectory is not None:
                attempts[t.task_id].append((Trajectory.from_dict(t.trajectory), Outcome(t.success, t.reward, t.checker)))
        ctx = BuildContext(cfg=cfg, summarizer=method_ctx.summarizer, embedder=embedder, bench=bench, task_ids=task_ids,
                           attempts=dict(attempts), work=run_dir.path)
        with answer_tally() as answers:
            await method.learn_from_training(ctx)
        if adapts:  # the method's calls were made by its units, which keep their counts (every session's)
            return ctx, sampling_llm, merge(*(t.summarizer_answers for t in run_dir.trials()))
        return ctx, sampling_llm, answers.to_dict()


def sampling_report(run_dir: RunDir, task_ids: list[str]) -> dict[str, Any]:
    trials = run_dir.trials()
    return {
        "tasks": len(task_ids),
        "trajectories": len([t for t in trials if t.ok]),
        "unit_errors": len([t for t in trials if not t.ok]),
        "trajectory_success_rate": (sum(t.success for t in trials) / len(trials)) if trials else 0.0,
    }


def report_table(report: dict[str, Any], method_rows: list[tuple[str, str]], out: Path,
                 notes: Sequence[str] = ()) -> Table:
    table = Table(title=f"build-pool ({report['method']}): {out}", show_header=False,
                  caption="; ".join(notes) or None)
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    rows = [
        ("training tasks", str(report["tasks"])),
        ("trajectories", str(report["trajectories"])),
        ("trajectory success rate", f"{100 * report['trajectory_success_rate']:.1f}%"),
        ("unit errors", str(report["unit_errors"])),
        ("sampling LLM calls (from cache)", f"{report['sampling_llm']['calls']} "
                                            f"({report['sampling_llm']['cached_calls']})"),
        *method_rows,
        *answer_rows(report.get("summarizer_answers") or {}),
    ]
    for what, value in rows:
        table.add_row(what, value)
    return table


def answer_rows(counts: dict[str, dict[str, int]]) -> list[tuple[str, str]]:
    """The summarizer's answers: the totals, then a row per role that had failures."""
    if not counts:
        return []
    t = total(counts)
    rows = [("summarizer answers (invalid, truncated)", f"{t['calls']} ({t['invalid']}, {t['truncated']})")]
    rows += [(f"  {role} answers failed", f"{row['failed']} of {row['calls']} "
                                          f"({row['invalid']} invalid, {row['truncated']} truncated)")
             for role, row in counts.items() if row["failed"] and role != SUMMARY]
    if SUMMARY in counts:
        s = summary_failures(counts)
        rows.append(("summaries failed (their candidates skipped)", f"{s['failed']} of {s['summaries']}"))
    return rows

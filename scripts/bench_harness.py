"""Benchmark of the harness itself: its own CPU time per LLM call, and how close it gets to
the ideal throughput when the LLM is the only bottleneck.

A stand-in OpenAI-compatible server (the scripted server, a TEST DOUBLE, in a separate process
so its CPU is not counted as the harness's) answers every request after a fixed delay D. The
episodes run through `reme eval`'s own code (its run lifecycle, episode settings and runner,
``eval_runner``), memory none, model=qwen3-8b's request settings. The ideal wall time schedules
the same episodes (their real call counts) on c slots with zero harness cost, so
episode-length tails do not count against the harness; achieved/ideal shows what the harness
(agent loop, BFCL backends, official checker, records) costs on top. Everything runs in one
invocation, so the ratios compare like with like on a noisy machine.

    python scripts/bench_harness.py                 # D = 0.25 s, c = 1 8 32 128
    python scripts/bench_harness.py --delay 0.5 --out results/harness_benchmark.md
"""

from __future__ import annotations

import argparse
import heapq
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from rich.console import Console

from reme_cli.bench.registry import make_benchmark
from reme_cli.commands.evaluate import eval_runner, eval_streams, run_dir_for
from reme_cli.core.config import compose
from reme_cli.core.errors import UserError
from reme_cli.run.lifecycle import RunLifecycle, Session


def process_cpu_s(pid: int) -> float:
    """User+system CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def config(base_url: str, *overrides: str):
    """`reme eval --mode none model=qwen3-8b` against the stand-in server."""
    return compose(["model=qwen3-8b", "embedding=minilm", "eval.mode=none", "benchmark.release=current",
                    f"llm.base_url={base_url}", "llm.model=stand-in", "llm.cache=false", "eval.seeds=1", *overrides])


def measure(base_url: str, concurrency: int, episodes: int, workdir: Path, delay: float) -> dict[str, float]:
    """About ``episodes`` BFCL-v3 test episodes, ``concurrency`` at a time, as `reme eval`
    runs them; the harness's CPU and wall time over the runner's work only."""
    split = len(make_benchmark(config(base_url).benchmark).task_ids())
    runs = -(-episodes // split)  # enough runs of the split to reach the episode count
    cfg = config(base_url, f"llm.concurrency={concurrency}", f"benchmark.limit={-(-episodes // runs)}",
                 f"eval.runs={runs}", f"out_dir={workdir / f'c{concurrency}'}")
    bench = make_benchmark(cfg.benchmark)
    streams = eval_streams(cfg, bench.task_ids())

    async def work(session: Session) -> dict[str, float]:
        async with eval_runner(cfg, session, streams) as runner:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await runner.run(streams)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        calls = session.client.usage.calls
        trials = session.run_dir.trials()
        failed = [t.error for t in trials if t.error]
        if failed:  # a table over broken episodes would time the wrong thing
            raise SystemExit(f"{len(failed)} episode(s) failed with an error, e.g. {failed[0]}")
        by_unit = {t.unit: t.interactions for t in trials}
        return {"calls": calls, "wall_s": wall, "cpu_ms_per_call": 1000 * cpu / calls,
                "achieved_per_s": calls / wall,
                "ideal_wall_s": ideal_makespan([by_unit[s[0].key] for s in streams], concurrency, delay)}

    with RunLifecycle(cfg, bench, Console(quiet=True), run_dir_for(cfg), kind="eval") as life:
        return life.run(f"bench c={concurrency}", work, manifest={})


def ideal_makespan(calls_per_episode: list[int], slots: int, delay: float) -> float:
    """Wall time with zero harness cost: episodes take their slots in order (as the
    runner's semaphore grants them), each lasting calls x delay."""
    free_at = [0.0] * slots
    for n in calls_per_episode:
        start = heapq.heappop(free_at)
        heapq.heappush(free_at, start + n * delay)
    return max(free_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.25, help="stand-in server delay per request (s)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--waves", type=int, default=4, help="episodes per concurrency slot")
    parser.add_argument("--out", type=Path, help="also write the table (markdown) here")
    args = parser.parse_args()

    load = os.getloadavg()[0]
    server = subprocess.Popen([sys.executable, "-m", "reme_cli.testing.scripted_server", "--policy", "fixed",
                               "--delay", str(args.delay)], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for c in args.concurrency:
                server_cpu0 = process_cpu_s(server.pid)
                r = measure(base_url, c, max(8, args.waves * c), Path(tmp), args.delay)
                server_ms = 1000 * (process_cpu_s(server.pid) - server_cpu0) / r["calls"]
                rows.append((c, r["calls"], r["wall_s"], r["ideal_wall_s"], r["cpu_ms_per_call"], server_ms,
                             r["achieved_per_s"], r["calls"] / r["ideal_wall_s"]))
    finally:
        server.kill()
        server.wait()

    lines = [
        f"Stand-in server (the scripted server, a test double) delay {args.delay} s; BFCL-v3 test episodes "
        "(fixed text answers, official checker on every episode), run by `reme eval`'s code with memory none.",
        "",
        "| concurrency | LLM calls | wall s | ideal wall s | harness CPU ms / call "
        "| stand-in server CPU ms / call | achieved calls/s | ideal calls/s | achieved / ideal |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c, calls, wall, ideal_wall, cpu, server_ms, achieved, ideal in rows:
        lines.append(f"| {c} | {calls} | {wall:.2f} | {ideal_wall:.2f} | {cpu:.2f} | {server_ms:.2f} "
                     f"| {achieved:.1f} | {ideal:.1f} | {achieved / ideal:.2f} |")
    lines += ["", "Both processes share the machine's cores; at high concurrency the stand-in "
              "server's own CPU is part of what limits the achieved rate.", "", machine_note(load)]
    emit("\n".join(lines), args.out)


def machine_note(load_at_start: float) -> str:
    """When and where a benchmark ran: on a shared machine its numbers depend on the load."""
    return (f"Measured {date.today().isoformat()} on {len(os.sched_getaffinity(0))} cores; 1-min load average "
            f"{load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (other work on the machine "
            "included).")


def emit(text: str, out: Path | None) -> None:
    """Print a benchmark's markdown report, and write it to ``out`` when one is given."""
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


def script_main(main) -> None:
    """A benchmark script's entry point: bad input (a ``UserError``) is one line and exit 2."""
    try:
        main()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    script_main(main)

"""Benchmark of the harness itself: its own CPU time per LLM call, and how close it gets to
the ideal throughput when the LLM is the only bottleneck.

A stand-in OpenAI-compatible server (a separate process, so its CPU is not counted as the
harness's) answers every request after a fixed delay D. The ideal wall time schedules the
same episodes (their real call counts) on c slots with zero harness cost, so episode-length
tails do not count against the harness; achieved/ideal shows what the harness (agent loop,
BFCL backends, official checker, records) costs on top. Everything runs in one invocation,
so the ratios compare like with like on a noisy machine.

    python scripts/bench_harness.py                 # D = 0.25 s, c = 1 8 32 128
    python scripts/bench_harness.py --delay 0.5 --out results/harness_benchmark.md
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reme_cli.agent.protocols import make_protocol
from reme_cli.bench.bfcl import BFCLBenchmark
from reme_cli.llm.client import ChatClient
from reme_cli.methods.base import NoMemory
from reme_cli.run.plan import plan_streams
from reme_cli.run.records import RunDir
from reme_cli.run.runner import EpisodeSettings, Runner


def process_cpu_s(pid: int) -> float:
    """User+system CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(base_url: str, concurrency: int, episodes: int, workdir: Path, delay: float) -> dict[str, float]:
    bench = BFCLBenchmark(split="test")
    ids = bench.task_ids()
    runs = -(-episodes // len(ids))  # enough runs to reach the episode count
    streams = plan_streams(ids, seeds=1, runs=runs, seed_base=0, sequential=False)[:episodes]
    run_dir = RunDir.open(workdir / f"c{concurrency}", {}, "bench", kind="bench")
    client = ChatClient(base_url=base_url, model="stand-in", concurrency=concurrency, cache=None)
    settings = EpisodeSettings(make_protocol("openai"), 0.9, 1.0, 64, 0, None, None, 30, 20)
    method = NoMemory()
    runner = Runner(bench, client, settings, run_dir, lambda _: method, concurrency)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await runner.run(streams)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await client.close()
    calls = client.usage.calls
    by_unit = {t.unit: t.interactions for t in run_dir.trials()}
    return {"calls": calls, "wall_s": wall, "cpu_ms_per_call": 1000 * cpu / calls,
            "achieved_per_s": calls / wall,
            "ideal_wall_s": ideal_makespan([by_unit[s[0].key] for s in streams], concurrency, delay)}


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

    server = subprocess.Popen([sys.executable, "-m", "reme_cli.testing.scripted_server", "--policy", "fixed",
                               "--delay", str(args.delay)], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for c in args.concurrency:
                server_cpu0 = process_cpu_s(server.pid)
                r = asyncio.run(measure(base_url, c, max(8, args.waves * c), Path(tmp), args.delay))
                server_ms = 1000 * (process_cpu_s(server.pid) - server_cpu0) / r["calls"]
                rows.append((c, r["calls"], r["wall_s"], r["ideal_wall_s"], r["cpu_ms_per_call"], server_ms,
                             r["achieved_per_s"], r["calls"] / r["ideal_wall_s"]))
    finally:
        server.kill()
        server.wait()

    lines = [
        f"Stand-in server delay {args.delay} s; BFCL-v3 test episodes (fixed text answers, "
        "official checker on every episode).",
        "",
        "| concurrency | LLM calls | wall s | ideal wall s | harness CPU ms / call "
        "| stand-in server CPU ms / call | achieved calls/s | ideal calls/s | achieved / ideal |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c, calls, wall, ideal_wall, cpu, server_ms, achieved, ideal in rows:
        lines.append(f"| {c} | {calls} | {wall:.2f} | {ideal_wall:.2f} | {cpu:.2f} | {server_ms:.2f} "
                     f"| {achieved:.1f} | {ideal:.1f} | {achieved / ideal:.2f} |")
    lines += ["", "Both processes share the machine's cores; at high concurrency the stand-in "
              "server's own CPU is part of what limits the achieved rate."]
    emit("\n".join(lines), args.out)


def emit(text: str, out: Path | None) -> None:
    """Print a benchmark's markdown report, and write it to ``out`` when one is given."""
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


if __name__ == "__main__":
    main()

"""Harness overhead per AppWorld step, with the model taken out: reme's own time per step,
and the AppWorld worker's time per call, measured separately.

A toy world is built in a temporary directory (tests/fixtures/appworld_toyworld.py, in AppWorld's
venv; never kept, not the benchmark), and the scripted server (a separate process, zero
delay) plays the model in two ways: `gold` answers each task with its solution code, which
completes the task (one step per episode: the whole per-episode cost of opening, evaluating
and closing a world lands on that step); `loop` answers every step with the same API call
that never completes the task, so an episode runs `--steps` steps (the steady per-step
cost). Workers are warmed up first (their start and first world are timed on their own).

Per step (one model call): reme's CPU time (its own process: agent loop, records, HTTP
clients), and at concurrency 1 the wall time left after subtracting the model calls'
latency and the worker calls, i.e. what an episode waits on reme alone. Per worker call:
the round trip seen by reme (HTTP on loopback + AppWorld's work). Memory: RSS of each
worker process (ps), idle after start and at its peak with a world open.

    python scripts/bench_appworld_overhead.py --out results/appworld_overhead.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from bench_harness import emit  # scripts/ is on the path when this runs as a script
from reme_cli.agent.protocols import make_protocol
from reme_cli.bench.appworld import AppWorldBenchmark, AppWorldConfig, AppWorldEnv, AppWorldServer, default_venv
from reme_cli.llm.client import ChatClient
from reme_cli.methods.base import NoMemory
from reme_cli.run.plan import plan_streams
from reme_cli.run.records import RunDir
from reme_cli.run.runner import EpisodeSettings, Runner

REPO = Path(__file__).resolve().parent.parent
TASKS = ["toy0001_1", "toy0002_1", "toy0003_1"]
worker_calls: dict[str, list[float]] = defaultdict(list)  # route -> round-trip seconds
starts: list[float] = []  # seconds from spawn to ready, per worker
first_worlds: list[float] = []  # a fresh worker's first /initialize (loads AppWorld's code)
opened: set[int] = set()
pids: list[int] = []


def _instrument() -> None:
    """Time every worker call and every worker start, without touching reme's code."""
    post, start = AppWorldEnv._post, AppWorldServer.start

    async def timed_post(self, route, **payload):
        t0 = time.perf_counter()
        try:
            return await post(self, route, **payload)
        finally:
            took = time.perf_counter() - t0
            worker_calls[route].append(took)
            if route == "/initialize" and id(self.server) not in opened:
                opened.add(id(self.server))
                first_worlds.append(took)

    def timed_start(self):
        t0 = time.perf_counter()
        out = start(self)
        starts.append(time.perf_counter() - t0)
        pids.append(self._proc.pid)
        return out

    AppWorldEnv._post, AppWorldServer.start = timed_post, timed_start


class RssSampler(threading.Thread):
    """Peak RSS (MB) of every worker seen, from `ps`, every 0.2 s."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for pid in list(pids):
                out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True).stdout
                if out.strip():
                    mb = int(out) / 1024
                    self.first.setdefault(pid, mb)
                    self.peak[pid] = max(self.peak.get(pid, 0.0), mb)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LOOP_CODE = "```python\nprint(len(apis.api_docs.show_app_descriptions()))\n```"


async def _episodes(bench, url: str, c: int, runs: int, run_dir: Path, steps: int) -> dict:
    client = ChatClient(base_url=url, model="stand-in", concurrency=c, cache=None)
    settings = EpisodeSettings(make_protocol("code"), 0.0, 1.0, 512, 0, None, bench.system_prompt, steps, None)
    method = NoMemory()
    runner = Runner(bench, client, settings, RunDir.open(run_dir, {}, "bench", kind="bench"),
                    lambda _: method, c)
    streams = plan_streams(TASKS, seeds=1, runs=runs, seed_base=0, sequential=False)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await runner.run(streams)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await client.close()
    trials = RunDir(run_dir).trials()
    steps = [s for t in trials for turn in t.trajectory["turns"] for s in turn]
    return {"episodes": len(trials), "ok": sum(t.success for t in trials), "steps": len(steps),
            "wall": wall, "cpu": cpu, "llm": sum(s["latency_s"] for s in steps)}


def measure(root: Path, url: str, c: int, runs: int, tmp: Path, server_pid: int, steps: int) -> dict:
    bench = AppWorldBenchmark(AppWorldConfig(data_dir=str(root), split="train", task_ids=TASKS, workers=c))
    try:
        asyncio.run(_episodes(bench, url, c, max(1, -(-c // len(TASKS))), tmp / f"warm{c}-{steps}", steps))  # start c workers
        worker_calls.clear()
        server_cpu0 = _cpu_s(server_pid)
        r = asyncio.run(_episodes(bench, url, c, runs, tmp / f"c{c}-{steps}", steps))
        r["server_cpu"] = _cpu_s(server_pid) - server_cpu0
        r["worker_wall"] = sum(sum(v) for v in worker_calls.values())
        r["calls"] = {route: list(v) for route, v in worker_calls.items()}
    finally:
        for server in bench._workers._idle if bench._workers else []:
            server.stop()
    return r


def _ms(values: list[float]) -> str:
    return (f"{len(values)} | {1000 * statistics.mean(values):.1f} | {1000 * statistics.median(values):.1f} "
            f"| {1000 * max(values):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--runs", type=int, default=5, help="episodes per task at each concurrency")
    parser.add_argument("--steps", type=int, default=10, help="steps per episode of the loop policy")
    parser.add_argument("--out", type=Path, help="also write the tables (markdown) here")
    args = parser.parse_args()
    python = default_venv() / "bin" / "python"
    if not python.exists():
        sys.exit("AppWorld is not set up: reme appworld setup")
    _instrument()
    sampler = RssSampler()
    sampler.start()
    rows, by_route = [], {}
    with tempfile.TemporaryDirectory(prefix="reme-aw-overhead-") as tmp:
        root = Path(tmp) / "toyworld"
        subprocess.run([str(python), str(REPO / "tests" / "fixtures" / "appworld_toyworld.py"), str(root), "--force"],
                       check=True, capture_output=True)
        policies = {"gold": ["--policy", "appworld-gold", "--appworld-root", str(root)],
                    "loop": ["--policy", "fixed", "--text", LOOP_CODE]}
        for name, policy in policies.items():
            server = subprocess.Popen([sys.executable, "-m", "reme_cli.testing.scripted_server", *policy],
                                      stdout=subprocess.PIPE, text=True)
            try:
                url = server.stdout.readline().strip()
                for c in args.concurrency:
                    r = measure(root, url, c, args.runs, Path(tmp), server.pid, 30 if name == "gold" else args.steps)
                    rows.append((name, c, r))
                    if c == args.concurrency[0]:
                        by_route[name] = r["calls"]
            finally:
                server.kill()
                server.wait()
    sampler.stop.set()
    sampler.join()

    lines = ["Toy world (3 tasks, built at run time); the scripted server (zero delay) plays the model: "
             f"gold = each task's solution code (1 step per episode, solved), loop = the same API call every "
             f"step ({args.steps} steps per episode, unsolved). Workers warmed up first.", "",
             "| policy | concurrency | episodes (solved) | steps | wall s | reme CPU ms / step "
             "| reme wall ms / step, model and worker time taken out | scripted server CPU ms / step "
             "| worker round trips ms / step |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, c, r in rows:
        n = r["steps"]
        residual = f"{1000 * (r['wall'] - r['llm'] - r['worker_wall']) / n:.2f}" if c == 1 else "—"
        lines.append(f"| {name} | {c} | {r['episodes']} ({r['ok']}) | {n} | {r['wall']:.2f} "
                     f"| {1000 * r['cpu'] / n:.2f} | {residual} | {1000 * r['server_cpu'] / n:.2f} "
                     f"| {1000 * r['worker_wall'] / n:.1f} |")
    lines += ["", f"AppWorld worker calls at concurrency {args.concurrency[0]} (round trip seen by reme):", "",
              "| policy | call | n | mean ms | median ms | max ms |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for name, calls in by_route.items():
        for route in ("/initialize", "/execute", "/task_completed", "/evaluate", "/close"):
            if calls.get(route):
                lines.append(f"| {name} | {route} | {_ms(calls[route])} |")
    idle = [sampler.first[p] for p in pids if p in sampler.first]
    peak = [sampler.peak[p] for p in pids if p in sampler.peak]
    lines += ["", f"Workers: {len(starts)} started, spawn to ready {min(starts):.1f}-{max(starts):.1f} s, "
              f"first world (/initialize) {min(first_worlds):.1f}-{max(first_worlds):.1f} s; "
              f"RSS (ps) idle {min(idle):.0f}-{max(idle):.0f} MB, peak with a world open "
              f"{min(peak):.0f}-{max(peak):.0f} MB.",
              f"Machine: {len(os.sched_getaffinity(0))} cores; the scripted server and the workers share them with reme."]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()

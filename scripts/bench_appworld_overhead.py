"""Harness overhead per AppWorld step, with the model taken out: reme's own time per step,
and the AppWorld worker's time per call, measured separately.

A toy world is built in a temporary directory (tests/fixtures/appworld_toyworld.py, in AppWorld's
venv; never kept, not the benchmark; `--world ROOT` uses one built already). Episodes run
through `reme eval`'s own code (run lifecycle, episode settings, runner: ``eval_runner``),
memory none, the sandbox on, and the scripted server (a TEST DOUBLE, a separate process, zero
delay) plays the model in two ways: `gold` answers each task with its solution code, which
completes the task (one step per episode: the whole per-episode cost of opening, evaluating
and closing a world lands on that step); `loop` answers every step with the same API call
that never completes the task, so an episode runs `--steps` steps (the steady per-step
cost). Each concurrency's workers are warmed up first (their start and first world are timed
on their own) and serve both policies.

Per step (one model call): reme's CPU time (its own process: agent loop, records, HTTP
clients), and at concurrency 1 the wall time left after subtracting the model calls'
latency and the worker calls, i.e. what an episode waits on reme alone. Per worker call:
the round trip seen by reme (HTTP on its socket + AppWorld's work). Memory: RSS of each
worker's process tree (bubblewrap and AppWorld's server under it; /proc), idle after start
and at its peak with a world open.

    python scripts/bench_appworld_overhead.py --out results/appworld_overhead.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console

from bench_harness import emit, machine_note, script_main  # scripts/ is on the path when this runs as a script
from reme_cli.bench.appworld import AppWorldEnv, AppWorldServer, default_venv
from reme_cli.bench.registry import make_benchmark
from reme_cli.commands.evaluate import eval_runner, eval_streams, run_dir_for
from reme_cli.core.config import compose
from reme_cli.core.errors import UserError
from reme_cli.run.lifecycle import RunLifecycle, Session
from reme_cli.run.records import RunDir

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


def tree_rss_mb(pid: int) -> float | None:
    """RSS (MB) of a process and all its descendants (Linux /proc): a sandboxed worker is
    bwrap, its namespace's init and AppWorld's server below them. None once it is gone."""
    total, todo, seen = 0, [pid], False
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # gone meanwhile
            continue
        seen = True
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total / 1024 if seen else None


class RssSampler(threading.Thread):
    """Peak RSS (MB) of every worker seen (its process tree), every 0.2 s."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for pid in list(pids):
                mb = tree_rss_mb(pid)
                if mb is not None:
                    self.first.setdefault(pid, mb)
                    self.peak[pid] = max(self.peak.get(pid, 0.0), mb)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LOOP_CODE = "```python\nprint(len(apis.api_docs.show_app_descriptions()))\n```"


def _config(root: Path, url: str, c: int, runs: int, out: Path, steps: int):
    """`reme eval --mode none benchmark=appworld` on the toy tasks against the scripted server."""
    return compose(["benchmark=appworld", f"benchmark.data_dir={root}", "benchmark.split=train",
                    f"benchmark.task_ids=[{','.join(TASKS)}]", f"benchmark.workers={c}",
                    f"benchmark.max_interactions={steps}", "model=qwen3-8b", "embedding=minilm", "eval.mode=none",
                    f"llm.base_url={url}", "llm.model=stand-in", "llm.cache=false", f"llm.concurrency={c}",
                    "model.sampling.temperature=0", "eval.seeds=1", f"eval.runs={runs}", f"out_dir={out}"])


def _episodes(bench, cfg) -> dict:
    """One `reme eval` run of ``cfg`` on ``bench`` (its workers stay up for the next run)."""
    streams = eval_streams(cfg, bench.task_ids())

    async def work(session: Session) -> dict:
        async with eval_runner(cfg, bench, session, streams) as runner:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await runner.run(streams)
            return {"cpu": time.process_time() - cpu0, "wall": time.perf_counter() - wall0}

    with RunLifecycle(cfg, bench, Console(quiet=True), run_dir_for(cfg), kind="eval") as life:
        r = life.run("bench", work, manifest={})
    trials = RunDir(run_dir_for(cfg)).trials()
    failed = [t.error for t in trials if t.error]
    if failed:  # a table over broken episodes would time the wrong thing
        raise SystemExit(f"{len(failed)} episode(s) failed with an error, e.g. {failed[0]}")
    steps = [s for t in trials for turn in t.trajectory["turns"] for s in turn]
    return {**r, "episodes": len(trials), "ok": sum(t.success for t in trials), "steps": len(steps),
            "llm": sum(s["latency_s"] for s in steps)}


def measure(root: Path, servers: dict[str, tuple[str, int]], c: int, runs: int, tmp: Path,
            steps: dict[str, int]) -> dict[str, dict]:
    """Each policy's episodes at concurrency ``c`` on one set of ``c`` workers, warmed up first."""
    out = {}
    first_url = next(iter(servers.values()))[0]
    warm = _config(root, first_url, c, max(1, -(-c // len(TASKS))), tmp / f"warm{c}", 1)
    bench = make_benchmark(warm.benchmark)
    try:
        _episodes(bench, warm)  # starts c workers, each with its first world
        for name, (url, server_pid) in servers.items():
            worker_calls.clear()
            server_cpu0 = _cpu_s(server_pid)
            r = _episodes(bench, _config(root, url, c, runs, tmp / f"c{c}-{name}", steps[name]))
            r["server_cpu"] = _cpu_s(server_pid) - server_cpu0
            r["worker_wall"] = sum(sum(v) for v in worker_calls.values())
            r["calls"] = {route: list(v) for route, v in worker_calls.items()}
            out[name] = r
    finally:
        if bench._workers is not None:
            bench._workers.close()
    return out


def _ms(values: list[float]) -> str:
    return (f"{len(values)} | {1000 * statistics.mean(values):.1f} | {1000 * statistics.median(values):.1f} "
            f"| {1000 * max(values):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--runs", type=int, default=5, help="episodes per task at each concurrency")
    parser.add_argument("--steps", type=int, default=10, help="steps per episode of the loop policy")
    parser.add_argument("--world", type=Path, help="a toy world built already (appworld_toyworld.py ROOT), "
                        "instead of one built here")
    parser.add_argument("--out", type=Path, help="also write the tables (markdown) here")
    args = parser.parse_args()
    python = default_venv() / "bin" / "python"
    if not python.exists():
        raise UserError("AppWorld is not set up: reme appworld setup")
    if args.world and not all((args.world / "data" / "tasks" / t).is_dir() for t in TASKS):
        raise UserError(f"--world {args.world} is not a toy world (no data/tasks/{TASKS[0]}); build one with "
                        "tests/fixtures/appworld_toyworld.py ROOT, or leave --world out")
    load = os.getloadavg()[0]
    _instrument()
    sampler = RssSampler()
    sampler.start()
    rows, by_route = [], {}
    with tempfile.TemporaryDirectory(prefix="reme-aw-overhead-") as tmp:
        root = args.world or Path(tmp) / "toyworld"
        if not args.world:
            subprocess.run([str(python), str(REPO / "tests" / "fixtures" / "appworld_toyworld.py"), str(root),
                            "--force"], check=True, capture_output=True)
        policies = {"gold": ["--policy", "appworld-gold", "--appworld-root", str(root)],
                    "loop": ["--policy", "fixed", "--text", LOOP_CODE]}
        procs = {name: subprocess.Popen([sys.executable, "-m", "reme_cli.testing.scripted_server", *policy],
                                        stdout=subprocess.PIPE, text=True) for name, policy in policies.items()}
        try:
            servers = {name: (proc.stdout.readline().strip(), proc.pid) for name, proc in procs.items()}
            for c in args.concurrency:
                for name, r in measure(root, servers, c, args.runs, Path(tmp),
                                       {"gold": 30, "loop": args.steps}).items():
                    rows.append((name, c, r))
                    if c == args.concurrency[0]:
                        by_route[name] = r["calls"]
        finally:
            for proc in procs.values():
                proc.kill()
                proc.wait()
    sampler.stop.set()
    sampler.join()

    lines = ["Toy world (3 tasks, tests/fixtures/appworld_toyworld.py); the scripted server (a test double, "
             "zero delay) plays the model: "
             f"gold = each task's solution code (1 step per episode, solved), loop = the same API call every "
             f"step ({args.steps} steps per episode, unsolved). Episodes run by `reme eval`'s code (memory none, "
             "model=qwen3-8b at temperature 0, the sandbox on); the workers of each concurrency, warmed up "
             "first, serve both policies.", "",
             "| policy | concurrency | episodes (solved) | steps | wall s | reme CPU ms / step "
             "| reme wall ms / step, model and worker time taken out | scripted server CPU ms / step "
             "| worker round trips ms / step |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, c, r in sorted(rows, key=lambda row: (list(policies).index(row[0]), row[1])):
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
              f"RSS (process tree: the sandbox and AppWorld's server) idle {min(idle):.0f}-{max(idle):.0f} MB, "
              "peak with a world open "
              f"{min(peak):.0f}-{max(peak):.0f} MB.",
              "The scripted server and the workers share the machine's cores with reme.", "", machine_note(load)]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    script_main(main)

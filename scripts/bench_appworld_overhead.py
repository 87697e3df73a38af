"""Harness overhead per AppWorld step, with the model taken out: reme's own time per step,
and the time of AppWorld's processes per call, measured separately.

A toy world is built in a temporary directory (tests/fixtures/appworld_toyworld.py, in AppWorld's
venv; never kept, not the benchmark), and the scripted server (a separate process, zero
delay) plays the model in two ways: `gold` answers each task with its solution code, which
completes the task (one step per episode: the whole per-episode cost of opening, ending and
evaluating an episode lands on that step); `loop` answers every step with the same API call
that never completes the task, so an episode runs `--steps` steps (the steady per-step
cost). Supervisors and the evaluator are warmed up first (their start is timed on its own).

Per step (one model call): reme's CPU time (its own process: agent loop, records, clients),
and at concurrency 1 the wall time left after subtracting the model calls' latency and the
calls to AppWorld's processes, i.e. what an episode waits on reme alone. Per call: the round
trip seen by reme (pipes + the supervisor's or evaluator's work: `open` forks the episode's
process and opens its world, `close` ends it and hands back the saved state, `evaluate`
forks an evaluation). Memory: RSS of each AppWorld process (ps), idle and at its peak.

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
from reme_cli.bench.appworld import AppWorldBenchmark, AppWorldConfig, AppWorldEnv, default_venv
from reme_cli.bench.appworld_workers import Processes
from reme_cli.llm.client import ChatClient
from reme_cli.methods.base import NoMemory
from reme_cli.run.plan import plan_streams
from reme_cli.run.records import RunDir
from reme_cli.run.runner import EpisodeSettings, Runner

REPO = Path(__file__).resolve().parent.parent
TASKS = ["toy0001_1", "toy0002_1", "toy0003_1"]
calls: dict[str, list[float]] = defaultdict(list)  # call -> round-trip seconds
starts: list[float] = []  # seconds from spawn to warmed up, per supervisor


def _instrument() -> None:
    """Time every call to AppWorld's processes and every supervisor start, without touching
    reme's code."""
    call, evaluate, acquire = AppWorldEnv._call, Processes.evaluate, Processes.acquire

    async def timed_call(self, method, params=None, timeout=60.0):
        t0 = time.perf_counter()
        try:
            return await call(self, method, params, timeout)
        finally:
            calls[method].append(time.perf_counter() - t0)

    async def timed_evaluate(self, task_id, experiment, state):
        t0 = time.perf_counter()
        try:
            return await evaluate(self, task_id, experiment, state)
        finally:
            calls["evaluate"].append(time.perf_counter() - t0)

    async def timed_acquire(self):
        fresh, t0 = not self._idle, time.perf_counter()
        out = await acquire(self)
        if fresh:
            starts.append(time.perf_counter() - t0)
        return out

    AppWorldEnv._call, Processes.evaluate, Processes.acquire = timed_call, timed_evaluate, timed_acquire


def _appworld_processes() -> list[int]:
    """AppWorld's processes of this benchmark run: this process's descendants running them
    (never another run's on the same machine)."""
    parent, cmds = {}, {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmds[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue

    def mine(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return [p for p, cmd in cmds.items() if cmd.startswith(str(default_venv()))
            and ("worker.py" in cmd or "evaluator.py" in cmd) and mine(p)]


class RssSampler(threading.Thread):
    """Peak RSS (MB) of every AppWorld process seen (supervisors, episodes, evaluator), from
    /proc, every 0.2 s."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.kind: dict[int, str] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for pid in _appworld_processes():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                mb = int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmRSS:"))) / 1024
                self.kind.setdefault(pid, "evaluator" if b"evaluator.py" in cmd else "worker")
                self.first.setdefault(pid, mb)
                self.peak[pid] = max(self.peak.get(pid, 0.0), mb)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LOOP_CODE = "```python\nprint(len(apis.api_docs.show_app_descriptions()))\n```"


async def _episodes(bench, client, c: int, runs: int, run_dir: Path, steps: int) -> dict:
    settings = EpisodeSettings(make_protocol("code"), 0.0, 1.0, 512, 0, None, bench.system_prompt, steps, None)
    method = NoMemory()
    runner = Runner(bench, client, settings, RunDir.open(run_dir, {}, "bench", kind="bench"),
                    lambda _: method, c)
    streams = plan_streams(TASKS, seeds=1, runs=runs, seed_base=0, sequential=False)
    cpu0, wall0, llm0 = time.process_time(), time.perf_counter(), client.usage.latency_s
    await runner.run(streams)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    trials = RunDir(run_dir).trials()
    steps = [s for t in trials for turn in t.trajectory["turns"] for s in turn]
    return {"episodes": len(trials), "ok": sum(t.success for t in trials), "steps": len(steps),
            "wall": wall, "cpu": cpu, "llm": sum(s["latency_s"] for s in steps)}


def measure(root: Path, url: str, c: int, runs: int, tmp: Path, server_pid: int, steps: int) -> dict:
    bench = AppWorldBenchmark(AppWorldConfig(data_dir=str(root), split="train", task_ids=TASKS, workers=c))
    bench.prepare()

    async def both() -> dict:
        client = ChatClient(base_url=url, model="stand-in", concurrency=c, cache=None)
        try:
            # Warm up c supervisors and the evaluator, then measure in the same loop.
            await _episodes(bench, client, c, max(1, -(-c // len(TASKS))), tmp / f"warm{c}-{steps}", steps)
            calls.clear()
            server_cpu0 = _cpu_s(server_pid)
            r = await _episodes(bench, client, c, runs, tmp / f"c{c}-{steps}", steps)
            r["server_cpu"] = _cpu_s(server_pid) - server_cpu0
            r["worker_wall"] = sum(sum(v) for v in calls.values())
            r["calls"] = {name: list(v) for name, v in calls.items()}
            return r
        finally:
            await client.close()
            await bench.aclose()

    return asyncio.run(both())


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
    lines += ["", f"Calls to AppWorld's processes at concurrency {args.concurrency[0]} (round trip seen by reme):", "",
              "| policy | call | n | mean ms | median ms | max ms |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for name, made in by_route.items():
        for call in ("open", "execute", "close", "evaluate"):
            if made.get(call):
                lines.append(f"| {name} | {call} | {_ms(made[call])} |")
    rss = {kind: ([sampler.first[p] for p in sampler.first if sampler.kind[p] == kind],
                  [sampler.peak[p] for p in sampler.peak if sampler.kind[p] == kind]) for kind in ("worker", "evaluator")}
    lines += ["", f"Supervisors: {len(starts)} started, spawn to warmed up {min(starts):.1f}-{max(starts):.1f} s "
              "(each episode then runs in a process it forks). RSS (/proc) of every AppWorld process seen: "
              + "; ".join(f"{kind} first {min(a):.0f}-{max(a):.0f} MB, peak {min(b):.0f}-{max(b):.0f} MB"
                          for kind, (a, b) in rss.items() if a) + ".",
              f"Machine: {len(os.sched_getaffinity(0))} cores, shared with other work while this ran; the scripted "
              "server and AppWorld's processes share them with reme."]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()

"""Harness overhead per AppWorld step, with the model taken out: reme's own time per step,
and the time of AppWorld's processes per call, measured separately.

A toy world is built in a temporary directory (tests/fixtures/appworld_toyworld.py, in AppWorld's
venv; never kept, not the benchmark; `--world ROOT` uses one built already). Episodes run
through `reme eval`'s own code (run lifecycle, episode settings, runner: ``eval_runner``),
memory none, the sandbox on, and the scripted server (a TEST DOUBLE, a separate process, zero
delay) plays the model in two ways: `gold` answers each task with its solution code, which
completes the task (one step per episode: the whole per-episode cost of opening, ending and
evaluating an episode lands on that step); `loop` answers every step with the same API call
that never completes the task, so an episode runs `--steps` steps (the steady per-step
cost). In each run the episode supervisors and the evaluator are started and warmed up
first, in the run's own loop (their start is timed on its own), then the episodes are timed.

Per step (one model call): reme's CPU time (its own process: agent loop, records, clients),
and at concurrency 1 the wall time left after subtracting the model calls' latency and the
calls to AppWorld's processes, i.e. what an episode waits on reme alone. Per call: the round
trip seen by reme (pipes + the work: `open` forks the episode's process and opens its world,
`execute` runs a step and checks completion, `close` ends the episode and hands back its
saved world, `evaluate` scores it in the evaluator's forked process). Memory: RSS (/proc) of
every AppWorld process of the run, idle and at its peak: supervisors, episode processes,
the evaluator.

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
from reme_cli.bench.appworld.benchmark import AppWorldEnv
from reme_cli.bench.appworld.processes import INSIDE_VENV, Processes
from reme_cli.bench.appworld.venv import default_venv
from reme_cli.bench.registry import make_benchmark, prepare_benchmark
from reme_cli.commands.evaluate import eval_runner, eval_streams, run_dir_for
from reme_cli.core.config import compose
from reme_cli.core.errors import UserError
from reme_cli.run.lifecycle import RunLifecycle, Session
from reme_cli.run.records import RunDir

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


def appworld_processes() -> dict[int, str]:
    """This run's AppWorld processes (this process's descendants running AppWorld's
    interpreter; never another run's on the machine): pid -> supervisor | episode | evaluator."""
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

    def appworlds(cmd: str) -> bool:  # AppWorld's python: on the host, or at its fixed path in the sandbox
        return cmd.startswith((str(default_venv()), INSIDE_VENV))

    found = {}
    for pid, cmd in cmds.items():
        if not (appworlds(cmd) and mine(pid)):
            continue
        if "evaluator.py" in cmd:
            found[pid] = "evaluator"
        elif "worker.py" in cmd:  # an episode's process is a fork of its supervisor (bwrap runs that)
            found[pid] = "episode" if appworlds(cmds.get(parent.get(pid, 0), "")) else "supervisor"
    return found


class RssSampler(threading.Thread):
    """Peak RSS (MB) of every AppWorld process seen, every 0.2 s."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.kind: dict[int, str] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for pid, kind in appworld_processes().items():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), None)
                if kb is None:  # a process that has exited and not been reaped yet holds no memory
                    continue
                mb = kb / 1024
                self.kind.setdefault(pid, kind)
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


async def _warm_up(bench, c: int) -> None:
    """Start ``c`` supervisors and the evaluator and wait until they are warm: the run then
    times episodes, not starts."""
    processes = bench._processes
    workers = [await processes.acquire() for _ in range(c)]
    for worker in workers:
        processes.release(worker, healthy=True)
    processes.start_evaluator()
    await processes._evaluator_start


def _episodes(cfg, server_pid: int) -> dict:
    """One `reme eval` run of ``cfg`` (AppWorld's processes warmed up first, in its loop)."""
    bench = make_benchmark(cfg.benchmark)
    streams = eval_streams(cfg, bench.task_ids())
    prepare_benchmark(bench)

    async def work(session: Session) -> dict:
        async with eval_runner(cfg, session, streams) as runner:
            await _warm_up(bench, cfg.llm.concurrency)
            calls.clear()
            cpu0, wall0, server0 = time.process_time(), time.perf_counter(), _cpu_s(server_pid)
            await runner.run(streams)
            return {"cpu": time.process_time() - cpu0, "wall": time.perf_counter() - wall0,
                    "server_cpu": _cpu_s(server_pid) - server0}

    with RunLifecycle(cfg, bench, Console(quiet=True), run_dir_for(cfg), kind="eval") as life:
        r = life.run("bench", work, manifest={})
    trials = RunDir(run_dir_for(cfg)).trials()
    failed = [t.error for t in trials if t.error]
    if failed:  # a table over broken episodes would time the wrong thing
        raise SystemExit(f"{len(failed)} episode(s) failed with an error, e.g. {failed[0]}")
    steps = [s for t in trials for turn in t.trajectory["turns"] for s in turn]
    return {**r, "episodes": len(trials), "ok": sum(t.success for t in trials), "steps": len(steps),
            "llm": sum(s["latency_s"] for s in steps), "worker_wall": sum(sum(v) for v in calls.values()),
            "calls": {name: list(v) for name, v in calls.items()}}


def measure(root: Path, servers: dict[str, tuple[str, int]], c: int, runs: int, tmp: Path,
            steps: dict[str, int]) -> dict[str, dict]:
    """Each policy's episodes at concurrency ``c``."""
    return {name: _episodes(_config(root, url, c, runs, tmp / f"c{c}-{name}", steps[name]), server_pid)
            for name, (url, server_pid) in servers.items()}


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
             "model=qwen3-8b at temperature 0, the sandbox on); each run's supervisors and evaluator are "
             "warmed up first. Each episode runs in a process forked for it and is scored in the evaluator.", "",
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
    lines += ["", f"Calls to AppWorld's processes at concurrency {args.concurrency[0]} (round trip seen by reme):", "",
              "| policy | call | n | mean ms | median ms | max ms |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for name, made in by_route.items():
        for call in ("open", "execute", "close", "evaluate"):
            if made.get(call):
                lines.append(f"| {name} | {call} | {_ms(made[call])} |")
    rss = []
    for kind in ("supervisor", "episode", "evaluator"):
        peaks = [sampler.peak[p] for p, k in sampler.kind.items() if k == kind]
        if peaks:
            rss.append(f"{kind} {min(peaks):.0f}-{max(peaks):.0f} MB")
    lines += ["", f"Supervisors: {len(starts)} started, spawn to warmed up {min(starts):.1f}-{max(starts):.1f} s "
              "(importing AppWorld and building its apps, once per supervisor). Peak RSS (/proc) of AppWorld's "
              f"processes: {'; '.join(rss)} (an episode's process is a fork of its supervisor: it shares the "
              "supervisor's pages until it writes them, so the two together take less than their sum).",
              "The scripted server and AppWorld's processes share the machine's cores with reme.", "",
              machine_note(load)]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    script_main(main)

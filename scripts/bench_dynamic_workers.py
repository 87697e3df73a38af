"""Wall time of a dynamic run against a no-memory run of the same units, as a function of
``eval.dynamic_workers`` (W), with the model taken out.

A dynamic stream learns in order, so with W=1 it walks its tasks one after another however
high ``llm.concurrency`` is; W workers share a stream's pool (worker i takes tasks i, i+W, ...,
as the authors' scripts do), so the stream's critical path shrinks by about W. The scripted
server (a TEST DOUBLE, a separate process) replays BFCL-v3 ground truth and answers the
summarizer's requests, every request after the same delay; ReMe starts from the authors'
released pool (imported, no LLM calls). Everything runs in one invocation through
``reme eval``'s own code path, so the ratios compare like with like on a noisy machine.

The "critical path" column is the lower bound with zero harness cost: for each worker, the
sum over its units of (executor + memory-side calls) x delay, the longest worker's sum (no
memory: the units scheduled on ``llm.concurrency`` slots, as in bench_harness.py).

    python scripts/bench_dynamic_workers.py                  # 40 tasks x 2 runs, delay 0.1 s, c 64, W 1 4 8
    python scripts/bench_dynamic_workers.py --out results/dynamic_workers_benchmark.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_harness import emit, ideal_makespan, machine_note, script_main  # noqa: E402

from reme_cli.commands.evaluate import evaluate  # noqa: E402
from reme_cli.commands.pool import import_pool  # noqa: E402
from reme_cli.core.config import compose  # noqa: E402
from reme_cli.llm.answer_health import total  # noqa: E402


def run(common: list[str], extra: list[str], out: Path) -> dict:
    cfg = compose([*common, *extra, f"out_dir={out}"])
    t0 = time.perf_counter()
    result = evaluate(cfg, Console(quiet=True))
    wall = time.perf_counter() - t0
    if result.errors:
        raise SystemExit(f"{out}: {result.errors} unit(s) failed; see {out / 'trials.jsonl'}")
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    for t in trials:
        t["calls"] = unit_calls(t, cfg)
    usage = json.loads((out / "metrics.json").read_text())["llm_usage"]
    counted = sum(sum(t["calls"]) for t in trials)
    if counted != usage["calls"]:  # the critical path below would miss calls
        raise SystemExit(f"{out}: the unit records account for {counted} LLM calls, the client made {usage['calls']}")
    return {"wall_s": wall, "trials": trials}


def unit_calls(trial: dict, cfg) -> tuple[int, int]:
    """(executor calls, memory-side calls) of one unit: every summarizer answer the unit
    asked for (distillation and judging of each trial, rerank and rewrite when on)."""
    if cfg.eval.mode == "none":
        return trial["interactions"], 0
    # total() counts answers only (a role like ReMe's "summary" counts summaries, not calls)
    return trial["interactions"], total(trial.get("summarizer_answers") or {})["calls"]


def critical_path(trials: list[dict], workers: int, delay: float, dynamic: bool, slots: int) -> float:
    if not dynamic:
        return ideal_makespan([sum(t["calls"]) for t in trials], slots, delay)
    chains: dict[tuple, float] = {}
    for t in trials:  # a stream is (seed, run); worker i of it takes positions i, i+W, ...
        key = (t["seed"], t["run"], t["position"] % workers)
        chains[key] = chains.get(key, 0.0) + sum(t["calls"]) * delay
    return max(chains.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.1, help="scripted server delay per request (s)")
    parser.add_argument("--tasks", type=int, default=40, help="BFCL-v3 test tasks (benchmark.limit)")
    parser.add_argument("--runs", type=int, default=2, help="eval.runs (one dynamic stream each)")
    parser.add_argument("--concurrency", type=int, default=64, help="llm.concurrency")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 8], help="eval.dynamic_workers values")
    parser.add_argument("--out", type=Path, help="also write the table (markdown) here")
    args = parser.parse_args()

    load = os.getloadavg()[0]
    server = subprocess.Popen([sys.executable, "-m", "reme_cli.testing.scripted_server",
                               "--policy", "bfcl-replay+summarizer", "--delay", str(args.delay)],
                              stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            common = ["model=qwen3-8b", "embedding=minilm", "benchmark.release=current", f"llm.base_url={base_url}",
                      "llm.model=replay", "llm.cache=false", f"benchmark.limit={args.tasks}",
                      f"eval.runs={args.runs}", "eval.seeds=1", f"llm.concurrency={args.concurrency}",
                      f"embedding.cache_dir={root / 'embed-cache'}"]
            pool = import_pool("official:bfcl/qwen3-8b", root / "pool", compose(["memory=reme", *common]),
                               Console(quiet=True))
            dynamic = ["eval.mode=dynamic", "memory=reme", f"memory.pool={pool}"]
            # Untimed warm-up: loads the embedder and the benchmark's data once for all rows.
            run(common, [*dynamic, "benchmark.limit=1", "eval.runs=1"], root / "warmup")
            settings = [("no memory", 1, ["eval.mode=none"])]
            settings += [(f"dynamic, W={w}", w, [*dynamic, f"eval.dynamic_workers={w}"]) for w in args.workers]
            # The other setting of rerank + rewrite (two more calls on every unit's critical path).
            on = not compose(["memory=reme"]).memory.rerank
            w = 4  # the authors' scripts' workers on BFCL
            flip = [f"memory.rerank={str(on).lower()}", f"memory.rewrite={str(on).lower()}"]
            settings.append((f"dynamic, W={w}, {' '.join(flip)}", w, [*dynamic, f"eval.dynamic_workers={w}", *flip]))
            rows = []
            for i, (name, w, extra) in enumerate(settings):
                r = run(common, extra, root / f"run{i}")
                calls = [t["calls"] for t in r["trials"]]
                rows.append((name, len(r["trials"]), sum(c[0] for c in calls), sum(c[1] for c in calls),
                             r["wall_s"], critical_path(r["trials"], w, args.delay, i > 0, args.concurrency)))
    finally:
        server.kill()
        server.wait()

    base = rows[0][4]
    lines = [
        f"Scripted server (a test double, not a model) answering every request after {args.delay} s; "
        f"{args.tasks} BFCL-v3 test tasks x {args.runs} runs x 1 seed, llm.concurrency={args.concurrency}; "
        "ReMe dynamic from the released pool official:bfcl/qwen3-8b, memory defaults.",
        "",
        "| setting | units | executor calls | memory-side calls | wall s | critical path s "
        "| wall - critical path s | wall / no memory |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, units, executor, summ, wall, path in rows:
        lines.append(f"| {name} | {units} | {executor} | {summ} | {wall:.1f} | {path:.1f} | {wall - path:.1f} "
                     f"| {wall / base:.1f}x |")
    lines += ["", "Critical path: the longest worker's (executor + memory-side calls) x delay, i.e. the wall "
              "time with zero harness cost (no memory: the units on llm.concurrency slots). Memory-side "
              "calls: every summarizer answer a unit asked for (each trial's summary and its judging, "
              "rerank + rewrite of the retrieved experiences when on).", "", machine_note(load)]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    script_main(main)

"""How close a hosted run gets to its provider's rate limit, and how much of it is throttled:
main's fixed requests in flight beside the adaptive ones (reme_cli/llm/inflight.py), one
run after the other in one invocation.

The scripted server (a TEST DOUBLE, a process of its own) plays DashScope's compatible mode
(``--provider dashscope``: streamed answers, the key checked) with a per-answer latency and a
per-second rate limit: past ``--rps`` chat requests in one clock second the rest get 429 with
``Retry-After`` (DashScope may enforce RPM/60 a second). It replays the BFCL-v3 ground truth,
so every episode is a real BFCL episode through ``reme eval``'s own code path
(``model=qwen3-8b-dashscope``, memory none, the official checker), with ``llm.rpm`` = 60 x rps
and no token limit. Answers stream, as the hosted configs ask; ``--no-stream`` asks for whole
answers with thinking off, which takes reme about half the CPU a request (the OpenAI SDK builds
a model of every streamed chunk): on a busy 2-core machine that CPU is what caps the rate.
The server counts what it admitted and throttled each second; the table reads those counts:

* best 10 s: the most requests admitted in 10 consecutive seconds, as a share of the limit;
* steady state: admitted over the middle half of the run (the first requests to the last),
  as a share of the limit (the tail, when the last episodes finish, is not steady);
* throttled: 429s as a share of every request the server received.

    python scripts/bench_hosted_limit.py                         # 1 s answers, 40 a second
    python scripts/bench_hosted_limit.py --no-stream --tasks 150 --runs 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_harness import emit, machine_note, process_cpu_s, script_main  # noqa: E402

from reme_cli.commands.evaluate import evaluate  # noqa: E402
from reme_cli.core.config import compose  # noqa: E402
from reme_cli.core.errors import UserError  # noqa: E402

KEY = "sk-scripted-bench-key"
WAYS = {  # name -> the llm.concurrency it runs with
    "fixed 32 (main)": "32",  # main's hosted configs: 32 in flight, whatever the answers allow
    "adaptive (this)": "null",  # the hosted configs now
}


def start_server(latency: float, rps: int) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "reme_cli.testing.scripted_server", "--policy", "bfcl-replay", "--provider", "dashscope",
         "--api-key", KEY, "--delay", str(latency), "--rate-limit-rps", str(rps), "--retry-after", "1",
         "--stream-piece", "0"],  # one chunk a field: the stream's shape, not its CPU, is what reme meets
        stdout=subprocess.PIPE, text=True)
    return server, server.stdout.readline().strip()


def per_second(base_url: str) -> dict[int, list[int]]:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/scripted/stats", timeout=10) as resp:
        return {int(k): v for k, v in json.load(resp)["per_second"].items()}


def shares(counts: dict[int, list[int]], rps: int) -> dict[str, float]:
    """Best 10 s and steady-state admitted rate as shares of ``rps``, and the throttled share."""
    first, last = min(counts), max(counts)
    admitted = [counts.get(t, [0, 0])[0] for t in range(first, last + 1)]
    best = max(sum(admitted[i:i + 10]) for i in range(max(1, len(admitted) - 9))) / (10 * rps)
    quarter = len(admitted) // 4
    middle = admitted[quarter:len(admitted) - quarter] or admitted
    received = sum(a + t for a, t in counts.values())
    return {"best_10s": best, "steady": sum(middle) / len(middle) / rps,
            "throttled": sum(t for _, t in counts.values()) / received, "received": received}


def measure(way: str, concurrency: str, args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    server, url = start_server(args.latency, args.rps)
    try:
        cfg = compose(["model=qwen3-8b-dashscope", "embedding=minilm", "eval.mode=none", "llm.model=replay",
                       "benchmark.release=current", f"llm.base_url={url}", "llm.cache=false",
                       # The provider limits requests only: no token limit to pace (qwen3-8b's
                       # 1M a minute would bind as the episodes' histories grow).
                       f"llm.rpm={60 * args.rps}", "llm.tpm=null", f"llm.concurrency={concurrency}",
                       f"benchmark.limit={args.tasks}",
                       f"eval.runs={args.runs}", "eval.seeds=1", f"out_dir={workdir / way.split()[0]}",
                       # Whole answers (thinking off: the provider streams thinking only) take
                       # reme ~half the CPU of streamed ones.
                       *([] if args.stream else ["llm.stream=never", "model.thinking=false"])])
        os.environ["DASHSCOPE_API_KEY"] = KEY
        server_cpu0, cpu0, t0 = process_cpu_s(server.pid), time.process_time(), time.perf_counter()
        result = evaluate(cfg, Console(quiet=True))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        server_cpu = process_cpu_s(server.pid) - server_cpu0
        if result.errors:
            raise SystemExit(f"{way}: {result.errors} unit(s) failed; see {cfg.out_dir}/trials.jsonl")
        counts = per_second(url)
    finally:
        server.kill()
        server.wait()
    manifest = json.loads((Path(cfg.out_dir) / "manifest.json").read_text())
    metrics = json.loads((Path(cfg.out_dir) / "metrics.json").read_text())
    got = shares(counts, args.rps)
    flight = manifest["throughput"]["in_flight"][0]
    return {**got, "wall_s": wall, "reme_ms": 1000 * cpu / got["received"],
            "server_ms": 1000 * server_cpu / got["received"], "peak": flight["peak"],
            "score": metrics[f"avg@{args.runs}"]["mean"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the server holds each answer")
    parser.add_argument("--rps", type=int, default=40, help="requests a second the server admits (llm.rpm = 60x)")
    parser.add_argument("--tasks", type=int, default=100, help="BFCL-v3 test tasks (benchmark.limit)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each task (eval.runs)")
    parser.add_argument("--no-stream", dest="stream", action="store_false",
                        help="whole answers, thinking off (the hosted configs stream thinking answers)")
    parser.add_argument("--out", type=Path, help="also write the table (markdown) here")
    args = parser.parse_args()
    if args.latency < 0 or args.rps < 1 or args.tasks < 1 or args.runs < 1:
        raise UserError("--latency must be >= 0 and --rps, --tasks, --runs at least 1")

    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for way, concurrency in WAYS.items():
            rows.append((way, measure(way, concurrency, args, Path(tmp))))

    given = sys.argv[1:]
    if "--out" in given:  # where the table went is not how it was made
        del given[given.index("--out"):given.index("--out") + 2]
    command = " ".join(["python scripts/bench_hosted_limit.py", *given])
    lines = [
        f"Scripted provider (a TEST DOUBLE: DashScope's rules, BFCL-v3 ground truth, never a model) answering "
        f"after {args.latency:g} s and admitting {args.rps} requests a second (429 + Retry-After past that); "
        f"`reme eval --mode none model=qwen3-8b-dashscope llm.rpm={60 * args.rps} llm.tpm=null"
        f"{'' if args.stream else ' llm.stream=never model.thinking=false'}` on {args.tasks} tasks x "
        f"{args.runs} runs. Made by `{command}`.",
        "",
        "| requests in flight | requests | wall s | best 10 s / limit | steady state / limit | throttled "
        "| peak in flight | reme CPU ms / request | server CPU ms / request | Avg@k |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for way, r in rows:
        lines.append(f"| {way} | {r['received']:.0f} | {r['wall_s']:.1f} | {r['best_10s']:.1%} | {r['steady']:.1%} "
                     f"| {r['throttled']:.2%} | {r['peak']} | {r['reme_ms']:.2f} | {r['server_ms']:.2f} "
                     f"| {r['score']:.2f} |")
    lines += ["", "Shares are of the server's own counts per clock second. Avg@k is the ground-truth replay's score, "
              "not a model's: the same in both rows, the same episodes ran whole.", "", machine_note(load)]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    script_main(main)

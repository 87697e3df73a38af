"""How fast `reme view` opens a large run, and whether it stays responsive.

Writes a synthetic dynamic ReMe run of the paper's size (BFCL-v3: 150 tasks x 4 runs x 3
seeds = 1,800 units, 12 streams with their commit logs, a 96-experience start pool; records
shaped like a Qwen3 run's: several turns of tool calls with outputs, reasoning, guidance of 5
experiences). The records are SYNTHETIC: made by this script to measure the viewer, not by a
model. Then measures, cold (a fresh reader each time):

- the data each page gets (the server's side): the Overview, a run's units, its memory, its
  health, one unit;
- the export: seconds and size;
- in headless Chromium (when there is one), for the live server and for the exported file:
  from navigation until the page has rendered, per page, and paging through the units.

    python scripts/bench_view.py --out results/view_benchmark.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reme_cli.testing.browser import chromium, missing  # noqa: E402
from reme_cli.view.api import answer  # noqa: E402
from reme_cli.view.export import export  # noqa: E402
from reme_cli.view.runs import Catalog  # noqa: E402
from reme_cli.view.server import ViewServer  # noqa: E402

WORDS = ("file directory move copy ticket message stock order login user report archive search sort "
         "budget analysis create list folder mail send check balance account vehicle fuel trip").split()


def text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def experience(rng: random.Random, i: int, origin: str, source: str) -> dict:
    return {"id": f"{i:032x}", "when_to_use": "When " + text(rng, 14), "content": text(rng, 45), "source": source,
            "keywords": [rng.choice(WORDS) for _ in range(3)], "confidence": round(rng.uniform(0.5, 1.0), 2),
            "tools_used": [], "task_query": text(rng, 20), "generalized_query": "", "f": 0, "u": 0,
            "origin_task": origin, "author": "synthetic", "created_at": "2026-01-01T00:00:00+00:00",
            "updated_at": "2026-01-01T00:00:00+00:00", "extra": {}}


def step(rng: random.Random) -> dict:
    calls = [{"name": rng.choice(WORDS), "arguments": json.dumps({"path": text(rng, 3)}),
              "call": f"{rng.choice(WORDS)}(path='{text(rng, 2)}')", "output": json.dumps({"result": text(rng, 40)}),
              "error": False} for _ in range(rng.randint(1, 2))]
    return {"text": "", "calls": calls, "prompt_tokens": rng.randint(2000, 9000), "completion_tokens": rng.randint(50, 400),
            "latency_s": round(rng.uniform(0.5, 4), 3), "cached": False, "code": None, "code_output": None,
            "reasoning": text(rng, 90)}


def write_run(where: Path, tasks: int, runs: int, seeds: int, pool_size: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    run = where / "bench-run"
    pool = where / "pool"
    pool.mkdir(parents=True)
    start = [experience(rng, i, f"train_{i}", rng.choice(["success", "failure", "comparative"]))
             for i in range(pool_size)]
    (pool / "experiences.jsonl").write_text("".join(json.dumps(e) + "\n" for e in start))
    (pool / "manifest.json").write_text(json.dumps({"format": "reme-pool", "retrieval_key": "usage_scenario",
                                                    "embedding": {"name": "synthetic", "dim": 384}}))
    run.mkdir()
    task_ids = [f"multi_turn_base_{i}" for i in range(tasks)]
    (run / "config.yaml").write_text(json.dumps({
        "experiment": "default", "out_dir": "bench-run", "benchmark": {"name": "bfcl_v3", "release": "current"},
        "eval": {"mode": "dynamic", "runs": runs, "seeds": seeds}, "model": {"name": "qwen3-8b"},
        "memory": {"name": "reme", "pool": str(pool), "top_k": 5}}))
    (run / "manifest.json").write_text(json.dumps({"kind": "eval", "status": "complete", "config_hash": "bench",
                                                   "task_ids": task_ids, "server": {"served_models": ["synthetic"]}}))
    next_id = pool_size
    with open(run / "trials.jsonl", "w") as trials:
        for s in range(seeds):
            for r in range(runs):
                stream = run / "streams" / f"s{s}_r{r}"
                stream.mkdir(parents=True)
                ids = [e["id"] for e in start]
                with open(stream / "commits.jsonl", "w") as log:
                    for pos, task in enumerate(rng.sample(task_ids, len(task_ids))):
                        unit = f"s{s}/r{r}/{task}"
                        got = rng.sample(ids, min(5, len(ids)))
                        success = rng.random() < 0.55
                        events = [{"op": "retrieve", "task_id": task, "ids": got, "scores": [0.4] * len(got)},
                                  {"op": "use", "ids": got, "success": success}]
                        if success and rng.random() < 0.4:
                            new = experience(rng, next_id, task, "success")
                            next_id += 1
                            ids.append(new["id"])
                            events.append({"op": "add", "source": "success", "experience": new})
                        if rng.random() < 0.05 and len(ids) > 10:
                            gone = ids.pop(rng.randrange(len(ids)))
                            events.append({"op": "delete", "id": gone, "f": 6, "u": 1})
                        log.write(json.dumps({"unit": unit, "seq": pos, "events": events}) + "\n")
                        turns = [[step(rng) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(3, 5))]
                        guidance = "Some Related Experience to help you to complete the task:\n" + "\n".join(
                            f"Experience {i + 1} :\n When to use: {text(rng, 14)}\n Content: {text(rng, 45)}" for i in range(5))
                        trials.write(json.dumps({
                            "unit": unit, "task_id": task, "seed": s, "run": r, "position": pos, "success": success,
                            "first_success": success, "reward": float(success), "stop_reason": "answered",
                            "checker": {"error_type": None}, "attempts": 1, "earlier_attempts": [],
                            "trajectory": {"turns": turns, "user": [[text(rng, 25)] for _ in turns], "interactions": 8,
                                           "stop_reason": "answered", "stop_detail": None},
                            "retrieved_ids": got, "retrieval_scores": sorted((rng.uniform(0.2, 0.8) for _ in got), reverse=True),
                            "retrieval_s": round(rng.uniform(0.01, 0.2), 4), "guidance": guidance,
                            "method": {"trials": [{"guided_by": "retrieval", "retrieved_ids": got, "success": success,
                                                   "retrieved_numbers": {i: {"f": 1, "u": 1} for i in got}}]},
                            "tokens": {"prompt": 40000, "completion": 900, "max_prompt": 9000}, "llm_latency_s": 20.0,
                            "interactions": 8, "wall_s": round(rng.uniform(10, 90), 2), "schema_version": 2}) + "\n")
    return run


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def data_side(run: Path, units: int, streams: int) -> list[tuple[str, float]]:
    rows = []
    catalog = Catalog([run])
    t, _ = timed(lambda: answer(catalog, "index"))
    rows.append((f"Overview (reads the {units:,} records; scores, intervals)", t))
    for key, what in (("units/r0", "a run's units"), ("memory/r0", f"its memory ({streams} streams replayed)"),
                      ("health/r0", "its health")):
        t, _ = timed(lambda: answer(catalog, key))
        rows.append((what, t))
    unit = catalog.runs()[0].trials[0].unit
    t, _ = timed(lambda: answer(catalog, f"unit/r0/{unit}"))
    rows.append(("one unit", t))
    return rows


def routes(tasks: int, rows: int, pages: int) -> tuple[tuple[str, str], ...]:
    return (("Overview", "#/overview"), (f"Task grid ({tasks} tasks x {rows} rows)", "#/grid"),
            (f"Units, page 1 of {pages}", "#/units/r0"), (f"Units, page {pages}", f"#/units/r0?page={pages - 1}"),
            ("Memory", "#/memory/r0"), ("Health", "#/health/r0"))


def browser_side(browser, url: str, unit: str, pages: tuple[tuple[str, str], ...]) -> list[tuple[str, float]]:
    rows = []
    page = browser.new_page(viewport={"width": 1360, "height": 860})
    try:
        t0 = time.perf_counter()
        page.goto(url)
        page.wait_for_function("() => document.body.dataset.ready === '1'", timeout=120000)
        rows.append(("open (first page shown)", time.perf_counter() - t0))
        for name, route in (*pages, ("a unit", f"#/unit/r0/{unit}")):
            count = page.evaluate("() => Number(document.body.dataset.rendered)")
            t0 = time.perf_counter()
            page.evaluate(f"() => {{ location.hash = {json.dumps(route)}; }}")
            page.wait_for_function(f"() => Number(document.body.dataset.rendered) > {count}", timeout=120000)
            rows.append((name, time.perf_counter() - t0))
    finally:
        page.close()
    return rows


def main(argv: list[str] | None = None, browser=None) -> str:
    """Run the benchmark; ``browser``: a Playwright browser to use (else one is started)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=150)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--pool", type=int, default=96)
    ap.add_argument("--no-browser", action="store_true", help="measure the data side and the export only")
    ap.add_argument("--out", type=Path, help="write the results as Markdown here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        run = write_run(where, args.tasks, args.runs, args.seeds, args.pool)
        units = args.tasks * args.runs * args.seeds
        records_mb = (run / "trials.jsonl").stat().st_size / 1e6
        data = data_side(run, units, args.seeds * args.runs)
        pages = routes(args.tasks, args.seeds * args.runs, -(-units // 50))
        out = where / "view.html"
        t, size = timed(lambda: export(Catalog([run]), out))
        data.append(("export (every page, every unit)", t))
        unit = "s0%2Fr0%2F" + json.loads((run / "trials.jsonl").open().readline())["task_id"]
        why = "--no-browser" if args.no_browser else missing()
        live = exported = None
        if why is None:
            with contextlib.nullcontext(browser) if browser is not None else chromium() as b:
                server = ViewServer(Catalog([run]), "127.0.0.1", 0)
                server.warm()  # as `reme view` does before it prints the URL (the Overview's cold cost is above)
                threading.Thread(target=server.serve_forever, daemon=True).start()
                try:
                    live = browser_side(b, server.url, unit, pages)
                finally:
                    server.shutdown()
                    server.server_close()
                exported = browser_side(b, out.as_uri(), unit, pages)
    lines = [f"Synthetic dynamic ReMe run (records written by scripts/bench_view.py, not by a model): {units} units "
             f"({args.tasks} tasks x {args.runs} runs x {args.seeds} seeds), {args.seeds * args.runs} streams, "
             f"start pool {args.pool}; trials.jsonl {records_mb:.1f} MB; export {size / 1e6:.1f} MB.", "",
             "| the data each page gets (cold, seconds) | s |", "| --- | ---: |"]
    lines += [f"| {name} | {t:.2f} |" for name, t in data]
    lines.append("")
    if live is None:
        lines.append(f"Browser: not measured ({why}).")
    else:
        lines += ["| in headless Chromium (seconds until rendered) | live server | exported file |", "| --- | ---: | ---: |"]
        lines += [f"| {a[0]} | {a[1]:.2f} | {b[1]:.2f} |" for a, b in zip(live, exported)]
        lines += ["", f"Slowest page switch: {max(t for _, t in live[1:] + exported[1:]):.2f} s; "
                      f"median {statistics.median(t for _, t in live[1:] + exported[1:]):.2f} s."]
    text_out = "\n".join(lines) + "\n"
    print(text_out)
    if args.out:
        args.out.write_text(text_out)
    return text_out


if __name__ == "__main__":
    main()

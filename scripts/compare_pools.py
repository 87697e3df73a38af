#!/usr/bin/env python3
"""Compare a pool built by `reme build-pool` with a released pool of the ReMe authors, in
structure: counts (in all, per source, per training task), lengths, which fields the items
carry, what the build's pipeline dropped where, and how many of the released items a
de-duplication at `--dedup` would keep (the authors' later flows de-duplicate inside the
summary; their BFCL pools were built before that, issue #213).

    PYTHONPATH=. python scripts/compare_pools.py --released official:bfcl/qwen3-8b --built DIR \\
        [--dedup 0.5 0.7 0.85] [--embedding-model all-MiniLM-L6-v2] > comparison.md

DIR is a `reme build-pool` out_dir (its pool/ and build/). Markdown on stdout. Embeds with
sentence-transformers (offline for the bundled all-MiniLM-L6-v2).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

from reme_cli.llm.embed import make_embedder
from reme_cli.methods.reme.experience import SOURCES, Experience
from reme_cli.methods.reme.official import parse_official, pool_source
from reme_cli.methods.reme.pool import Pool


def _median(values: list[int]) -> str:
    return f"{statistics.median(values):g}" if values else "-"


def _share(items: list[Experience], has) -> str:
    return f"{sum(1 for e in items if has(e))}/{len(items)}"


def summary_rows(name: str, items: list[Experience]) -> list[str]:
    by = Counter(e.source for e in items)
    authors = ", ".join(f"{a} {n}" for a, n in Counter(e.author for e in items).most_common())
    meta = [e.extra.get("metadata") if isinstance(e.extra.get("metadata"), dict) else {} for e in items]
    return [f"| {name} | {len(items)} | " + " / ".join(str(by.get(s, 0)) for s in SOURCES[:3])
            + f" | {by.get('trajectory', 0)} | {authors} | {_median([len(e.when_to_use) for e in items])} | "
            f"{_median([len(e.content) for e in items])} | {_share(items, lambda e: e.task_query)} | "
            f"{_share(items, lambda e: e.generalized_query)} | {_share(items, lambda e: e.keywords)} | "
            f"{sum(1 for m in meta if 'step_type' in m)}/{len(items)} | {_share(items, lambda e: e.tools_used)} |"]


def per_task(items: list[Experience]) -> str:
    counts = Counter(e.origin_task for e in items if e.origin_task)
    if not items:
        return "none"
    if not counts:
        return (f"not recorded (the items name no task); {len({e.task_query for e in items})} distinct "
                f"task_query values for {len(items)} items")
    spread = Counter(counts.values())
    return (f"{len(counts)} tasks, {statistics.mean(counts.values()):.2f} per task "
            f"({', '.join(f'{n} item(s): {t} task(s)' for n, t in sorted(spread.items()))})")


def dedup_survivors(items: list[Experience], threshold: float, embedder) -> Counter:
    """The items a pool keeps when they arrive in file order, dropping a new one whose
    when_to_use + content is more similar than ``threshold`` (cosine) to a kept item's
    when_to_use (the authors' dedup op against the stored pool)."""
    kept: list[Experience] = []
    with tempfile.TemporaryDirectory() as tmp:
        pool = Pool.create(Path(tmp) / "p", embedder)
        for e in items:  # one at a time: each is compared with the pool as it stands (tasks unknown)
            kept += pool.add([Experience.from_dict(e.to_dict())], dedup_threshold=threshold,
                             dedup_text="key_content_vs_key")
    return Counter(e.source for e in kept)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--released", required=True, help="official:NAME or a released .jsonl")
    ap.add_argument("--built", required=True, type=Path, help="a `reme build-pool` out_dir")
    ap.add_argument("--dedup", type=float, nargs="+", default=[0.5])
    ap.add_argument("--embedding-model", default="all-MiniLM-L6-v2")
    args = ap.parse_args(argv)

    released, _ = parse_official(pool_source(args.released).read_text(encoding="utf-8"))
    built = [Experience.from_dict(json.loads(line)) for line in
             (args.built / "pool" / "experiences.jsonl").read_text().splitlines() if line.strip()]
    report = json.loads((args.built / "build" / "report.json").read_text())
    # Every validated candidate, kept or turned down (build/distill.jsonl), before de-duplication.
    candidates = [Experience.from_dict(e) for line in (args.built / "build" / "distill.jsonl").read_text().splitlines()
                  if line.strip() for rec in [json.loads(line)] for e in rec["experiences"] + rec.get("rejected", [])]
    lines = [f"## {args.released} vs {args.built.name}", "",
             "| pool | items | success / failure / comparative | trajectory | authors | median chars when_to_use "
             "| median chars content | task_query | generalized_query | tags (κ) | step_type | tools_used |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|",
             *summary_rows(args.released, released), *summary_rows(f"built ({args.built.name})", built),
             *summary_rows(f"built: candidates before validation ({args.built.name})", candidates), "",
             f"- per training task, released: {per_task(released)}",
             f"- per training task, built: {per_task(built)}",
             f"- per training task, built candidates: {per_task(candidates)}", "",
             "Built pipeline (build/report.json): "
             f"{report['tasks_distilled']} tasks distilled, {report['trajectories']} trajectories "
             f"(success rate {report['trajectory_success_rate']:.2f}), {report['summarizer_llm_calls']} summarizer "
             f"calls, candidates by source {report['candidates_by_source']}, "
             f"{report['invalid_llm_outputs']} invalid outputs, {report['rejected_by_judge']} rejected by the "
             f"validation, {report['removed_as_duplicates']} removed as duplicates, pool {report['pool_size']}.", ""]
    embedder = make_embedder({"kind": "sentence_transformers", "model": args.embedding_model})
    lines += [f"The released pool's {len(released)} items added in file order with de-duplication "
              f"({args.embedding_model}, when_to_use + content against the kept items' when_to_use):", "",
              "| cosine > | kept | success / failure / comparative |", "|---|---|---|"]
    for threshold in args.dedup:
        kept = dedup_survivors(released, threshold, embedder)
        lines.append(f"| {threshold:g} | {sum(kept.values())} | "
                     + " / ".join(str(kept.get(s, 0)) for s in SOURCES[:3]) + " |")
    lines.append("")
    sys.stdout.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Tokens per second of an OpenAI-compatible server (vLLM, llama.cpp, ...) at several
concurrencies, written as the calibration file `reme ablate ... --dry-run` reads
(`cost.calibration=FILE`) for its wall-time and GPU-hour estimate.

At each concurrency c it runs two phases, each with c requests in flight until
`--requests` (default 2c) have answered:
- prefill: long prompts, each starting with its own random words so that no prefix cache
  can serve them, and max_tokens 1: prompt tokens per second;
- decode: short prompts, max_tokens `--max-tokens` with ignore_eos (vLLM and llama.cpp
  honour it; others may stop early, which the usage counts still account for): generated
  tokens per second.
Both rates are sums over the requests in flight, from the server's own usage counts.

    python scripts/bench_vllm.py --base-url http://127.0.0.1:8000/v1 --out calibration.json
    reme ablate table1 model=qwen3-8b cost.calibration=calibration.json --dry-run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from reme_cli.core.errors import UserError
from reme_cli.llm.client import ChatClient, check_server

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def prompt(rng: random.Random, words: int) -> list[dict[str, str]]:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return [{"role": "user", "content": f"{rng.getrandbits(64):x} Repeat these words: {text}"}]


async def phase(client: ChatClient, concurrency: int, requests: int, words: int, max_tokens: int,
                seed: int) -> dict[str, float]:
    """``requests`` calls, ``concurrency`` at a time; summed usage over wall time."""
    rng = random.Random(seed)
    prompts = [prompt(rng, words) for _ in range(requests)]
    slots = asyncio.Semaphore(concurrency)

    async def one(messages: list[dict[str, str]]):
        async with slots:
            return await client.chat(messages, temperature=0.0, max_tokens=max_tokens,
                                     extra_body={"ignore_eos": True})

    start = time.perf_counter()
    results = await asyncio.gather(*(one(m) for m in prompts))
    wall = time.perf_counter() - start
    return {"wall_s": wall, "prompt_tokens": sum(r.prompt_tokens for r in results),
            "completion_tokens": sum(r.completion_tokens for r in results)}


async def measure(args: argparse.Namespace, model: str) -> list[dict[str, float]]:
    points = []
    for c in args.concurrency:
        # The client's own bound is the level under test; no cache, no retries to blur the timing.
        client = ChatClient(base_url=args.base_url, model=model, api_key=args.api_key, concurrency=c,
                            timeout=args.timeout, max_retries=0)
        try:
            n = args.requests or 2 * c
            prefill = await phase(client, c, n, args.prompt_words, 1, seed=c)
            decode = await phase(client, c, n, 8, args.max_tokens, seed=10_000 + c)
        finally:
            await client.close()
        point = {"concurrency": c, "requests": n,
                 "prompt_tokens_per_s": round(prefill["prompt_tokens"] / prefill["wall_s"], 2),
                 "generated_tokens_per_s": round(decode["completion_tokens"] / decode["wall_s"], 2),
                 "prefill": prefill, "decode": decode}
        print(f"concurrency {c:>3}: prompt {point['prompt_tokens_per_s']:>10,.1f} tok/s   "
              f"generated {point['generated_tokens_per_s']:>9,.1f} tok/s", file=sys.stderr)
        points.append(point)
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="the server, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", help="served model name (default: the server's first)")
    parser.add_argument("--api-key", default="EMPTY")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--requests", type=int, default=0, help="requests per phase (default: 2 x concurrency)")
    parser.add_argument("--prompt-words", type=int, default=1500, help="words per prefill prompt (~2 tokens each)")
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens per decode request")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=Path("calibration.json"))
    args = parser.parse_args(argv)
    if min(args.concurrency) < 1 or args.max_tokens < 1 or args.prompt_words < 1:
        parser.error("--concurrency, --max-tokens and --prompt-words must be at least 1")
    try:
        model = args.model or (check_server(args.base_url, args.api_key) or [""])[0]
        if not model:
            raise UserError(f"{args.base_url} serves no model; give --model")
        points = asyncio.run(measure(args, model))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the server refused or broke: one line, not a traceback
        print(f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return 1
    args.out.write_text(json.dumps({
        "model": model, "base_url": args.base_url,
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "prompt_words": args.prompt_words, "max_tokens": args.max_tokens, "points": points}, indent=2) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

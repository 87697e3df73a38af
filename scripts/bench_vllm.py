"""Tokens per second of an OpenAI-compatible server (vLLM, llama.cpp, ...) at several
concurrencies, written as the calibration file `reme ablate ... --dry-run` reads
(`cost.calibration=FILE`) for its wall-time and GPU-hour estimate: the same file, measured by
the same code (``reme_cli/llm/sweep.py``), as `reme check` keeps after its short sweep.
This is the full sweep (64 in flight by default): run it on the GPU box once the server is up.

At each concurrency c it runs two phases, each with c requests in flight until
`--requests` (default 2c) have answered: prefill (long prompts no prefix cache can serve,
max_tokens 1) and decode (short prompts, `--max-tokens` with ignore_eos); both rates are
sums over the requests in flight, from the server's own usage counts.

    python scripts/bench_vllm.py --base-url http://127.0.0.1:8000/v1 --out calibration.json
    reme ablate table1 model=qwen3-8b cost.calibration=calibration.json --dry-run
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from reme_cli.core.errors import UserError
from reme_cli.llm.client import ChatClient, check_server
from reme_cli.llm.sweep import Sweep, measure
from reme_cli.run.calibration import Calibration


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
    sweep = Sweep(tuple(args.concurrency), args.requests, args.prompt_words, args.max_tokens)

    def report(point: dict) -> None:
        print(f"concurrency {point['concurrency']:>3}: prompt {point['prompt_tokens_per_s']:>10,.1f} tok/s   "
              f"generated {point['generated_tokens_per_s']:>9,.1f} tok/s", file=sys.stderr)

    try:
        model = args.model or (check_server(args.base_url, args.api_key) or [""])[0]
        if not model:
            raise UserError(f"{args.base_url} serves no model; give --model")
        # The client's own bound is the level under test; no cache, no retries to blur the timing.
        points = asyncio.run(measure(lambda c: ChatClient(base_url=args.base_url, model=model, api_key=args.api_key,
                                                          concurrency=c, timeout=args.timeout, max_retries=0),
                                     sweep, report))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the server refused or broke: one line, not a traceback
        print(f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return 1
    Calibration.measured(model, args.base_url, points, tool="scripts/bench_vllm.py",
                         extra={"prompt_words": args.prompt_words, "max_tokens": args.max_tokens}).write(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

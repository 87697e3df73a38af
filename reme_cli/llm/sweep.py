"""Tokens per second of an OpenAI-compatible server at a few concurrencies: the rates a
plan's wall time is computed from (``run/cost.py``), measured the same way by
``scripts/bench_vllm.py`` (a full sweep) and ``reme check`` (a short one).

At each concurrency c, two phases, each with c requests in flight until ``requests`` have
answered:
- prefill: long prompts, each starting with its own random words so that no prefix cache
  can serve them, and max_tokens 1: prompt tokens per second;
- decode: short prompts, ``max_tokens`` with ignore_eos (vLLM and llama.cpp honour it;
  others may stop early, which the usage counts still account for): generated tokens per
  second.
Both rates are sums over the requests in flight, from the server's own usage counts.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reme_cli.llm.client import ChatClient

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


@dataclass(frozen=True)
class Sweep:
    """What one measurement asks: the concurrencies, requests per phase (0: 2 x c), words per
    prefill prompt (~2 tokens each) and tokens per decode request."""

    concurrency: tuple[int, ...]
    requests: int = 0
    prompt_words: int = 1500
    max_tokens: int = 256


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


async def measure(make_client: Callable[[int], ChatClient], sweep: Sweep,
                  report: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """One point per concurrency (the calibration file's ``points``). ``make_client(c)``
    gives a client bounded at c, without a cache or retries to blur the timing."""
    points = []
    for c in sweep.concurrency:
        client = make_client(c)
        try:
            n = sweep.requests or 2 * c
            prefill = await phase(client, c, n, sweep.prompt_words, 1, seed=c)
            decode = await phase(client, c, n, 8, sweep.max_tokens, seed=10_000 + c)
        finally:
            await client.close()
        point = {"concurrency": c, "requests": n,
                 "prompt_tokens_per_s": round(prefill["prompt_tokens"] / prefill["wall_s"], 2),
                 "generated_tokens_per_s": round(decode["completion_tokens"] / decode["wall_s"], 2),
                 "prefill": prefill, "decode": decode}
        if report is not None:
            report(point)
        points.append(point)
    return points

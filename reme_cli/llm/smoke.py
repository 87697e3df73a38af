"""The install's smoke check: the embedded model server must answer a short greedy chat.

    python -m reme_cli.llm.smoke [--model PATH]

A llama.cpp build tuned for another CPU (a native source build, or a wheel built so) does
not fail at import: it segfaults on the first prompt of more than one token, or answers
garbage. So start the real server (the engine reme will use), ask one question greedily, and
check the answer; exit 0 and one line naming the engine on success, exit 1 and one line
naming the cause and the fix otherwise.
"""

from __future__ import annotations

import argparse
import sys

import httpx

from reme_cli.core.errors import UserError
from reme_cli.llm.local_engine import choose
from reme_cli.llm.local_server import LocalServer, default_model_path

QUESTION = "What is the capital of France? Answer in one sentence."
# What the bundled SmolLM2-135M answers greedily; another model file only has to answer.
EXPECTED = "Paris"
REBUILD_HINT = ("rerun bash scripts/install.sh: it replaces an xllamacpp engine that fails here with a "
                "portable source build (REME_LLAMA_ENGINE=source forces that; REME_LLAMA_CMAKE_ARGS sets its "
                "flags for your CPU)")


class SmokeFailure(Exception):
    pass


def check_answer(text: str, expected: str | None) -> None:
    """A well-formed answer: non-empty, mostly letters and spaces, and right if we know it."""
    stripped = text.strip()
    if not stripped:
        raise SmokeFailure("the model answered nothing")
    readable = sum(ch.isalnum() or ch.isspace() or ch in ".,;:'!?-()\"" for ch in stripped)
    if readable / len(stripped) < 0.9:
        raise SmokeFailure(f"the model answered garbage: {stripped[:60]!r}")
    if expected and expected.lower() not in stripped.lower():
        raise SmokeFailure(f"the model answered {stripped[:80]!r}, expected it to mention {expected}")


def smoke(model_path: str | None = None, timeout: float = 120.0) -> str:
    bundled = model_path is None
    path = model_path or default_model_path()
    server = LocalServer(model_path=path, n_ctx=512, startup_timeout=timeout)
    with server:
        try:
            resp = httpx.post(server.base_url + "/chat/completions", timeout=timeout, json={
                "model": server.model_name, "temperature": 0.0, "seed": 0, "max_tokens": 32,
                "messages": [{"role": "user", "content": QUESTION}]})
            resp.raise_for_status()
            text = resp.json()["choices"][0]["message"]["content"] or ""
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            died = server.exit_status()
            if died:
                raise SmokeFailure(f"the embedded model server died on its first prompt ({died}); "
                                   f"log: {server.log_path}") from None
            raise SmokeFailure(f"the embedded model server failed the request ({type(exc).__name__}: "
                               f"{str(exc)[:120]}); log: {server.log_path}") from None
        check_answer(text, EXPECTED if bundled else None)
    return text.strip()


def engine_label() -> str:
    engine = choose()
    return f"{engine.name} {engine.version() or '(version unknown)'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .gguf file (default: the bundled SmolLM2-135M)")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    try:
        answer = smoke(args.model, args.timeout)
    except SmokeFailure as exc:
        print(f"error: smoke check failed: {exc}; {REBUILD_HINT}", file=sys.stderr)
        return 1
    except UserError as exc:
        print(f"error: smoke check failed: {exc}", file=sys.stderr)
        return 1
    print(f"smoke check passed: the embedded model answered {answer[:80]!r} ({engine_label()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

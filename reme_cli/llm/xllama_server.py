"""llama.cpp's own OpenAI-compatible server, embedded in Python by xllamacpp, as a command:

    python -m reme_cli.llm.xllama_server --model GGUF --port N [--model_alias NAME]
        [--host 127.0.0.1] [--n_ctx 8192] [--n_threads N] [--n_threads_batch N] [--cache_ram_mib 2048] [--seed 0]
        [--chat_template_file FILE.jinja]

xllamacpp has no command line of its own; this one takes the argument names of
``python -m llama_cpp.server``, so ``LocalServer`` starts either engine the same way. It serves
``/v1/models``, ``/v1/chat/completions`` and ``/health`` until SIGTERM or SIGINT, then exits 0.
``--chat_template_file`` serves the model with another chat template (llama-server's
``--chat-template-file``), rendered in jinja mode, as llama.cpp's server always renders here:
Qwen3's own template makes it speak Qwen3's wire format (tools in the system prompt, calls
parsed from ``<tool_call>`` into native ``tool_calls``, ``<think>`` into ``reasoning_content``:
llama.cpp's chat-format detection reads them off the template; tests/llm/test_qwen3_server.py).
A server that cannot start (a broken model file, a taken port, a wheel that does not load)
ends with one ``error:`` line and exit code 1.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import sys
import threading
from pathlib import Path

# What llama-cpp-python's `--cache true` keeps in RAM (LlamaRAMCache's 2 GiB), where llama.cpp's
# server would take 8 GiB: a laptop runs reme's embedder and the test suite beside it.
CACHE_RAM_MIB = 2048


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m reme_cli.llm.xllama_server", description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a .gguf file")
    ap.add_argument("--model_alias", default=None, help="the model id clients send (default: the file's)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n_ctx", type=int, default=8192)
    # llama-cpp-python's server default; reme's LocalServer passes its own count.
    ap.add_argument("--n_threads", type=int, default=max((os.cpu_count() or 2) // 2, 1))
    ap.add_argument("--n_threads_batch", type=int, default=None, help="default: --n_threads")
    ap.add_argument("--cache_ram_mib", type=int, default=CACHE_RAM_MIB,
                    help="RAM for cached prompt prefixes (llama.cpp's server default is 8192)")
    ap.add_argument("--chat_template_file", default=None,
                    help="a jinja chat template to serve the model with (default: the GGUF's own)")
    # The seed of a request that sends none (the summarizer's: the authors' memory service sent
    # none). llama.cpp's own default draws a new random seed for each such request, so the
    # embedded model's summarizer answered anew on every run; with a fixed one it is as
    # reproducible as the executor's seeded calls. (llama-cpp-python's server samples such a
    # request with the last seed a request sent.)
    ap.add_argument("--seed", type=int, default=0, help="the seed of requests that send none")
    return ap.parse_args(argv)


def params(args: argparse.Namespace, xlc) -> object:
    p = xlc.CommonParams()
    p.model.path = args.model
    if args.model_alias:
        p.model_alias = {args.model_alias}
    p.hostnames = [args.host]
    p.port = args.port
    p.n_ctx = args.n_ctx
    # One slot with the whole context, as llama-cpp-python serves: requests queue, and a long
    # BFCL episode is not cut to n_ctx / n_parallel.
    p.n_parallel = 1
    p.sampling.seed = args.seed
    p.cpuparams.n_threads = args.n_threads
    p.cpuparams_batch.n_threads = args.n_threads_batch or args.n_threads
    # Concurrent episodes interleave on the one slot; the RAM cache restores an episode's
    # prefix instead of recomputing it (llama-cpp-python's `--cache true`).
    p.cache_prompt = True
    p.cache_ram_mib = args.cache_ram_mib
    # Jinja mode (xllamacpp's default, said here because the template below needs it): tools
    # are rendered by the template, and the reply is parsed by the format llama.cpp detects
    # in it; reasoning goes to reasoning_content (the deepseek format, also the default).
    p.use_jinja = True
    if args.chat_template_file:
        p.chat_template = Path(args.chat_template_file).read_text()
    return p


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import xllamacpp as xlc
    except ImportError as exc:  # an OSError inside (libgomp.so.1 missing) surfaces as ImportError
        print(f"error: xllamacpp does not load ({exc}); it needs the system's libgomp.so.1 (it comes with gcc), "
              "or reinstall with REME_LLAMA_ENGINE=source bash scripts/install.sh", file=sys.stderr, flush=True)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server = xlc.Server(params(args, xlc))  # returns once the model is loaded and the port bound
    except RuntimeError as exc:
        # llama.cpp has logged the cause above ("couldn't bind HTTP server socket", "failed
        # to load model"); LocalServer retries a port someone took, so name that case its way.
        cause = (f"address already in use: {args.host}:{args.port}" if _port_taken(args.host, args.port)
                 else "see the log lines above")
        print(f"error: llama.cpp server did not start ({exc}): {cause}", file=sys.stderr, flush=True)
        return 1
    print(f"xllamacpp {xlc.__version__} serving {args.model} on {server.listening_address}", flush=True)
    while not stop.wait(1.0):  # a timed wait, so the signal handler runs promptly
        pass
    del server  # its destructor stops llama.cpp's HTTP and main loops
    return 0


if __name__ == "__main__":
    sys.exit(main())

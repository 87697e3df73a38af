r"""How complete the embedded model's constrained answers are, per llama.cpp engine and per way
of asking: reme's real request shapes replayed against the engine this interpreter runs.

The 16 requests (max_tokens 96, greedy, seed 0) are the ones the engine survey replayed
(results/prebuilt_llama.md): 8 steps of reme's JSON tool protocol, built with
``JSONProtocol(TOOL_DIALECT)`` from bfcl-eval's own data (3 simple_python, 2 multiple,
2 live_multiple, 1 parallel_multiple, first entries of each file); ReMe's 5 summarizer formats
(``CONSTRAINED_FORMATS``) on a one-line task; and the 3 GBNF grammars of DC's curator and
ReasoningBank's judge and extraction. Each is sent three ways:

- ``plain``: the schema as ``response_format``, no repeat penalty (reme before the xllamacpp
  engine; on llama-cpp-python its server then applies repeat_penalty 1.1 unasked);
- ``penalty``: the same, with ``repeat_penalty: 1.1`` (model=local's sampling);
- ``reme``: as reme sends it now (``model.sampling`` of model=local, and on llama.cpp's C++
  server the schema as a compact grammar: reme_cli/llm/json_grammar.py).

A schema answer counts as complete when it parses (``json.loads(strict=False)``) and did not
stop at max_tokens (reme reads a "length" answer as invalid); a grammar answer when it starts
with its format's first line. Prints a Markdown table (and writes it with --out).

    python scripts/bench_json_answers.py [--ways plain,penalty,reme] [--limit N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GRAMMAR_PREFIX = {"dc-curator": "<cheatsheet>\n\nVersion: ", "rb-judge": "Thoughts: ", "rb-extract": "# Memory Item "}
BFCL_FILES = (("simple_python", 3), ("multiple", 2), ("live_multiple", 2), ("parallel_multiple", 1))
TASK = "Task: the agent booked a flight from Paris to Rome with the search and book tools."


def cases() -> list[dict]:
    """(name, kind, messages, response_format or grammar) of each request, from reme's own code."""
    import bfcl_eval

    from reme_cli.agent.protocols import JSONProtocol
    from reme_cli.bench.bfcl.benchmark import TOOL_DIALECT
    from reme_cli.methods.dc.curator import GRAMMAR as DC_GRAMMAR
    from reme_cli.methods.reasoningbank.induce import EXTRACT_GRAMMAR, JUDGE_GRAMMAR
    from reme_cli.methods.reme.formats import CONSTRAINED_FORMATS

    data = Path(bfcl_eval.__file__).parent / "data"
    out = []
    for category, n in BFCL_FILES:
        path = next(data / f"{v}_{category}.json" for v in ("BFCL_v4", "BFCL_v3") if (data / f"{v}_{category}.json").exists())
        for line in path.read_text().splitlines()[:n]:
            entry = json.loads(line)
            tools = [{"type": "function", "function": f} for f in entry["function"]]
            protocol = JSONProtocol(TOOL_DIALECT)
            messages = [{"role": "system", "content": protocol.system_prompt(None, tools)}]
            messages += [{"role": m["role"], "content": m["content"]} for m in entry["question"][0]]
            out.append({"name": f"bfcl:{entry['id']}", "kind": "schema", "messages": messages,
                        "response_format": protocol.request_kwargs(tools)["response_format"]})
    for role, fmt in CONSTRAINED_FORMATS.items():
        out.append({"name": f"reme:{role}", "kind": "schema", "response_format": fmt, "messages": [
            {"role": "user", "content": f"{TASK} Write the {role} answer as JSON."}]})
    for name, grammar in (("dc-curator", DC_GRAMMAR), ("rb-judge", JUDGE_GRAMMAR), ("rb-extract", EXTRACT_GRAMMAR)):
        out.append({"name": f"gbnf:{name}", "kind": "grammar", "grammar": grammar, "messages": [
            {"role": "user", "content": "The agent booked a flight from Paris to Rome. Write your notes in the "
                                        "requested format."}]})
    return out


def request(case: dict, way: str, model: str, compact: bool, max_tokens: int) -> dict:
    from reme_cli.core.config import compose
    from reme_cli.llm.json_grammar import compact_json_request

    body = {"model": model, "messages": case["messages"], "temperature": 0.0, "seed": 0, "max_tokens": max_tokens}
    extra = {"grammar": case["grammar"]} if case["kind"] == "grammar" else {}
    if case["kind"] == "schema":
        body["response_format"] = case["response_format"]
    if way in ("penalty", "reme"):
        extra["repeat_penalty"] = 1.1
    if way == "reme":
        s = compose(["model=local"]).model.sampling
        extra |= {"top_k": s.top_k, "min_p": s.min_p, "repeat_penalty": s.repeat_penalty}
    body["extra_body"] = extra
    return compact_json_request(body) if way == "reme" and compact else body


def complete(case: dict, text: str, finish: str | None) -> bool:
    if case["kind"] == "grammar":
        return text.startswith(GRAMMAR_PREFIX[case["name"].split(":", 1)[1]])
    try:
        json.loads(text, strict=False)
    except json.JSONDecodeError:
        return False
    return finish != "length"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ways", default="plain,penalty,reme", help="comma-separated: plain, penalty, reme")
    ap.add_argument("--limit", type=int, help="only the first N requests (a smoke run)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="also write the table to this file")
    ap.add_argument("--json", help="write every answer to this file")
    args = ap.parse_args()

    import openai
    from openai import OpenAI

    from reme_cli.llm.endpoint import is_llama_cpp_server
    from reme_cli.llm.local_server import LocalServer

    todo = cases()[:args.limit]
    rows, answers = [], []
    load = os.getloadavg()[0]
    with LocalServer(n_threads=args.threads, startup_timeout=300) as server:
        engine = f"{server.engine.name} {server.engine.version()}"
        client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=900)
        compact = is_llama_cpp_server([m.model_dump() for m in client.models.list().data])
        for way in args.ways.split(","):
            counts = {"requests": 0, "errors": 0, "complete": 0, "length": 0, "tokens": 0, "secs": 0.0}
            for case in todo:
                body = request(case, way, server.model_name, compact, args.max_tokens)
                start = time.monotonic()
                counts["requests"] += 1
                try:
                    r = client.chat.completions.create(**body)
                except openai.APIStatusError as exc:  # a request shape the engine refuses is a result
                    counts["errors"] += 1
                    answers.append({"engine": engine, "way": way, "case": case["name"], "error": str(exc)[:300]})
                    continue
                counts["secs"] += time.monotonic() - start
                choice = r.choices[0]
                text = choice.message.content or ""
                counts["complete"] += complete(case, text, choice.finish_reason)
                counts["length"] += choice.finish_reason == "length"
                counts["tokens"] += r.usage.completion_tokens
                answers.append({"engine": engine, "way": way, "case": case["name"], "finish": choice.finish_reason,
                                "text": text})
                print(f"{way:8s} {case['name']:36s} {choice.finish_reason:6s} {text[:60]!r}", file=sys.stderr, flush=True)
            rows.append((engine, way, counts))
    lines = ["| engine | way | complete | finish=length | HTTP errors | completion tokens | s/request |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {e} | {w} | {c['complete']}/{c['requests']} | {c['length']}/{c['requests']} | {c['errors']} | "
              f"{c['tokens']} | {c['secs'] / max(c['requests'] - c['errors'], 1):.1f} |" for e, w, c in rows]
    report = "\n".join(lines) + (f"\n\n{len(todo)} requests per way, max_tokens {args.max_tokens}, "
                                 f"{args.threads} thread(s); 1-min load average at start / end: "
                                 f"{load:.1f} / {os.getloadavg()[0]:.1f}\n")
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    if args.json:
        Path(args.json).write_text(json.dumps(answers, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()

r"""Probe the embedded CPU model (SmolLM2-135M-Instruct Q4_1 via llama-cpp-python's server).

Run:  python scripts/probe_local_model.py [--quick] [--samples N] [--threads N]
                [--only protocol_ab] [--out results.json]
Prints one line per measurement and a JSON summary. Everything goes through the openai
client against reme_cli.llm.local_server.LocalServer, exactly as the harness talks to it.

RESULTS (filled in from a run on the dev box; rerun to refresh)
---------------------------------------------------------------
Box: 2 vCPU Xeon (AVX-512), no GPU; llama-cpp-python 0.3.36 built from source;
SmolLM2-135M-Instruct Q4_1 (92 MiB), n_ctx 8192. The box is shared: numbers were taken at
1-min load average 0.7-2; under heavier load see "threads". Server start: ~1 s.

Request shape (openai client, chat.completions.create):
- response_format={"type": "json_object", "schema": S}: works; output follows S.
- response_format={"type": "json_schema", ...}: HTTP 500, pydantic "Input should be 'text'
  or 'json_object'". Not supported by this server version.
- extra_body={"grammar": GBNF}: works (raw grammar).
- tools + tool_choice="auto": never tool_calls. The GGUF chat template ignores `tools`
  and `tool_calls` entirely, so the model never even sees the tools; free text comes back.
- tools + tool_choice={"type":"function","function":{"name":X}}: grammar from X's schema,
  message.tool_calls=[X(args)]. One forced tool only, so no choice and no "done".
- enum is enforced: in 20+20+20 samples at T=0.9, tool names were only ever cd/ls/mkdir.
- per-tool `anyOf` (and `oneOf`, same grammar) of {name: {const}, arguments: schema}:
  3 tools: 20/20 stop, strict-JSON, schema-valid (mean 58 tokens, 1.8 s).
  Enum + free `arguments: {"type":"object"}`: 17/20 stop, 16/20 json.loads, 17/20 with
  strict=False (89 tokens, 2.8 s). The free-object grammar lets the model run away in keys.
- A/B on real BFCL tool sets, same prompt, n=10, max_tokens=128, scored by per-tool schema:
    18 tools  loose:  7/10 stop, 3/10 args valid, 2.8 s/step | anyOf: 10/10, 10/10, 1.7 s
    32 tools  loose:  7/10 stop, 4/10 args valid, 3.6 s/step | anyOf: 10/10, 10/10, 2.6 s
  Sampling speed is the same for both (17-22 tok/s); anyOf steps are shorter. 46 tools
  (3 classes, 5.0k-token prompt): 6/6 valid, 3.6 s mean, 6.3 s max.
- Not always parseable: (a) finish_reason="length" truncates JSON; (b) llama-cpp-python's
  schema->GBNF `char ::= [^"\\] | ...` admits raw control characters in strings, so
  json.loads(text) can fail where json.loads(text, strict=False) succeeds. Seen only with
  free-form strings/objects (1/20), never with the per-tool schema.
- BFCL function docs use "dict"/"float": json_schema_to_gbnf raises on them and the server
  then *silently* falls back to an unconstrained JSON grammar. Map dict->object,
  float->number (all 12 BFCL classes then convert; grammar 3-15k chars).
- maxItems / maxLength are supported and bound the output (bounded 18-tool step: 8/8 valid).

Determinism: same seed + T=0.9 gives identical text on repeat, also after an intervening
different request and with --cache true (prefix reuse / restored state). 4 other seeds gave 4
different outputs.

Speed (idle box; 1 thread / 2 threads):
- decode, plain: 58-62 / 106 tok/s.
- prompt processing: 118-120 / 210-224 tok/s at 1.1k tokens; 76 / 137-141 at 5.7k tokens.
  --logits_all false: +20% prompt speed (default server value is true, we pass false).
- constrained decode (grammar sampling is single-threaded, so threads matter little):
  3 tools 30-40 tok/s; BFCL 18 tools at 2.1k-token context 21-23 tok/s; 32 tools 17;
  46 tools at 5k context 15.6.
- a cold BFCL prompt (18 tools, 2.1k tokens): 20 s / 11 s; then cached as a prefix.
- threads under load: with one other CPU-bound process, 2 threads fell to 8-43 tok/s decode
  (38-112 prompt), 1 thread kept 32-54 (87-119). With another llama server busy on the box
  2 threads fell to 0.6-7.5 tok/s decode; 1 thread kept 44-54. llama.cpp's threads
  spin-wait on each other, so a stolen core stalls both: LocalServer defaults to cpus-1.
- --cache true (RAM prompt cache): two episodes sharing the 18-tool system prompt (3.2k
  tokens) alternating: the next step of episode A after B costs 1.1-1.3 s instead of
  7.5-13.7 s. Without it only the common prefix with the *previous* request is reused.
- --flash_attn true: ~10% faster cold prompts, not consistently faster decode; not used.

Roles (GGUF template: '<|im_start|>' + role + '\n' + content + '<|im_end|>'):
- system, user, assistant, tool all render (any role string is pasted in verbatim).
  Without a leading system message the template inserts "You are a helpful AI assistant
  named SmolLM...".
- content null -> HTTP 500 (pydantic, 7 validation errors): send "".
- content as a list of parts -> HTTP 500 "can only concatenate str (not "list") to str".
- assistant.tool_calls are dropped by the template: put the step's JSON in content.
- prompt + max_tokens > 8192 -> HTTP 400 "maximum context length is 8192 tokens" at once.
- errors are HTTP 500, which the openai SDK retries by default (max_retries=2).

Concurrency: one request at a time. 4 concurrent constrained requests finished at 1.3, 2.7,
5.3, 6.7 s (single 1.7 s); the others wait in the server's queue (their latency includes the
wait, so client timeouts must cover n_concurrent x step time).

max_tokens for one JSON step under ~10 s: 128. Observed steps average 35-60 tokens
(max_s 3.9 s at 18 tools, 6.3 s at 46 tools, fresh ~500-token suffix included); at 64,
1/8 BFCL steps were truncated; at 128 and 256, 0/8.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reme_cli.agent.protocols import grammar_schema
from reme_cli.agent.protocols import step_schema as _step_schema
from reme_cli.llm.local_server import LocalServer

ENUM_SCHEMA = {
    "type": "object",
    "properties": {
        "tool_calls": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": ["cd", "ls", "mkdir"]},
                           "arguments": {"type": "object"}},
            "required": ["name", "arguments"]}},
        "answer": {"type": "string"}},
    "required": ["tool_calls"],
}
SMALL_TOOLS = [
    {"name": "cd", "description": "Change directory.", "parameters": {
        "type": "dict", "properties": {"folder": {"type": "string"}}, "required": ["folder"]}},
    {"name": "ls", "description": "List the current directory.", "parameters": {
        "type": "dict", "properties": {"a": {"type": "boolean"}}, "required": []}},
    {"name": "mkdir", "description": "Make a directory.", "parameters": {
        "type": "dict", "properties": {"dir_name": {"type": "string"}}, "required": ["dir_name"]}},
]
SYSTEM = ("You operate a file system through tools. Reply with JSON: "
          '{"tool_calls": [{"name": ..., "arguments": {...}}], "answer": "..."}.')
TASK = "Go into the folder 'docs' and create a folder named 'old'."


# ---- schemas -------------------------------------------------------------------------
# The harness's own schema builders, so the probe measures what the agent loop sends.
def to_json_schema(s, max_str: int | None = None):
    return grammar_schema(s, max_str)


def step_schema(tools: list[dict], max_calls: int | None = None, max_str: int | None = None) -> dict:
    """Probe tools are BFCL function docs; the harness takes OpenAI-style tool entries."""
    return _step_schema([{"function": t} for t in tools], max_calls=max_calls, max_str=max_str)


def validate(x, s) -> bool:
    """The JSON Schema subset step_schema uses (no jsonschema dependency)."""
    if "anyOf" in s or "oneOf" in s:
        return any(validate(x, a) for a in s.get("anyOf") or s["oneOf"])
    if "const" in s and x != s["const"]:
        return False
    if "enum" in s and x not in s["enum"]:
        return False
    t = s.get("type")
    py = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int,
          "number": (int, float)}.get(t)
    if py and (not isinstance(x, py) or (t in ("integer", "number") and isinstance(x, bool))):
        return False
    if t == "object":
        props = s.get("properties", {})
        if any(r not in x for r in s.get("required", [])):
            return False
        if s.get("additionalProperties") is False and any(k not in props for k in x):
            return False
        return all(validate(v, props[k]) for k, v in x.items() if k in props)
    if t == "string" and len(x) > s.get("maxLength", len(x)):
        return False
    if t == "array":
        return len(x) <= s.get("maxItems", len(x)) and all(validate(v, s.get("items", {})) for v in x)
    return True


def bfcl_fs_tools() -> list[dict]:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None:
        return SMALL_TOOLS
    doc = Path(next(iter(spec.submodule_search_locations))) / "data/multi_turn_func_doc/gorilla_file_system.json"
    return [json.loads(line) for line in doc.read_text().splitlines() if line.strip()]


def tools_system_prompt(tools: list[dict]) -> str:
    return SYSTEM + "\nTools:\n" + "\n".join(
        json.dumps({"name": t["name"], "description": t["description"],
                    "parameters": to_json_schema(t["parameters"])}) for t in tools)


# ---- measurements --------------------------------------------------------------------
def chat(c, s, messages, **kw):
    t = time.perf_counter()
    r = c.chat.completions.create(model=s.model_name, messages=messages, **kw)
    return r, time.perf_counter() - t


def msgs(system=SYSTEM, user=TASK):
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def request_shapes(c, s) -> dict:
    out = {}
    tools = [{"type": "function", "function": {**t, "parameters": to_json_schema(t["parameters"])}}
             for t in SMALL_TOOLS]
    cases = {
        "json_object+schema": {"response_format": {"type": "json_object", "schema": ENUM_SCHEMA}},
        "json_schema": {"response_format": {"type": "json_schema",
                                             "json_schema": {"name": "step", "schema": ENUM_SCHEMA}}},
        "extra_body.grammar": {"extra_body": {"grammar": 'root ::= "{\\"name\\": \\"" ("cd" | "ls" | "mkdir") "\\"}"'}},
        "tools+auto": {"tools": tools, "tool_choice": "auto"},
        "tools+forced(mkdir)": {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "mkdir"}}},
    }
    for name, kw in cases.items():
        try:
            r, dt = chat(c, s, msgs(), temperature=0.9, seed=1, max_tokens=120, **kw)
            m = r.choices[0].message
            out[name] = {"ok": True, "seconds": round(dt, 2), "content": (m.content or "")[:160],
                         "tool_calls": [(tc.function.name, tc.function.arguments) for tc in m.tool_calls or []]}
        except Exception as e:  # noqa: BLE001 - recording what the server says is the point
            out[name] = {"ok": False, "error": str(e).splitlines()[0][:200]}
        print(f"shape {name:22s} {out[name]}")
    return out


def validity(c, s, schema, messages, n, max_tokens, label, check=None) -> dict:
    """n seeded samples at T=0.9 constrained by `schema`; outputs are judged against `check`
    (default: `schema`), so a loose grammar can be scored by the strict per-tool schema."""
    check = check or schema
    parsed = lenient = valid = stop = 0
    names, times, toks = set(), [], []
    for seed in range(n):
        r, dt = chat(c, s, messages, temperature=0.9, seed=seed, max_tokens=max_tokens,
                     response_format={"type": "json_object", "schema": schema})
        times.append(dt)
        toks.append(r.usage.completion_tokens)
        stop += r.choices[0].finish_reason == "stop"
        text = r.choices[0].message.content
        try:
            json.loads(text)
            parsed += 1
        except json.JSONDecodeError:
            pass
        try:
            # llama-cpp-python's schema grammar lets raw control characters (newlines)
            # into strings; strict=False accepts them.
            x = json.loads(text, strict=False)
        except json.JSONDecodeError:
            continue
        lenient += 1
        valid += validate(x, check)
        names |= {tc.get("name") for tc in x.get("tool_calls", []) if isinstance(tc, dict)}
    res = {"n": n, "max_tokens": max_tokens, "finish_stop": stop, "parsed": parsed, "parsed_strict_false": lenient, "schema_valid": valid,
           "names_seen": sorted(map(str, names)), "mean_s": round(statistics.mean(times), 2),
           "max_s": round(max(times), 2), "mean_tokens": round(statistics.mean(toks), 1),
           "constrained_tok_s": round(sum(toks) / sum(times), 1)}
    print(f"validity {label:28s} {res}")
    return res


def determinism(c, s) -> dict:
    kw = {"temperature": 0.9, "max_tokens": 60, "response_format": {"type": "json_object", "schema": ENUM_SCHEMA}}
    same = [chat(c, s, msgs(), seed=7, **kw)[0].choices[0].message.content]
    chat(c, s, msgs(user="List the files here."), seed=3, **kw)  # different prompt: KV prefix reuse changes
    same.append(chat(c, s, msgs(), seed=7, **kw)[0].choices[0].message.content)
    same.append(chat(c, s, msgs(), seed=7, **kw)[0].choices[0].message.content)
    others = {chat(c, s, msgs(), seed=k, **kw)[0].choices[0].message.content for k in range(8, 12)}
    plain = {chat(c, s, msgs(), seed=7, temperature=0.9, max_tokens=60)[0].choices[0].message.content
             for _ in range(3)}
    res = {"same_seed_identical": len(set(same)) == 1, "plain_same_seed_identical": len(plain) == 1,
           "distinct_outputs_over_4_other_seeds": len(others)}
    print(f"determinism {res}")
    return res


def filler(n_words: int) -> str:
    # a nonce first, so no prefix of this prompt is in the server's KV cache
    return uuid.uuid4().hex + " " + " ".join(f"item{i} is stored in folder f{i % 17}." for i in range(n_words // 6))


def speed(c, s, long=True) -> dict:
    chat(c, s, msgs(), max_tokens=8)  # warm-up: the first request pays page-in costs
    r, dt = chat(c, s, msgs(user="Write a long story about a dragon who lives in a file system."),
                 temperature=0.9, seed=1, max_tokens=256)
    res = {"decode_tok_s": round(r.usage.completion_tokens / dt, 1), "decode_tokens": r.usage.completion_tokens}
    for words in (600, 3000) if long else (600,):
        r, dt = chat(c, s, msgs(user=filler(words)), max_tokens=1)
        res[f"prompt_tok_s@{r.usage.prompt_tokens}"] = round(r.usage.prompt_tokens / dt)
    print(f"speed threads={s.n_threads} {res}")
    return res


def interleaved_episodes(extra_args, threads=None) -> dict:
    """Two episodes sharing the BFCL system prompt alternate on the one KV cache."""
    tools = bfcl_fs_tools()
    system = tools_system_prompt(tools)
    notes = " ".join(f"Earlier note {i}: the folder f{i} holds report{i}.txt." for i in range(60))

    def episode(tag, extra=()):
        return [{"role": "system", "content": system},
                {"role": "user", "content": f"[{tag}] {notes} Now create a folder named '{tag}'."}, *extra]
    step2 = [{"role": "assistant", "content": '{"tool_calls":[{"name":"mkdir","arguments":{"dir_name":"A"}}]}'},
             {"role": "user", "content": "Tool result: ok. Next step?"}]
    with LocalServer(n_threads=threads, extra_args=extra_args) as s:
        c = OpenAI(base_url=s.base_url, api_key="none", max_retries=0, timeout=600)
        r, a1 = chat(c, s, episode("A"), max_tokens=1)
        _, b1 = chat(c, s, episode("B"), max_tokens=1)
        _, a2 = chat(c, s, episode("A", step2), max_tokens=1)
    res = {"prompt_tokens": r.usage.prompt_tokens, "A_cold_s": round(a1, 2), "B_shared_system_s": round(b1, 2),
           "A_step2_after_B_s": round(a2, 2)}
    print(f"interleaved {' '.join(extra_args)} {res}")
    return res


def thread_sweep() -> dict:
    """n_threads on an idle box vs with one competing CPU-bound process."""
    out = {}
    for burners in (0, 1):
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
        try:
            for threads in (2, 1):
                with LocalServer(n_threads=threads) as s:
                    c = OpenAI(base_url=s.base_url, api_key="none", max_retries=0, timeout=600)
                    out[f"threads={threads},busy_procs={burners}"] = speed(c, s, long=False)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    return out


def roles(c, s) -> dict:
    base = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}]
    cases = {
        "system+user": base,
        "no system": base[1:],
        "assistant content ''": base + [{"role": "assistant", "content": ""}, {"role": "user", "content": "ok"}],
        "assistant content null": base + [{"role": "assistant", "content": None}, {"role": "user", "content": "ok"}],
        "assistant tool_calls+''": base + [
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt"}],
        "tool": base + [{"role": "assistant", "content": "calling ls"},
                        {"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt"}],
        "user content parts": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
    }
    out = {}
    for name, m in cases.items():
        try:
            r, _ = chat(c, s, m, max_tokens=4)
            out[name] = f"ok prompt_tokens={r.usage.prompt_tokens}"
        except Exception as e:  # noqa: BLE001
            out[name] = "error: " + str(e).splitlines()[0][:160]
        print(f"role {name:26s} {out[name]}")
    return out


def concurrency(c, s, n=4) -> dict:
    def one(i):
        t0 = time.perf_counter()
        r, _ = chat(c, s, msgs(user=f"Request {i}: " + TASK), temperature=0.9, seed=i, max_tokens=64,
                    response_format={"type": "json_object", "schema": ENUM_SCHEMA})
        return t0, time.perf_counter(), r.usage.completion_tokens
    r1 = one(99)
    single = r1[1] - r1[0]
    t = time.perf_counter()
    with cf.ThreadPoolExecutor(n) as ex:
        spans = list(ex.map(one, range(n)))
    wall = time.perf_counter() - t
    ends = sorted(e - t for _, e, _ in spans)
    res = {"n": n, "single_s": round(single, 2), "wall_s": round(wall, 2),
           "finish_times_s": [round(e, 2) for e in ends]}  # evenly spaced finishes = one at a time
    print(f"concurrency {res}")
    return res


def bfcl_step(c, s, max_tokens_list, n) -> dict:
    tools = bfcl_fs_tools()
    schema = step_schema(tools)
    m = [{"role": "system", "content": tools_system_prompt(tools)},
         {"role": "user", "content": "Create a folder named 'temp' in the current directory and list its contents."}]
    r, dt = chat(c, s, m, max_tokens=1)
    out = {"n_tools": len(tools), "prompt_tokens": r.usage.prompt_tokens, "first_prompt_s": round(dt, 2)}
    from llama_cpp.llama_grammar import json_schema_to_gbnf
    try:
        out["grammar_chars"] = len(json_schema_to_gbnf(json.dumps(schema)))
        json_schema_to_gbnf(json.dumps(tools[0]["parameters"]))
        out["raw_bfcl_dict_schema_converts"] = True
    except Exception as e:  # noqa: BLE001
        out["raw_bfcl_dict_schema_converts"] = f"no: {str(e)[:100]}"
    for mt in max_tokens_list:
        out[f"max_tokens={mt}"] = validity(c, s, schema, m, n, mt, f"bfcl-fs step mt={mt}")
    bounded = step_schema(tools, max_calls=4, max_str=64)
    out["bounded_grammar_chars"] = len(json_schema_to_gbnf(json.dumps(bounded)))
    out["bounded(maxItems=4,maxLength=64) max_tokens=256"] = validity(
        c, s, bounded, m, n, 256, "bfcl-fs bounded mt=256")
    print(f"bfcl_step {out}")
    return out


def bfcl_tools(*doc_files: str) -> list[dict]:
    spec = importlib.util.find_spec("bfcl_eval")
    d = Path(next(iter(spec.submodule_search_locations))) / "data/multi_turn_func_doc"
    return [json.loads(ln) for f in doc_files for ln in (d / f).read_text().splitlines() if ln.strip()]


def loose_schema(tools: list[dict]) -> dict:
    """Tool name as an enum, arguments a free JSON object."""
    return {"type": "object", "properties": {
        "tool_calls": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": [t["name"] for t in tools]},
                           "arguments": {"type": "object"}},
            "required": ["name", "arguments"]}},
        "answer": {"type": "string"}}, "required": ["tool_calls"]}


def protocol_ab(c, s, n) -> dict:
    """Loose (enum + free arguments) vs per-tool anyOf grammar on real BFCL tool sets, same
    prompt, alternating; both scored by the per-tool schema."""
    if importlib.util.find_spec("bfcl_eval") is None:
        return {"skipped": "bfcl_eval not installed"}
    out = {}
    for files in (("gorilla_file_system.json",), ("gorilla_file_system.json", "posting_api.json")):
        tools = bfcl_tools(*files)
        strict = step_schema(tools, max_calls=4, max_str=64)
        m = [{"role": "system", "content": tools_system_prompt(tools)},
             {"role": "user", "content": "Create a folder named 'temp' in the current directory and list its contents."}]
        r, dt = chat(c, s, m, max_tokens=1)
        key = f"{len(tools)}_tools"
        out[key] = {"prompt_tokens": r.usage.prompt_tokens, "cold_prompt_s": round(dt, 2)}
        for name, schema in (("loose", loose_schema(tools)), ("per_tool_anyOf", strict)):
            out[key][name] = validity(c, s, schema, m, n, 128, f"{key} {name}", check=strict)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples, skip the thread sweep")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--threads", type=int, help="n_threads for the main server (default: LocalServer's)")
    ap.add_argument("--only", help="run just this section: protocol_ab")
    a = ap.parse_args()
    n = 5 if a.quick else a.samples
    res: dict = {"loadavg_1min_at_start": round(os.getloadavg()[0], 2)}
    t = time.perf_counter()
    with LocalServer(n_threads=a.threads) as s:
        res["n_threads"] = s.n_threads
        res["startup_s"] = round(time.perf_counter() - t, 2)
        res["server_cmd"] = " ".join(s.command("<model>", 0)[1:])
        c = OpenAI(base_url=s.base_url, api_key="none", max_retries=0, timeout=600)
        if a.only == "protocol_ab":
            res["protocol_ab"] = protocol_ab(c, s, n)
            print(json.dumps(res, indent=1))
            return
        res["speed"] = speed(c, s)
        res["shapes"] = request_shapes(c, s)
        res["enum_schema"] = validity(c, s, ENUM_SCHEMA, msgs(), n, 200, "enum schema")
        small = step_schema(SMALL_TOOLS)
        res["anyOf_small"] = validity(c, s, small, msgs(), n, 200, "per-tool anyOf (3 tools)")
        res["oneOf_small"] = validity(c, s, json.loads(json.dumps(small).replace('"anyOf"', '"oneOf"')),
                                      msgs(), n, 200, "per-tool oneOf (3 tools)")
        res["determinism"] = determinism(c, s)
        res["roles"] = roles(c, s)
        res["concurrency"] = concurrency(c, s)
        res["bfcl_step"] = bfcl_step(c, s, [64, 128] if a.quick else [64, 128, 256], 4 if a.quick else 8)
        res["protocol_ab"] = protocol_ab(c, s, 4 if a.quick else 10)
    res["interleaved_no_cache"] = interleaved_episodes(["--cache", "false"], a.threads)
    res["interleaved_cache"] = interleaved_episodes([], a.threads)
    if not a.quick:
        res["thread_sweep"] = thread_sweep()
    res["loadavg_1min_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(res, indent=1))
    if a.out:
        a.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

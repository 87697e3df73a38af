"""Probe the embedded CPU model (SmolLM2-135M-Instruct Q4_1 via llama-cpp-python's server).

Run:  python scripts/probe_local_model.py [--quick] [--samples N] [--out results.json]
Prints one line per measurement and a JSON summary. Everything goes through the openai
client against reme_cli.llm.local_server.LocalServer, exactly as the harness talks to it.

RESULTS (filled in from a run on the dev box; rerun to refresh)
---------------------------------------------------------------
@RESULTS@
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
from reme_cli.llm.local_server import LocalServer  # noqa: E402

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
BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def to_json_schema(s, max_str: int | None = None):
    """BFCL function docs say "dict"/"float"/"tuple"/"any"; JSON Schema (and llama.cpp's
    converter, which otherwise silently falls back to free JSON) needs standard types.
    max_str bounds every string, so a runaway string cannot eat the token budget."""
    if isinstance(s, list):
        return [to_json_schema(x, max_str) for x in s]
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k == "type" and isinstance(v, str) and v in BFCL_TYPES:
            if BFCL_TYPES[v]:
                out[k] = BFCL_TYPES[v]
        elif k in ("description", "default", "response"):
            continue  # prose and defaults only bloat the grammar
        elif k == "properties":
            out[k] = {name: to_json_schema(p, max_str) for name, p in v.items()}
        else:
            out[k] = to_json_schema(v, max_str)
    if out.get("type") == "object":
        out["additionalProperties"] = False
    if out.get("type") == "string" and max_str and "enum" not in out:
        out["maxLength"] = max_str
    return out


def step_schema(tools: list[dict], max_calls: int | None = None, max_str: int | None = None) -> dict:
    """One agent step: zero or more calls whose arguments follow the named tool's schema."""
    per_tool = [{"type": "object",
                 "properties": {"name": {"const": t["name"]},
                                "arguments": to_json_schema(t["parameters"], max_str)},
                 "required": ["name", "arguments"], "additionalProperties": False}
                for t in tools]
    calls = {"type": "array", "items": {"anyOf": per_tool}}
    answer = {"type": "string"}
    if max_calls:
        calls["maxItems"] = max_calls
    if max_str:
        answer["maxLength"] = max_str
    return {"type": "object", "properties": {"tool_calls": calls, "answer": answer},
            "required": ["tool_calls"], "additionalProperties": False}


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
        "json_object+schema": dict(response_format={"type": "json_object", "schema": ENUM_SCHEMA}),
        "json_schema": dict(response_format={"type": "json_schema",
                                             "json_schema": {"name": "step", "schema": ENUM_SCHEMA}}),
        "extra_body.grammar": dict(extra_body={"grammar": 'root ::= "{\\"name\\": \\"" ("cd" | "ls" | "mkdir") "\\"}"'}),
        "tools+auto": dict(tools=tools, tool_choice="auto"),
        "tools+forced(mkdir)": dict(tools=tools, tool_choice={"type": "function", "function": {"name": "mkdir"}}),
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


def validity(c, s, schema, messages, n, max_tokens, label) -> dict:
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
        valid += validate(x, schema)
        names |= {tc.get("name") for tc in x.get("tool_calls", []) if isinstance(tc, dict)}
    res = {"n": n, "max_tokens": max_tokens, "finish_stop": stop, "parsed": parsed, "parsed_strict_false": lenient, "schema_valid": valid,
           "names_seen": sorted(map(str, names)), "mean_s": round(statistics.mean(times), 2),
           "max_s": round(max(times), 2), "mean_tokens": round(statistics.mean(toks), 1),
           "constrained_tok_s": round(sum(toks) / sum(times), 1)}
    print(f"validity {label:28s} {res}")
    return res


def determinism(c, s) -> dict:
    kw = dict(temperature=0.9, max_tokens=60, response_format={"type": "json_object", "schema": ENUM_SCHEMA})
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples, skip the thread sweep")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--threads", type=int, help="n_threads for the main server (default: LocalServer's)")
    a = ap.parse_args()
    n = 5 if a.quick else a.samples
    res: dict = {"loadavg_1min_at_start": round(os.getloadavg()[0], 2)}
    t = time.perf_counter()
    with LocalServer(n_threads=a.threads) as s:
        res["n_threads"] = s.n_threads
        res["startup_s"] = round(time.perf_counter() - t, 2)
        res["server_cmd"] = " ".join(s.command("<model>", 0)[1:])
        c = OpenAI(base_url=s.base_url, api_key="none", max_retries=0, timeout=600)
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

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
import statistics
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


def to_json_schema(s):
    """BFCL function docs say "dict"/"float"/"tuple"/"any"; JSON Schema (and llama.cpp's
    converter, which otherwise silently falls back to free JSON) needs standard types."""
    if isinstance(s, list):
        return [to_json_schema(x) for x in s]
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
            out[k] = {name: to_json_schema(p) for name, p in v.items()}
        else:
            out[k] = to_json_schema(v)
    if out.get("type") == "object":
        out["additionalProperties"] = False
    return out


def step_schema(tools: list[dict]) -> dict:
    """One agent step: zero or more calls whose arguments follow the named tool's schema."""
    per_tool = [{"type": "object",
                 "properties": {"name": {"const": t["name"]},
                                "arguments": to_json_schema(t["parameters"])},
                 "required": ["name", "arguments"], "additionalProperties": False}
                for t in tools]
    return {"type": "object",
            "properties": {"tool_calls": {"type": "array", "items": {"anyOf": per_tool}},
                           "answer": {"type": "string"}},
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
    if t == "array" and "items" in s:
        return all(validate(v, s["items"]) for v in x)
    return True


def bfcl_fs_tools() -> list[dict]:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None:
        return SMALL_TOOLS
    doc = Path(next(iter(spec.submodule_search_locations))) / "data/multi_turn_func_doc/gorilla_file_system.json"
    return [json.loads(line) for line in doc.read_text().splitlines() if line.strip()]


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
    parsed = valid = stop = 0
    names, times, toks = set(), [], []
    for seed in range(n):
        r, dt = chat(c, s, messages, temperature=0.9, seed=seed, max_tokens=max_tokens,
                     response_format={"type": "json_object", "schema": schema})
        times.append(dt)
        toks.append(r.usage.completion_tokens)
        stop += r.choices[0].finish_reason == "stop"
        try:
            x = json.loads(r.choices[0].message.content)
        except json.JSONDecodeError:
            continue
        parsed += 1
        valid += validate(x, schema)
        names |= {tc.get("name") for tc in x.get("tool_calls", []) if isinstance(tc, dict)}
    res = {"n": n, "max_tokens": max_tokens, "finish_stop": stop, "parsed": parsed, "schema_valid": valid,
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


def speed(c, s) -> dict:
    chat(c, s, msgs(), max_tokens=8)  # warm-up: first request pays page-in costs
    r, dt = chat(c, s, msgs(user="Write a long story about a dragon who lives in a file system."),
                 temperature=0.9, seed=1, max_tokens=256)
    decode = r.usage.completion_tokens / dt
    pp = {}
    for words in (600, 3000):
        r, dt = chat(c, s, msgs(user=filler(words)), max_tokens=1)
        pp[r.usage.prompt_tokens] = round(r.usage.prompt_tokens / dt)
    base = filler(3000)
    chat(c, s, msgs(user=base), max_tokens=1)
    r, dt = chat(c, s, msgs(user=base + " Now list the files."), max_tokens=1)
    res = {"decode_tok_s": round(decode, 1), "decode_tokens": r.usage.completion_tokens,
           "prompt_tok_s": pp, "shared_prefix_followup_s": round(dt, 3)}
    print(f"speed threads={s.n_threads} {res}")
    return res


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
           "finish_times_s": [round(e, 2) for e in ends], "serialized": wall > 0.8 * n * single}
    print(f"concurrency {res}")
    return res


def bfcl_step(c, s, max_tokens_list) -> dict:
    tools = bfcl_fs_tools()
    schema = step_schema(tools)
    system = SYSTEM + "\nTools:\n" + "\n".join(
        json.dumps({"name": t["name"], "description": t["description"],
                    "parameters": to_json_schema(t["parameters"])}) for t in tools)
    m = [{"role": "system", "content": system},
         {"role": "user", "content": "Create a folder named 'temp' in the current directory and list its contents."}]
    r, dt = chat(c, s, m, max_tokens=1)
    out = {"n_tools": len(tools), "prompt_tokens": r.usage.prompt_tokens, "first_prompt_s": round(dt, 2)}
    try:
        from llama_cpp.llama_grammar import json_schema_to_gbnf
        out["grammar_chars"] = len(json_schema_to_gbnf(json.dumps(schema)))
        json_schema_to_gbnf(json.dumps(tools[0]["parameters"]))
        out["raw_bfcl_dict_schema_converts"] = True
    except Exception as e:  # noqa: BLE001
        out["raw_bfcl_dict_schema_converts"] = f"no: {str(e)[:100]}"
    for mt in max_tokens_list:
        out[f"max_tokens={mt}"] = validity(c, s, schema, m, 4, mt, f"bfcl-fs step mt={mt}")
    print(f"bfcl_step {out}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples, skip the thread sweep")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    n = 5 if a.quick else a.samples
    res: dict = {}
    t = time.perf_counter()
    with LocalServer() as s:
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
        res["bfcl_step"] = bfcl_step(c, s, [64, 128] if a.quick else [64, 128, 256])
    if not a.quick:
        for threads in (1,):
            with LocalServer(n_threads=threads) as s:
                c = OpenAI(base_url=s.base_url, api_key="none", max_retries=0, timeout=600)
                res[f"speed_threads_{threads}"] = speed(c, s)
                res[f"enum_threads_{threads}"] = validity(c, s, ENUM_SCHEMA, msgs(), 5, 200, f"enum threads={threads}")
    print(json.dumps(res, indent=1))
    if a.out:
        a.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

"""JSON-schema answers for llama.cpp's C++ server (the xllamacpp engine), held compact.

Given ``response_format={"type": "json_object", "schema": S}``, llama.cpp's C++ server builds
a grammar that allows newlines and up to 20 spaces of indentation between any two JSON tokens,
and the 135M embedded model takes them: its answers come pretty-printed, more tokens for the
same content, and more of them hit max_tokens, which reme counts as invalid.
llama-cpp-python's converter allows one optional space. So for that server reme sends the
schema itself as an llguidance grammar (llguidance is built into the xllamacpp wheel) with
fixed separators, ``{"a": 1, "b": [2, 3]}``, and with objects closed as llama-cpp-python
reads a schema: an object that lists ``properties`` and says nothing of
``additionalProperties`` takes no other keys. The measurements: results/prebuilt_llama.md.
"""

from __future__ import annotations

import json
from typing import Any

# llguidance's options for the %json rule: no free whitespace, ", " and ": " as separators.
COMPACT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "if", "then", "else", "contains")


def closed(schema: Any) -> Any:
    """``schema`` with every object that has ``properties`` and no ``additionalProperties``
    closed (``additionalProperties: false``); a free ``{"type": "object"}`` stays free."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [closed(s) for s in out[key]]
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: closed(s) for name, s in out[key].items()}
    for key in _SCHEMA_VALUES:
        if isinstance(out.get(key), dict):
            out[key] = closed(out[key])
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def grammar(schema: dict[str, Any]) -> str:
    """An llguidance grammar (the ``grammar`` field's ``%llguidance`` form) of compact JSON
    matching ``schema``."""
    return "%llguidance {}\nstart: %json " + json.dumps({**closed(schema), "x-guidance": COMPACT})


def schema_of(response_format: Any) -> dict[str, Any] | None:
    """The schema a response_format asks for: llama-cpp-python's ``json_object`` + ``schema``
    or OpenAI's ``json_schema``; None for free JSON or text."""
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_object":
        schema = response_format.get("schema")
    elif response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
    else:
        return None
    return schema if isinstance(schema, dict) else None


def compact_json_request(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with its response_format schema sent as a compact grammar instead; any
    other request unchanged. A request that brings its own grammar keeps it."""
    schema = schema_of(request.get("response_format"))
    extra = request.get("extra_body") or {}
    if schema is None or "grammar" in extra:
        return request
    out = {k: v for k, v in request.items() if k != "response_format"}
    out["extra_body"] = {**extra, "grammar": grammar(schema)}
    return out

"""Safe parsing and serialising of tool calls.

BFCL's official checker re-executes every recorded call with ``eval()``. The only
strings we ever hand it are built here by ``canonical_call``: a plain identifier
followed by keyword arguments whose values are ``repr`` of JSON values. ``repr`` of
str/int/float/bool/None/list/dict is always a literal, so whatever the model wrote
can only ever become data, never code. Ground-truth strings go the other way through
``parse_call_string``, which accepts literals only (``ast.literal_eval``).
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# ASCII only: Python NFKC-normalises non-ASCII identifiers inside eval(), so a key
# like "ｆolder" would mean one thing to **kwargs and another to the checker.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

MAX_ARGUMENT_CHARS = 100_000  # raw JSON text or total string payload of one call
MAX_DEPTH = 32  # nesting of lists/objects inside one argument value
MAX_INT_BITS = 1024  # well beyond any BFCL value; keeps repr()/eval() cheap

JSONValue = Any  # str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "canonical_call",
    "decode_arguments",
    "is_identifier",
    "parse_call_string",
]


def is_identifier(name: object) -> bool:
    """An ASCII Python identifier that is not a keyword (usable as ``f(name=...)``)."""
    return (
        isinstance(name, str)
        and _IDENTIFIER.match(name) is not None
        and not keyword.iskeyword(name)
    )


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a valid JSON number; use a finite number")


def decode_arguments(raw: Any) -> dict[str, JSONValue]:
    """Turn whatever the model produced as tool arguments into a checked dict.

    Accepts a dict, a JSON object string, or nothing (``None``/empty string → no
    arguments). Raises ``ValueError`` with a message the model can act on.
    """
    if raw is None:
        return {}
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError("arguments must be UTF-8 JSON text") from exc
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        if len(text) > MAX_ARGUMENT_CHARS:
            raise ValueError(
                f"arguments are too long ({len(text)} characters; limit {MAX_ARGUMENT_CHARS})"
            )
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except ValueError as exc:  # JSONDecodeError is a ValueError
            raise ValueError(
                f"arguments are not valid JSON ({exc}); send a JSON object such as "
                '{"name": "value"}'
            ) from exc
        except RecursionError as exc:
            raise ValueError("arguments are nested too deeply") from exc
    else:
        value = raw
    if not isinstance(value, dict):
        raise ValueError(
            f"arguments must be a JSON object of parameter names to values, got {_type_name(value)}"
        )
    budget = [MAX_ARGUMENT_CHARS]
    checked: dict[str, JSONValue] = {}
    for key, item in value.items():
        if not is_identifier(key):
            raise ValueError(
                f"parameter name {_short(key)} is not valid; use the parameter names "
                "from the tool schema"
            )
        checked[key] = _check_value(item, key, 0, budget)
    return checked


def _check_value(value: Any, where: str, depth: int, budget: list[int]) -> JSONValue:
    """Return a fresh copy of ``value`` if it is plain JSON data, else raise ValueError."""
    if depth > MAX_DEPTH:
        raise ValueError(f"value of {where!r} is nested too deeply (limit {MAX_DEPTH})")
    # bool before int: bool is a subclass of int, and both are fine as they are.
    if value is None or type(value) is bool:
        return value
    if type(value) is int:
        if value.bit_length() > MAX_INT_BITS:
            raise ValueError(f"integer in {where!r} is too large")
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise ValueError(f"number in {where!r} must be finite")
        return value
    if type(value) is str:
        budget[0] -= len(value)
        if budget[0] < 0:
            raise ValueError(f"arguments are too long (limit {MAX_ARGUMENT_CHARS} characters)")
        return value
    if type(value) is list:
        return [_check_value(v, where, depth + 1, budget) for v in value]
    if type(value) is dict:
        out: dict[str, JSONValue] = {}
        for k, v in value.items():
            if type(k) is not str:
                raise ValueError(f"object keys in {where!r} must be strings")
            budget[0] -= len(k)
            out[k] = _check_value(v, where, depth + 1, budget)
        if budget[0] < 0:
            raise ValueError(f"arguments are too long (limit {MAX_ARGUMENT_CHARS} characters)")
        return out
    raise ValueError(f"value of {where!r} is a {_type_name(value)}, not a JSON value")


def canonical_call(name: str, args: Mapping[str, Any]) -> str:
    """``name(k=repr(v),...)``, the same shape bfcl-eval's FC decoder produces.

    Re-validates everything, so a string from here is safe to give to ``eval``.
    """
    if not is_identifier(name):
        raise ValueError(f"function name {_short(name)} is not a valid identifier")
    checked = decode_arguments(dict(args))
    # bfcl joins with "," and no space (model_handler.utils.convert_to_function_call).
    return f"{name}({','.join(f'{k}={v!r}' for k, v in checked.items())})"


ParamNames = Mapping[str, Sequence[str]] | Callable[[str], Sequence[str]]


def parse_call_string(s: str, positional: ParamNames | None = None) -> tuple[str, dict[str, Any]]:
    """Parse ``f(a, b=1)`` into ``("f", {...})`` with literals only.

    BFCL ground truth sometimes passes arguments positionally (``cd('temp')``);
    ``positional`` maps a function name to its parameter names in signature order so
    those can be named. Anything that is not a plain call of a bare name with literal
    arguments raises ``ValueError``.
    """
    if not isinstance(s, str):
        raise ValueError(f"call must be a string, got {_type_name(s)}")
    try:
        tree = ast.parse(s.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a function call: {_short(s)}") from exc
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ValueError(f"not a call of a plain function name: {_short(s)}")
    name = call.func.id
    if not is_identifier(name):
        raise ValueError(f"function name {_short(name)} is not a valid identifier")
    args: dict[str, Any] = {}
    if call.args:
        names = _param_names(positional, name)
        if names is None:
            raise ValueError(f"positional arguments in {_short(s)} need parameter names")
        if len(call.args) > len(names):
            raise ValueError(f"too many positional arguments in {_short(s)}")
        for param, node in zip(names, call.args, strict=False):
            if isinstance(node, ast.Starred):
                raise ValueError(f"starred arguments are not allowed: {_short(s)}")
            args[param] = _literal(node, s)
    for kw in call.keywords:
        if kw.arg is None:
            raise ValueError(f"**kwargs are not allowed: {_short(s)}")
        if kw.arg in args:
            raise ValueError(f"argument {kw.arg!r} given twice in {_short(s)}")
        args[kw.arg] = _literal(kw.value, s)
    return name, args


def _param_names(positional: ParamNames | None, name: str) -> Sequence[str] | None:
    if positional is None:
        return None
    if callable(positional):
        return positional(name)
    return positional.get(name)


def _literal(node: ast.expr, source: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"argument is not a literal in {_short(source)}") from exc


def _type_name(value: Any) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

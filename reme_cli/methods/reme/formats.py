"""ReMe's role schemas: the answer formats its summarizer calls ask a constrained model for,
and the sampling every ReMe summarizer call uses."""

from __future__ import annotations

from typing import Any

from reme_cli.methods.summarizer import SummarizerSettings

_STR_LIST = {"type": "array", "items": {"type": "string"}}

# For small local models, whose free text is rarely JSON: the server's grammar makes the
# answer parse; whether its content is any good is another matter (smoke-level).
CONSTRAINED_FORMATS: dict[str, dict[str, Any]] = {
    "distill": {"type": "json_object", "schema": {
        "type": "object",
        "properties": {"experiences": {"type": "array", "items": {
            "type": "object",
            "properties": {"when_to_use": {"type": "string"}, "experience": {"type": "string"},
                           "tags": _STR_LIST, "confidence": {"type": "number"}, "tools_used": _STR_LIST},
            "required": ["when_to_use", "experience", "tags", "confidence", "tools_used"]}}},
        "required": ["experiences"]}},
    "judge": {"type": "json_object", "schema": {
        "type": "object", "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
        "required": ["score", "reason"]}},
    "reflection": {"type": "json_object", "schema": {
        "type": "object", "properties": {"guidance": {"type": "string"}}, "required": ["guidance"]}},
}


def sampling(summ: SummarizerSettings, role: str) -> dict[str, Any]:
    """The keyword arguments of a summarizer call in ``role`` (distill, judge, reflection,
    rerank, rewrite): only the roles whose answer ReMe constrains get a format."""
    out: dict[str, Any] = {"temperature": summ.temperature, "max_tokens": summ.max_tokens}
    if summ.constrained and role in CONSTRAINED_FORMATS:
        out["response_format"] = CONSTRAINED_FORMATS[role]
    return out

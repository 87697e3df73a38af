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
        # At most 3 items, as the prompts ask ("1-3"): unbounded, the 135M model repeats
        # items until max_tokens cuts the answer off.
        "properties": {"experiences": {"type": "array", "maxItems": 3, "items": {
            "type": "object",
            "properties": {"when_to_use": {"type": "string"}, "experience": {"type": "string"},
                           "tags": _STR_LIST, "confidence": {"type": "number"}, "tools_used": _STR_LIST},
            "required": ["when_to_use", "experience", "tags", "confidence", "tools_used"]}}},
        "required": ["experiences"]}},
    # The score as one of 0.0, 0.1, ..., 1.0: llama.cpp's grammars have no numeric bounds,
    # and the 135M model otherwise answers scores like 2.0 (an invalid verdict).
    "judge": {"type": "json_object", "schema": {
        "type": "object", "properties": {"score": {"enum": [i / 10 for i in range(11)]},
                                         "reason": {"type": "string"}},
        "required": ["score", "reason"]}},
    "reflection": {"type": "json_object", "schema": {
        "type": "object", "properties": {"guidance": {"type": "string"}}, "required": ["guidance"]}},
    "rerank": {"type": "json_object", "schema": {
        "type": "object", "properties": {"ranked_indices": {"type": "array", "items": {"type": "integer"},
                                                            "maxItems": 20}},
        "required": ["ranked_indices"]}},
    "rewrite": {"type": "json_object", "schema": {
        "type": "object", "properties": {"rewritten_context": {"type": "string"}},
        "required": ["rewritten_context"]}},
}


def sampling(summ: SummarizerSettings, role: str) -> dict[str, Any]:
    """The keyword arguments of a summarizer call in ``role`` (distill, judge, reflection,
    rerank, rewrite): a constrained (small local) summarizer gets the role's format."""
    out: dict[str, Any] = {"temperature": summ.temperature, "max_tokens": summ.max_tokens}
    if summ.constrained and role in CONSTRAINED_FORMATS:
        out["response_format"] = CONSTRAINED_FORMATS[role]
    return out

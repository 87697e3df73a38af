"""DC's two curator calls, each one user message with the authors' prompt and nothing else
(``LanguageModel.generate`` with ``history=[{"role": "user", ...}]``), answered by the
summarizer. An answer without a cheatsheet block keeps the old text (the authors' rule) and
is counted per role in the summarizer's answer health: ``dc_curator`` (DC-Cu's rewrite after
a task), ``dc_synthesis`` (DC-RS's cheatsheet before a task). A constrained summarizer (the
small embedded model) answers within the prompts' cheatsheet template (``GRAMMAR``)."""

from __future__ import annotations

from typing import Any

from reme_cli.llm import answer_health
from reme_cli.methods.dc.cheatsheet import Curated, extract_cheatsheet, fill, prompt


# For a constrained (small local) summarizer: the curator prompts' cheatsheet template, with
# at most 3 short items so that the block closes within the local model's answer cap.
GRAMMAR = r"""root ::= "<cheatsheet>\n\nVersion: " [0-9]{1,3} "\n\n" item{1,3} "</cheatsheet>"
item ::= "<memory_item>\n" [^<\n]{1,300} "\n</memory_item>\n\n"
"""


async def _ask(summ: Any, text: str, role: str, old: str) -> tuple[Curated, dict[str, Any]]:
    result = await summ.llm.chat([{"role": "user", "content": text}], temperature=summ.temperature,
                                 max_tokens=summ.max_tokens, **summ.text_grammar(GRAMMAR))
    curated = extract_cheatsheet(result.content, old)
    truncated = answer_health.is_truncated(result)
    answer_health.note(role, result, valid=curated.usable)
    return curated, {"usable": curated.usable, "closed": curated.closed, "truncated": truncated}


async def rewrite(summ: Any, previous: str, question: str, answer: str) -> tuple[Curated, dict[str, Any]]:
    """DC-Cu: the curator rewrites the cheatsheet after seeing a task and the model's answer."""
    text = fill(prompt("curator_cumulative"), QUESTION=question, MODEL_ANSWER=answer, PREVIOUS_CHEATSHEET=previous)
    return await _ask(summ, text, "dc_curator", previous)


async def synthesize(summ: Any, previous: str, pairs_text: str, next_input: str) -> tuple[Curated, dict[str, Any]]:
    """DC-RS: the curator writes a cheatsheet for the next input from the retrieved pairs;
    without a usable answer the pairs themselves are the cheatsheet (the authors' fallback)."""
    text = fill(prompt("curator_retrieval_synthesis"), PREVIOUS_INPUT_OUTPUT_PAIRS=pairs_text,
                NEXT_INPUT=next_input, PREVIOUS_CHEATSHEET=previous)
    return await _ask(summ, text, "dc_synthesis", pairs_text)

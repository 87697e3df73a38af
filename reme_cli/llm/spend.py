"""What a hosted model's answers cost, and the run's budget (``llm.budget_usd``).

Prices are the model config's (``model.price``: USD per million tokens, with where and when
they were read). A reply that thought is priced at ``thinking_output`` where the provider
bills thinking mode's output apart. Only answers the provider computed are charged: a
cached one cost nothing this time. The meter is shared by every client of a run (the
executor's and the summarizer's), and starts from what the run's manifest says was spent
before a resume, so a budget holds across sessions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reme_cli.core.errors import RunAborted


@dataclass(frozen=True)
class Prices:
    input: float  # USD per 1M prompt tokens
    output: float  # per 1M completion tokens
    thinking_output: float  # per 1M completion tokens of a reply that thought
    source: str = ""
    date: str = ""

    @classmethod
    def of(cls, price: Any) -> Prices | None:
        """From a ``model.price`` section; None unless both input and output are known."""
        if price is None or price.input is None or price.output is None:
            return None
        thinking = price.output if price.thinking_output is None else price.thinking_output
        return cls(float(price.input), float(price.output), float(thinking), price.source or "", price.date or "")

    def cost(self, prompt_tokens: float, completion_tokens: float, thinking: bool) -> float:
        out = self.thinking_output if thinking else self.output
        return (prompt_tokens * self.input + completion_tokens * out) / 1e6


@dataclass
class SpendMeter:
    """USD spent by a run at its model's prices; ``check`` stops it once ``budget`` is reached."""

    budget: float | None = None
    spent: float = 0.0  # this run's spend, sessions before this one included
    unpriced_calls: int = 0  # answers computed by a model without prices (not in ``spent``)

    def charge(self, prices: Prices | None, prompt_tokens: int, completion_tokens: int, thinking: bool) -> None:
        if prices is None:
            self.unpriced_calls += 1
            return
        self.spent += prices.cost(prompt_tokens, completion_tokens, thinking)

    def check(self) -> None:
        """Before a request the provider would compute (and bill)."""
        if self.budget is not None and self.spent >= self.budget:
            raise RunAborted(f"llm.budget_usd={self.budget:g} reached: this run has spent ${self.spent:,.4f} at "
                             "model.price; finished units are kept: rerun with a higher llm.budget_usd to go on")

    def record(self) -> dict[str, Any]:
        """The manifest's ``spend``."""
        out: dict[str, Any] = {"usd": round(self.spent, 6)}
        if self.budget is not None:
            out["budget_usd"] = self.budget
        if self.unpriced_calls:
            out["unpriced_calls"] = self.unpriced_calls
        return out

"""What a hosted model's answers cost, and the run's budget (``llm.budget_usd``).

Prices are the model config's (``model.price``: per million tokens in ``currency``, with where
and when they were read); ``usd_rate``, when the user sets one, turns a list in another
currency into USD (reme ships no exchange rate, so a CNY list stays in CNY without it). A
reply that thought is priced at ``thinking_output`` where the provider bills thinking mode's
output apart, and prompt tokens the provider served from its context cache at
``cached_input``. Only answers the provider computed are charged: a cached one cost nothing
this time. The meter is shared by every client of a run (the executor's and the
summarizer's), keeps each currency apart, and starts from what the run's manifest says was
spent before a resume, so a budget holds across sessions.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from reme_cli.core.errors import RunAborted, UserError

USD = "USD"


@dataclass(frozen=True)
class Prices:
    input: float  # per 1M prompt tokens, in ``currency``
    output: float  # per 1M completion tokens
    thinking_output: float  # per 1M completion tokens of a reply that thought
    cached_input: float  # per 1M prompt tokens served from the provider's context cache
    currency: str = USD
    source: str = ""
    date: str = ""
    converted: str = ""  # "at 0.14 USD per CNY" when usd_rate turned another currency into USD

    @classmethod
    def of(cls, price: Any, input_only: bool = False) -> Prices | None:
        """From a ``model.price`` (or, ``input_only``, an ``embedding.price``) section; None
        unless its prices are known."""
        if price is None or price.input is None or (not input_only and price.output is None):
            return None
        rate, currency, converted = 1.0, (price.currency or USD).upper(), ""
        if currency != USD and price.usd_rate is not None:
            rate, converted = float(price.usd_rate), f"at {price.usd_rate:g} USD per {currency}"
            currency = USD
        output = float(price.output or 0.0)
        thinking = output if price.thinking_output is None else float(price.thinking_output)
        cached = float(price.input) if price.cached_input is None else float(price.cached_input)
        return cls(float(price.input) * rate, output * rate, thinking * rate, cached * rate, currency,
                   price.source or "", price.date or "", converted)

    def cost(self, prompt_tokens: float, completion_tokens: float, thinking: bool,
             cached_prompt_tokens: float = 0.0) -> float:
        out = self.thinking_output if thinking else self.output
        fresh = prompt_tokens - cached_prompt_tokens
        return (fresh * self.input + cached_prompt_tokens * self.cached_input + completion_tokens * out) / 1e6

    def describe(self) -> str:
        """One line: the prices, their unit, where and when they were read."""
        parts = [f"{self.input:g} in", f"{self.output:g} out"]
        if self.thinking_output != self.output:
            parts.append(f"{self.thinking_output:g} thinking")
        if self.cached_input != self.input:
            parts.append(f"{self.cached_input:g} cached in")
        return (" / ".join(parts) + f" {self.currency} per 1M tokens" + (f" ({self.converted})" if self.converted else "")
                + f" ({self.source or 'source not given'}, {self.date or 'undated'})")


def money(amounts: dict[str, float]) -> str:
    """Amounts by currency as one string: ``$1.23``, ``CNY 45.60``, ``$1.23 + CNY 45.60``."""
    parts = [f"${v:,.2f}" if c == USD else f"{c} {v:,.2f}" for c, v in sorted(amounts.items()) if v]
    return " + ".join(parts) if parts else "$0.00"


@dataclass
class SpendMeter:
    """What a run spent at its models' prices, by currency; ``check`` stops it once ``budget``
    (USD) is reached."""

    budget: float | None = None
    spent: dict[str, float] = field(default_factory=dict)  # currency -> this run's spend, earlier sessions too
    unpriced_calls: int = 0  # answers computed by a model without prices (not in ``spent``)
    # Embeddings are charged from the methods' worker threads.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def require_usd(self, prices: Prices | None, what: str) -> None:
        """A budget in USD cannot hold prices in another currency: say so before the run."""
        if self.budget is not None and prices is not None and prices.currency != USD:
            raise UserError(f"llm.budget_usd counts USD, but {what} is in {prices.currency}: set its usd_rate "
                            f"(USD per {prices.currency}, as you convert it; e.g. {what}.usd_rate=R), or drop the budget")

    def charge(self, prices: Prices | None, prompt_tokens: int, completion_tokens: int, thinking: bool,
               cached_prompt_tokens: int = 0) -> None:
        with self._lock:
            if prices is None:
                self.unpriced_calls += 1
                return
            amount = prices.cost(prompt_tokens, completion_tokens, thinking, cached_prompt_tokens)
            self.spent[prices.currency] = self.spent.get(prices.currency, 0.0) + amount

    def check(self) -> None:
        """Before a request the provider would compute (and bill)."""
        usd = self.spent.get(USD, 0.0)
        if self.budget is not None and usd >= self.budget:
            raise RunAborted(f"llm.budget_usd={self.budget:g} reached: this run has spent ${usd:,.4f} at "
                             "model.price; finished units are kept: rerun with a higher llm.budget_usd to go on")

    def resume(self, record: dict[str, Any]) -> None:
        """What the manifest's ``spend`` says earlier sessions spent (``usd``, ``cny``, ...)."""
        for key, value in (record or {}).items():
            if len(key) == 3 and key.isalpha() and isinstance(value, (int, float)):
                self.spent[key.upper()] = float(value)

    def record(self) -> dict[str, Any]:
        """The manifest's ``spend``: an amount per currency (``usd``: USD; ``cny``: CNY)."""
        out: dict[str, Any] = {c.lower(): round(v, 6) for c, v in sorted(self.spent.items())}
        out.setdefault("usd", 0.0)
        if self.budget is not None:
            out["budget_usd"] = self.budget
        if self.unpriced_calls:
            out["unpriced_calls"] = self.unpriced_calls
        return out

"""The context guard for methods whose whole memory rides in every prompt (ACE's playbook,
Dynamic Cheatsheet's cheatsheet). Such a memory grows with every task; once it no longer
fits beside the task and the answer, the server either rejects the prompt (the episode
stops with ``context_overflow``) or, worse, a client-side cut hides it. So a method cuts
its memory to a budget itself, at item boundaries, and records per task what it did:
``Fitted.record()`` goes into the unit's ``method`` record (``context``).

Tokens are estimated from characters (``CHARS_PER_TOKEN``): no tokenizer is needed and
the estimate errs on the large side for English, JSON and code, so a memory judged to fit
does fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Qwen3's and SmolLM2's tokenizers average about 4 characters per token on English prose
# and 3.3-3.6 on JSON and code; 3 keeps the estimate above the true count for all of them.
CHARS_PER_TOKEN = 3.0


def estimate_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1 if text else 0


# An answer with no cap (model.sampling.max_tokens=null, as the authors sent) is planned at
# this many tokens: the Qwen3 configs' cap before they sent none, room for thinking and a call.
UNCAPPED_ANSWER_TOKENS = 8192


def memory_budget(cfg: Any, share: float) -> int:
    """Tokens the memory may take: ``share`` of what the context leaves after the answer
    (the served context, ``core.config.context_length``, less ``model.sampling.max_tokens``, or
    ``UNCAPPED_ANSWER_TOKENS`` without a cap); the rest is for the task and its steps."""
    from reme_cli.core.config import context_length

    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    answer = cfg.model.sampling.max_tokens
    served = context_length(cfg.model.kind, cfg.model.n_ctx, cfg.model.max_model_len, cfg.benchmark.context)
    room = served - (UNCAPPED_ANSWER_TOKENS if answer is None else answer)
    return max(0, int(room * share))


@dataclass
class Fitted:
    items: list[str]  # the items kept, in their order
    tokens: int  # the estimated tokens of the kept items joined
    budget: int
    dropped: int  # items left out

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def record(self) -> dict[str, Any]:
        return {"memory_tokens": self.tokens, "budget": self.budget, "dropped_items": self.dropped,
                "truncated": self.truncated}


def fit_items(items: list[str], budget: int, sep: str = "\n", keep: str = "first") -> Fitted:
    """Keep whole items while their joined text fits ``budget`` tokens: the first ones
    (``keep="first"``) or the last ones (``"last"``, e.g. the most recent lessons)."""
    if keep not in ("first", "last"):
        raise ValueError(f"keep must be 'first' or 'last', got {keep!r}")
    order = items if keep == "first" else list(reversed(items))
    kept: list[str] = []
    chars = 0
    for item in order:
        extra = len(item) + (len(sep) if kept else 0)
        if int((chars + extra) / CHARS_PER_TOKEN) + 1 > budget:
            break
        kept.append(item)
        chars += extra
    if keep == "last":
        kept.reverse()
    return Fitted(kept, estimate_tokens(sep.join(kept)), budget, len(items) - len(kept))

"""The context guard cuts a whole-prompt memory at item boundaries and says what it cut."""

import pytest

from reme_cli.core.config import compose
from reme_cli.methods.context_guard import estimate_tokens, fit_items, memory_budget


def test_estimate_errs_large():
    assert estimate_tokens("") == 0
    assert estimate_tokens("a" * 300) == 101  # 300 chars / 3 + 1


def test_budget_is_a_share_of_what_the_answer_leaves():
    cfg = compose(["model=qwen3-8b", "model.sampling.max_tokens=8192"])
    assert memory_budget(cfg, 0.5) == 12288  # (32768 - 8192) / 2
    with pytest.raises(ValueError):
        memory_budget(cfg, 0)


def test_budget_follows_the_context_the_server_serves():
    """AppWorld's vLLM server serves 131,072 (benchmark.context): the memory's budget is a share
    of that; a hosted provider is budgeted at model.n_ctx."""
    appworld = compose(["model=qwen3-8b", "benchmark=appworld", "model.sampling.max_tokens=8192"])
    assert memory_budget(appworld, 0.5) == (131072 - 8192) // 2
    hosted = compose(["model=qwen3-8b-dashscope", "benchmark=appworld", "model.sampling.max_tokens=8192"])
    assert memory_budget(hosted, 0.5) == 12288


def test_fit_keeps_whole_items_first_or_last():
    items = ["a" * 30, "b" * 30, "c" * 30]  # 30 chars each; joined by "\n"
    first = fit_items(items, budget=22)  # 61 chars -> 21 tokens fit, 92 -> 31 do not
    assert first.items == items[:2] and first.dropped == 1 and first.truncated
    assert first.record() == {"memory_tokens": 21, "budget": 22, "dropped_items": 1, "truncated": True}
    last = fit_items(items, budget=22, keep="last")
    assert last.items == items[1:]
    whole = fit_items(items, budget=100)
    assert whole.items == items and not whole.truncated
    assert fit_items(items, budget=5).items == []

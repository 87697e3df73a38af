"""The dry-run's cost estimate (reme_cli/run/cost.py): call counts and time, checked against
numbers worked out by hand for a small plan, and the CLI printing them."""

from __future__ import annotations

import json
import math
import re

import pytest

from reme_cli.core.config import compose
from reme_cli.core.errors import UserError
from reme_cli.run import cost

GPU = ["model=qwen3-8b", "embedding=minilm", "llm.base_url=http://127.0.0.1:9/v1", "benchmark.release=current"]
# Round numbers, so the hand arithmetic below stays readable.
ASSUMED = ["cost.calls_per_episode=10", "cost.success_rate=0.5", "cost.candidates_per_summary=2",
           "cost.prompt_tokens=1000", "cost.completion_tokens=100", "cost.prefix_cached_share=0.5",
           "cost.summarizer_prompt_tokens=500", "cost.summarizer_completion_tokens=200"]


def calibration(tmp_path) -> str:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"model": "m", "base_url": "u", "points": [
        {"concurrency": 1, "prompt_tokens_per_s": 1000, "generated_tokens_per_s": 100},
        {"concurrency": 64, "prompt_tokens_per_s": 10000, "generated_tokens_per_s": 1000}]}))
    return str(path)


def test_a_dynamic_reme_run_by_hand(tmp_path):
    a, rest = cost.split_overrides([*ASSUMED, f"cost.calibration={calibration(tmp_path)}", "cost.gpus=2",
                                    "eval.runs=2"])
    assert rest == ["eval.runs=2"]
    cfg = compose([*GPU, "memory=reme", "eval.mode=dynamic", "eval.runs=2", "eval.seeds=1"])
    assert (cfg.memory.reflection.max_retries, cfg.eval.dynamic_workers, cfg.llm.concurrency) == (2, 4, 64)
    units = 6  # 3 tasks x 2 runs x 1 seed
    calls = cost.run_calls(cfg, units, a)
    # trials per unit: 1 + 0.5 + 0.25 = 1.75, each 10 calls (at most 3 trials x 30)
    assert calls.executor == pytest.approx(6 * 1.75 * 10) and calls.executor_max == 6 * 3 * 30
    # summarized trials: the first two always (a failure guides the next), the last only if it
    # succeeds: 1 + 0.5 + 0.25 * 0.5 = 1.625; each 1 distill + 2 judge calls
    assert calls.summarizer == pytest.approx(6 * 1.625 * 3)
    # 2 streams x 4 workers = 8 chains, but only 6 units: 6 chains of one unit each
    assert calls.chains == 6
    est = cost.estimate(cfg, calls, a, cost.rates_for(cfg, a))
    assert est.prompt_tokens == pytest.approx(105 * 1000 + 29.25 * 500)
    assert est.completion_tokens == pytest.approx(105 * 100 + 29.25 * 200)
    # At 64 in flight: half the executor prompt is prefilled at 10k/s, the rest decoded at 1k/s.
    throughput = (105 * 500 + 29.25 * 500) / 10000 + (105 * 100 + 29.25 * 200) / 1000
    # Each chain: 17.5 executor + 4.875 summarizer calls, one at a time, 6 chains sharing
    # rates interpolated log-log between 1 and 64 in flight.
    r = 10 ** (math.log(6) / math.log(64))
    chain = ((17.5 * 500 + 4.875 * 500) / (1000 * r) + (17.5 * 100 + 4.875 * 200) / (100 * r)) * 6
    assert chain > throughput  # the sequential part decides here
    assert est.wall_s == pytest.approx(chain)
    assert est.gpu_hours == pytest.approx(2 * chain / 3600)


def test_a_reme_pool_build_and_a_fixed_run_by_hand():
    a, _ = cost.split_overrides(ASSUMED)
    build = compose([*GPU, "memory=reme", "benchmark.split=train", "build.samples=2"])
    calls = cost.build_calls(build, 6, 3, a)  # 3 tasks x 2 samples
    assert calls.executor == 60 and calls.executor_max == 180 and calls.chains == 0
    # the authors' flow: an analysis of each of the 2 posted trajectories, and a comparative
    # one if one succeeded and the other failed (0.5): 2.5 calls, each with 2 validations
    assert calls.summarizer == pytest.approx(3 * 2.5 * 3)
    # reme's prompts: success analysis if one of 2 succeeded (0.75), failure if one failed
    # (0.75), comparative if both (0.5): 2 distill calls, each with 2 judge calls
    calls = cost.build_calls(compose([*GPU, "memory=reme", "memory.prompts=reme", "benchmark.split=train",
                                      "build.samples=2"]), 6, 3, a)
    assert calls.summarizer == pytest.approx(3 * 2.0 * 3)
    fixed = compose([*GPU, "memory=reme", "eval.mode=fixed", "memory.rewrite=true", "memory.rerank=true"])
    calls = cost.run_calls(fixed, 10, a)
    assert calls.executor == 100 and calls.executor_max == 300 and calls.summarizer == 20  # rerank + rewrite
    est = cost.estimate(fixed, calls, a, cost.rates_for(fixed, a))
    # the stated H200 table at 64 in flight (no calibration given)
    rates = cost.H200_ASSUMED["qwen3-8b"]
    expected = (100 * 500 + 20 * 500) / rates["prompt"][64] + (100 * 100 + 20 * 200) / rates["generated"][64]
    assert est.wall_s == pytest.approx(expected)


def test_more_concurrency_is_less_time_and_an_unknown_model_has_none():
    a, _ = cost.split_overrides([])
    calls = cost.run_calls(compose([*GPU]), 100, a)
    at = {c: cost.estimate(cfg, calls, a, cost.rates_for(cfg, a)).wall_s
          for c in (8, 64) for cfg in [compose([*GPU, f"llm.concurrency={c}"])]}
    assert at[8] > 2 * at[64]
    local = compose(["model=local"])
    assert cost.rates_for(local, a) is None
    assert cost.estimate(local, calls, a, None).gpu_hours is None
    with pytest.raises(UserError, match="set both cost.tokens_per_s and cost.prompt_tokens_per_s"):
        cost.rates_for(local, cost.split_overrides(["cost.tokens_per_s=50"])[0])


@pytest.mark.parametrize("bad, message", [
    ("cost.colour=1", "KEY one of"), ("cost.success_rate=2", "between 0 and 1"),
    ("cost.tokens_per_s=fast", "bad cost.* value")])
def test_bad_cost_overrides_are_one_line(bad, message):
    with pytest.raises(UserError, match=re.escape(message)):
        cost.split_overrides([bad])


def test_table1_dry_run_prints_calls_tokens_time_and_gpu_hours(reme, tmp_path, no_paper_count):
    def summary(*extra: str) -> str:
        proc = reme("ablate", "table1", *GPU, *extra, "--dry-run", check=True, env={"COLUMNS": "200"})
        text = re.sub(r"[\s│]+", " ", proc.stderr)
        return text[text.index("in all:"):]

    at64 = summary()
    m = re.search(r"in all: ([\d,]+) LLM calls \(([\d,]+) executor, ([\d,]+) summarizer\), ([\d.,]+)M tokens, "
                  r"([\d.,]+) h wall, ([\d.,]+) GPU-hours", at64)
    assert m, at64
    total, executor, summarizer = (int(m.group(i).replace(",", "")) for i in (1, 2, 3))
    assert summarizer > 0 and abs(total - executor - summarizer) <= 1  # each is rounded
    hours64 = float(m.group(5).replace(",", ""))
    hours8 = float(re.search(r"([\d.,]+) h wall", summary("llm.concurrency=8")).group(1).replace(",", ""))
    assert hours8 > 2 * hours64
    assert "rates: assumed H200 rates" in at64
    # A file without a date (bench_vllm.py's before it wrote one) still names its host.
    assert "rates: calibrated on an unrecorded date against u (m, scripts/bench_vllm.py)" in \
        summary(f"cost.calibration={calibration(tmp_path)}")
    bad = reme("ablate", "table1", *GPU, "cost.calibration=/nonexistent.json", "--dry-run")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "not a calibration written by reme check or scripts/bench_vllm.py" in bad.stderr


def test_methods_on_the_seam_declare_their_summarizer_calls():
    """ACE, DC: the estimate counts what each method declares (Memory.expected_summarizer_calls)."""
    a, _ = cost.split_overrides(ASSUMED)  # success rate 0.5
    ace = compose([*GPU, "memory=ace", "eval.mode=dynamic"])
    assert cost.run_calls(ace, 6, a).summarizer == pytest.approx(6 * 2)  # Reflector + Curator per unit
    assert cost.run_calls(compose([*GPU, "memory=ace", "eval.mode=fixed"]), 6, a).summarizer == 0
    build = compose([*GPU, "memory=ace", "build.samples=3", "memory.offline_attempts=until_success"])
    # until a success, at most 3 samples: 1 + 0.5 + 0.25 attempts, 2 calls each, one task after another
    calls = cost.build_calls(build, 3 * 3, 3, a)
    assert calls.summarizer == pytest.approx(3 * 2 * 1.75) and calls.chains == 1
    assert calls.chain_summarizer == pytest.approx(calls.summarizer) and calls.chain_executor == 0
    # live (the default): one unit per task, its own attempts until a success, at most 5
    # (1 + 0.5 + ... + 0.0625 = 1.9375), each an episode plus 2 calls, all one after another
    live = compose([*GPU, "memory=ace", "build.samples=3"])
    assert cost.build_shape(live, 0.5) == (1, 1.9375, 5)
    calls = cost.build_calls(live, 3, 3, a)
    assert calls.summarizer == pytest.approx(3 * 2 * 1.9375)
    assert calls.executor == pytest.approx(3 * 1.9375 * 10) == calls.chain_executor  # cost.calls_per_episode=10
    assert calls.executor_max == 3 * 5 * live.benchmark.max_interactions
    rs = [*GPU, "memory=dc", "memory.variant=retrieval_synthesis"]
    assert cost.run_calls(compose([*rs, "eval.mode=fixed"]), 6, a).summarizer == 6  # a synthesis per unit
    assert cost.build_calls(compose(rs), 9, 3, a).summarizer == 0  # pairs only
    assert cost.build_calls(compose([*GPU, "memory=dc"]), 9, 3, a).summarizer == 3  # one fold per task
    rb = [*GPU, "memory=reasoningbank", "eval.mode=dynamic"]
    assert cost.run_calls(compose(rb), 6, a).summarizer == 12  # judge + extraction per unit
    assert cost.run_calls(compose([*rb, "memory.judge=checker"]), 6, a).summarizer == 6  # extraction only


def test_a_run_without_memory_counts_no_summarizer_calls_and_a_method_declares_its_own_guesses():
    """--mode none is the No Memory row whatever memory says (ReMe's rerank and rewrite make no
    calls there); cost.NAME=VALUE sets a guess a method declares (LangMem's manager calls)."""
    a, _ = cost.split_overrides(ASSUMED)
    none = compose([*GPU, "memory=reme", "eval.mode=none", "memory.rerank=true", "memory.rewrite=true"])
    assert cost.run_calls(none, 10, a).summarizer == 0
    dynamic = [*GPU, "memory=langmem", "eval.mode=dynamic"]
    assert cost.run_calls(compose(dynamic), 10, a).summarizer == pytest.approx(10 * 0.5 * 2)  # its default: 2
    three, _ = cost.split_overrides([*ASSUMED, "cost.langmem_calls_per_trajectory=3"])
    assert cost.run_calls(compose(dynamic), 10, three).summarizer == pytest.approx(10 * 0.5 * 3)
    with pytest.raises(UserError, match="bad cost"):
        cost.split_overrides(["cost.langmem_calls_per_trajectory=many"])

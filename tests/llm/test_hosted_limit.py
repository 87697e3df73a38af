"""A hosted run at its provider's limit (issue 54): the pacer spreads a minute's requests
evenly, the requests in flight adapt (additive increase, multiplicative decrease on 429), the
run records what it achieved against the limits, the plan names the bound that sets its
hours, and money is in the price list's own currency, cached prompt tokens and the embedding
priced too.

The pacer's turns are checked as it computes them, on given times: nothing here depends on
this machine's speed or load. The scripted server (a TEST DOUBLE) stands in for the provider; its numbers
are no model's. The benchmark of the whole (scripts/bench_hosted_limit.py) measures rates.
"""

from __future__ import annotations

import asyncio
import json
import re
from types import SimpleNamespace

import pytest

from reme_cli.core.config import compose
from reme_cli.core.errors import UserError
from reme_cli.llm import inflight as inflight_mod
from reme_cli.llm.client import ChatClient, _record_from_response
from reme_cli.llm.endpoint import Endpoint, make_client
from reme_cli.llm.inflight import CEILING, InFlight, most_in_flight
from reme_cli.llm.pacing import PACE_SHARE, Pacer, PerSecond, Ticket
from reme_cli.llm.spend import Prices, SpendMeter, money
from reme_cli.llm.throughput import Throughput
from reme_cli.run import cost
from reme_cli.testing import scripted_server
from reme_cli.testing.scripted_server import FixedPolicy, Provider, ScriptedServer

KEY = "sk-hosted-limit-test"


# ------------------------------------------------------------------------------ the pacer


def test_the_pacer_spreads_a_minutes_requests_evenly_and_idle_time_earns_no_burst():
    pacer = Pacer(rpm=600)
    step = 60 / (600 * PACE_SHARE)  # 10 a second, at the margin's share
    assert [pacer.reserve(1, 0.0) for _ in range(20)] == pytest.approx([i * step for i in range(20)])
    # A quiet spell: the next ones are spread again from their arrival, not sent together.
    assert [pacer.reserve(1, 100.0) for _ in range(5)] == pytest.approx([100 + i * step for i in range(5)])


def test_requests_woken_late_together_still_go_no_more_than_rpm_over_60_in_a_second():
    """A busy event loop wakes every sleeper after its turn, all at once: the sends are then
    held to the per-second limit (RPM/60) of real time, not sent as one burst."""
    window, sent, now = PerSecond(600 // 60), [], 30.0  # every turn has passed by 30 s
    for _ in range(25):
        now += window.wait(now)
        window.add(now)
        sent.append(now)
    assert max(sum(1 for t in sent if s <= t < s + 1) for s in sent) == 10
    assert sent[:10] == [30.0] * 10 and sent[10] == 31.0


def test_tokens_are_paced_by_their_estimate_until_the_answer_settles_them():
    pacer = Pacer(tpm=60_000)  # ~1,000 tokens a second at the margin
    assert pacer.reserve(2_000, 0.0) == 0.0
    pacer.settle(Ticket(2_000, 0.0), 500)  # the answer used a quarter of the estimate
    assert pacer.reserve(10, 0.0) == pytest.approx(500 * 60 / (60_000 * PACE_SHARE))


# ------------------------------------------------------------------------------ in flight


def _busy(flight: InFlight, n: int) -> list[asyncio.Task]:
    return [asyncio.ensure_future(flight.acquire()) for _ in range(n)]


def test_a_fixed_number_in_flight_is_never_exceeded_whatever_the_answers_say():
    async def go():
        flight = InFlight(3)
        waiting = _busy(flight, 10)
        await asyncio.sleep(0)
        for _ in range(20):
            flight.answered(paced_s=0.0, answer_s=1.0)
        await asyncio.sleep(0)
        return flight.in_flight, sum(t.done() for t in waiting), flight.level

    assert asyncio.run(go()) == (3, 3, 3)


def test_adaptive_in_flight_grows_while_answers_come_back_and_halves_once_a_burst_of_429s():
    async def go():
        flight = InFlight(None)
        assert flight.adaptive and flight.level == inflight_mod.START
        _busy(flight, 100)
        await asyncio.sleep(0)
        for _ in range(8):  # every slot busy, nothing held back by the limits: +1 each
            flight.answered(paced_s=0.0, answer_s=1.0)
        grown = flight.level
        flight.answered(paced_s=0.5, answer_s=1.0)  # queued half its answer's time for the pacer: the limits bind
        held = flight.level
        epoch = flight.epoch
        for _ in range(5):  # five requests of one burst come back 429: one halving
            flight.throttled(epoch)
        return grown, held, flight.level, flight.throttles, flight.record()

    grown, held, level, throttles, record = asyncio.run(go())
    assert grown == 16 and held == 16 and level == 8 and throttles == 5
    assert record == {"mode": "adaptive", "level": 8, "peak": 16, "ceiling": CEILING, "throttled": 5}


def test_adaptive_in_flight_never_passes_its_ceiling_and_a_cancelled_waiter_keeps_no_slot():
    async def go():
        flight = InFlight(None, start=2, ceiling=4)
        waiting = _busy(flight, 6)
        await asyncio.sleep(0)
        for _ in range(10):
            flight.answered(paced_s=0.0, answer_s=1.0)
        await asyncio.sleep(0)
        level, running = flight.level, flight.in_flight
        waiting[-1].cancel()  # a queued request given up (Ctrl-C): its place goes to nobody
        await asyncio.sleep(0)
        flight.release()
        await asyncio.sleep(0)
        return level, running, flight.in_flight, len(flight._waiters)

    assert asyncio.run(go()) == (4, 4, 4, 0)
    assert most_in_flight(None) == CEILING and most_in_flight(12) == 12


def test_the_hosted_configs_adapt_and_the_local_ones_keep_their_number():
    assert compose(["model=qwen3-8b-dashscope"]).llm.concurrency is None
    assert compose(["model=qwen3-8b-dashscope", "llm.concurrency=32"]).llm.concurrency == 32
    assert compose(["model=qwen3-8b"]).llm.concurrency == 64


# ------------------------------------------------------------------------------ the client


class Answer:
    name = "answer"

    def reply(self, body, headers):
        return FixedPolicy("ok").reply(body, headers)


@pytest.mark.slow  # the OpenAI SDK's first request runs `uname -p` (its platform headers)
def test_a_429_halves_the_endpoints_requests_in_flight_and_the_run_counts_it():
    """Every second request is throttled (Retry-After 0.05 s): the second question's first
    try is; its answer still comes, the level halves, and the throughput record says so."""
    async def go():
        with ScriptedServer(Answer(), provider=Provider(api_key=KEY, rate_limit_every=2, retry_after="0.05")) as srv:
            client = ChatClient(srv.base_url, "m", api_key=KEY, concurrency=None, stream="always",
                                pacer=Pacer(rpm=6000, tpm=10_000_000), max_retries=3)
            await client.chat([{"role": "user", "content": "hi"}], max_tokens=None)
            first = await client.chat([{"role": "user", "content": "again"}], max_tokens=None)
            await client.close()
            return first, client.inflight.record(), client.throughput.record(), client.throughput.line()

    first, flight, rates, line = asyncio.run(go())
    assert first.content == "ok"
    assert flight["mode"] == "adaptive" and flight["level"] == inflight_mod.START // 2 and flight["throttled"] == 1
    assert rates["requests"] == 3 and rates["throttled"] == 1 and rates["tokens"] > 0
    assert rates["requests_per_min"] == {"last": 3, "best": 3, "limit": 6000}
    assert re.search(r"in flight 4 \(adaptive\)\s+3/6,000 req/min\s+\S+ tok/min\s+throttled 1", line)


def test_the_provider_admits_its_requests_a_second_and_throttles_the_rest(monkeypatch):
    clock = SimpleNamespace(time=lambda: 1000.5)  # one clock second for every request
    monkeypatch.setattr(scripted_server, "time", clock)
    provider = Provider(api_key=KEY, rate_limit_rps=2, retry_after="1")
    said = [provider.refusal({}, {"authorization": f"Bearer {KEY}"}, n) for n in (1, 2, 3)]
    assert said[:2] == [None, None]
    status, body, headers = said[2]
    assert status == 429 and body["error"]["code"] == "Throttling.RateQuota" and headers == {"Retry-After": "1"}
    clock.time = lambda: 1001.0  # the next second admits again
    assert provider.refusal({}, {"authorization": f"Bearer {KEY}"}, 4) is None
    assert provider.per_second == {1000: [2, 1], 1001: [1, 0]}


# ------------------------------------------------------------------------------ the plan


def test_the_plan_names_the_bound_that_sets_a_hosted_runs_hours():
    a = cost.Assumptions()
    tokens = compose(["model=qwen3-8b-dashscope", "eval.mode=none"])  # 600 rpm, 1M tpm, adaptive
    calls = cost.run_calls(tokens, 1800, a)
    est = cost.estimate(tokens, calls, a, None, 1800)
    assert est.hosted.bound == "tokens" and est.hosted.in_flight == CEILING
    assert est.wall_s == pytest.approx((est.prompt_tokens + est.completion_tokens) / 1_000_000 * 60)
    fixed = compose(["model=qwen3-8b-dashscope", "eval.mode=none", "llm.concurrency=32"])
    latency = cost.estimate(fixed, calls, a, None, 1800).hosted  # main's fixed 32 at 20 s an answer
    assert latency.bound == "latency" and latency.seconds == pytest.approx(calls.executor * 20 / 32)
    requests = compose(["model=qwen3-8b-dashscope", "eval.mode=none", "llm.rpm=100"])
    assert cost.estimate(requests, calls, a, None, 1800).hosted.bound == "requests"
    # Where the latency came from is said: assumed, or given on the command line.
    assert a.hosted_call_s_source == "assumed"
    given, _ = cost.split_overrides(["cost.hosted_call_s=7.5"])
    assert (given.hosted_call_s, given.hosted_call_s_source) == (7.5, "cost.hosted_call_s as given")
    with pytest.raises(UserError, match="cost.KEY=VALUE"):
        cost.split_overrides(["cost.hosted_call_s_source=measured"])


def test_money_is_in_the_price_lists_currency_unless_a_rate_the_user_sets_converts_it():
    a = cost.Assumptions()
    cny = compose(["model=qwen3-32b-dashscope", "memory=reme", "eval.mode=fixed"])
    calls = cost.run_calls(cny, 100, a)
    amounts = cost.estimate(cny, calls, a, None, 100).cost
    executor = (calls.executor * a.prompt_tokens * 2.0 + calls.executor * a.completion_tokens * 20.0) / 1e6
    assert amounts == pytest.approx({"CNY": executor, "USD": 100 * a.embedding_tokens * 0.072 / 1e6})
    usd = compose(["model=qwen3-32b-dashscope", "memory=reme", "eval.mode=fixed", "model.price.usd_rate=0.5"])
    assert cost.estimate(usd, calls, a, None, 100).cost == pytest.approx({"USD": executor * 0.5 + amounts["USD"]})
    # Without a memory method nothing is embedded; without prices the cost is unknown.
    none = compose(["model=qwen3-32b-dashscope", "eval.mode=none"])
    assert set(cost.estimate(none, cost.run_calls(none, 100, a), a, None, 100).cost) == {"CNY"}
    assert cost.estimate(compose(["model=qwen3-8b-dashscope"]), calls, a, None, 100).cost is None
    assert money({"CNY": 1234.5, "USD": 0.04}) == "CNY 1,234.50 + $0.04" and money({}) == "$0.00"


# ------------------------------------------------------------------------------ spend


def test_cached_prompt_tokens_are_priced_apart_and_the_spend_keeps_currencies_apart():
    record = _record_from_response({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
                                    "usage": {"prompt_tokens": 1000, "completion_tokens": 10,
                                              "prompt_tokens_details": {"cached_tokens": 800}}}, 0.1)
    assert record["cached_prompt_tokens"] == 800
    cny = Prices.of(compose(["model=qwen3-32b-dashscope"]).model.price)
    assert (cny.currency, cny.input, cny.cached_input) == ("CNY", 2.0, 0.4)
    meter = SpendMeter()
    meter.charge(cny, 1000, 10, thinking=True, cached_prompt_tokens=800)
    meter.charge(Prices(1.0, 1.0, 1.0, 1.0), 1_000_000, 0, thinking=False)
    assert meter.spent == pytest.approx({"CNY": (200 * 2.0 + 800 * 0.4 + 10 * 20.0) / 1e6, "USD": 1.0})
    again = SpendMeter()
    again.resume(meter.record())  # a resumed run starts from what its manifest says
    assert again.spent == pytest.approx(meter.spent)


def test_a_budget_in_usd_refuses_a_price_list_in_another_currency_before_the_run(monkeypatch):
    monkeypatch.setenv("DASHSCOPE_API_KEY", KEY)
    cfg = compose(["model=qwen3-32b-dashscope", "llm.budget_usd=5", "llm.model=m"])
    ep = Endpoint(["http://127.0.0.1:9/v1"], "m")
    with pytest.raises(UserError, match=r"llm.budget_usd counts USD, but model.price is in CNY.*usd_rate"):
        make_client(cfg, ep)
    converted = make_client(compose(["model=qwen3-32b-dashscope", "llm.budget_usd=5", "model.price.usd_rate=0.14"]), ep)
    assert converted.prices.currency == "USD" and converted.prices.input == pytest.approx(0.28)


def test_the_manifest_and_the_progress_line_say_the_throughput():
    t = Throughput(rpm=600, tpm=1_000_000, inflight=[InFlight(None)])
    assert t.line() == ""  # nothing sent yet
    t.sent()
    t.answered(12_000)
    assert json.loads(json.dumps(t.record()))["tokens_per_min"] == {"last": 12_000, "best": 12_000,
                                                                    "limit": 1_000_000}
    assert t.line() == "in flight 8 (adaptive)  1/600 req/min  12k/1,000k tok/min"


@pytest.mark.slow
def test_the_dry_run_of_table1_on_qwen3_32b_costs_in_cny_and_names_the_bound(reme):
    """The issue's done-when: a cost in a named currency, and which bound sets the hours."""
    proc = reme("ablate", "table1", "model=qwen3-32b-dashscope", "--dry-run", env={"COLUMNS": "240"}, check=True)
    text = re.sub(r"[\s│]+", " ", proc.stderr)
    assert re.search(r"no_memory 21,600 0 142\.6 [\d.]+ - CNY 518\.40 ", text)
    assert "the hours are set by the token bound (llm.tpm) for pool amem, no_memory" in text
    assert "20 s an answer (assumed)" in text and "adaptive in flight (at most 256)" in text
    assert "2 in / 8 out / 20 thinking / 0.4 cached in CNY per 1M tokens" in text
    assert "https://help.aliyun.com/en/document_detail/3023262.html, 2026-12-07" in text

"""Requests and tokens per minute under a provider's limits (``llm.rpm``, ``llm.tpm``), paced
evenly over the minute.

A hosted provider counts both per minute and answers 429 past either (DashScope: per model
and account, "Requests rate limit exceeded" for RPM, "Allocated quota exceeded" for TPM), and
may enforce them per second too: RPM/60 requests and TPM/60 tokens a second, so "a burst of
requests in a short period may trigger rate limiting" even under the minute's totals
(Model Studio's rate-limit page). So a minute's requests are not sent as they come but spread
over it: each request (and its tokens) takes its turn on a schedule of ``60/rpm`` seconds a
request and ``60/tpm`` seconds a token, the GCRA ("virtual scheduling") form of a token
bucket with no burst allowance. Idle time earns no credit, so nothing is sent in a burst.
The schedule runs at ``PACE_SHARE`` of the limits: a provider counting per clock second sees
the network's jitter move a request across a second's edge now and then, and the margin keeps
such a second under its limit. And since a busy event loop wakes its sleepers late, and then
together, no more than RPM/60 requests are sent in any one second of real time, whatever the
schedule says (scripts/bench_hosted_limit.py measures both).

One pacer serves every client of a run, so the executor and the summarizer share the budget
as the provider sees them. A request's tokens are estimated (prompt characters / 4 plus its
answer's cap) until its answer says how many it really used; ``settle`` then moves the
schedule by the difference. A 429 that gets through anyway is waited out by the client
(``Retry-After``) and lowers its requests in flight (``llm/inflight.py``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

PACE_SHARE = 0.975  # of llm.rpm / llm.tpm: what the schedule aims at


@dataclass
class Schedule:
    """One rate's schedule: the time from which the next unit may go (GCRA's theoretical
    arrival time), ``interval`` seconds a unit. A request that arrives after it starts the
    schedule anew from its arrival: idle time earns no burst."""

    interval: float
    next_at: float = 0.0


@dataclass
class PerSecond:
    """At most ``cap`` sends in any one second of real time (a sliding window)."""

    cap: int
    _sent: deque[float] = field(default_factory=deque)

    def wait(self, now: float) -> float:
        while self._sent and now - self._sent[0] >= 1.0:
            self._sent.popleft()
        return 0.0 if len(self._sent) < self.cap else self._sent[0] + 1.0 - now

    def add(self, now: float) -> None:
        self._sent.append(now)


@dataclass
class Ticket:
    """A paced request: its estimated tokens (replaced by ``settle``) and how long it waited
    for its turn (while others' went: the limits, not the requests in flight, held it)."""

    tokens: int
    waited_s: float


@dataclass
class Pacer:
    rpm: int | None = None
    tpm: int | None = None
    clock: Callable[[], float] = time.monotonic  # the clock and the sleep the schedule keeps (tests: a fake)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _requests: Schedule | None = field(default=None, init=False)
    _tokens: Schedule | None = field(default=None, init=False)
    _second: PerSecond | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._requests = Schedule(60.0 / (self.rpm * PACE_SHARE)) if self.rpm else None
        self._tokens = Schedule(60.0 / (self.tpm * PACE_SHARE)) if self.tpm else None
        self._second = PerSecond(max(1, self.rpm // 60)) if self.rpm else None

    async def acquire(self, tokens: int) -> Ticket:
        """Take the next turn for one more request of ``tokens``, and wait for it.

        The turn is reserved at once, first come first served, and the request sleeps until
        it: no lock is handed from one waiter to the next (each handoff would cost a turn of
        a busy event loop), and a late wake-up shifts no later turn."""
        now = self.clock()
        turn = self.reserve(tokens, now)
        if turn > now:
            await self.sleep(turn - now)
        if self._second is not None:
            while (wait := self._second.wait(self.clock())) > 0:
                await self.sleep(wait)
            self._second.add(self.clock())
        return Ticket(tokens, self.clock() - now)

    def reserve(self, tokens: int, now: float) -> float:
        """The turn of a request of ``tokens`` arriving at ``now``, taken on every schedule."""
        schedules = [(s, n) for s, n in ((self._requests, 1), (self._tokens, tokens)) if s is not None]
        turn = max([now, *(s.next_at for s, _ in schedules)])
        for s, n in schedules:
            # A request larger than a second's tokens still goes: it moves the schedule
            # further on, so the minute's total holds.
            s.next_at = turn + n * s.interval
        return turn

    def settle(self, ticket: Ticket, tokens: int) -> None:
        """The tokens the answer says the request used, in place of the estimate: later
        turns move by the difference."""
        if self._tokens is not None:
            self._tokens.next_at += (tokens - ticket.tokens) * self._tokens.interval
        ticket.tokens = tokens


def estimate_tokens(request: dict) -> int:
    """A request's tokens before its answer: ~4 characters a token, plus its answer's cap."""
    prompt = len(json.dumps(request.get("messages", []), ensure_ascii=False)) // 4
    return prompt + int(request.get("max_tokens") or 0)

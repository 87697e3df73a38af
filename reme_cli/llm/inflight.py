"""Requests in flight to one endpoint: a fixed number, or as many as the answers and the
provider's limits allow (additive increase, multiplicative decrease).

``llm.concurrency=N`` keeps N in flight, never more (a local or vLLM server queues what it is
sent; N is the batch it serves). ``llm.concurrency=null`` (the hosted configs) adapts by
additive increase and multiplicative decrease: from ``START`` the level grows by one for
every answer that came back while every slot was busy (so it can double in a round trip); a
429 or a provider's throttling code halves it, once for the requests sent before the halving
however many of them say so; it never exceeds ``CEILING``. A request that waited
for its turn in the pacer (``llm/pacing.py``) longer than a quarter of its answer's time
(``QUEUED``) found the RPM/TPM budget full, not the slots: its answer grows nothing. So the
level settles a little above what the limits let through (their rate x the answer's time),
keeping the pacer's queue from running dry, instead of climbing to the ceiling. With a 20 s
answer and DashScope's 600 requests a minute that is ~200 in flight, where a fixed 32 used
16% of the requests the account allows.

No library was used: the AIMD limiters on PyPI (aimd-limiter, ace-concurrency,
adaptive-concurrency) are 0.1 releases with no track record; this one is the small
part of them reme needs, tested in tests/llm/test_hosted_limit.py.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

START = 8  # requests in flight before the first answers say more fit
CEILING = 256  # adaptive: never more in flight than this
DECREASE = 0.5  # a throttle multiplies the level by this
QUEUED = 0.25  # waited longer than this share of its answer's time for the pacer: the limits bind


def most_in_flight(concurrency: int | None) -> int:
    """The most requests ``llm.concurrency`` can have in flight: its number, or the adaptive
    ceiling (what the runner opens episodes for, and a method its parallel calls)."""
    return CEILING if concurrency is None else concurrency


class InFlight:
    """A FIFO semaphore whose size is fixed (``fixed``) or adapts (``fixed=None``)."""

    def __init__(self, fixed: int | None = None, start: int = START, ceiling: int = CEILING):
        self.adaptive = fixed is None
        self.ceiling = ceiling if fixed is None else fixed
        self.limit = float(min(start, ceiling) if fixed is None else fixed)
        self.in_flight = 0
        self.peak = self.level  # the highest level reached
        self.throttles = 0  # 429s (and throttling codes) seen
        self.epoch = 0  # bumped by each decrease: a 429 of a request sent before it is the same event
        self._waiters: deque[asyncio.Future] = deque()

    @property
    def level(self) -> int:
        return max(1, int(self.limit))

    async def acquire(self) -> None:
        if self.in_flight < self.level and not self._waiters:
            self.in_flight += 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted as it was cancelled: give it back
                self.release()
            else:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.level:
            fut = self._waiters.popleft()
            if not fut.done():
                self.in_flight += 1  # the slot is the waiter's from here
                fut.set_result(None)

    def answered(self, paced_s: float, answer_s: float) -> None:
        """An answer came back after ``answer_s`` seconds, its request having waited
        ``paced_s`` for its turn under the limits: more may fit, if every slot was busy and
        the limits did not hold it back."""
        held_by_limits = paced_s > QUEUED * answer_s
        if not self.adaptive or held_by_limits or self.in_flight < self.level or self.limit >= self.ceiling:
            return
        self.limit = min(float(self.ceiling), self.limit + 1.0)
        self.peak = max(self.peak, self.level)
        self._wake()

    def throttled(self, epoch: int) -> None:
        """A 429 for a request sent at ``epoch``: halve the level, once for one burst."""
        self.throttles += 1
        if not self.adaptive or epoch != self.epoch:
            return
        self.limit = max(1.0, self.limit * DECREASE)
        self.epoch += 1

    def record(self) -> dict[str, Any]:
        """The manifest's view: how the level is set, where it is, the highest it reached."""
        return {"mode": "adaptive" if self.adaptive else "fixed", "level": self.level, "peak": self.peak,
                "ceiling": self.ceiling, "throttled": self.throttles}

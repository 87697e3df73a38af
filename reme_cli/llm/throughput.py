"""What a run achieves against its provider's limits: requests and tokens in the last minute
(and the best minute so far) beside ``llm.rpm`` / ``llm.tpm``, the requests throttled, and the
requests in flight. Shared by a run's clients, as the pacer is; the progress line shows
``line()`` and the manifest records ``record()`` as units end."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from reme_cli.llm.inflight import InFlight

MINUTE_S = 60.0


@dataclass
class Throughput:
    rpm: int | None = None  # the limits, for comparison
    tpm: int | None = None
    requests: int = 0  # sent (retries included: the provider counts them)
    tokens: int = 0  # prompt + generated, as the answers say
    best_rpm: int = 0
    best_tpm: int = 0
    inflight: list[InFlight] = field(default_factory=list)  # each endpoint's
    _sent: deque[float] = field(default_factory=deque)
    _used: deque[tuple[float, int]] = field(default_factory=deque)
    _used_sum: int = 0

    @property
    def throttled(self) -> int:
        """Requests answered 429, as each endpoint's requests in flight counted them."""
        return sum(f.throttles for f in self.inflight)

    def sent(self) -> None:
        now = time.monotonic()
        self.requests += 1
        self._sent.append(now)
        self._trim(now)
        self.best_rpm = max(self.best_rpm, len(self._sent))

    def answered(self, tokens: int) -> None:
        now = time.monotonic()
        self.tokens += tokens
        self._used.append((now, tokens))
        self._used_sum += tokens
        self._trim(now)
        self.best_tpm = max(self.best_tpm, self._used_sum)

    def _trim(self, now: float) -> None:
        while self._sent and now - self._sent[0] >= MINUTE_S:
            self._sent.popleft()
        while self._used and now - self._used[0][0] >= MINUTE_S:
            self._used_sum -= self._used.popleft()[1]

    def last_minute(self) -> tuple[int, int]:
        self._trim(time.monotonic())
        return len(self._sent), self._used_sum

    def line(self) -> str:
        """The progress line's part: in flight, requests and tokens a minute against the limits."""
        if not self.requests:
            return ""
        rpm, tpm = self.last_minute()
        flight = " + ".join(f"{f.level}{' (adaptive)' if f.adaptive else ''}" for f in self.inflight)
        out = f"in flight {flight}  {rpm:,}" + (f"/{self.rpm:,}" if self.rpm else "") + " req/min  "
        out += f"{tpm / 1000:,.0f}k" + (f"/{self.tpm / 1000:,.0f}k" if self.tpm else "") + " tok/min"
        return out + (f"  throttled {self.throttled}" if self.throttled else "")

    def record(self) -> dict[str, Any]:
        """The manifest's ``throughput``."""
        rpm, tpm = self.last_minute()
        return {"in_flight": [f.record() for f in self.inflight],
                "requests": self.requests, "throttled": self.throttled, "tokens": self.tokens,
                "requests_per_min": {"last": rpm, "best": self.best_rpm, "limit": self.rpm},
                "tokens_per_min": {"last": tpm, "best": self.best_tpm, "limit": self.tpm}}

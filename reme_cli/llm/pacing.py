"""Requests and tokens per minute under a provider's limits (``llm.rpm``, ``llm.tpm``).

A hosted provider counts both over a minute and answers 429 past either (DashScope: per
model and account, "Requests rate limit exceeded" for RPM, "Allocated quota exceeded" for
TPM). One pacer serves every client of a run, so the executor and the summarizer share the
budget as the provider sees them. A request waits until the last 60 seconds leave room for
it: one more request, and its estimated tokens (prompt characters / 4 plus what it may
generate) until its answer says how many it really used. A 429 that gets through anyway is
waited out by the client (``Retry-After``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

WINDOW_S = 60.0


@dataclass
class _Entry:
    at: float
    tokens: int


@dataclass
class Pacer:
    rpm: int | None = None
    tpm: int | None = None
    _sent: deque[_Entry] = field(default_factory=deque)
    _lock: asyncio.Lock | None = None

    async def acquire(self, tokens: int) -> _Entry:
        """Wait until one more request of ``tokens`` fits the last minute, then count it."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # first come, first served
            while True:
                now = time.monotonic()
                while self._sent and now - self._sent[0].at >= WINDOW_S:
                    self._sent.popleft()
                used = sum(e.tokens for e in self._sent)
                fits_rpm = self.rpm is None or len(self._sent) < self.rpm
                # A request larger than the whole budget goes alone rather than never.
                fits_tpm = self.tpm is None or not self._sent or used + tokens <= self.tpm
                if fits_rpm and fits_tpm:
                    entry = _Entry(now, tokens)
                    self._sent.append(entry)
                    return entry
                await asyncio.sleep(max(0.01, WINDOW_S - (now - self._sent[0].at)))

    @staticmethod
    def settle(entry: _Entry, tokens: int) -> None:
        """The tokens the answer says the request used, in place of the estimate."""
        entry.tokens = tokens


def estimate_tokens(request: dict) -> int:
    """A request's tokens before its answer: ~4 characters a token, plus its answer's cap."""
    import json

    prompt = len(json.dumps(request.get("messages", []), ensure_ascii=False)) // 4
    return prompt + int(request.get("max_tokens") or 0)

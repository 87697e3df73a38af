"""Live progress: done / total, ETA, success rate so far, tokens."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from reme_cli.llm.spend import money
from reme_cli.run.records import UnitRecord


class RunProgress:
    def __init__(self, console: Console, label: str):
        self.label = label
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
            console=console,
            transient=False,
        )
        self._task = None
        self.finished = self.successes = self.errors = self.tokens = 0
        self.spend: Callable[[], dict[str, float]] | None = None  # by currency (a hosted model with prices)
        self.rates: Callable[[], str] | None = None  # in flight, requests and tokens a minute (llm/throughput.py)
        self.on_advance: Callable[[], None] | None = None  # after each recorded unit

    def start(self, total: int, done: list[UnitRecord]) -> None:
        self._progress.start()
        self._task = self._progress.add_task(self.label, total=total, stats="")
        for rec in done:
            if rec.ok:
                self._count(rec)
        self._progress.update(self._task, completed=self.finished, stats=self._stats())

    def advance(self, record: UnitRecord) -> None:
        self._count(record)
        self._progress.update(self._task, completed=self.finished, stats=self._stats())
        if self.on_advance is not None:
            self.on_advance()

    def stop(self) -> None:
        self._progress.stop()

    def _count(self, rec: UnitRecord) -> None:
        self.finished += 1
        self.successes += rec.success
        self.errors += not rec.ok
        self.tokens += rec.tokens.get("prompt", 0) + rec.tokens.get("completion", 0)

    def _stats(self) -> str:
        rate = self.successes / self.finished if self.finished else 0.0
        err = f" errors {self.errors}" if self.errors else ""
        spent = self.spend() if self.spend is not None else {}
        money_ = f"  {money(spent)}" if any(spent.values()) else ""
        rates = self.rates() if self.rates is not None else ""
        return f"success {rate:.1%}  tokens {self.tokens:,}{money_}{err}" + (f"  {rates}" if rates else "")

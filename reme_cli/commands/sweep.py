"""One table over the runs of a multirun sweep, read from their metrics.json files."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from reme_cli.core.errors import UserError
from reme_cli.core.run_log import Score, read_run_log


def print_sweep(paths: list[Path], console: Console) -> None:
    table = Table(title="sweep")
    for col in ("run", "model", "mode", "Avg@k %", "Pass@k %", "units", "errors"):
        table.add_column(col)
    for path in paths:
        log = read_run_log(path)
        m = log.metrics
        if m is None:
            raise UserError(f"{log.result_file} is missing: the run did not finish; rerun the same command")
        table.add_row(path.name, log.config.model, log.config.mode, _pct(m.avg), _pct(m.pass_), str(m.units),
                      str(m.errors))
    console.print(table)


def _pct(score: Score | None) -> str:
    mean, std = (score.mean, score.std) if score else (0.0, 0.0)
    return f"{100 * mean:.2f} ± {100 * std:.2f}"

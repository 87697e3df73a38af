"""One table over the runs of a multirun sweep, read from their metrics.json files."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from reme_cli.run.records import CONFIG_FILE, METRICS_FILE


def print_sweep(paths: list[Path], console: Console) -> None:
    table = Table(title="sweep")
    for col in ("run", "model", "mode", "Avg@k %", "Pass@k %", "units", "errors"):
        table.add_column(col)
    for path in paths:
        m = json.loads((path / METRICS_FILE).read_text())
        cfg = yaml.safe_load((path / CONFIG_FILE).read_text())
        k = m["k"]
        avg, pas = m.get(f"avg@{k}", {}), m.get(f"pass@{k}", {})
        table.add_row(path.name, cfg["model"]["name"], cfg["eval"]["mode"],
                      f"{100 * avg.get('mean', 0):.2f} ± {100 * avg.get('std', 0):.2f}",
                      f"{100 * pas.get('mean', 0):.2f} ± {100 * pas.get('std', 0):.2f}",
                      str(m["units"]), str(m["errors"]))
    console.print(table)

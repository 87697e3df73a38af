"""Rich tables of run metrics."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def metrics_table(metrics: dict[str, Any], title: str, variants: dict[str, dict[str, Any]] | None = None) -> Table:
    """One row per metric variant (e.g. final and first-attempt success)."""
    k = metrics["k"]
    table = Table(title=title)
    table.add_column("success")
    table.add_column(f"Avg@{k} % (mean ± std)", justify="right")
    table.add_column(f"Pass@{k} % (mean ± std)", justify="right")
    table.add_column("seeds", justify="right")
    table.add_column("tasks", justify="right")
    table.add_column("units", justify="right")
    table.add_column("errors", justify="right")
    for label, m in (variants or {"final": metrics}).items():
        if not m.get("units"):
            table.add_row(label, "-", "-", "0", "0", "0", "0")
            continue
        avg, pas = m[f"avg@{k}"], m[f"pass@{k}"]
        table.add_row(
            label,
            f"{_pct(avg['mean'])} ± {_pct(avg['std'])}",
            f"{_pct(pas['mean'])} ± {_pct(pas['std'])}",
            str(avg["n_seeds"]), str(m["tasks"]), str(m["units"]), str(m["errors"]),
        )
    return table

"""The numbers the ReMe paper reports, so every table can show ours beside theirs.

The values live in ``data/paper_tables.csv`` (a verbatim copy of the shared reference file)
and are read through ``importlib.resources`` so they ship inside the wheel and never depend
on the working directory.
"""

from __future__ import annotations

import math
from importlib import resources

import pandas as pd

# Model ids used in configs -> the labels the paper's tables use.
PAPER_MODEL_LABELS: dict[str, str] = {
    "qwen3-8b": "Qwen3-8B",
    "qwen3-14b": "Qwen3-14B",
    "qwen3-32b": "Qwen3-32B",
}


def paper_model_label(model: str) -> str | None:
    """The paper's label for a model id (or a label already), None if the paper has no such model."""
    if model in PAPER_MODEL_LABELS.values():
        return model
    return PAPER_MODEL_LABELS.get(str(model).lower())


def served_model_label(model: str) -> str | None:
    """The paper's label of the model a model config serves: a copy at a hosted provider
    (``qwen3-8b-dashscope``, whose ``model.same_as`` is qwen3-8b) has its paper model's. Where
    a run's paper cells are looked up; a table's columns keep the config's own name, so a
    hosted run and a vLLM run of one model never share a cell."""
    from reme_cli.core.providers import paper_model_of

    return paper_model_label(model) or paper_model_label(paper_model_of(str(model)))


def load_paper_tables() -> pd.DataFrame:
    """All paper values; read fresh on each call (a 100-line file) to keep no module state."""
    source = resources.files("reme_cli.report").joinpath("data").joinpath("paper_tables.csv")
    with source.open("r", encoding="utf-8") as handle:
        return pd.read_csv(handle, dtype={"note": str})


def paper_value(table: str, model_label: str, setting: str, benchmark: str, metric: str,
                tables: pd.DataFrame | None = None) -> tuple[float, float | None] | None:
    """(value_pct, std_pct or None) the paper reports for one cell, or None if it has none.

    ``model_label`` may be a paper label ("Qwen3-8B") or a model id ("qwen3-8b"); ``metric``
    is matched case-insensitively ("Avg@4" == "avg@4"). Pass ``tables`` to avoid re-reading
    the file when looking up many cells.
    """
    label = paper_model_label(model_label)
    if label is None:
        return None
    df = load_paper_tables() if tables is None else tables
    hit = df[(df["table"] == table) & (df["model"] == label) & (df["setting"] == setting)
             & (df["benchmark"] == benchmark) & (df["metric"].str.lower() == metric.lower())]
    if hit.empty:
        return None
    row = hit.iloc[0]
    std = float(row["std_pct"])
    return float(row["value_pct"]), (None if math.isnan(std) else std)


def paper_benchmarks() -> list[str]:
    """The benchmarks the paper's tables report, in the order they first appear there."""
    return list(dict.fromkeys(load_paper_tables()["benchmark"]))

"""Numbers other papers published for the methods in the methods table (``reme ablate
methods``), shown beside ours as context: each names its model, split and source, since
none was measured with Qwen3 or with this harness (ACE's and DC's AppWorld rows used
DeepSeek-V3.1 on one run per task). They are never a Δ target.

The values live in ``data/published_methods.csv``, one row per (setting, split, metric),
where ``setting`` is our row label for the same method and mode.
"""

from __future__ import annotations

from importlib import resources

import pandas as pd


def load_published() -> pd.DataFrame:
    source = resources.files("reme_cli.report").joinpath("data").joinpath("published_methods.csv")
    with source.open("r", encoding="utf-8") as handle:
        return pd.read_csv(handle, dtype={"note": str})


def published_text(setting: str, benchmark: str, published: pd.DataFrame) -> str | None:
    """One cell: every published number for this setting and benchmark, grouped by source,
    e.g. "TGC 69.6 / SGC 53.6 (test_normal), TGC 66.0 / SGC 48.9 (test_challenge);
    DeepSeek-V3.1; ACE paper (...), Table 1: ReAct + ACE, online"."""
    hits = published[(published["setting"] == setting) & (published["benchmark"] == benchmark)]
    if hits.empty:
        return None
    parts = []
    for (source, model), rows in hits.groupby(["source", "model"], sort=False):
        splits = [" / ".join(f"{r.metric} {r.value_pct:.1f}" for r in split.itertuples()) + f" ({name})"
                  for name, split in rows.groupby("split", sort=False)]
        parts.append(f"{', '.join(splits)}; {model}; {source}")
    return " | ".join(parts)

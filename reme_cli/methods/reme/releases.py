"""ReMe's released pools as the plug-in's ``Releases`` (``ReMe.releases``): the six pools the
authors released, bundled in ``official_pools/`` and named ``official:<benchmark>/<model>``
(``official.py`` reads them). ``reme pool import`` and a suite's ``released`` pools ask for
them through the registry, so no shared command names ReMe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reme_cli.llm.embed import make_embedder_for
from reme_cli.methods.reme.official import (OFFICIAL_PREFIX, import_official, pool_source, released_counts,
                                            released_name, released_pools)


class OfficialReleases:
    prefix = OFFICIAL_PREFIX

    def name_for(self, benchmark: str, model: str) -> str:
        return released_name(benchmark, model)

    def source(self, spec: str) -> Path:
        return pool_source(spec)

    def list(self, console: Console) -> None:
        table = Table(title="Released ReMe pools bundled with reme (agentscope-ai/ReMe@65971baf, Apache-2.0)")
        for col in ("name", "total", "success", "failure", "comparative"):
            table.add_column(col, justify="left" if col == "name" else "right")
        for name, path in released_pools().items():
            counts = released_counts(path)
            table.add_row(OFFICIAL_PREFIX + name,
                          *(str(counts[k]) for k in ("total", "success", "failure", "comparative")))
        console.print(table)

    def import_into(self, source: str, staging: Path, cfg: Any) -> str:
        pool = import_official(source, staging, make_embedder_for(cfg), retrieval_key=cfg.memory.retrieval_key)
        report = pool.built_by["import"]
        by_source = ", ".join(f"{n} {s}" for s, n in sorted(report["by_source"].items()))
        return (f"imported {report['imported']} experiences ({by_source}) from {source}; "
                f"skipped {report.get('skipped', 0)} line(s)")


RELEASES = OfficialReleases()

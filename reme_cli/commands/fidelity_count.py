"""The fidelity column counted (docs/fidelity.md, "How far a departure goes"): how many of a
suite's table cells have runs whose every departure is low, by table, for `reme ablate
--dry-run`: this plan's cells, and the paper's cells of the suite's table on this plan's
path (the suite planned again for each of the paper's models at the agent's provider and each
benchmark the paper reports the table on), the count an audit of the column would make.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from reme_cli.commands.ablate import SuitePlan, plan, run_departures


def fidelity_count(name: str, overrides: list[str], p: SuitePlan, paper_wide: bool = True) -> Table:
    """The count, by table: this plan's cells free of medium/high departures and, with
    ``paper_wide``, the paper's cells of suite ``name``'s table on this plan's path
    (``overrides``: the plan's own, less the cost assumptions)."""
    from reme_cli.report.fidelity import CellCount
    from reme_cli.report.specs import table_spec

    spec = table_spec(p.table)
    table = Table(title="fidelity count: cells free of medium/high departures, by table (docs/fidelity.md, "
                        "\"How far a departure goes\")")
    for col in ("table", "cells of", "count"):
        table.add_column(col, overflow="fold")
    first = p.runs[0].cfg if p.runs else None
    if first is not None:
        count = sum((CellCount.of(run_departures(p, j)) for j in p.runs), CellCount())
        table.add_row(spec.name, f"this plan ({first.model.name}, {first.benchmark.name})", count.text())
    wide = paper_count(name, overrides, p, spec) if paper_wide and first is not None else None
    if wide is not None:
        count, models, benchmarks = wide
        table.add_row(spec.paper_table, f"the paper's table at this provider ({', '.join(models)}; "
                                        f"{', '.join(benchmarks)})", count.text())
    table.caption = ("a run fills its row's Avg@k and Pass@k; a cell is free when every departure the fidelity "
                     "column names for its run is low" + ("" if wide is not None or not paper_wide else
                                                          "; the paper has no such table, or no copy of its "
                                                          "models at this provider"))
    return table


def paper_count(name: str, overrides: list[str], p: SuitePlan, spec: Any) -> tuple[Any, list[str], list[str]] | None:
    """(count, models, benchmarks) over the paper's cells of ``spec``'s paper table, with the
    paper's models at the provider of ``p``'s agent: a paper cell no run fills is counted, not
    free. None where the paper has no such table or the agent's provider no copy of its models."""
    from reme_cli.core.config import to_dict
    from reme_cli.core.departure import is_clean
    from reme_cli.core.providers import model_copy
    from reme_cli.report.fidelity import CellCount, flatten
    from reme_cli.report.paper import PAPER_MODEL_LABELS, load_paper_tables
    from reme_cli.report.tables import paper_cells

    if spec.paper_table is None:
        return None
    paper = load_paper_tables()
    paper = paper[paper["table"] == spec.paper_table]
    agent = p.runs[0].cfg
    copies = {m: model_copy(m, agent.model.name) for m, label in PAPER_MODEL_LABELS.items()
              if label in set(paper["model"])}
    if not copies or None in copies.values():
        return None
    benchmarks = list(dict.fromkeys(paper["benchmark"]))
    clean: set[tuple[str, str, str, str]] = set()
    for copy in copies.values():
        for bench in benchmarks:
            mine = copy == agent.model.name and bench == agent.benchmark.name
            sibling = p if mine else plan(name, _sibling(overrides, copy, bench, bench != agent.benchmark.name),
                                          count_units=False)
            for job in sibling.runs:
                if not is_clean(run_departures(sibling, job)):
                    continue
                mode = job.cfg.eval.mode
                run = {"params": flatten(to_dict(job.cfg)), "mode": mode, "model": copy, "benchmark": bench,
                       "memory": job.cfg.memory.name if mode != "none" else "none"}
                clean |= paper_cells(spec, run, paper)
    labels = {PAPER_MODEL_LABELS[m] for m in copies}
    cells = paper[paper["model"].isin(labels)]
    return CellCount(len(clean), len(cells)), list(copies.values()), benchmarks


def _sibling(overrides: list[str], model: str, benchmark: str, other_benchmark: bool) -> list[str]:
    """The user's overrides for the same suite with another model (and benchmark): theirs for
    the model and, on another benchmark, theirs for the benchmark left out."""
    mine = ("model=", "llm.model=", *(("benchmark=", "benchmark.") if other_benchmark else ()))
    kept = [o for o in overrides if not o.lstrip("+~").startswith(mine)]
    return [*kept, f"model={model}", *([f"benchmark={benchmark}"] if other_benchmark else [])]

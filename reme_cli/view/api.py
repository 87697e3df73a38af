"""What the page asks for, by key, and how each answer is made. The server answers
``GET /api/<key>``; an exported file holds the answer to every key the page can ask.

    index                 every run's Overview row
    units/<run>           the run's units, column by column (task grid, unit list)
    unit/<run>/<unit>     one unit in full (``<unit>`` is its key, e.g. s0/r1/multi_turn_base_3)
    memory/<run>          the run's memory: start state, streams, items' lives
    health/<run>          the run's health measures
"""

from __future__ import annotations

from typing import Any, Callable

from reme_cli.view.health import health
from reme_cli.view.memory import memory_page
from reme_cli.view.overview import index, units_table
from reme_cli.view.runs import Catalog, Run
from reme_cli.view.unit import unit_detail

PER_RUN: dict[str, Callable[[Run], Any]] = {"units": units_table, "memory": memory_page, "health": health}


def answer(catalog: Catalog, key: str, live: bool = True) -> Any:
    """The answer to ``key``; KeyError if there is no such page."""
    if key == "index":
        return index(catalog.runs(), catalog.dirs, live, catalog.suite_order)
    kind, _, rest = key.partition("/")
    if kind in PER_RUN:
        run = catalog.run(rest)
        return run.cached(f"page:{kind}", lambda: PER_RUN[kind](run))
    if kind == "unit":
        run_id, _, unit = rest.partition("/")
        return unit_detail(catalog.run(run_id), unit)
    raise KeyError(key)


def every_key(catalog: Catalog) -> list[str]:
    """Every key the page can ask about these runs (what an export holds)."""
    keys = ["index"]
    for run in catalog.runs():
        keys += [f"{kind}/{run.id}" for kind in PER_RUN]
        keys += [f"unit/{run.id}/{t.unit}" for t in run.trials]
    return keys

"""The report's tables as data: each suite file's ``table:`` block (``configs/ablation/*.yaml``)
says its title, how a run becomes a row, the row order, and which of the paper's tables
(``data/paper_tables.csv``) holds its paper cells, so a new suite with a new table needs no
Python. A block::

    table:
      title: "Table 2: experience granularity"
      paper: table2_granularity          # paper_tables.csv's table (none: no paper column)
      rows:
        header: granularity              # the first column's name
        keys: [memory.granularity]       # run-config keys a row reads; only the runs of methods
                                         # that declare them all (report_columns) are shown
        labels: {keypoint: keypoint-level, trajectory: trajectory-level}  # values -> row, in order
        otherwise: "granularity={memory.granularity}"   # a row for any other values

Row labels: ``labels`` keys are the keys' values joined by ", "; ``otherwise`` holds
``{key}``, ``{key:d}`` (an integer) or ``{key:g}`` (a number). Values of keys listed in
``flags`` read as on / off, of keys in ``models`` as the paper's model label ("same": the
executor). ``by: method`` instead takes each method's own setting label (Table 1).
``order`` lists rows first (else the ``labels`` order); ``sort: numbers`` orders by the
numbers in a label (K=5 before K=10). ``cost``/``published``: the methods table's extra
columns. ``table: NAME`` (a string) reuses suite NAME's table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from reme_cli.core.config import config_dir
from reme_cli.core.errors import UserError
from reme_cli.report.columns import method_columns
from reme_cli.report.paper import served_model_label

BLOCK_KEYS = {"title", "paper", "rows", "cost", "published"}
ROW_KEYS = {"header", "by", "keys", "labels", "otherwise", "flags", "models", "order", "sort"}
_FIELD = re.compile(r"\{([^{}:]+)(?::([dg]))?\}")


@dataclass(frozen=True)
class TableSpec:
    """One table as its suite file declares it (the module docstring)."""

    name: str
    title: str
    row_header: str
    by_method: bool = False
    params: tuple[str, ...] = ()  # the run-config keys its rows read
    labels: Mapping[str, str] = field(default_factory=dict)
    otherwise: Optional[str] = None
    flags: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    order: tuple[str, ...] = ()  # known labels first, in this order
    numeric: bool = False  # sort rows by the numbers in their labels (overrides ``order``)
    paper_table: Optional[str] = None  # table name in paper_tables.csv; None = no paper numbers
    # The methods table: each group also shows what a task cost (the executor's tokens, the
    # longest prompt), and each row the numbers other papers published for its method.
    cost: bool = False
    published: bool = False

    def label(self, run: Any) -> Optional[str]:
        """The run's row (a pandas row of the report's joined frame); None where it has none."""
        params = run.get("params")
        params = params if isinstance(params, dict) else {}
        if self.by_method:
            return method_columns(str(run["memory"])).setting_label(run["mode"], params)
        if any(params.get(k) is None for k in self.params):
            return None
        shown = {k: self._shown(k, params[k], run) for k in self.params}
        key = ", ".join(shown.values())
        if key in self.labels:
            return self.labels[key]
        if self.otherwise is None:
            return key
        return _FIELD.sub(lambda m: _formatted(shown.get(m[1], params.get(m[1])), m[2]), self.otherwise)

    def _shown(self, key: str, value: Any, run: Any) -> str:
        if key in self.flags:
            return "on" if flag(value) else "off"
        if key in self.models:
            model = run["model"] if value == "same" else value
            return served_model_label(model) or str(model)
        return str(value)


def flag(value: object) -> bool:
    """A config switch that may arrive as bool or as text."""
    if isinstance(value, str):
        return value.strip().lower() in {"true", "1", "on", "yes"}
    return bool(value)


def _formatted(value: Any, spec: Optional[str]) -> str:
    if spec == "d":
        return str(int(float(value)))
    if spec == "g":
        return f"{float(value):g}"
    return str(value)


def numbers_in(label: str) -> tuple:
    """Sort key for labels like "K=5" or "α=5, β=0.5": their numbers, in order."""
    parts = label.replace(",", " ").replace("=", " ").split()
    return tuple(float(p) for p in parts if _is_number(p))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- reading the suite files

def _suite_path(name: str) -> Path | None:
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    candidate = config_dir() / "ablation" / f"{name}.yaml"
    return candidate if candidate.is_file() else None


def _block(name: str, seen: tuple[str, ...] = ()) -> tuple[str, dict] | None:
    """(table name, its block) of suite ``name``, following ``table: OTHER``; None if none."""
    path = _suite_path(name)
    if path is None or name in seen:
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError):  # load_suite says what is wrong with it
        return None
    block = data.get("table") if isinstance(data, dict) else None
    if isinstance(block, str):
        return _block(block, (*seen, name))
    return (Path(name).stem if path.parent == config_dir() / "ablation" else str(name), block) \
        if isinstance(block, dict) else None


def parse_spec(name: str, block: Mapping[str, Any]) -> TableSpec:
    """A ``table:`` block as a ``TableSpec``; a one-line UserError names what to fix."""
    where = f"suite {name}: table"
    rows = block.get("rows")
    if set(block) - BLOCK_KEYS or not isinstance(rows, dict) or set(rows) - ROW_KEYS:
        raise UserError(f"{where} takes {sorted(BLOCK_KEYS)} and rows: {sorted(ROW_KEYS)} "
                        f"(reme_cli/report/specs.py), not {dict(block)!r}")
    by_method = rows.get("by") == "method"
    keys = tuple(rows.get("keys") or ())
    if "title" not in block or "header" not in rows or by_method == bool(keys) \
            or rows.get("by") not in (None, "method") or rows.get("sort") not in (None, "numbers"):
        raise UserError(f"{where} needs a title, rows.header, and either rows.by: method or rows.keys "
                        "(rows.sort: numbers, if given)")
    labels = {str(k): str(v) for k, v in (rows.get("labels") or {}).items()}
    return TableSpec(name=name, title=str(block["title"]), row_header=str(rows["header"]), by_method=by_method,
                     params=keys, labels=labels, otherwise=rows.get("otherwise"),
                     flags=tuple(rows.get("flags") or ()), models=tuple(rows.get("models") or ()),
                     order=tuple(rows.get("order") or labels.values()), numeric=rows.get("sort") == "numbers",
                     paper_table=block.get("paper"), cost=bool(block.get("cost")),
                     published=bool(block.get("published")))


def table_names() -> list[str]:
    """Every packaged suite with a table of its own: the paper's tables first (by the paper's
    table names), then the others by name."""
    specs = [table_spec(p.stem) for p in sorted((config_dir() / "ablation").glob("*.yaml"))
             if _block(p.stem) is not None and _block(p.stem)[0] == p.stem]
    return [s.name for s in sorted(specs, key=lambda s: (s.paper_table is None, s.paper_table or "", s.name))]


def table_spec(name: str) -> TableSpec:
    """The table of suite ``name`` (a packaged suite's name or a suite file's path); a
    UserError lists the valid names."""
    found = _block(name)
    if found is None:
        known = sorted(p.stem for p in (config_dir() / "ablation").glob("*.yaml") if _block(p.stem) is not None)
        raise UserError(f"unknown table {name!r}; choose one of {', '.join(known)}")
    return parse_spec(*found)

"""What the report shows of a memory method: declared by the method, never inferred from its name.

A method tells the report three things (``MethodColumns``):

- ``setting``: its row in Table 1; ``{mode}`` stands for the run's mode ("ReMe ({mode})"
  gives "ReMe (fixed)" and "ReMe (dynamic)", two rows);
- ``params``: the run-config keys (flattened, e.g. ``memory.top_k``) its runs may be laid out
  by. An ablation table whose rows read some keys (Top-K reads ``memory.top_k``) shows the
  runs of the methods that declare all of them, and no others';
- ``series``: the fields of its per-unit record (``Solved.record``, stored as a trial's
  ``method``) that follow its state along a dynamic stream, each with its axis label; each
  becomes one panel of ``pool_series.png``.

Where a method's declaration comes from, first hit wins:

1. the plug-in registered under its name in ``reme_cli.core.registry.METHODS`` (built-in,
   entry point or ``module:Class``), through a ``report_columns`` class attribute: a
   ``MethodColumns``, or a plain mapping with the same keys (``{memory.KEY}`` in the setting
  stands for the run's value of that key) (so ``methods/`` need not import
   this layer), e.g. ``report_columns = {"setting": "ACE ({mode})", "params": ["memory.top_k"],
   "series": {"playbook_size": "playbook bullets"}}``;
2. none: the method's name as its setting, no ablation rows, no series.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache

from reme_cli.core.errors import UserError
from reme_cli.methods.base import find_method

MODE = "{mode}"


@dataclass(frozen=True)
class MethodColumns:
    setting: str
    params: tuple[str, ...] = ()
    series: Mapping[str, str] = field(default_factory=dict)

    def setting_label(self, mode: str, params: Mapping[str, object] | None = None) -> str:
        """The row label; ``{memory.KEY}`` stands for the run's value of that key (a method
        with variants, e.g. "DC ({memory.variant}, {mode})")."""
        # replace, not str.format: a label may hold other braces
        label = self.setting.replace(MODE, str(mode))
        for key, value in (params or {}).items():
            if key.startswith("memory.") and "{" + key + "}" in label:
                label = label.replace("{" + key + "}", str(value))
        return label


def _declared(name: str) -> object | None:
    """The plug-in's own ``report_columns``, if it can be loaded (a run of a plug-in not
    installed here still reports) and has one."""
    plugin = find_method(name)
    return plugin.report_columns if plugin is not None else None


def _coerce(name: str, declared: object) -> MethodColumns:
    if isinstance(declared, MethodColumns):
        return declared
    keys = {f.name for f in fields(MethodColumns)}
    if not isinstance(declared, Mapping) or not set(declared) <= keys or "setting" not in declared:
        raise UserError(f"memory method {name!r}: report_columns must be a mapping with 'setting' "
                        f"and optionally 'params', 'series', not {declared!r}")
    return MethodColumns(str(declared["setting"]), tuple(declared.get("params") or ()),
                         dict(declared.get("series") or {}))


@lru_cache(maxsize=None)
def method_columns(name: str) -> MethodColumns:
    """What the report shows of memory method ``name`` (see the module docstring)."""
    declared = _declared(name)
    if declared is not None:
        return _coerce(name, declared)
    return MethodColumns(str(name))


def series_labels(methods: Iterable[str]) -> dict[str, str]:
    """Axis label of every series field the given methods declare, in declaration order."""
    labels: dict[str, str] = {}
    for name in dict.fromkeys(methods):
        for key, label in method_columns(name).series.items():
            labels.setdefault(key, label)
    return labels

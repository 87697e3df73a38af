"""What a finished run shows on the console: the metrics table and the errors."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from reme_cli.bench.base import Benchmark
from reme_cli.llm.client import NO_SERVER
from reme_cli.run.records import UnitRecord

UNSANDBOXED_NOTE = "sandbox: none (benchmark.sandbox=none: the model's code ran on the host)"


def replay_notes(usage: dict[str, Any]) -> list[str]:
    """A line for the final table when no request of this session reached a server: every
    answer was replayed from the response cache, or none was asked (``usage``: the session's
    calls and cached calls, ``RunLifecycle.usage``)."""
    if not usage or usage.get("calls", 0) != usage.get("cached_calls", 0):
        return []
    n = usage.get("calls", 0)
    return [f"{NO_SERVER}: " + (f"all {n} answers were replayed from the response cache" if n
                                else "no unit was left to run")]


def sandbox_notes(bench: Benchmark) -> list[str]:
    """A line for the final table when model-written code ran on the host, unsandboxed."""
    return [UNSANDBOXED_NOTE] if bench.sandbox == "none" else []


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def own_scores(metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-seed scores a benchmark declared beside Avg@k / Pass@k (e.g. AppWorld's SGC),
    read from metrics.json's shape: a mean over seeds that is not one of the paper's two."""
    k = metrics.get("k")
    return {key: value for key, value in metrics.items()
            if key not in (f"avg@{k}", f"pass@{k}") and isinstance(value, dict) and {"mean", "std", "n_seeds"} <= set(value)}


def metrics_table(metrics: dict[str, Any], title: str, variants: dict[str, dict[str, Any]] | None = None,
                  notes: Sequence[str] = ()) -> Table:
    """One row per metric variant (e.g. final and first-attempt success); ``notes`` end the
    caption."""
    k = metrics["k"]
    stops = metrics.get("stop_reasons") or {}
    caption = ["stop reasons: " + ", ".join(f"{r} {n}" for r, n in stops.items())] if stops else []
    caption += [f"{key.upper()} % {_pct(value['mean'])} ± {_pct(value['std'])}"
                for key, value in own_scores(metrics).items()]
    caption += notes
    table = Table(title=title, caption="; ".join(caption) or None)
    table.add_column("success")
    table.add_column(f"Avg@{k} % (mean ± std)", justify="right")
    table.add_column(f"Pass@{k} % (mean ± std)", justify="right")
    table.add_column("seeds", justify="right")
    table.add_column("tasks", justify="right")
    table.add_column("units", justify="right")
    table.add_column("errors", justify="right")
    for label, m in (variants or {"final": metrics}).items():
        if f"avg@{k}" not in m:  # nothing scored (no unit, or every unit errored)
            table.add_row(label, "-", "-", "0", str(m.get("tasks", 0)), str(m.get("units", 0)),
                          str(m.get("errors", 0)))
            continue
        avg, pas = m[f"avg@{k}"], m[f"pass@{k}"]
        table.add_row(
            label,
            f"{_pct(avg['mean'])} ± {_pct(avg['std'])}",
            f"{_pct(pas['mean'])} ± {_pct(pas['std'])}",
            str(avg["n_seeds"]), str(m["tasks"]), str(m["units"]), str(m["errors"]),
        )
    return table


def errors_summary(trials: list[UnitRecord], limit: int = 10) -> str | None:
    """Errored units grouped by message, most frequent first (plain lines: they must survive
    log files and narrow terminals whole), or None if there are none."""
    failed = [(t.error.splitlines()[0] if t.error.strip() else "(no message)", t.unit) for t in trials if not t.ok]
    if not failed:
        return None
    messages = [m for m, _ in failed]
    example: dict[str, str] = {}
    for message, unit in failed:
        example.setdefault(message, unit)
    counts = Counter(messages)
    lines = [f"errors by message ({len(messages)} units):"]
    lines += [f"  {n:>5} x {message[:300]}  (e.g. {example[message]})" for message, n in counts.most_common(limit)]
    if len(counts) > limit:
        rest = counts.most_common()[limit:]
        lines.append(f"  {sum(n for _, n in rest):>5} x ({len(rest)} other messages)")
    return "\n".join(lines)


def identical_runs(trials: list[UnitRecord], runs: int) -> dict[str, int] | None:
    """With one seed on every call (``model.sampling.seed``): how many (seed, task) pairs got
    the same replies in all ``runs`` of theirs: a provider that honours the seed answers the
    k runs of a task alike, and Pass@k = Avg@k there. None with fewer than two runs."""
    if runs < 2:
        return None
    replies: dict[tuple[int, str], set[str]] = {}
    counts: dict[tuple[int, str], int] = {}
    for t in trials:
        if not t.ok or t.trajectory is None:
            continue
        steps = [[s.get("text"), [(c.get("name"), c.get("arguments")) for c in s.get("calls") or []], s.get("code"),
                  s.get("reasoning")] for turn in t.trajectory.get("turns", []) for s in turn]
        key = (t.seed, t.task_id)
        replies.setdefault(key, set()).add(json.dumps(steps, sort_keys=True, default=str))
        counts[key] = counts.get(key, 0) + 1
    whole = [k for k, n in counts.items() if n >= runs]
    return {"tasks": sum(len(replies[k]) == 1 for k in whole), "of": len(whole)}


def identical_runs_note(found: dict[str, int] | None, runs: int, seed: int) -> list[str]:
    if not found or not found["tasks"]:
        return []
    return [f"{found['tasks']} of {found['of']} tasks came back identical in all {runs} runs: the provider "
            f"honoured seed={seed} there, so Pass@{runs} = Avg@{runs} on them"]

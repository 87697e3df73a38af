"""The Overview page's data: one row per run (Avg@k / Pass@k with intervals, status, fidelity
notes), grouped by the suite it belongs to, and each run's units as a compact table (the
task grid and the unit list are drawn from it)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from reme_cli.core.config import config_dir, experiment_memory
from reme_cli.core.io import now
from reme_cli.core.run_log import flatten, read_pool_header
from reme_cli.report.frames import unit_columns, unit_row
from reme_cli.report.metrics import declared_reducers, reducer_columns, run_metrics
from reme_cli.report.order import natural_key
from reme_cli.report.stats import task_interval
from reme_cli.view.runs import Run, SuiteOrder


def units_frame(run: Run) -> pd.DataFrame:
    return pd.DataFrame([unit_row(run.id, t) for t in run.trials], columns=unit_columns())


def own_means() -> list[str]:
    """The means of the per-seed metrics benchmarks declare (AppWorld's ``sgc_mean``)."""
    return [c for c in reducer_columns(declared_reducers()) if c.endswith("_mean")]


def scores(run: Run) -> dict[str, Any]:
    """The run's metrics as the report computes them, and a task-bootstrap interval of each."""
    units = units_frame(run)
    frame = pd.DataFrame([{"run_id": run.id, "benchmark": run.config.benchmark, "seeds": run.config.seeds,
                           "k": run.config.k, "tasks": len(run.manifest.task_ids) or units["task_id"].nunique(),
                           "status": run.manifest.status}])
    row = run_metrics(units, frame).iloc[0].to_dict()
    scored = units[~units["error"].eq(True)]
    out = {k: _num(row[k]) for k in ("avg_mean", "avg_std", "pass_mean", "pass_std", "first_avg_mean",
                                     "first_pass_mean", "n_seeds", "n_tasks", "n_units", "n_errors",
                                     "expected_units", "n_retried", "tokens_per_unit",
                                     *own_means())}
    out["partial"] = bool(row["partial"])
    for metric in ("avg", "pass"):
        lo, hi = task_interval(scored, metric) if len(scored) else (math.nan, math.nan)
        out[f"{metric}_ci"] = [_num(lo), _num(hi)]
    return out


def _num(x: Any) -> Any:
    """JSON has no NaN: a missing number is null."""
    if x is None:
        return None
    if isinstance(x, float) and math.isnan(x):
        return None
    return x.item() if hasattr(x, "item") else x


PAPER_TEXT = "paper_text"  # the experiment preset holding the paper's words where the authors ran otherwise


def _paper_text_keys() -> dict[str, Any]:
    """The keys ``experiment=paper_text`` sets, flattened: where the paper's text and what the
    authors ran differ (docs/fidelity.md)."""
    try:
        data = yaml.safe_load((config_dir() / "experiment" / f"{PAPER_TEXT}.yaml").read_text()) or {}
    except OSError:
        return {}
    return {k: v for k, v in flatten(data).items() if k not in ("defaults", "experiment")}


def fidelity_notes(run: Run) -> list[str]:
    """What a reader must know before comparing the run's numbers: who scored it, which data,
    where its memory started, and where it follows the paper's text rather than what the
    authors ran."""
    cfg, notes = run.config, []
    if run.manifest.test_double:
        notes.append("scripted server (a test double): not a model result")
    if cfg["model"].get("name") == "local":
        notes.append("embedded 135M CPU model: smoke-level scores")
    bench = cfg.get("benchmark") or {}
    if bench.get("release"):
        notes.append(f"benchmark.release={bench['release']}")
    if cfg.get("experiment") not in (None, "default"):
        notes.append(f"experiment={cfg['experiment']}")
    if run.config.mode != "none":
        notes.append(_start_note(run))
    if run.config.method == experiment_memory(PAPER_TEXT):  # the paper's method, whose words it holds
        values = flatten(cfg)
        paper = [k for k, v in _paper_text_keys().items()
                 if k.startswith("memory.") and values.get(k) == v and run.config.mode == "dynamic"]
        if paper:
            notes.append("the paper's text on " + ", ".join(k.removeprefix("memory.") for k in paper))
    return notes


def _start_note(run: Run) -> str:
    pool = run.config.pool
    if not pool:
        return "starts without a pool (the method's own empty or initial memory)"
    where = run.start_state_dir()
    header = read_pool_header(where) if where else None
    built_by = header.built_by if header else {}
    source = built_by.get("source") or built_by.get("reembedded_from") or built_by.get("rekeyed_from")
    return f"starts from pool {Path(pool).name}" + (f" ({source})" if source else "") + \
        ("" if where else " (not found from here)")


def run_row(run: Run) -> dict[str, Any]:
    cfg = run.config
    return {
        "id": run.id, "label": run.label, "setting": run.setting, "path": str(run.path),
        "suite": str(run.suite) if run.suite else None, "suite_name": run.suite.name if run.suite else None,
        "benchmark": cfg.benchmark, "model": cfg.model, "mode": run.config.mode,
        "memory": run.config.method, "k": cfg.k, "seeds": cfg.seeds,
        "status": run.manifest.status, "test_double": run.manifest.test_double,
        "fidelity": fidelity_notes(run), "streams": [s.name for s in run.streams()],
        "has_memory": run.config.mode != "none",
        **run.cached("scores", lambda: scores(run)),
    }


def _order(runs: list[Run], suite_order: SuiteOrder | None) -> list[Run]:
    """Suites together, each in the order its file lists its variants (``suite_order``); lone
    runs by name."""
    ranks: dict[Path, dict[str, int]] = {}
    for run in runs:
        if run.suite and run.suite not in ranks:
            try:
                ranks[run.suite] = {label: i for i, label in enumerate(suite_order(run.suite) if suite_order else [])}
            except Exception:  # a suite file of the user's, not found by name here: name order
                ranks[run.suite] = {}
    return sorted(runs, key=lambda r: (str(r.suite or ""), ranks.get(r.suite, {}).get(r.label, math.inf),
                                       natural_key(r.label)))


def index(runs: list[Run], dirs: list[Path], live: bool, suite_order: SuiteOrder | None = None) -> dict[str, Any]:
    """The page's entry: every run's row, in order, and what the page was made from."""
    return {"runs": [run_row(r) for r in _order(runs, suite_order)], "sources": [str(d) for d in dirs],
            "generated_at": now(), "live": live}


def units_table(run: Run) -> dict[str, list]:
    """The run's units, column by column (compact for 1,800 units): what the task grid, the
    unit list and the comparison of two runs read."""
    cols: dict[str, list] = {k: [] for k in ("unit", "task", "seed", "run", "position", "success", "first",
                                             "attempts", "stop", "steps", "wall_s", "tokens", "retrieved",
                                             "best_score", "retrieval_s")}
    for t in sorted(run.trials, key=lambda t: (t.seed, t.run, t.position, natural_key(t.task_id))):
        cols["unit"].append(t.unit)
        cols["task"].append(t.task_id)
        cols["seed"].append(t.seed)
        cols["run"].append(t.run)
        cols["position"].append(t.position)
        cols["success"].append(None if not t.ok else int(t.success))  # null: the unit errored
        cols["first"].append(None if not t.ok else int(t.first_success if t.attempts > 1 else t.success))
        cols["attempts"].append(t.attempts)
        cols["stop"].append(t.stop_reason)
        cols["steps"].append(t.interactions)
        cols["wall_s"].append(t.wall_s)
        cols["tokens"].append((t.tokens.get("prompt", 0) + t.tokens.get("completion", 0)) if t.tokens else None)
        cols["retrieved"].append(len(t.retrieved_ids))
        cols["best_score"].append(max(t.retrieval_scores) if t.retrieval_scores else None)
        cols["retrieval_s"].append(t.retrieval_s)
    return cols

"""`reme ablate SUITE`: one paper table (or sweep) as a suite of ordinary runs.

A suite is data (``configs/ablation/SUITE.yaml``, or a path to such a file):

    description: "..."
    table: topk                        # the report layout: a suite's table, or a table: block (reme_cli/report/specs.py)
    overrides: [...]                   # for every job, before the user's own
    benchmark_overrides:               # ... and these for the benchmark the job runs
      bfcl_v3: [benchmark.release=paper]
    start: released                    # which form of a two-form pool (below) the suite uses;
                                       # the command line overrides it: suite.start=built
    pools:                             # pools to build, by name: build-pool overrides
      reme: {released: official, built: []}   # two forms: the released pool, or one built here
      amem: [memory=amem]              # a pool's memory method (default reme) is its variants' too
      released: official               # the authors' released pool of this benchmark and model
      released_8b: official:bfcl/qwen3-8b   # ... or one named (reme pool import --list)
      mine: []                         # always built here
    variants:                          # runs, by name
      k0: {mode: fixed, pool: reme, overrides: [memory.top_k=0]}
      ab: {mode: dynamic, pool: reme, overrides: ["memory.deletion.alpha=3,5,10"]}   # swept like -m
      online: {mode: dynamic, memory: ace}   # no pool: a dynamic run from the method's empty memory

Every pool is built (or, for a released one, imported) once under ``SUITE_DIR/pools/NAME`` and shared by the variants that
name it; every variant (each point of a swept one) is a normal resumable run directory
under ``SUITE_DIR/runs/``. A suite with two-form pools lives in one directory per start
(``SUITE_DIR`` ends in ``-released`` or ``-built``), so the two starting points never share a
pool or a run and can be reported side by side. Everything is composed and validated before
anything runs, so ``--dry-run`` prints the exact plan and a bad suite fails before any LLM time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from reme_cli.bench.registry import make_benchmark
from reme_cli.commands.jobs import expand, job_label, swept_keys
from reme_cli.core.config import Config, TrackerCfg, compose, config_dir, experiment_memory
from reme_cli.core.errors import EXIT_UNIT_ERRORS, UserError
from reme_cli.core.registry import DEFAULT_METHOD

MODES = {"none", "fixed", "dynamic"}


# Whose released pools a suite's ``official`` pools are, and the method of a pool that names
# none: the paper's ablations start from its authors' pools (the registry's default method),
# read through the method's ``releases`` hook as `reme pool import` reads them.


def _releases() -> Any:
    from reme_cli.commands.pool import releases_of

    return releases_of(DEFAULT_METHOD)


# A two-form pool's forms: the authors' released pool, or one built here from training trajectories.
STARTS = ("released", "built")
SUITE_PREFIX = "suite."  # suite.KEY=VALUE on the command line sets the suite file's KEY
SUITE_KEYS = {"start"}


@dataclass
class PoolJob:
    name: str
    cfg: Config
    overrides: list[str]  # what `reme build-pool` needs to rebuild cfg (a cluster job does)
    units: int  # training trajectories to sample
    max_calls: int  # executor calls at most (units x max_interactions)
    source: str | None = None  # official:NAME: a released pool, imported (no LLM calls), not built
    start: str = "built"  # released | built: what the plan table shows


@dataclass
class RunJob:
    label: str
    variant: str
    pool: str | None
    cfg: Config
    overrides: list[str]  # what `reme eval` needs to rebuild cfg
    units: int
    max_calls: int
    varies: tuple[str, ...] = ()  # the keys its variant sets: what its table varies


@dataclass
class SuitePlan:
    name: str
    description: str
    table: str
    path: Path  # the suite directory
    pools: list[PoolJob] = field(default_factory=list)
    runs: list[RunJob] = field(default_factory=list)
    start: str | None = None  # the suite's start if it has two-form pools
    notes: list[str] = field(default_factory=list)  # how the plan was made, where it is not from the data

    @property
    def units(self) -> int:
        return sum(j.units for j in self.pools) + sum(j.units for j in self.runs)

    @property
    def max_calls(self) -> int:
        return sum(j.max_calls for j in self.pools) + sum(j.max_calls for j in self.runs)

    @property
    def tracker(self) -> TrackerCfg:
        """Where the suite's runs are also logged (the same for every job: the user's overrides)."""
        jobs = [*self.runs, *self.pools]
        return jobs[0].cfg.tracker if jobs else TrackerCfg()

    def join(self, parent: str | None) -> None:
        """Make every job a run of the suite's tracker run ``parent`` (``tracker.parent``)."""
        if parent is None:
            return
        for job in [*self.pools, *self.runs]:
            job.cfg.tracker.parent = parent
            job.overrides = [*job.overrides, f"tracker.parent={parent}"]


def suite_file(name: str) -> Path:
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    candidate = config_dir() / "ablation" / f"{name}.yaml"
    if candidate.is_file():
        return candidate
    known = sorted(p.stem for p in (config_dir() / "ablation").glob("*.yaml"))
    raise UserError(f"unknown suite {name!r}; choose one of {known}, or give a path to a suite file")


def load_suite(name: str) -> dict[str, Any]:
    path = suite_file(name)
    where = f"suite {path}"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UserError(f"{where} is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:  # PyYAML composes nested nodes recursively
        raise UserError(f"{where} is not valid YAML: nested too deep") from None
    if not isinstance(data, dict):
        raise UserError(f"{where} must be a mapping (description, table, pools, variants), "
                        f"not a {type(data).__name__}")
    if not isinstance(data.get("variants"), dict) or not data["variants"]:
        raise UserError(f"{where} has no variants")
    pools = data.get("pools") or {}
    if not isinstance(pools, dict):
        raise UserError(f"{where}: pools must map a pool name to a list of build-pool overrides "
                        f"or a released pool ('official' or '{_releases().prefix}NAME')")
    for pname, spec in pools.items():
        _check_pool(where, pname, spec)
    two_form = [p for p, spec in pools.items() if isinstance(spec, dict)]
    if two_form and data.get("start") not in STARTS:
        raise UserError(f"{where}: pool {two_form[0]} has two forms, so the suite needs start: "
                        f"{' | '.join(STARTS)}, not {data.get('start')!r}")
    if not two_form and "start" in data:
        raise UserError(f"{where}: start: {data['start']!r} chooses nothing: no pool has the two forms "
                        "{released: ..., built: [...]}")
    for vname, variant in data["variants"].items():
        if not isinstance(variant, dict) or variant.get("mode") not in MODES:
            raise UserError(f"{where}: variant {vname} needs mode: none | fixed | dynamic")
        if not isinstance(variant.get("overrides") or [], list):
            raise UserError(f"{where}: variant {vname}: overrides must be a list")
        # A dynamic run may start from nothing (memory: NAME, no pool): ACE online, DC and
        # ReasoningBank learn at test time from an empty memory, as their authors run them.
        empty_start = variant["mode"] == "dynamic" and "pool" not in variant and isinstance(variant.get("memory"), str)
        if variant["mode"] != "none" and variant.get("pool") not in pools and not empty_start:
            raise UserError(f"{where}: variant {vname} (mode {variant['mode']}) needs a pool from {sorted(pools)}"
                            + (" (or, in mode dynamic, memory: NAME to start from an empty memory)"
                               if variant["mode"] == "dynamic" else ""))
        if "memory" in variant and not empty_start:
            raise UserError(f"{where}: variant {vname}: memory: names the method of a dynamic run with no pool; "
                            "a run with a pool takes its pool's method")
        unknown = set(variant) - {"mode", "pool", "memory", "overrides"}
        if unknown:
            raise UserError(f"{where}: variant {vname} has unknown keys {sorted(unknown)}")
    if not isinstance(data.setdefault("overrides", []), list):
        raise UserError(f"{where}: overrides must be a list")
    if not isinstance(data.setdefault("benchmark_overrides", {}), dict):
        raise UserError(f"{where}: benchmark_overrides must map a benchmark name to a list of overrides")
    table = data.setdefault("table", path.stem)
    if isinstance(table, dict):  # the suite's own table: checked now, laid out by `reme report`
        from reme_cli.report.specs import parse_spec

        data["table"] = path.stem if path.parent == config_dir() / "ablation" else str(path.resolve())
        parse_spec(data["table"], table)
    data.setdefault("description", path.stem)
    data["name"] = path.stem
    data["pools"] = pools
    return data


def _is_released(spec: Any) -> bool:
    return isinstance(spec, str) and (spec == "official" or spec.startswith(_releases().prefix))


def _check_pool(where: str, pname: str, spec: Any) -> None:
    if isinstance(spec, dict):
        if set(spec) != set(STARTS) or not _is_released(spec["released"]) \
                or not isinstance(spec["built"], (list, type(None))):
            raise UserError(f"{where}: pool {pname}'s two forms must be {{released: official or "
                            f"'{_releases().prefix}NAME', built: [build-pool overrides]}}, not {spec!r}")
        return
    if not (_is_released(spec) or isinstance(spec, (list, type(None)))):
        raise UserError(f"{where}: pool {pname} must be a list of build-pool overrides, "
                        f"'official' or '{_releases().prefix}NAME', or {{released: ..., built: [...]}}, not {spec!r}")


def suite_settings(suite: dict[str, Any], overrides: list[str]) -> list[str]:
    """Apply the command line's ``suite.KEY=VALUE`` to ``suite``; the other overrides, for the runs."""
    rest = []
    for o in overrides:
        key, eq, value = o.lstrip("+").partition("=")
        if not key.startswith(SUITE_PREFIX):
            rest.append(o)
            continue
        key = key[len(SUITE_PREFIX):]
        if not eq or key not in SUITE_KEYS:
            raise UserError(f"{o}: a suite takes {', '.join(SUITE_PREFIX + k + '=...' for k in sorted(SUITE_KEYS))}")
        if "start" not in suite:
            raise UserError(f"{o}: suite {suite['name']} has no start to choose; every pool it uses is "
                            f"always built here or always released (see its file's comments)")
        if value not in STARTS:
            raise UserError(f"{o}: choose {' or '.join(SUITE_PREFIX + 'start=' + s for s in STARTS)}")
        suite[key] = value
    return rest


def pool_memory(pool_spec: list[str] | str) -> str:
    """The memory method a suite's pool is built for (its last ``memory=``; the default method
    if none, and for the authors' released pools)."""
    named = [o.split("=", 1)[1] for o in pool_spec if o.startswith("memory=")] if isinstance(pool_spec, list) else []
    return named[-1] if named else DEFAULT_METHOD


def _units(cfg: Config, samples: int | None = None, notes: list[str] | None = None) -> tuple[int, int]:
    """Units and executor calls of one job. A benchmark that can plan without its data
    (``plan_size``: AppWorld from its official split sizes) says so in ``notes``."""
    bench = make_benchmark(cfg.benchmark)
    planned = bench.plan_size()
    if planned is None:
        tasks = len(bench.task_ids())
    else:
        tasks, note = planned
        if note and notes is not None and note not in notes:
            notes.append(note)
    units = tasks * (samples if samples is not None else cfg.eval.seeds * cfg.eval.runs)
    return units, units * cfg.benchmark.max_interactions


def _for_method(method: str | None, overrides: list[str]) -> list[str]:
    """``overrides`` for a run of ``method`` (None: a run without memory, which takes them
    all): an ``experiment=X`` whose preset selects another method (``experiment=paper_text``
    holds the words of the paper's method) is left out, so the suite's other methods run as
    they are under it."""
    if method is None:
        return overrides
    return [o for o in overrides
            if not (o.startswith("experiment=") and experiment_memory(o.split("=", 1)[1]) not in (None, method))]


def plan(name: str, overrides: list[str], only: list[str] | None = None, count_units: bool = True) -> SuitePlan:
    """The suite's jobs; ``only``: just these run labels (one cluster job each) and the
    pools they need; ``count_units=False``: the jobs' configs only, their units left at 0
    (no split is read)."""
    from reme_cli.run.cost import build_shape

    suite = load_suite(name)
    overrides = suite_settings(suite, overrides)
    count = _units if count_units else (lambda cfg, samples=None, notes=None: (0, 0))
    start = suite.get("start")
    # A two-form pool is, from here on, the form the suite starts from.
    forms = {p for p, spec in suite["pools"].items() if isinstance(spec, dict)}
    suite["pools"] = {p: spec[start] if p in forms else spec for p, spec in suite["pools"].items()}
    used = {v.get("pool") for v in suite["variants"].values() if v["mode"] != "none"} - {None}
    memory = {pname: pool_memory(suite["pools"][pname] or []) for pname in suite["pools"]}
    # The user's memory.* overrides are the suite method's keys: validated against its schema
    # wherever no memory is named (memory=none has none of them).
    own = next((memory[p] for p in suite["pools"] if p in used), DEFAULT_METHOD)
    memory_head = [f"memory={own}"] if any(o.lstrip("+~").startswith("memory.") for o in overrides) else []
    base = compose([*memory_head, *suite["overrides"], *overrides])  # where the suite lives
    extra = suite["benchmark_overrides"].get(base.benchmark.name, [])
    overrides = [*suite["overrides"], *extra, *overrides]  # the user's win
    if extra:  # composed again only when the benchmark adds its own
        base = compose([*memory_head, *overrides])
    root = Path(base.runs_root) / "ablate" / "-".join(
        [suite["name"], base.benchmark.name, base.model.name, *([start] if start else [])])
    out = SuitePlan(suite["name"], suite["description"], suite["table"], root, start=start)
    # The suite's own summarizers are the agent's provider's (Table 4's 14B / 32B rows).
    suite["pools"] = {p: follow_provider(spec, base.model.name, out.notes) if isinstance(spec, list) else spec
                      for p, spec in suite["pools"].items()}

    for pname in [p for p in suite["pools"] if p in used]:
        spec = suite["pools"][pname]
        if isinstance(spec, str):
            try:
                source = (_releases().name_for(base.benchmark.name, base.model.same_as or base.model.name)
                          if spec == "official" else spec)
                _releases().source(source)  # a bad name fails the plan, before anything runs
            except UserError as exc:
                if pname not in forms:
                    raise
                raise UserError(f"{exc}; build ReMe's pool here instead: suite.start=built") from None
            job_overrides = [f"memory={DEFAULT_METHOD}", *overrides, f"out_dir={root / 'pools' / pname}"]
            out.pools.append(PoolJob(pname, compose(job_overrides), job_overrides, 0, 0, source=source,
                                     start="released"))
            continue
        job_overrides = ["benchmark.split=train", f"memory={memory[pname]}", *_for_method(memory[pname], overrides),
                         *(suite["pools"][pname] or []), f"out_dir={root / 'pools' / pname}"]
        cfg = compose(job_overrides)
        units, calls = count(cfg, samples=build_shape(cfg, 0.0)[0], notes=out.notes)  # build.samples, or ACE's epochs
        out.pools.append(PoolJob(pname, cfg, job_overrides, units, calls))

    for vname, variant in suite["variants"].items():
        extra = follow_provider(list(variant.get("overrides") or []), base.model.name, out.notes)
        swept = swept_keys(extra)
        for job in expand(extra):
            label = job_label(vname, job, swept)
            head = [f"eval.mode={variant['mode']}"]
            method: str | None = None  # a run without memory
            if variant.get("memory"):  # a dynamic run from an empty memory
                method = variant["memory"]
                head += [f"memory={method}"]
            elif variant["mode"] != "none":
                method = memory[variant["pool"]]
                head += [f"memory={method}", f"memory.pool={root / 'pools' / variant['pool']}"]
            else:
                head += memory_head
            job_overrides = [*head, *_for_method(method, overrides), *job, f"out_dir={root / 'runs' / label}"]
            cfg = compose(job_overrides)
            units, calls = count(cfg, notes=out.notes)
            varies = tuple(o.lstrip("+~").split("=", 1)[0] for o in job)
            out.runs.append(RunJob(label, vname, variant.get("pool"), cfg, job_overrides, units, calls, varies))
    if only:
        unknown = sorted(set(only) - {j.label for j in out.runs})
        if unknown:
            raise UserError(f"--only {', '.join(unknown)}: no such run in suite {name}; "
                            f"choose from {[j.label for j in out.runs]}")
        out.runs = [j for j in out.runs if j.label in only]
        out.pools = [j for j in out.pools if j.name in {r.pool for r in out.runs}]
    return out


def follow_provider(overrides: list[str], model: str, notes: list[str]) -> list[str]:
    """A suite file's ``summarizer=NAME`` and ``summarizer.name=NAME`` at the provider of the
    agent's model config ``model`` (``core/providers.py``): under a hosted model the same
    provider's summarizer; one with no copy there stays as named, and ``notes`` says so."""
    from reme_cli.core.providers import summarizer_copy

    out = []
    for o in overrides:
        key, eq, value = o.partition("=")
        if eq and key.lstrip("+~") in ("summarizer", "summarizer.name") and value != "same":
            copy = summarizer_copy(value, model)
            if copy is None and key.lstrip("+~") == "summarizer":
                note = f"summarizer={value} has no copy at model={model}'s provider: it is served as named"
                if note not in notes:
                    notes.append(note)
            o = f"{key}={copy or value}"
        out.append(o)
    return out


def _max_calls(p: SuitePlan) -> dict[int, int]:
    """Executor calls at most per job (by id): every trial, retries included, runs to
    benchmark.max_interactions."""
    from reme_cli.run.cost import max_executor_calls

    out = {id(j): 0 if j.source else max_executor_calls(j.cfg, j.units, build=True) for j in p.pools}
    out.update({id(j): max_executor_calls(j.cfg, j.units) for j in p.runs})
    return out


def run_departures(p: SuitePlan, job: RunJob) -> list[str]:
    """Where the run departs from the authors' setup, each with its level (report/fidelity.py)."""
    from reme_cli.core.config import to_dict
    from reme_cli.report.fidelity import departures, flatten

    pool = next((j for j in p.pools if j.name == job.pool), None)
    start = None if pool is None else ("released" if pool.source else "built")
    pool_params = flatten(to_dict(pool.cfg)) if pool is not None and not pool.source else None
    return departures(flatten(to_dict(job.cfg)), pool=start, varied=job.varies, pool_params=pool_params)


def run_fidelity(p: SuitePlan, job: RunJob) -> str:
    """The fidelity column: where the run departs from the authors' setup."""
    from reme_cli.report.fidelity import fidelity_text

    return fidelity_text(run_departures(p, job))


def fidelity_table(p: SuitePlan) -> Table:
    """Per run: where it departs from the authors' setup, or "authors' setup"."""
    table = Table(title="fidelity: departures from the authors' setup (docs/fidelity.md)")
    table.add_column("run")
    table.add_column("departs from the authors' setup in", overflow="fold")
    for j in p.runs:
        table.add_row(j.label, run_fidelity(p, j))
    table.caption = ("the keys a run's table varies are not departures; the embedding is named where it is "
                     "not the authors' text-embedding-v4, and what reme keeps apart on purpose wherever a run "
                     "has it (docs/fidelity.md, \"Named, not changed\")")
    return table


def plan_table(p: SuitePlan) -> Table:
    table = Table(title=f"reme ablate {p.name}: {p.description}  ({p.path})")
    for col in ("step", "name", "mode", "pool", "start", "summarizer", "units", "LLM calls (at most)"):
        table.add_column(col, justify="right" if col in ("units", "LLM calls (at most)") else "left",
                         overflow="fold")  # a released pool's name whole, never cut with an ellipsis
    starts = {j.name: j.start for j in p.pools}
    most = _max_calls(p)
    for j in p.pools:
        step, pool = ("import pool", j.source) if j.source else ("build pool", "-")
        table.add_row(step, j.name, "-", pool, j.start, "-" if j.source else summarizer_of(j.cfg), str(j.units),
                      str(most[id(j)]))
    for j in p.runs:
        table.add_row("eval", j.label, j.cfg.eval.mode, j.pool or "-", starts.get(j.pool, "-"), summarizer_of(j.cfg),
                      str(j.units), str(most[id(j)]))
    other = next(s for s in STARTS if s != p.start) if p.start else None
    table.caption = (f"{len(p.pools)} pool(s) to build or import, {len(p.runs)} run(s), {p.units} units, "
                     f"at most {sum(most.values())} executor LLM calls (units x trials x benchmark.max_interactions; "
                     "the estimate below adds summarizer calls)"
                     + (f"; start: {p.start} (suite.start={other} for the other)" if p.start else "")
                     + "".join(f"; {note}" for note in p.notes))
    return table


def summarizer_of(cfg: Config) -> str:
    """The plan's summarizer column: the model that summarizes for a job where it is not the
    agent (a run on a built pool names the pool's, as its row's summarizer.name)."""
    return "-" if cfg.summarizer.name == "same" or cfg.memory.name == "none" else cfg.summarizer.name


def cost_table(p: SuitePlan, assumptions: Any) -> Table:
    """Expected calls, tokens, wall time and GPU-hours per job and in all
    (``reme_cli/run/cost.py``; ``assumptions``: its ``Assumptions``)."""
    from reme_cli.run import cost

    def fmt(x: float | None, digits: int = 0) -> str:
        return "?" if x is None else f"{x:,.{digits}f}"

    table = Table(title="estimate (expected counts; cost.KEY=VALUE overrides an assumption)")
    for col in ("name", "executor calls", "summarizer calls", "tokens (M)", "wall (h)", "GPU-h", "cost"):
        table.add_column(col, justify="left" if col == "name" else "right")
    totals = {"executor": 0.0, "summarizer": 0.0, "tokens": 0.0, "wall_h": 0.0, "gpu_h": 0.0}
    unknown, sources = False, set()
    money = HostedMoney()
    jobs = [(f"pool {j.name}", j.cfg, j.units, True,
             cost.build_calls(j.cfg, j.units, j.units // cost.build_shape(j.cfg, 0.0)[0], assumptions))
            for j in p.pools if not j.source]
    jobs += [(j.label, j.cfg, j.units, False, cost.run_calls(j.cfg, j.units, assumptions)) for j in p.runs]
    for name, cfg, units, build, calls in jobs:
        based = cost.basis(cfg, assumptions)  # a kept `reme check` measurement, else the assumptions
        row = cost.as_row(cost.estimate(cfg, calls, based.assumptions, based.rates, units, build))
        if cost.hosted(cfg):
            money.add(name, cfg, row, build, based.assumptions)
        elif based.rates is None:
            unknown = True
        else:
            sources.add(f"{based.source}, {cfg.llm.concurrency or 'adaptive'} in flight")
        for key in totals:
            totals[key] += row[key] or 0.0
        table.add_row(name, fmt(row["executor"]), fmt(row["summarizer"]), fmt(row["tokens"] / 1e6, 1),
                      fmt(row["wall_h"], 1), "-" if cost.hosted(cfg) else fmt(row["gpu_h"], 1),
                      money.cell(row) if cost.hosted(cfg) else "-")
    table.columns[-1].header = money.header()
    a = assumptions
    table.caption = (
        f"in all: {totals['executor'] + totals['summarizer']:,.0f} LLM calls ({totals['executor']:,.0f} executor, "
        f"{totals['summarizer']:,.0f} summarizer), {totals['tokens'] / 1e6:,.1f}M tokens, "
        + ("wall time and GPU-hours unknown for a model without rates (cost.calibration=FILE from "
           "scripts/bench_vllm.py, or cost.tokens_per_s and cost.prompt_tokens_per_s)" if unknown else
           f"{totals['wall_h']:,.1f} h wall, {totals['gpu_h']:,.1f} GPU-hours, jobs one after another")
        + f". Assumed: {a.calls_per_episode:g} calls per episode, success rate {a.success_rate:g}, "
        + "".join(f"{a.own.get(name, g.default):g} {g.label}, " for name, g in _guesses(p).items())
        + f"{a.prompt_tokens:g}+{a.completion_tokens:g} tokens "
        f"per executor call ({a.prefix_cached_share:g} of the prompt prefix-cached), "
        f"{a.summarizer_prompt_tokens:g}+{a.summarizer_completion_tokens:g} per summarizer call"
        + (f"; rates: {'; '.join(sorted(sources))}" if sources else "")
        + money.notes())
    return table


class HostedMoney:
    """The dry run's hosted part: the cost column in each price list's own currency, the
    prices and their sources, and which bound sets each hosted job's hours."""

    def __init__(self) -> None:
        from reme_cli.llm.spend import Prices

        self._prices_of = Prices.of
        self.total: dict[str, float] = {}
        self.unpriced = False
        self.prices: set[str] = set()
        self.limits: set[str] = set()
        self.bounds: dict[str, list[str]] = {}  # bound -> the jobs it sets the hours of
        self.answers: set[str] = set()  # the seconds an answer each job assumes, and whence

    def add(self, name: str, cfg: Any, row: dict[str, Any], build: bool, a: Any) -> None:
        from reme_cli.llm.inflight import most_in_flight
        from reme_cli.run.cost import embeds

        if row["cost"] is None:
            self.unpriced = True
        for amount_currency, amount in (row["cost"] or {}).items():
            self.total[amount_currency] = self.total.get(amount_currency, 0.0) + amount
        if (price := self._prices_of(cfg.model.price)) is not None:
            self.prices.add(f"{cfg.model.name}: {price.describe()}")
        if embeds(cfg, build) and (price := self._prices_of(cfg.embedding.price, input_only=True)) is not None:
            self.prices.add(f"embedding {cfg.embedding.model}: {price.input:g} {price.currency} per 1M tokens "
                            f"({price.source or 'source not given'}, {price.date or 'undated'})")
        most = most_in_flight(cfg.llm.concurrency)
        flight = f"{most} in flight" if cfg.llm.concurrency else f"adaptive in flight (at most {most})"
        self.limits.add(f"{cfg.llm.rpm or '-'} requests and {cfg.llm.tpm or '-'} tokens per minute, {flight}")
        self.bounds.setdefault(row["bound"], []).append(name)
        self.answers.add(f"{a.hosted_call_s:g} s an answer ({a.hosted_call_s_source})")

    def cell(self, row: dict[str, Any]) -> str:
        from reme_cli.llm.spend import money

        return "?" if row["cost"] is None else money(row["cost"])

    def header(self) -> str:
        """``cost (CNY)`` when every priced amount is in one currency, else ``cost``."""
        return f"cost ({next(iter(self.total))})" if len(self.total) == 1 else "cost"

    def notes(self) -> str:
        from reme_cli.llm.spend import money
        from reme_cli.run.cost import BOUND_WORDS

        if not self.bounds:
            return ""
        jobs = sum(len(v) for v in self.bounds.values())
        hours = "; ".join(f"{BOUND_WORDS[b]} for {'every job' if len(names) == jobs else ', '.join(names)}"
                          for b, names in sorted(self.bounds.items(), key=lambda kv: -len(kv[1])))
        return (f"; hosted: {'; '.join(sorted(self.limits))}, {'; '.join(sorted(self.answers))}; "
                f"the hours are set by {hours}"
                + (f"; {money(self.total)} at prices: {'; '.join(sorted(self.prices))}" if self.total else "")
                + ("; cost unknown (?) for a hosted model without prices: set model.price.input, .output, "
                   ".thinking_output and .currency from the provider's price list" if self.unpriced else ""))


def _guesses(p: SuitePlan) -> dict[str, Any]:
    """The methods' own cost guesses the plan's jobs assume (``Memory.cost_guesses``), by name."""
    from reme_cli.methods.base import method_class

    methods = dict.fromkeys([*(j.cfg.memory.name for j in p.pools if not j.source),
                             *(j.cfg.memory.name for j in p.runs if j.cfg.eval.mode != "none")])
    found = {name: g for m in methods for name, g in method_class(m).cost_guesses.items()}
    return dict(sorted(found.items()))


def suite_record(p: SuitePlan, results: list) -> tuple[str, dict[str, str], dict[str, float]]:
    """The suite's own tracker record: its status (failed if a run errored), what it is, and
    each run's Avg@k and Pass@k (``LABEL/avg@k``), side by side in one place."""
    from reme_cli.track.content import headlines

    params = {"suite.name": p.name, "suite.description": p.description, "suite.table": str(p.table),
              "suite.start": str(p.start), "suite.path": str(p.path.resolve()),
              "suite.runs": ", ".join(j.label for j in p.runs)}
    status = "failed" if any(r.errors or r.summarizer_failure for r in results) else "finished"
    return status, params, headlines([Path(j.cfg.out_dir) for j in p.runs])


def run_suite(p: SuitePlan, console: Console, wait: bool = False, launcher: str = "inline",
              jobs: int = 2, executor: dict[str, str] | None = None) -> list:
    """Build the pools, then run the variants (each resumes if it ran before); returns the
    results. ``launcher``: ``inline`` (here, one after another) or any launcher of
    ``reme_cli.commands.launch`` (each run its own process or cluster job)."""
    # Released pools are imported here whatever the launcher: no LLM, seconds of embedding.
    imported = [import_released(j, console) for j in p.pools if j.source]
    built = [j for j in p.pools if not j.source]
    if launcher == "slurm":  # every job on a node of its own serves its own model
        return imported + _run_jobs(p, built, console, wait, launcher, jobs, executor)
    from reme_cli.llm.shared import shared_servers

    # The jobs on this node that would each start vLLM share one server per model instead.
    with shared_servers([*built, *p.runs], p.path / "logs"):
        return imported + _run_jobs(p, built, console, wait, launcher, jobs, executor)


def _run_jobs(p: SuitePlan, built: list[PoolJob], console: Console, wait: bool, launcher: str, jobs: int,
              executor: dict[str, str] | None) -> list:
    from reme_cli.commands.build_pool import build_pool
    from reme_cli.commands.evaluate import RunResult, evaluate

    if launcher == "inline":
        results = [build_pool(j.cfg, console, wait=wait) for j in built]
        return results + [evaluate(j.cfg, console, wait=wait) for j in p.runs]

    from reme_cli.commands.launch import Job, launch

    def batch(kind: str, items: list) -> list:
        specs = [Job(kind, getattr(j, "label", getattr(j, "name", "")), j.overrides) for j in items]
        codes = launch(specs, launcher, p.path / "logs", parallel=jobs, executor=executor or {})
        for spec, code in zip(specs, codes, strict=True):
            if code not in (0, EXIT_UNIT_ERRORS):  # bad input, a broken server, an interruption
                raise UserError(f"{spec.kind} {spec.label} stopped with exit code {code}; its log: "
                                f"{p.path / 'logs' / f'{spec.kind}-{spec.label}.log'}")
        return [RunResult(Path(j.cfg.out_dir), int(code != 0)) for j, code in zip(items, codes, strict=True)]

    # Pools first: every run of the suite may need one.
    return batch("build-pool", built) + batch("eval", p.runs)


def import_released(job: PoolJob, console: Console):
    """A suite's released pool, imported once under ``SUITE_DIR/pools/NAME/pool``; a rerun
    keeps it if it came from the same file."""
    from reme_cli.commands.evaluate import RunResult
    from reme_cli.commands.pool import import_pool
    from reme_cli.core.run_log import read_pool_header

    target = Path(job.cfg.out_dir) / "pool"
    header = read_pool_header(target)
    if header is not None and header.path == target:
        source = header.built_by.get("source")
        if source != job.source:
            raise UserError(f"{target} holds a pool imported from {source!r}, not {job.source}; "
                            "remove that suite directory's pools/ or give the suite another runs_root")
    else:
        import_pool(job.source, target, job.cfg, console)
    return RunResult(Path(job.cfg.out_dir), 0)

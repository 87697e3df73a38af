"""`reme eval -m hydra/sweeper=optuna ...`: search the config with Optuna instead of a grid.

Hydra's habits (those of its Optuna sweeper plugin) on reme's own ``-m``. The overrides whose
value sweeps are the search space: ``choice(1,3,5)`` or ``1,3,5`` (categorical), ``range(1,11)``
(whole numbers, the stop left out as on a grid), ``interval(0.5,0.9)`` (a float; two whole
numbers, ``int(interval(1,10))``: an integer), ``tag(log, interval(...))`` (on a log scale); the
other overrides hold for every trial, and ``hydra.sweeper.KEY=VALUE`` set the study
(``SweeperCfg``; ``hydra/sweeper/sampler=NAME`` as in Hydra). Hydra's own plugin pins
optuna<3, so reme drives current Optuna itself.

The sweep lives in ``runs_root/sweeps/STUDY/``: the study in ``study.db`` (SQLite), each trial an
ordinary `reme eval` run in ``runs/`` named for the values it tries (a value tried again resumes
that run, which has nothing left to do), the study's table in ``trials.csv``. The same command
again continues the study: a trial that was running (Ctrl-C, a kill, a dead server) runs again
first, resuming its run directory, then new trials until the study holds ``n_trials`` finished
ones. A trial whose units errored stops the sweep (exit 3) and is retried by the rerun. The
objective is read from the run's metrics as its tracker names them (``avg@k``: Avg@k's mean over
seeds, k = eval.runs). With ``tracker=``, the study is one parent run (W&B: group) of its
trials, holding the best trial and the table.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from rich.console import Console
from rich.table import Table

from reme_cli.commands.jobs import SWEEPER, job_label
from reme_cli.core.config import Config, compose, config_hash
from reme_cli.core.errors import UserError
from reme_cli.run.lock import DirLock
from reme_cli.track.content import RunContent, headlines
from reme_cli.track.group import GroupTracking

SAMPLER_GROUP = "hydra/sweeper/sampler"
SETTING = "hydra.sweeper."
NAME = "optuna"
SAMPLERS = ("tpe", "random", "grid")
STUDY_FILE = "study.db"
TABLE_FILE = "trials.csv"
INSTALL = "pip install -c constraints.txt -e '.[sweep]' from the reme checkout (or pip install optuna)"


@dataclass
class SweeperCfg:
    """``hydra.sweeper.KEY=VALUE`` of an Optuna sweep."""

    n_trials: int = 20  # finished trials the study holds when the sweep ends (a rerun continues to it)
    direction: str = "maximize"  # maximize | minimize the objective
    # A run metric as its tracker names it: avg@k, pass@k, first_attempt/avg@k, tokens/prompt, ...
    objective: str = "avg@k"
    sampler: str = "tpe"  # tpe | random | grid (grid: every combination of choice/range values once)
    seed: int = 0  # the sampler's seed: the same command proposes the same trials
    study_name: Optional[str] = None  # default: BENCHMARK-MODEL-MODE-HASH of the fixed overrides and the space
    dry_run: bool = False  # print what one trial costs and where the study is, run nothing


@dataclass
class Sweep:
    settings: SweeperCfg
    space: dict[str, Any]  # override key -> Optuna distribution
    fixed: list[str]  # the overrides every trial takes


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise UserError(f"hydra/sweeper=optuna needs Optuna: {INSTALL}") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def parse(overrides: list[str]) -> Sweep:
    """The sweep's settings, search space and fixed overrides; bad ones are one line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    optuna = _optuna()
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception as exc:  # Hydra's grammar errors
        raise UserError(f"bad override: {str(exc).splitlines()[0]}") from None
    settings: dict[str, Any] = {}
    space: dict[str, Any] = {}
    fixed: list[str] = []
    for override, text in zip(parsed, overrides, strict=True):
        key = override.key_or_group
        if key == SWEEPER:
            if override.value() != NAME:
                raise UserError(f"{text}: reme's sweepers are basic (the grid of `-m`) and optuna")
        elif key == SAMPLER_GROUP:
            settings["sampler"] = override.value()
        elif key.startswith(SETTING):
            settings[key[len(SETTING):]] = override.value()
        elif override.is_sweep_override():
            space[override.get_key_element()] = _distribution(optuna, override, text)
        else:
            fixed.append(text)
    try:
        cfg: SweeperCfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SweeperCfg), settings))  # type: ignore[assignment]
    except OmegaConfBaseException as exc:
        known = ", ".join(SETTING + f.name for f in fields(SweeperCfg))
        raise UserError(f"{SETTING}{getattr(exc, 'full_key', '') or ''}: {str(exc).splitlines()[0]} "
                        f"(the sweep's settings: {known})") from None
    if cfg.direction not in ("maximize", "minimize"):
        raise UserError(f"{SETTING}direction={cfg.direction!r}: choose maximize or minimize")
    if cfg.sampler not in SAMPLERS:
        raise UserError(f"{SETTING}sampler={cfg.sampler!r}: choose one of {', '.join(SAMPLERS)}")
    if cfg.n_trials < 1:
        raise UserError(f"{SETTING}n_trials={cfg.n_trials}: give at least 1")
    if not space:
        raise UserError("hydra/sweeper=optuna needs a search space: a key with choice(...), a,b,c, range(...) or "
                        "interval(...), e.g. 'memory.top_k=choice(1,3,5,10)'")
    if cfg.sampler == "grid":
        bad = [k for k, d in space.items() if _grid(optuna, d) is None]
        if bad:
            raise UserError(f"hydra/sweeper/sampler=grid takes choice(...) and range(...) only: {bad[0]} is an interval")
    if any(o.lstrip("+~").startswith("out_dir=") for o in fixed):
        raise UserError("out_dir= names one run; a sweep's trials go under runs_root/sweeps/STUDY/runs "
                        "(set runs_root= instead)")
    return Sweep(cfg, space, fixed)


def _distribution(optuna: Any, override: Any, text: str) -> Any:
    from hydra.core.override_parser.types import Transformer

    d = optuna.distributions
    value = override.value()
    if override.is_interval_sweep():
        log = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return d.IntDistribution(value.start, value.end, log=log)
        return d.FloatDistribution(float(value.start), float(value.end), log=log)
    if getattr(value, "shuffle", False):
        raise UserError(f"{text}: a shuffled sweep has no order to search; drop shuffle()")
    values = list(override.sweep_iterator(transformer=Transformer.encode))
    if override.is_range_sweep() and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        step = values[1] - values[0] if len(values) > 1 else 1
        return d.IntDistribution(values[0], values[-1], step=step)
    if not all(isinstance(v, (str, int, float, bool, type(None))) for v in values):
        raise UserError(f"{text}: a searched value must be a string, a number, true/false or null")
    return d.CategoricalDistribution(values)


def _grid(optuna: Any, dist: Any) -> list | None:
    d = optuna.distributions
    if isinstance(dist, d.CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, d.IntDistribution) and not dist.log:
        return list(range(dist.low, dist.high + 1, dist.step))
    return None


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    return repr(value) if isinstance(value, float) else str(value)


def trial_overrides(sweep: Sweep, params: dict[str, Any]) -> list[str]:
    return [*sweep.fixed, *(f"{key}={_value(params[key])}" for key in sweep.space)]


def study_name(sweep: Sweep, base: Config) -> str:
    """The study a command continues: its fixed config (as a run's hash says it) and its
    space, objective and sampler; not ``n_trials`` (asking for more trials continues it)."""
    s = sweep.settings
    blob = json.dumps([config_hash(base), {k: repr(v) for k, v in sweep.space.items()}, s.objective,
                       s.direction, s.sampler, s.seed], sort_keys=True)
    return f"{base.benchmark.name}-{base.model.name}-{base.eval.mode}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def objective_value(metrics: dict[str, float], objective: str, k: int) -> float:
    """``objective`` (``avg@k``, ``pass@k``, ``first_attempt/avg@k``, ``tokens/prompt``...)
    in a run's metrics; a score over seeds is its mean."""
    key = objective.replace("@k", f"@{k}").replace(".", "/")
    for name in (key, f"{key}/mean"):
        if name in metrics:
            return metrics[name]
    known = sorted(m.replace(f"@{k}", "@k").removesuffix("/mean") for m in metrics
                   if not m.startswith(("per_seed/", "stream/")) and not m.endswith(("/std", "/n_seeds")))
    raise UserError(f"{SETTING}objective={objective}: the run has no such metric; choose one of {', '.join(known)}")


def optimize(overrides: list[str], console: Console, wait: bool = False) -> list:
    """Run (or continue) the study; the trials' results, then the sweep directory's."""
    from reme_cli.commands.evaluate import RunResult, evaluate

    optuna = _optuna()
    sweep = parse(overrides)
    settings = sweep.settings
    first = {k: _first(optuna, d) for k, d in sweep.space.items()}
    base = compose(trial_overrides(sweep, first))  # a bad key or value fails here, before anything runs
    name = settings.study_name or study_name(sweep, compose(sweep.fixed))
    where = Path(base.runs_root) / "sweeps" / name
    console.print(trial_estimate(base, where, settings.n_trials))
    if settings.dry_run:
        console.print(f"dry run: study {name} in {where} ({settings.sampler} sampler, {settings.objective} "
                      f"{settings.direction}d over {len(sweep.space)} key(s)); nothing was run", highlight=False)
        return [RunResult(where, 0)]
    grid = {k: _grid(optuna, d) for k, d in sweep.space.items()} if settings.sampler == "grid" else None
    wanted = min(settings.n_trials, math.prod(len(v) for v in grid.values())) if grid else settings.n_trials
    sampler = {"tpe": lambda: optuna.samplers.TPESampler(seed=settings.seed),
               "random": lambda: optuna.samplers.RandomSampler(seed=settings.seed),
               "grid": lambda: optuna.samplers.GridSampler(grid, seed=settings.seed)}[settings.sampler]()
    results: list = []
    with DirLock(where, wait=wait, what="sweep"):
        where.mkdir(parents=True, exist_ok=True)
        study = optuna.create_study(study_name=name, storage=f"sqlite:///{(where / STUDY_FILE).resolve()}",
                                    sampler=sampler, direction=settings.direction, load_if_exists=True)
        with GroupTracking(base.tracker, console, where.resolve(), "sweep") as group:
            stopped = False
            # Trials a stopped sweep left running first: their runs resume.
            pending = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING]
            while len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))) < wanted:
                trial = pending.pop(0) if pending else study.ask(sweep.space)
                console.print(f"sweep {name}: trial {trial.number} "
                              + " ".join(f"{k}={_value(v)}" for k, v in trial.params.items()), highlight=False)
                cfg = compose(trial_overrides(sweep, trial.params))
                cfg.out_dir = str(where / "runs" / _label(sweep, trial.params))
                cfg.tracker.parent = group.parent
                result = evaluate(cfg, console, wait=wait)
                results.append(result)
                if result.errors or result.summarizer_failure:  # stays running: the rerun retries it
                    stopped = True
                    break
                metrics = RunContent.read(result.path).tracked_metrics()
                value = objective_value(metrics, settings.objective, cfg.eval.runs)
                _tell(study, trial.number, value)
            table = study_table(study, sweep, where)
            console.print(table)
            best = _best(study, optuna)
            if best is not None:
                console.print(f"best: trial {best.number}, " + " ".join(f"{k}={_value(v)}" for k, v in best.params.items())
                              + f": {settings.objective} = {best.value:g} ({settings.direction})", highlight=False)
            if group.live:
                done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                group.finish("failed" if stopped else "finished", _study_params(sweep, name),
                             _study_metrics(best, where), [(where / TABLE_FILE, "")],
                             series=[(t.number, {"objective": float(t.value)}) for t in done], tags=_best_tags(best))
    if stopped:
        console.print(f"[red]sweep stopped: trial {trial.number}'s run has units in error; rerun the same "
                      "command to retry them and continue the study[/red]")
    return [*results, RunResult(where, 0)]


def _tell(study: Any, number: int, value: float) -> None:
    """``study.tell``. Optuna's grid sampler calls ``study.stop()`` once the grid is done, which
    outside ``study.optimize`` raises after the trial is stored: the sweep ends by its count."""
    try:
        study.tell(number, value)
    except RuntimeError as exc:
        if "Study.stop" not in str(exc):
            raise


def _first(optuna: Any, dist: Any) -> Any:
    d = optuna.distributions
    return dist.choices[0] if isinstance(dist, d.CategoricalDistribution) else dist.low


def _best(study: Any, optuna: Any) -> Any:
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    return study.best_trial if complete else None


def study_table(study: Any, sweep: Sweep, where: Path) -> Table:
    """The study's trials (Optuna's own table of it, with each trial's run and its seconds),
    printed and written to ``trials.csv``."""
    frame = study.trials_dataframe(attrs=("number", "state", "params", "value", "duration"))
    if len(frame):
        frame["duration"] = frame["duration"].dt.total_seconds().round(1)
        frame = frame.rename(columns={"duration": "seconds"})
        frame["run"] = [_label(sweep, t.params) for t in study.get_trials(deepcopy=False)]
    frame.to_csv(where / TABLE_FILE, index=False)
    table = Table(title=f"sweep {study.study_name} ({where / STUDY_FILE})")
    for col in frame.columns:
        table.add_column(str(col).removeprefix("params_"))
    for row in frame.itertuples(index=False):
        table.add_row(*("" if (isinstance(v, float) and math.isnan(v)) else f"{v:g}" if isinstance(v, float)
                        else str(v) for v in row))
    return table


def _label(sweep: Sweep, params: dict[str, Any]) -> str:
    """A trial's run directory name: the values it tries (``trial-top_k3``)."""
    return job_label("trial", trial_overrides(sweep, params), list(sweep.space)) if params else ""


def trial_estimate(cfg: Config, where: Path, trials: int) -> Table:
    """What one trial costs: the estimate `reme ablate --dry-run` prints for a run."""
    from reme_cli.commands.ablate import RunJob, SuitePlan, _units, cost_table
    from reme_cli.run.cost import Assumptions

    units, calls = _units(cfg)
    plan = SuitePlan("sweep", "one trial", "", where, runs=[RunJob("one trial", "trial", None, cfg, [], units, calls)])
    table = cost_table(plan, Assumptions())
    table.title = f"estimate of one trial of {trials} (expected counts, as reme ablate --dry-run estimates a run)"
    return table


def _study_params(sweep: Sweep, name: str) -> dict[str, str]:
    s = sweep.settings
    return {"sweep.study": name, "sweep.objective": s.objective, "sweep.direction": s.direction,
            "sweep.sampler": s.sampler, "sweep.seed": str(s.seed), **{f"space.{k}": repr(d) for k, d in sweep.space.items()}}


def _best_tags(best: Any) -> dict[str, str]:
    """The best trial so far (tags: a study continued later may find a better one)."""
    if best is None:
        return {}
    return {"best.trial": str(best.number), "best.value": f"{best.value:g}",
            **{f"best.{k}": _value(v) for k, v in best.params.items()}}


def _study_metrics(best: Any, where: Path) -> dict[str, float]:
    out = headlines(sorted(p for p in (where / "runs").iterdir() if p.is_dir())) if (where / "runs").is_dir() else {}
    if best is not None:
        out["best/value"] = float(best.value)
    return out


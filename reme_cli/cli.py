"""The `reme` command line. Every command takes Hydra overrides as extra arguments."""

from __future__ import annotations

import functools
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from enum import Enum
from pathlib import Path
from typing import Callable, Optional

import typer
from typer.core import TyperCommand, TyperGroup
from rich.console import Console
from rich.markup import escape

from reme_cli import PROGRAM
from reme_cli.commands.jobs import expand, search_requested  # light: Hydra's parser is imported when a sweep needs it
from reme_cli.core.config import Config, compose
from reme_cli.core.errors import EXIT_UNIT_ERRORS, Interrupted, Reexec, UserError, os_error_message
from reme_cli.core.reading import new_command
from reme_cli.core.registry import DEFAULT_METHOD

console = Console(stderr=True)  # progress and tables; stdout carries only paths, for scripts


class _FlagsWithoutType:
    """Flags take no value: Typer >= 0.22 prints ``<bool>`` beside each (``--help``
    included), which reads as if one were wanted. An empty metavar leaves that column blank."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class _Group(_FlagsWithoutType, TyperGroup):
    def main(self, *args, **kwargs):
        """A usage error (an unknown option or command, a bad ``--mode``) is one line on stderr
        and exit 2, like every other bad input, not Typer's box."""
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        try:
            code = super().main(*args, **{**kwargs, "standalone_mode": False})
        except typer.Abort:  # Ctrl-C outside a command's own handling
            sys.exit(130)
        except typer.TyperException as exc:  # click's usage and parameter errors (typer vendors click)
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError":  # `reme`, `reme pool`: the help is printed
                sys.exit(2)
            where = f" (see {ctx.command_path} --help)" if ctx else ""
            console.print(f"[red]error:[/red] {escape(exc.format_message())}{escape(where)}", highlight=False,
                          soft_wrap=True)
            sys.exit(getattr(exc, "exit_code", 2))
        sys.exit(code if isinstance(code, int) else 0)


class _Command(_FlagsWithoutType, TyperCommand):
    pass


def _typer(**kw) -> typer.Typer:
    return typer.Typer(cls=_Group, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_show_locals=False, **kw)


app = _typer(
    name=PROGRAM,
    help="Reproduce and extend ReMe (dynamic procedural memory for LLM agents, arXiv 2512.10696) on "
         "BFCL-v3 multi-turn and AppWorld: build experience pools, evaluate memory methods (ReMe fixed "
         "and dynamic, A-Mem, LangMem, ACE, Dynamic Cheatsheet, ReasoningBank, or your own plug-in) with "
         "Avg@k / Pass@k over seeds, run the paper's ablations and regenerate its tables beside the "
         "paper's numbers. Every command takes Hydra overrides (model=qwen3-8b eval.runs=4).",
)
pool_app = _typer(help="Inspect and import experience pools.")
app.add_typer(pool_app, name="pool")
track_app = _typer(help="Experiment trackers (MLflow, W&B): log runs made without one.")
app.add_typer(track_app, name="track")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"reme {version('reme-harness')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            print("reme (not installed: pip install -e . from the checkout)")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print reme's version and exit."),
) -> None:
    """The options before a command."""


_OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}
OverridesArg = typer.Argument(
    None, metavar="OVERRIDES",
    help="Hydra overrides, e.g. model=qwen3-8b eval.runs=4 benchmark.limit=20 experiment=quickstart",
    show_default=False,
)
MultirunOpt = typer.Option(False, "--multirun", "-m",
                           help="Sweep: run once per combination of comma-separated override values.")
WaitOpt = typer.Option(False, "--wait",
                       help="If another reme is writing the same directory, wait for it instead of refusing.")


class Mode(str, Enum):
    none = "none"
    fixed = "fixed"
    dynamic = "dynamic"


def _configs(overrides: list[str], multirun: bool, defaults: tuple[str, ...] = ()) -> list[Config]:
    """Every job's config, composed and validated before anything runs: a bad override (in
    any point of a sweep) is refused at once, before a command imports its run machinery
    (the LLM client, pandas, the trackers), which is why each command imports it after this.
    ``defaults`` go first, so the user's own overrides win."""
    return [compose([*defaults, *job]) for job in expand(overrides, sweep=multirun)]


def _raise_interrupted(signum: int, frame: object) -> None:
    if signum == signal.SIGTERM:  # asked once: a repeat (see runner.on_signals) must not cut the unwinding
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Interrupted(signum)


def _run(body: Callable[[], None]) -> None:
    """Turn expected failures into one line on stderr and a non-zero exit."""
    # SIGTERM (SLURM preemption, `timeout`, `docker stop`) unwinds like Ctrl-C: manifests
    # say "interrupted", servers we started are stopped. The runner's own handler takes
    # over while units run.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupted)
    new_command()
    try:
        body()
    except Reexec as again:  # e.g. the config asks for another BFCL release: run again with it
        _reexec(again.env)
    except UserError as exc:
        _error(str(exc), exc.exit_code)
    except OSError as exc:
        # A path that cannot be written or read (a file where a directory must be, read-only,
        # full, too long): bad input or an unusable environment. A run that was going has
        # already said "interrupted" in its manifest.
        _error(os_error_message(exc), 2)
    except KeyboardInterrupt as exc:
        console.print("[yellow]interrupted:[/yellow] finished units are saved; rerun the same command to resume")
        raise typer.Exit(getattr(exc, "exit_code", 130)) from None


def _reexec(env: dict[str, str]) -> None:
    """Replace this process by the same command, with ``env`` over the current environment."""
    sys.stdout.flush()
    sys.stderr.flush()
    from reme_cli.core.environ import own_env

    # Marked as reme's own: a server the new process starts must not inherit them.
    os.execve(sys.executable, [sys.executable, "-m", "reme_cli.cli", *sys.argv[1:]], own_env(env))


def _error(message: str, code: int) -> None:
    # Escaped: a message may hold brackets (pip extras, lists) that rich would eat as markup.
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code) from None


def _view_page(dirs: list[Path], out: Path) -> Path:
    """The `reme view --export` page of ``dirs``, written to ``out``."""
    from reme_cli.commands.report import suite_dir_order
    from reme_cli.view.export import export
    from reme_cli.view.runs import Catalog

    export(Catalog(dirs, suite_dir_order), out)
    return out


def _finish(results: list, sweep_table: bool = False) -> None:
    """Print each run's path (stdout: for scripts) and exit non-zero if any unit errored or
    too many summarizer answers failed."""
    if sweep_table and len(results) > 1:
        from reme_cli.commands.sweep import print_sweep

        print_sweep([r.path for r in results], console)
    for r in results:
        print(r.path)
    if any(r.errors or r.summarizer_failure for r in results):
        raise typer.Exit(EXIT_UNIT_ERRORS)


def _mode_overrides(mode: Mode | None, overrides: list[str]) -> list[str]:
    """``--mode`` as overrides. Without it: ``none`` unless a memory is named (then
    ``fixed``); a memory mode without a named memory uses the default method (the paper's)."""
    named = [o.split("=", 1)[1] for o in overrides if o.lstrip("+~").startswith("memory=")]
    if mode is None:
        mode = Mode.fixed if named and named[-1] != "none" else Mode.none
    extra = [f"eval.mode={mode.value}"]
    if mode is not Mode.none and not named:
        extra.append(f"memory={DEFAULT_METHOD}")
    return extra + overrides


@app.command("eval", cls=_Command, context_settings=_OVERRIDES)
def eval_cmd(
    mode: Optional[Mode] = typer.Option(None, "--mode", help="none: no memory; fixed: retrieve from a pool; "
                                                             "dynamic: retrieve and refine the pool as tasks go. "
                                                             "Default: none, or fixed when memory=NAME is given."),
    multirun: bool = MultirunOpt,
    wait: bool = WaitOpt,
    overrides: Optional[list[str]] = OverridesArg,
) -> None:
    """Evaluate the agent: Avg@k / Pass@k over seeds, scored by the official checker.

    Writes a run directory (config.yaml, manifest.json, trials.jsonl, metrics.json) and prints its path as the last line. Rerunning the same command resumes it.

    Example: reme eval --mode none experiment=quickstart

    Example: reme eval --mode none model=qwen3-8b llm.base_url=http://127.0.0.1:8000/v1

    Example: reme eval -m --mode fixed memory.pool=pools/bfcl_8b hydra/sweeper=optuna 'memory.top_k=range(1,11)' hydra.sweeper.n_trials=6
    """
    def body() -> None:
        jobs = _mode_overrides(mode, overrides or [])
        if multirun and search_requested(jobs):  # a search, not a grid (docs/tracking.md)
            from reme_cli.commands import optuna_sweep

            _finish(optuna_sweep.optimize(jobs, console, wait=wait))
            return
        configs = _configs(jobs, multirun)
        from reme_cli.commands.evaluate import evaluate

        _finish([evaluate(cfg, console, wait=wait) for cfg in configs], sweep_table=True)

    _run(body)


@app.command("check", cls=_Command, context_settings=_OVERRIDES)
def check_cmd(
    mode: Optional[Mode] = typer.Option(None, "--mode", help="As for reme eval: the memory mode whose endpoints "
                                                             "to try (the summarizer and the embedding with a memory)."),
    overrides: Optional[list[str]] = OverridesArg,
) -> None:
    """Before a long run, try every endpoint it will use with its own requests, and keep what was measured.

    Composes the config as reme eval would, starts what it would start (the embedded model, a managed vLLM), and sends each endpoint the run's request shapes: a plain answer, thinking where the config thinks, one tool call, parallel calls where the config sends parallel_tool_calls, AppWorld's code action, an embedding batch. Prints what was sent, what came back and what was measured (time to first token, seconds per answer, tokens per second, a seed's repeatability, the context limit, rate-limit headers). Exit 0 when everything the run needs works (the measurement is kept, and reme ablate --dry-run plans with it), 4 otherwise. Prints the kept file's path last.

    Example: reme check model=qwen3-8b-dashscope

    Example: reme check --mode dynamic memory=reme model=qwen3-8b llm.base_url=http://127.0.0.1:8000/v1
    """
    def body() -> None:
        jobs = _mode_overrides(mode, overrides or [])
        # The config first, the machinery after: a bad override costs no heavy import.
        cfg = compose([o for o in jobs if not o.startswith("cost.")])
        from reme_cli.commands.check import check
        from reme_cli.run.cost import split_overrides

        assumptions, _ = split_overrides(jobs)  # cost.calibration=FILE: where the measurement goes
        code, kept = check(cfg, assumptions, console)
        if kept is not None:
            print(kept)
        raise typer.Exit(code)

    _run(body)


@app.command("serve", cls=_Command, context_settings=_OVERRIDES)
def serve_cmd(
    port: int = typer.Option(8000, help="Port to serve on."),
    host: str = typer.Option("127.0.0.1", help="Interface to bind (0.0.0.0: every interface, for other machines)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the command instead of running it."),
    overrides: Optional[list[str]] = OverridesArg,
) -> None:
    """Start the model's OpenAI-compatible server (vLLM on a GPU box, llama.cpp for model=local).

    vLLM gets model.tensor_parallel GPUs (auto: as many as the model needs) of the visible ones.

    Example: reme serve model=qwen3-8b --dry-run

    Example: CUDA_VISIBLE_DEVICES=4,5,6,7 reme serve model=qwen3-32b --host 0.0.0.0 --port 8001

    Then: reme eval --mode none model=qwen3-8b llm.base_url=http://127.0.0.1:8000/v1
    """

    def body() -> None:
        if not 1 <= port <= 65535:
            raise UserError(f"--port {port}: choose a port from 1 to 65535")
        cfg = compose(overrides or [])
        from reme_cli.core.environ import user_env
        from reme_cli.llm.vllm_server import serve_command, serve_devices

        tp, extra = serve_devices(cfg)
        cmd = serve_command(cfg, port, host, tp)
        print(shlex.join(cmd))
        if dry_run:
            return
        try:
            raise typer.Exit(subprocess.call(cmd, env=user_env(extra)))
        except FileNotFoundError:
            raise UserError(f"`{cmd[0]}` is not installed: bash scripts/install.sh --gpu from the reme checkout on a GPU machine") from None

    _run(body)


@app.command("build-pool", cls=_Command, context_settings=_OVERRIDES)
def build_pool_cmd(
    multirun: bool = MultirunOpt,
    wait: bool = WaitOpt,
    overrides: Optional[list[str]] = OverridesArg,
) -> None:
    """Distill an experience pool from training-task trajectories (ReMe acquisition).

    Writes DIR/pool (the pool) and DIR/build (sampled trajectories, distillation records, report.json) and prints DIR last. Rerunning resumes.

    Example: reme build-pool benchmark.limit=3 out_dir=pools/smoke
    """

    def body() -> None:
        configs = _configs(overrides or [], multirun, defaults=("benchmark.split=train", f"memory={DEFAULT_METHOD}"))
        from reme_cli.commands.build_pool import build_pool

        _finish([build_pool(cfg, console, wait=wait) for cfg in configs])

    _run(body)


@app.command("ablate", cls=_Command, context_settings=_OVERRIDES)
def ablate_cmd(
    suite: str = typer.Argument(..., help="A suite in configs/ablation/ (table1..table5, topk, alpha_beta) "
                                          "or a path to a suite file."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (runs, units, LLM calls, pools) "
                                                          "and run nothing."),
    only: Optional[list[str]] = typer.Option(None, "--only", help="Run just this run label (repeatable): one "
                                                                     "cluster job per run, see docs/reproducing.md."),
    launcher: str = typer.Option("inline", "--launcher", help="Where runs go: inline (here, in turn), joblib "
                                                             "(parallel local processes), slurm or submitit-local "
                                                             "(submitit jobs)."),
    jobs: int = typer.Option(2, "--jobs", help="Runs at once with --launcher joblib."),
    executor: Optional[list[str]] = typer.Option(None, "--executor", metavar="KEY=VALUE",
                                                 help="submitit parameter (repeatable), e.g. slurm_partition=gpu "
                                                      "gpus_per_node=1 timeout_min=1440."),
    wait: bool = WaitOpt,
    overrides: Optional[list[str]] = OverridesArg,
) -> None:
    """Run one of the paper's ablations as a suite of resumable runs, then write its report.

    Pools are built once and shared; rerunning the same command resumes every run.

    Example: reme ablate topk suite.start=built benchmark.limit=2 eval.runs=1 eval.seeds=1 build.samples=2

    Example: reme ablate table3 model=qwen3-8b llm.base_url=http://127.0.0.1:8000/v1 --dry-run
    """
    from reme_cli.commands.ablate import cost_table, fidelity_table, plan, plan_table, run_suite, suite_record
    from reme_cli.commands.fidelity_count import fidelity_count
    from reme_cli.commands.report import report, suite_order
    from reme_cli.run.cost import split_overrides
    from reme_cli.track.group import GroupTracking

    def body() -> None:
        if jobs < 1:
            raise UserError(f"--jobs {jobs}: give at least 1")
        assumptions, rest = split_overrides(overrides or [])
        p = plan(suite, rest, only=only)
        console.print(plan_table(p))
        console.print(fidelity_table(p))
        # The paper's whole table at this provider only in a dry run: it plans the suite again
        # for each of the paper's models and benchmarks.
        console.print(fidelity_count(suite, rest, p, paper_wide=dry_run))
        console.print(cost_table(p, assumptions))
        if dry_run:
            print(p.path)
            return
        params = dict(kv.split("=", 1) for kv in executor or [] if "=" in kv)
        if len(params) != len(executor or []):
            raise UserError("--executor takes KEY=VALUE")
        with GroupTracking(p.tracker, console, p.path, "suite") as group:  # tracker=: the suite's parent run
            p.join(group.parent)
            results = run_suite(p, console, wait=wait, launcher=launcher, jobs=jobs, executor=params)
            target, _ = report([p.path / "runs"], out=p.path / "report", suite=p.table, order=suite_order(suite))
            console.print(f"report: {target / 'report.md'}")
            if group.live:
                status, record, metrics = suite_record(p, results)
                with tempfile.TemporaryDirectory(prefix="reme-suite-") as tmp:
                    page = _view_page([p.path / "runs"], Path(tmp) / "view.html")
                    files = [(f, str(Path("report") / f.relative_to(target).parent)) for f in sorted(target.rglob("*"))
                             if f.is_file()]
                    group.finish(status, record, metrics, [*files, (page, "")])
        _finish(results)

    _run(body)


@app.command("report", cls=_Command)
def report_cmd(
    dirs: list[Path] = typer.Argument(..., help="Run directories, suite directories, or folders holding them."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to write (default: DIR/report for one DIR)."),
    suite: Optional[str] = typer.Option(None, "--table", help="Lay out as this paper table "
                                                              "(table1..table5, topk, alpha_beta)."),
) -> None:
    """Paper-layout tables, bootstrap intervals, plots and error analysis from run records.

    Writes report.md, one CSV per table and PNG plots; prints the report directory last.

    Example: reme report runs/default
    """

    def body() -> None:
        from reme_cli.commands.report import report

        target, written = report(dirs, out=out, suite=suite)
        md = target / "report.md"
        console.print(md.read_text(), markup=False, highlight=False, soft_wrap=True)
        print(target)

    _run(body)


@app.command("view", cls=_Command)
def view_cmd(
    dirs: list[Path] = typer.Argument(..., help="Run directories, suite directories, or folders holding them."),
    host: str = typer.Option("127.0.0.1", help="Interface to serve on (0.0.0.0: every interface, to share it; "
                                               "run records hold prompts and model output)."),
    port: int = typer.Option(0, help="Port to serve on (0: a free one)."),
    export: Optional[Path] = typer.Option(None, "--export", metavar="FILE.html",
                                          help="Write one self-contained HTML file instead of serving (opens "
                                               "from disk, no network)."),
) -> None:
    """See what memory did, in the browser: runs and suites, the task grid, each unit, the memory, its health.

    Serves a local page until Ctrl-C and prints its URL; reload it to see new units of a run that is still going.

    Example: reme view runs/ablate/table1-bfcl_v3-qwen3-8b-released

    Example: reme view runs/default --export view.html
    """

    def body() -> None:
        if not 0 <= port <= 65535:
            raise UserError(f"--port {port}: choose a port from 1 to 65535 (or 0 for a free one)")
        from reme_cli.commands.report import suite_dir_order
        from reme_cli.view.runs import Catalog

        catalog = Catalog(dirs, suite_dir_order)
        catalog.runs()  # a damaged run is refused now, in one line
        if export is not None:
            from reme_cli.view.export import export as write_export

            size = write_export(catalog, export)
            console.print(f"wrote {len(catalog.paths)} run(s), {size / 1e6:.1f} MB")
            print(export)
            return
        from reme_cli.view.server import ViewServer

        server = ViewServer(catalog, host, port)
        server.warm()
        if not server.loopback_only:
            console.print(f"[yellow]warning:[/yellow] serving on {host}, not this machine alone: run records hold "
                          "prompts and model output, and the page has no authentication (anyone who reaches port "
                          f"{server.server_address[1]} reads them)", markup=True, highlight=False)
        console.print(f"reme view: {len(catalog.paths)} run(s) at {server.url} (Ctrl-C to stop)")
        print(server.url, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:  # Ctrl-C (or SIGTERM) is how a viewer ends: nothing was being written
            console.print("reme view: stopped")
        finally:
            server.server_close()

    _run(body)


@pool_app.command("import", cls=_Command, context_settings=_OVERRIDES)
def pool_import_cmd(
    source: Optional[str] = typer.Argument(
        None, metavar="SOURCE",
        help="A bundled released pool by name (official:bfcl/qwen3-8b; see --list) or a pool JSONL file."),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory to write the native pool to."),
    list_: bool = typer.Option(False, "--list", help="List the bundled released pools with their counts."),
    overrides: Optional[list[str]] = OverridesArg,
) -> None:
    """Convert a released experience pool (the authors' JSONL format) into a native pool directory.

    The authors' six released pools ship with reme. Example: reme pool import official:bfcl/qwen3-8b --out pools/bfcl_8b
    """

    def body() -> None:
        from reme_cli.commands.pool import import_pool, list_released

        if list_:
            list_released(overrides or [], console)
            return
        if source is None or out is None:
            raise UserError("give a pool to import and where to write it: "
                            "reme pool import official:bfcl/qwen3-8b --out DIR (names: reme pool import --list)")
        print(import_pool(source, out, overrides or [], console))

    _run(body)


@pool_app.command("stats", cls=_Command, context_settings=_OVERRIDES)
def pool_stats_cmd(
    pool: Path = typer.Argument(..., help="A pool directory."),
    overrides: Optional[list[str]] = OverridesArg,
) -> None:
    """A pool's size, its method's summary (counts by kind) and the distributions of its items' numbers (ReMe: f, u, confidence).

    Any method's pool: the method is found from the folder (or give memory=NAME).
    """

    def body() -> None:
        from reme_cli.commands.pool import show_stats

        show_stats(pool, overrides or [], console)

    _run(body)


@pool_app.command("show", cls=_Command, context_settings=_OVERRIDES)
def pool_show_cmd(
    pool: Path = typer.Argument(..., help="A pool directory."),
    query: Optional[str] = typer.Option(None, "--query", help="Show what this query retrieves."),
    limit: int = typer.Option(20, help="How many items to list."),
    overrides: Optional[list[str]] = OverridesArg,
) -> None:
    """List a pool's items (any method's), or what a query retrieves from it (methods that search a saved pool, e.g. ReMe)."""

    def body() -> None:
        if limit < 1:
            raise UserError(f"--limit {limit}: give at least 1")
        from reme_cli.commands.pool import show_pool

        show_pool(pool, query, limit, overrides or [], console)

    _run(body)


@track_app.command("sync", cls=_Command, context_settings=_OVERRIDES)
def track_sync_cmd(
    args: list[str] = typer.Argument(..., metavar="DIR... OVERRIDES",
                                     help="Run directories, suite or sweep directories, or folders holding them; "
                                          "then the tracker, e.g. tracker=mlflow (tracker.uri=..., runs_root=...)."),
) -> None:
    """Log finished runs to an experiment tracker after the fact (runs made without one, or whose tracker failed).

    A run whose manifest keeps a tracker run for the same place continues it; a suite or sweep directory is one parent run with its runs as children. Prints each run logged.

    Example: reme track sync runs/default tracker=mlflow

    Example: reme track sync runs/ablate/table1-bfcl_v3-qwen3-8b-released tracker=wandb
    """

    def body() -> None:
        from reme_cli.commands.track import sync

        dirs = [Path(a) for a in args if "=" not in a]
        if not dirs:
            raise UserError("give the run directories to log: reme track sync DIR... tracker=mlflow")
        for path in sync(dirs, [a for a in args if "=" in a], console):
            print(path)

    _run(body)


def _guarded(command: Callable[..., None]) -> Callable[..., None]:
    """A plug-in's command with the CLI's handling of bad input (one line, exit 2)."""
    @functools.wraps(command)  # Typer reads the parameters and help through __wrapped__
    def run(*args, **kwargs) -> None:
        _run(lambda: command(*args, **kwargs))

    return run


def _add_plugin_commands() -> None:
    """Commands plug-ins contribute (``reme_cli.core.registry.COMMANDS``): a benchmark's own
    commands (its environment's setup, its release differences) come from the benchmark."""
    from reme_cli.core.registry import COMMANDS, CommandGroup

    try:
        names = COMMANDS.names()
    except UserError as exc:  # two packages claiming one name: say so, and keep reme's own commands
        console.print(f"[yellow]warning:[/yellow] {escape(str(exc))}", highlight=False, soft_wrap=True)
        names = []
    for name in names:
        try:
            contributed = COMMANDS.get(name)
        except UserError as exc:  # one broken plug-in must not take `reme --help` down with it
            console.print(f"[yellow]warning:[/yellow] {escape(str(exc))}", highlight=False, soft_wrap=True)
            continue
        if isinstance(contributed, CommandGroup):
            group = _typer(help=contributed.help)
            for sub, command in contributed.commands.items():
                group.command(sub, cls=_Command)(_guarded(command))
            app.add_typer(group, name=name)
        else:
            app.command(name, cls=_Command)(_guarded(contributed))


_add_plugin_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()

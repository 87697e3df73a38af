"""Where the jobs of a suite run: here, in parallel local processes (joblib), or as cluster
jobs (submitit: SLURM, or its local executor). Every job is the ordinary command line
(`reme eval ... --wait`, `reme build-pool ... --wait`), so release switches, managed servers,
locks, resume and exit codes behave exactly as when a user types it; a job that needs a
pool another job is building waits on that pool's lock. Jobs on this node that would each
start vLLM get the suite's shared server instead (``llm.base_url``, see reme_cli/llm/shared.py);
a SLURM job serves its own model on its node's GPUs.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from reme_cli.core.errors import UserError
from reme_cli.llm.local_server import die_with_parent

LAUNCHERS = ("inline", "joblib", "submitit-local", "slurm")


@dataclass(frozen=True)
class Job:
    kind: str  # eval | build-pool
    label: str
    overrides: list[str]


# Jobs running in this process's threads (joblib): stopped with the suite.
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def run_job(job: Job, log: str) -> int:
    """Run one job as the CLI does; its output goes to ``log``; returns its exit code. The
    job dies with us: a parent-death signal (SIGTERM, which a job handles like Ctrl-C) from
    the thread that waits on it, which lives until the job ends."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "reme_cli.cli", job.kind, "--wait", *job.overrides],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=die_with_parent if sys.platform == "linux" else None)  # noqa: PLW1509
        with _running_lock:
            _running.add(proc)
        try:
            return proc.wait()
        finally:
            with _running_lock:
                _running.discard(proc)


def stop_jobs(grace: float = 60.0) -> None:
    """SIGTERM the running jobs (they record themselves as interrupted and stop their
    servers), wait up to ``grace`` seconds, then kill what is left."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def launch(jobs: list[Job], launcher: str, logs: Path, parallel: int = 2,
           executor: dict[str, str] | None = None) -> list[int]:
    """Exit codes, in the order of ``jobs``. ``parallel``: local processes at once (joblib);
    ``executor``: submitit parameters (``slurm_partition``, ``gpus_per_node``, ``timeout_min``...)."""
    if not jobs:
        return []
    logs.mkdir(parents=True, exist_ok=True)
    paths = [str(logs / f"{j.kind}-{j.label}.log") for j in jobs]
    if launcher == "joblib":
        from joblib import Parallel, delayed

        # Threads are enough: each job is its own process.
        try:
            return Parallel(n_jobs=parallel, prefer="threads")(delayed(run_job)(j, p) for j, p in zip(jobs, paths))
        except BaseException:  # Ctrl-C, SIGTERM: stopping the suite stops its jobs
            stop_jobs()
            raise
    if launcher in ("submitit-local", "slurm"):
        try:
            import submitit
        except ImportError:
            raise UserError("--launcher slurm needs submitit: pip install -e '.[cluster]' from the reme checkout") from None
        ex = submitit.AutoExecutor(folder=str(logs / "submitit"), cluster="slurm" if launcher == "slurm" else "local")
        params = {"timeout_min": 24 * 60, **_typed(executor or {})}
        ex.update_parameters(**params)
        submitted = [ex.submit(run_job, j, p) for j, p in zip(jobs, paths)]
        codes = []
        for job, sub in zip(jobs, submitted):
            try:
                codes.append(sub.result())
            except Exception as exc:  # the cluster job itself failed (preempted, killed, ...)
                raise UserError(f"cluster job {job.kind} {job.label} ({sub.job_id}) failed: "
                                f"{str(exc).splitlines()[0]}; rerun the same command to resume") from None
        return codes
    raise UserError(f"--launcher {launcher!r}: choose one of {', '.join(LAUNCHERS)}")


def _typed(params: dict[str, str]) -> dict[str, object]:
    """``KEY=VALUE`` strings from the command line, numbers as numbers."""
    out: dict[str, object] = {}
    for key, value in params.items():
        try:
            out[key] = int(value)
        except ValueError:
            out[key] = value
    return out

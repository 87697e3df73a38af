"""Where the jobs of a suite run: here, in parallel local processes (joblib), or as cluster
jobs (submitit: SLURM, or its local executor). Every job is the ordinary command line
(`reme eval ... --wait`, `reme build-pool ... --wait`), so release switches, managed servers,
locks, resume and exit codes behave exactly as when a user types it; a job that needs a
pool another job is building waits on that pool's lock.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from reme_cli.core.errors import UserError

LAUNCHERS = ("inline", "joblib", "submitit-local", "slurm")


@dataclass(frozen=True)
class Job:
    kind: str  # eval | build-pool
    label: str
    overrides: list[str]


def run_job(job: Job, log: str) -> int:
    """Run one job as the CLI does; its output goes to ``log``; returns its exit code."""
    with open(log, "ab") as out:
        return subprocess.call([sys.executable, "-m", "reme_cli.cli", job.kind, "--wait", *job.overrides],
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


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
        return Parallel(n_jobs=parallel, prefer="threads")(delayed(run_job)(j, p) for j, p in zip(jobs, paths))
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

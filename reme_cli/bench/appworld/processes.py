"""AppWorld's processes for one benchmark: episode supervisors and one evaluator.

Both are programs of ``reme_cli/bench/appworld/venv_programs/`` run under AppWorld's interpreter and
spoken to over pipes (``reme_cli.bench.worker``). In the sandbox (``benchmark.sandbox``):

- an episode supervisor sees AppWorld's venv, its interpreter, the task data's
  ``base_dbs`` and ``api_docs`` (read-only), and a tmpfs of ``benchmark.disk_mb`` (its inodes
  from ``benchmark.memory_mb``: ``Limits.scratch``) that holds
  the one task it is given (``specs.json`` and ``dbs/``, sent by reme: never ``ground_truth/``)
  and the world's outputs; nothing of the host is writable and nothing of the host leaves;
- the evaluator sees the whole task data (ground truth included) and the episodes' saved
  states, both read-only; no model code ever runs in it.

Supervisors are reused, one episode at a time: each episode runs in a process the supervisor
forks for it, and the supervisor wipes what the episode wrote before the next one (a
supervisor that cannot wipe back to its starting layout is replaced). Their logs
and the saved states live in a private temporary directory (mode 0700, marked with this
process as its owner), removed at exit unless a process failed (its log is then named in the
error); a directory left by a killed run is removed by the next run, never a live run's.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reme_cli.bench import sandbox
from reme_cli.bench.worker import Worker, WorkerCrashed
from reme_cli.core.staging import clean_stale_tempdirs, private_tempdir

SCRIPTS = Path(__file__).parent / "venv_programs"
# Inside the sandbox every host path has a fixed place, whatever it is on the host.
INSIDE_SCRIPTS = "/reme/scripts"
INSIDE_VENV = "/reme/appworld-venv"
INSIDE_PYTHON = "/reme/python"  # the interpreter AppWorld's venv was made from
INSIDE_ROOT = "/appworld"
PRIVATE_PREFIX = "reme-appworld-"
WARM_UP_S = 600.0  # importing AppWorld and building its apps: ~12 s of CPU, far more on a busy box
STATE_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\.jsonl?")
_EVALUATOR_SCRATCH = sandbox.Tmpfs(INSIDE_ROOT, 16 << 20, 4096)
# Of what memory_mb leaves beyond the scratch space's data, the share its inodes may pin
# (each sandbox.INODE_BYTES): 1/16, e.g. 61,440 inodes at the defaults (2048, 128), 2,048 at
# the least memory_mb allows; an honest episode makes fewer than 100 files.
INODE_SHARE = 16


@dataclass(frozen=True)
class Limits:
    """What one episode may use (``benchmark.*``), as the supervisor is told."""

    step_seconds: float
    episode_seconds: float
    memory_bytes: int
    disk_bytes: int
    max_threads: int
    output_chars: int

    def scratch(self) -> sandbox.Tmpfs:
        """The episode's scratch space: ``disk_bytes`` of data, and inodes from ``memory_bytes``
        (``INODE_SHARE``)."""
        inodes = (self.memory_bytes - self.disk_bytes) // INODE_SHARE // sandbox.INODE_BYTES
        return sandbox.Tmpfs(INSIDE_ROOT, self.disk_bytes, inodes)

    def for_worker(self) -> dict[str, Any]:
        # The scratch space and /dev/shm are tmpfs, memory, their data and their inodes: what
        # the code may add to its address space is the rest of the bound.
        kernel = self.scratch().kernel_bytes() + sandbox.SHM.kernel_bytes()
        return {"step_seconds": self.step_seconds, "episode_seconds": self.episode_seconds,
                "memory_bytes": self.memory_bytes - kernel,
                "max_threads": self.max_threads, "output_chars": self.output_chars}


class Processes:
    """Up to ``limit`` episode supervisors, started on demand, and the evaluator."""

    def __init__(self, venv: Path, data: Path, limit: int, limits: Limits, sandboxed: bool):
        self.venv, self.data, self.limits, self.sandboxed = venv, data, limits, sandboxed
        self.python = venv / "bin" / "python"
        clean_stale_tempdirs(PRIVATE_PREFIX)  # left by a run that was killed
        self.dir = private_tempdir(PRIVATE_PREFIX)
        self.states = self.dir / "states"  # experiment/tasks/<id>/dbs: what the evaluator reads
        self.states.mkdir(mode=0o755)
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[Worker] = []
        self._all: list[Worker] = []
        self._count = 0
        self._failed = False
        self._evaluator: Worker | None = None
        self._evaluator_start: asyncio.Task | None = None
        self.binary: sandbox.Binary | None = None
        self._venv_inside: tuple | None = None
        atexit.register(self.close)

    # ------------------------------------------------------------------ layouts
    def worker_layout(self) -> sandbox.Bwrap:
        return self._layout(((self.data / "base_dbs", f"{INSIDE_ROOT}/data/base_dbs"),
                             (self.data / "api_docs", f"{INSIDE_ROOT}/data/api_docs")), self.limits.scratch())

    def evaluator_layout(self) -> sandbox.Bwrap:
        return self._layout(((self.data, f"{INSIDE_ROOT}/data"), (self.states, f"{INSIDE_ROOT}/experiments/outputs")),
                            _EVALUATOR_SCRATCH)

    def _layout(self, data: tuple, scratch: sandbox.Tmpfs) -> sandbox.Bwrap:
        if self._venv_inside is None:  # once: a running sandbox reads the pyvenv.cfg it writes
            self._venv_inside = venv_inside(self.venv, self.dir)
        venv, links, env = self._venv_inside
        return sandbox.Bwrap(read_only=(*venv, (SCRIPTS, INSIDE_SCRIPTS), *data), scratch=(scratch,),
                             symlinks=(*links, (f"{INSIDE_ROOT}/tmp", "/tmp")), env={**_inside_env(), **env})

    def check_sandbox(self) -> sandbox.Binary:
        """Both layouts start here, and what they bind can be read inside (else a one-line
        ``UserError``); the bwrap they use."""
        self.binary = sandbox.find_binary(self.worker_layout(), _probe(f"{INSIDE_ROOT}/data/base_dbs",
                                                                       f"{INSIDE_ROOT}/data/api_docs"))
        sandbox.find_binary(self.evaluator_layout(), _probe(f"{INSIDE_ROOT}/data"))
        return self.binary

    def _command(self, script: str, layout: sandbox.Bwrap, root: Path | None) -> tuple[sandbox.Launch, dict[str, str]]:
        if self.sandboxed:
            argv = [f"{INSIDE_VENV}/bin/python", "-E", "-s", "-B", f"{INSIDE_SCRIPTS}/{script}", "--confine"]
            return layout.launch(argv, self.binary), sandbox.host_env()
        # On the host (benchmark.sandbox=none): the same programs, a root of their own.
        return (sandbox.Launch([str(self.python), "-E", "-s", "-B", str(SCRIPTS / script)]),
                {**sandbox.host_env(), "APPWORLD_ROOT": str(root), "HOME": str(root / "tmp"),
                 "TMPDIR": str(root / "tmp")})

    # ------------------------------------------------------------------ supervisors
    async def acquire(self) -> Worker:
        await self._slots.acquire()
        try:
            if self._idle:
                return self._idle.pop()
            self._count += 1
            root = None
            if not self.sandboxed:
                root = self.dir / f"root-{self._count}"
                (root / "data").mkdir(parents=True)
                (root / "tmp").mkdir()
                for name in ("base_dbs", "api_docs"):
                    (root / "data" / name).symlink_to(self.data / name)
            launch, env = self._command("worker.py", self.worker_layout(), root)
            worker = Worker(launch.argv, env=env, stderr_path=str(self.dir / f"worker-{self._count}.log"),
                            line_limit=self.limits.disk_bytes * 2 + (16 << 20), preexec=launch.preexec)
            self._all.append(worker)
            await worker.start()
            await self._hello(worker, f"worker-{self._count}.log")
            return worker
        except BaseException:
            self._failed = True
            self._slots.release()
            raise

    def release(self, worker: Worker, healthy: bool, retire: bool = False) -> None:
        """Back to the pool, or (broken, interrupted, or ``retire``: its episode left what it
        could not wipe) killed, and a fresh one started next time."""
        if healthy and not retire and worker.running:
            self._idle.append(worker)
        else:
            self._failed = self._failed or not healthy  # a failure keeps the logs
            worker.kill_now()
        self._slots.release()

    async def _hello(self, worker: Worker, log: str, what: str = "AppWorld worker") -> None:
        try:
            await worker.call("hello", timeout=WARM_UP_S)
        except (WorkerCrashed, RuntimeError) as exc:
            raise WorkerCrashed(f"{what} did not start ({exc}); log: {self.dir / log}") from None

    # ------------------------------------------------------------------ evaluator
    def start_evaluator(self) -> None:
        """Start the evaluator in the background (its warm-up overlaps the first episode)."""
        if self._evaluator_start is None:
            self._evaluator_start = asyncio.ensure_future(self._start_evaluator())

    async def _start_evaluator(self) -> Worker:
        root = None
        if not self.sandboxed:
            root = self.dir / "eval-root"
            (root / "experiments").mkdir(parents=True)
            (root / "tmp").mkdir()
            (root / "data").symlink_to(self.data)
            (root / "experiments" / "outputs").symlink_to(self.states)
        launch, env = self._command("evaluator.py", self.evaluator_layout(), root)
        worker = Worker(launch.argv, env=env, stderr_path=str(self.dir / "evaluator.log"), timeout=330,
                        preexec=launch.preexec)
        self._all.append(worker)
        await worker.start()
        await self._hello(worker, "evaluator.log", "AppWorld's evaluator")
        return worker

    async def evaluate(self, task_id: str, experiment: str, state: dict[str, str]) -> dict[str, Any]:
        """AppWorld's evaluation of ``state`` (the episode's saved DBs) for ``task_id``."""
        self.start_evaluator()
        try:
            evaluator = await asyncio.shield(self._evaluator_start)
        except BaseException:
            self._evaluator_start = None  # the next evaluation tries a fresh one
            self._failed = True
            raise
        where = self.states / experiment
        dbs = where / "tasks" / task_id / "dbs"
        try:
            # Readable by any user whatever the umask: reme as root, the evaluator's uid is another.
            for folder in (where, where / "tasks", dbs.parent, dbs):
                folder.mkdir(mode=0o755)
                folder.chmod(0o755)
            for name, text in state.items():
                if STATE_FILE.fullmatch(name):
                    (dbs / name).write_text(text)
                    (dbs / name).chmod(0o644)
            return await evaluator.call("evaluate", {"task_id": task_id, "experiment": experiment})
        except WorkerCrashed:
            self._failed = True
            self._evaluator_start = None
            evaluator.kill_now()
            raise
        finally:
            shutil.rmtree(where, ignore_errors=True)

    async def aclose(self) -> None:
        """Stop every process and wait for it, inside the loop that started them (their pipes
        close with it), then ``close``."""
        if self._evaluator_start is not None and not self._evaluator_start.done():
            self._evaluator_start.cancel()
        for worker in self._all:
            await worker.kill()
        self.close()

    def close(self) -> None:
        for worker in self._all:
            worker.kill_now()
        self._all, self._idle = [], []
        if self._evaluator_start is not None and not self._evaluator_start.done():
            self._evaluator_start.cancel()
        if not self._failed:
            shutil.rmtree(self.dir, ignore_errors=True)
        atexit.unregister(self.close)


def _inside_env() -> dict[str, str]:
    return {"APPWORLD_ROOT": INSIDE_ROOT, "HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}


def _probe(*folders: str) -> list[str]:
    """AppWorld's interpreter starts and lists ``folders`` (reme as root: the sandbox's uid
    reads what it binds as any other user does)."""
    return [f"{INSIDE_VENV}/bin/python", "-E", "-s", "-B", "-c",
            "import os, sys\nfor p in sys.argv[1:]: os.listdir(p)", *folders]


def venv_inside(venv: Path, private: Path) -> tuple[tuple, tuple, dict[str, str]]:
    """AppWorld's venv at ``INSIDE_VENV`` and the interpreter it was made from at
    ``INSIDE_PYTHON``, wherever they are on the host: ``(read_only, symlinks, env)``.

    A venv names its interpreter by host path (``pyvenv.cfg``'s ``home``, ``bin/python``'s
    link, the interpreter's own RUNPATH), so the venv inside is made of its ``lib/`` (the
    packages), a ``pyvenv.cfg`` whose ``home`` is the inside path (written to ``private``),
    ``bin/python`` linked to the inside interpreter, and ``LD_LIBRARY_PATH`` for its
    ``libpython``."""
    cfg = {}
    for line in (venv / "pyvenv.cfg").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            cfg[key.strip()] = value.strip()
    lib = next(iter(sorted((venv / "lib").glob("python3*"))), None)
    named = Path(cfg.get("home", "")) / (lib.name if lib else "python3")
    base = Path(os.path.realpath(named if named.exists() else venv / "bin" / "python"))
    prefix = base.parent.parent
    inside_cfg = private / "pyvenv.cfg"
    inside_cfg.write_text(f"home = {INSIDE_PYTHON}/bin\n" + "".join(
        f"{k} = {cfg[k]}\n" for k in ("include-system-site-packages", "version", "version_info") if k in cfg))
    inside_cfg.chmod(0o644)
    python = f"{INSIDE_PYTHON}/{base.relative_to(prefix)}"
    return (((prefix, INSIDE_PYTHON), (venv / "lib", f"{INSIDE_VENV}/lib"), (inside_cfg, f"{INSIDE_VENV}/pyvenv.cfg")),
            ((python, f"{INSIDE_VENV}/bin/python"), ("lib", f"{INSIDE_VENV}/lib64")),
            {"LD_LIBRARY_PATH": f"{INSIDE_PYTHON}/lib"})

"""AppWorld: the agent writes Python against ``apis.*``; AppWorld's own evaluator scores it.

AppWorld pins old dependencies (pydantic<2), keeps one live world per process and freezes
every clock in it, so it never runs in reme's process. ``reme appworld setup`` gives it a
virtualenv of its own (``<prefix>/share/reme/appworld-venv``), and its code runs in processes
of that venv (``reme_cli.bench.appworld.processes``): each episode in a process forked for it
from a warmed-up supervisor, which sees the task's files but never its ground truth; the
episode's saved world is scored by AppWorld's evaluator in a process where model code never
ran. By default both run in an OS sandbox (``benchmark.sandbox``, ``reme_cli.bench.sandbox``).

Each episode is bounded (``benchmark.*``): seconds per step (``timeout``, AppWorld's own 100)
and of code per episode (``episode_timeout``), memory the code may hold (``memory_mb``),
threads (``max_threads``), disk it may write (``disk_mb``) and characters of output kept and
shown to the model per step (``output_chars``). A bound that is hit ends the episode with its
stop reason (``time_limit``, ``memory_limit``, ``process_limit``, ``disk_limit``; a cut
output only says ``[truncated N chars]`` and is listed in the record's ``limits``).

Task data does not ship (``appworld download data`` needs the internet):
``benchmark.data_dir`` (default ``$APPWORLD_ROOT``, else ``<prefix>/share/reme/appworld``)
must hold ``data/``. A plan (``--dry-run``) made where the data is not uses the official
split sizes. Success is AppWorld's task goal completion (every test of the task passes);
the scenario (the id before ``_``) gives scenario goal completion.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from reme_cli.bench import sandbox
from reme_cli.bench.appworld.agent import (COMPACT_SYSTEM_PROMPT, EXPERIENCE_LABEL, app_descriptions,
                                          authors_system_prompt, compact_user_message)
from reme_cli.bench.appworld.config import AppWorldConfig, default_data_dir
from reme_cli.bench.appworld.metrics import LABELS, METRICS
from reme_cli.bench.appworld.processes import Processes
from reme_cli.bench.appworld.venv import default_venv
from reme_cli.bench.base import Benchmark, Outcome, Task, ToolResult
from reme_cli.bench.worker import Worker, WorkerCrashed
from reme_cli.core.errors import UserError
from reme_cli.core.reading import JsonFile

# A task's specs.json in AppWorld's data (what the agent is told: the supervisor and the instruction).
TASK_SPECS = JsonFile("an AppWorld task's specs.json", shape={"supervisor": dict, "instruction": str},
                      required=("supervisor", "instruction"), fix="run `reme appworld setup` again to restore the data")

# AppWorld's official splits (its data/datasets/*.txt), for plans made without the data.
SPLIT_SIZES = {"train": 90, "dev": 57, "test_normal": 168, "test_challenge": 417}
_GRACE_S = 30.0  # reme's wait on a supervisor beyond the step's own limit
# Who mounts the sandbox's tmpfs (sandbox.Binary.mounts) -> how its inodes are bounded.
_KERNEL_MEMORY = {"own": "tmpfs nr_inodes", "bwrap": "none: bwrap's --size tmpfs (only bwrap may make a user "
                                                      "namespace here), inodes unbounded"}


class AppWorldBenchmark(Benchmark):
    name = "appworld"
    config_class = AppWorldConfig
    max_steps_per_turn = None
    packages = ("appworld",)  # recorded where this environment has it (it runs in its own venv)
    metrics = METRICS  # Avg@k / Pass@k over TGC, SGC, success per difficulty
    labels = LABELS
    system_prompt: str | None = None  # the authors' agent: each task's own (Task.meta)
    # The bounds on the model's code (issue 33): at their defaults no honest episode meets
    # them, so runs made before they existed resume (out of the run hash at these values).
    hash_neutral = {"episode_timeout": 300.0, "memory_mb": 2048, "disk_mb": 128, "max_threads": 64,
                    "output_chars": 100_000}
    # Where AppWorld's data and interpreter are installed (their default, $APPWORLD_ROOT, was
    # never hashed either): which AppWorld is there is `reme appworld setup`'s pinned release.
    where_keys = {"data_dir": None, "venv": None}

    def __init__(self, cfg: AppWorldConfig):
        self.cfg = cfg
        self.prompt_family = cfg.prompt_family
        # The authors' system message is the task's own (its supervisor): Task.meta carries it.
        self.system_prompt = COMPACT_SYSTEM_PROMPT if cfg.agent == "compact" else None
        self._apps: dict[str, str] | None = None
        self.root = Path(cfg.data_dir) if cfg.data_dir else default_data_dir()
        self.venv = Path(cfg.venv) if cfg.venv else default_venv()
        self.data = self.root / "data"
        self.sandbox = "none" if cfg.sandbox == "none" else "bwrap"  # recorded in the manifest
        self.sandbox_detail: dict[str, Any] | None = None  # which bwrap, as the manifest records it
        self._processes: Processes | None = None

    @classmethod
    def from_config(cls, cfg: AppWorldConfig) -> AppWorldBenchmark:
        return cls(cfg)

    # ------------------------------------------------------------------ data and plans
    def _split_file(self) -> Path:
        return self.data / "datasets" / f"{self.cfg.split}.txt"

    def _require_data(self) -> None:
        if not self._split_file().is_file():
            raise UserError(
                f"AppWorld data not found under {self.root} (no data/datasets/{self.cfg.split}.txt): on a machine "
                f"with internet run `{self.venv / 'bin' / 'python'} -m appworld.cli download data --root "
                f"{self.root}` and copy it here, or set benchmark.data_dir")

    def task_ids(self) -> list[str]:
        self._require_data()
        split = [t.strip() for t in self._split_file().read_text().splitlines() if t.strip()]
        if self.cfg.task_ids is not None:
            bad = [t for t in self.cfg.task_ids if not (self.data / "tasks" / t / "specs.json").is_file()]
            if bad:
                raise UserError(f"unknown AppWorld task id(s): {', '.join(bad)} (ids look like {split[0]})")
            return list(self.cfg.task_ids)
        return split[: self.cfg.limit] if self.cfg.limit else split

    def plan_size(self) -> tuple[int, str | None]:
        """How many tasks the config selects, for a plan: from the data when it is here,
        else from the official split sizes (and a note that says so)."""
        if self._split_file().is_file():
            return len(self.task_ids()), None
        if self.cfg.task_ids is not None:
            return len(self.cfg.task_ids), None
        size = SPLIT_SIZES[self.cfg.split]
        n = min(size, self.cfg.limit) if self.cfg.limit else size
        return n, (f"AppWorld's data is not on this machine ({self._split_file()} is missing): planned from the "
                   f"official split size, {self.cfg.split} = {size} tasks")

    # ------------------------------------------------------------------ before a run
    def prepare(self) -> None:
        """What running episodes needs, checked before anything is written: AppWorld's venv,
        the task data and (unless benchmark.sandbox=none) a sandbox that starts here. Plans
        never call it."""
        if self._processes is not None:
            return
        if not (self.venv / "bin" / "python").exists():
            raise UserError("AppWorld is not set up: reme appworld setup")
        self._require_data()
        for part in ("base_dbs", "api_docs"):
            if not (self.data / part).is_dir():
                raise UserError(f"AppWorld data under {self.root} has no data/{part}: download it again "
                                "(appworld download data), or set benchmark.data_dir")
        processes = Processes(self.venv, self.data, self.cfg.workers or 64, self.cfg.limits(),
                              sandboxed=self.sandbox != "none")
        if self.sandbox != "none":
            try:
                binary = processes.check_sandbox()
            except BaseException:
                processes.close()
                raise
            scratch = self.cfg.limits().scratch()
            self.sandbox_detail = {"binary": binary.path, "source": binary.source, "version": binary.version,
                                   "uid": sandbox.SANDBOX_UID,
                                   # the host uid it maps to: reme's own, or as root one of its own per sandbox
                                   "host_uid": f"{sandbox.HOST_UID_BASE}+" if sandbox.as_root() else os.getuid(),
                                   "limits": {
                                       k: getattr(self.cfg, k) for k in ("timeout", "episode_timeout", "memory_mb",
                                                                         "disk_mb", "max_threads", "output_chars")},
                                   # how what the kernel holds for the episode, and its CPU, are bounded
                                   "mechanisms": {"kernel_memory": _KERNEL_MEMORY[binary.mounts], "cpu": "RLIMIT_CPU"},
                                   "inodes": {scratch.inside: scratch.inodes, sandbox.SHM.inside: sandbox.SHM.inodes}
                                   if binary.mounts == "own" else "unbounded"}
        self._processes = processes

    # ------------------------------------------------------------------ tasks
    def load(self, task_id: str) -> Task:
        specs = TASK_SPECS.read(self.data / "tasks" / task_id / "specs.json")
        if specs is None:
            raise UserError(f"AppWorld's data has no task {task_id} ({self.data / 'tasks' / task_id} is missing); "
                            "run `reme appworld setup`, or choose its task ids")
        sup, instruction = specs["supervisor"], specs["instruction"]
        meta: dict[str, Any] = {"scenario": task_id.split("_")[0], "supervisor": sup}
        if self.cfg.agent == "compact":
            text = compact_user_message(sup, instruction)
        else:
            if self._apps is None:
                self._apps = self._app_descriptions()
            text = instruction
            meta["system_prompt"] = authors_system_prompt(sup, self._apps)
            meta["experience_label"] = EXPERIENCE_LABEL
        return Task(id=task_id, turns=[[{"role": "user", "content": text}]], query=instruction,
                    meta=meta, prompt_family=self.prompt_family)

    async def aclose(self) -> None:
        """Stop AppWorld's processes at the end of the run, in its loop."""
        if self._processes is not None:
            processes, self._processes = self._processes, None
            await processes.aclose()

    def _app_descriptions(self) -> dict[str, str]:
        return app_descriptions(self.venv)

    async def open(self, task: Task, episode_key: str) -> AppWorldEnv:
        self.prepare()
        processes = self._processes
        processes.start_evaluator()  # warms up while the first episode runs
        worker = await processes.acquire()
        env = AppWorldEnv(task, worker, processes, self.cfg)
        try:
            await env.open(f"reme_{episode_key}_{uuid.uuid4().hex[:6]}", self._task_files(task.id))
        except BaseException:
            await env.close()
            raise
        return env

    def _task_files(self, task_id: str) -> dict[str, str]:
        """What executing the task needs of its folder: ``specs.json`` and ``dbs/``, never
        ``ground_truth/``."""
        task_dir = self.data / "tasks" / task_id
        files = {"specs.json": (task_dir / "specs.json").read_text()}
        for path in sorted((task_dir / "dbs").iterdir()):
            if path.is_file():
                files[f"dbs/{path.name}"] = path.read_text()
        return files


class AppWorldEnv:
    """One episode: its own process under a supervisor; evaluated apart."""

    def __init__(self, task: Task, worker: Worker, processes: Processes, cfg: AppWorldConfig):
        self.task, self.worker, self.processes, self.cfg = task, worker, processes, cfg
        self.experiment = ""
        self._healthy = True
        self._busy = False  # a call in flight (cancelled by Ctrl-C: the supervisor is killed)
        self._ended: str | None = None  # the limit that ended the episode
        self._closed_episode = False
        self._dirty = False  # the supervisor could not make the next episode's layout: replace it
        self._released = False

    async def _call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0) -> Any:
        self._busy = True
        try:
            result = await self.worker.call(method, params, timeout=timeout)
        except (WorkerCrashed, RuntimeError) as exc:
            self._healthy = False
            raise WorkerCrashed(f"AppWorld worker failed on {method} ({str(exc)[:300]}); log: "
                                f"{self.worker.stderr_path}") from None
        self._busy = False
        return result

    async def open(self, experiment: str, files: dict[str, str]) -> None:
        self.experiment = experiment
        await self._call("open", {"task_id": self.task.id, "experiment": experiment, "files": files,
                                  "limits": self.cfg.limits().for_worker()}, timeout=330)

    def tools(self) -> list[dict[str, Any]]:
        return []  # the model writes code against `apis`, described in the agent's prompt

    async def execute(self, name: str, arguments: Any) -> ToolResult:
        code = arguments.get("code") if isinstance(arguments, dict) else None
        if name != "execute" or not isinstance(code, str):
            return ToolResult(str(name), "Error: write Python code in a ```python block.", error=True)
        wait = min(self.cfg.timeout, self.cfg.episode_timeout) + _GRACE_S
        answer = await self._call("execute", {"code": code}, timeout=wait)
        output = _cut(str(answer.get("output", "")), self.cfg.output_chars)  # whatever the worker says
        hit = answer.get("hit") if answer.get("hit") in _LIMITS else None
        if answer.get("ended"):
            self._ended = hit or "crashed"
            detail = answer.get("detail")
            return ToolResult(code, output, error=True, done=True, limit=self._ended,
                              detail=str(detail)[:500] if detail else None)
        if hit is None and len(output) < len(str(answer.get("output", ""))):
            hit = "output"
        return ToolResult(code, output, error=output.startswith("Execution failed"), done=bool(answer.get("done")),
                          limit=hit)

    async def end_step(self) -> None:
        pass

    async def end_turn(self) -> None:
        pass

    async def evaluate(self) -> Outcome:
        """End the episode (its process is killed, its saved world handed back), then
        AppWorld's evaluation of that world, where model code never ran."""
        closed = await self._close_episode()
        state = closed.get("state") or {}
        try:
            result = await self.processes.evaluate(self.task.id, self.experiment, state)
        except WorkerCrashed as exc:
            raise WorkerCrashed(f"AppWorld's evaluator failed ({exc}); log: {self.processes.dir / 'evaluator.log'}") \
                from None
        details: dict[str, Any] = {"scenario": self.task.meta.get("scenario")}
        if "error" in result:  # a saved world the evaluation cannot load: the model's doing
            details.update({"difficulty": None, "num_tests": 0, "passes": [], "failures": [],
                            "evaluation_error": str(result["error"])[:2000]})
            return Outcome(False, 0.0, details)
        tests = result.get("num_tests") or 0
        passes = len(result.get("passes") or [])
        details.update({"difficulty": result.get("difficulty"), "num_tests": tests, "passes": result.get("passes"),
                        "failures": result.get("failures")})
        return Outcome(bool(result.get("success")), passes / tests if tests else 0.0, details)

    async def close(self) -> None:
        if self._released:
            return
        self._released = True
        if self._busy:  # interrupted mid-call: the supervisor may be mid-step; never wait for it
            self._healthy = False
        elif self._healthy and not self._closed_episode:
            try:
                await self._close_episode()
            except WorkerCrashed:
                pass
        self.processes.release(self.worker, self._healthy, retire=self._dirty)

    async def _close_episode(self) -> dict[str, Any]:
        closed = await self._call("close", timeout=120)
        self._closed_episode = True
        self._dirty = closed.get("clean") is not True
        return closed


_LIMITS = ("time", "memory", "processes", "disk", "output", "crashed")


def _cut(text: str, limit: int) -> str:
    """reme's own cap on what a worker says (the worker cuts first, marker included), with
    what UTF-8 cannot hold (a lone surrogate) escaped, as the worker does."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= limit + 64:
        return text
    return text[:limit] + f"\n[truncated {len(text) - limit} chars]"

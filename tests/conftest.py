import contextlib
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_reme(args: list[str], cwd: Path, timeout: float = 600, env: dict | None = None,
             check: bool = False, process: bool = False) -> subprocess.CompletedProcess:
    """The real CLI, as a user runs it, from ``cwd``: in this process (Typer's runner: no
    interpreter start and no imports, 2-3 s of CPU each) unless ``process=True`` or the
    command must re-execute itself (another BFCL release). Tests of what only a process
    shows (signals, kill -9, exit on a crash, the processes left behind) pass ``process=True``."""
    env = {"REME_CACHE_DIR": str(cwd / ".reme_cache"), **(env or {})}
    if not process:
        done = _in_process(args, cwd, env)
        if done is not None:
            if check and done.returncode != 0:
                raise AssertionError(f"reme {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            return done
    proc = subprocess.run([sys.executable, "-m", "reme_cli.cli", *args], cwd=cwd, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"reme {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


class _Reexec(Exception):
    """The command asked to run again in a fresh process: the test runs it as a subprocess."""


_in_process_lock = threading.Lock()  # the working directory and environment are the process's


def _in_process(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess | None:
    """One CLI invocation in this process, with the working directory, environment and signal
    handlers it had restored afterwards; ``None`` if the command must re-execute itself."""
    import signal
    import traceback

    from typer.testing import CliRunner

    import reme_cli.cli as cli

    def no_reexec(_env):
        raise _Reexec()

    with _in_process_lock:
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        main = threading.current_thread() is threading.main_thread()
        saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
        os.environ.update(env)
        os.chdir(cwd)
        real_reexec, cli._reexec = cli._reexec, no_reexec
        try:
            result = CliRunner().invoke(cli.app, args, prog_name="reme")
        finally:
            cli._reexec = real_reexec
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            for s, handler in saved_signals.items():
                signal.signal(s, handler)
    if isinstance(result.exception, _Reexec):
        return None
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # What a user would see: the traceback (a test that expects one line fails on it).
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["reme", *args], result.exit_code, result.stdout, stderr)


@pytest.fixture(scope="session")
def toy_world(tmp_path_factory) -> Path:
    """The AppWorld toy world (tests/fixtures/appworld_toyworld.py), built once per session in
    AppWorld's own venv: ~30 s of CPU. Tests only read it (each episode writes its own
    experiment output under it, named uniquely)."""
    from reme_cli.bench.appworld import default_venv

    python = default_venv() / "bin" / "python"
    assert python.exists(), "AppWorld is not set up: run `reme appworld setup` (.ci/run does)"
    root = tmp_path_factory.mktemp("toyworld")
    subprocess.run([str(python), str(REPO / "tests" / "fixtures" / "appworld_toyworld.py"), str(root), "--force"],
                   check=True, capture_output=True, timeout=600)
    return root


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory):
    """The embedded CPU model's llama.cpp server (the bundled SmolLM2), started once for the
    tests that need the real model but not reme's own start and stop of it (that is
    tests/test_local_model_e2e.py's, and tests/test_local_server.py tests the server on its
    own): they pass ``llm.base_url=`` its URL. Each reme run so skips a server start, and
    the server's RAM prompt cache serves the BFCL prompt these tests share."""
    from reme_cli.llm.local_server import LocalServer

    with LocalServer(log_path=tmp_path_factory.mktemp("llama") / "server.log") as server:
        group = server._proc.pid
        yield server
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # stopped, with every process of its group


@pytest.fixture
def reme(tmp_path):
    def _run(*args: str, **kw) -> subprocess.CompletedProcess:
        return run_reme(list(args), tmp_path, **kw)
    _run.cwd = tmp_path
    return _run


def run_reme_together(*runs: tuple[list[str], Path], **kw) -> list[subprocess.CompletedProcess]:
    """Independent CLI runs (args, cwd) side by side, results in order. Each is one mostly
    single-threaded process that a test waits on: alone, it leaves the other core idle."""
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        return list(pool.map(lambda run: run_reme(run[0], run[1], **kw), runs))


def processes(*needles: str) -> list[str]:
    """Live processes (not zombies) whose command line or environment holds every needle, as
    "PID COMMAND". A test names its own processes by a needle only it uses (its tmp_path, its
    toy world), never by a program name alone: tests may run side by side (pytest-xdist), and
    another test's server or worker is not this test's to count or kill."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (d / "environ").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile
            continue
        if state != "Z" and all(n in cmd or n in env for n in needles):
            found.append(f"{d.name} {cmd}")
    return found


@contextlib.contextmanager
def scripted_server_process(*args: str, env: dict | None = None):
    """The scripted server (a TEST DOUBLE) in its own process: yields its base URL. Its own
    process, so a run can be killed or interrupted without touching the server."""
    server = subprocess.Popen([sys.executable, "-m", "reme_cli.testing.scripted_server", *args],
                              stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        yield server.stdout.readline().strip()
    finally:
        server.kill()
        server.wait()

import contextlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_reme(args: list[str], cwd: Path, timeout: float = 600, env: dict | None = None,
             check: bool = False) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess, as a user runs it."""
    full_env = {**os.environ, "REME_CACHE_DIR": str(cwd / ".reme_cache"), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "reme_cli.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"reme {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


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

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import forkserver

REPO = Path(__file__).resolve().parents[1]
# Seconds each test file took in a measured run (scripts/bench_tests.py --save-durations).
DURATIONS = Path(__file__).with_name("durations.json")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as in a terminal, for every process the tests start. A shell starts a background
    job (as a CI runner may start the tests) with SIGINT ignored, every process below inherits
    that, and Python then installs no KeyboardInterrupt handler: a test's SIGINT to a run it
    started would be ignored, and the run would finish instead of stopping. A handler (not
    SIG_IGN) is reset to the default by exec, so the children start as from a terminal."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    from tests import tiers  # the fast tier and the rule that keeps it fast

    config.pluginmanager.register(tiers, "reme-tiers")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, each file's tests in their own order. Files go to workers
    whole (``--dist loadfile``), in collection order: a long file that starts last keeps one
    worker busy after the others have finished. A file not yet measured goes last."""
    try:
        seconds = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return
    items.sort(key=lambda item: -float(seconds.get(item.nodeid.split("::")[0], 0.0)))  # stable


def script_module(name: str):
    """``scripts/NAME`` imported as a module (the scripts are not a package), registered in
    ``sys.modules`` (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(Path(name).stem, REPO / "scripts" / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_reme(args: list[str], cwd: Path, timeout: float = 600, env: dict | None = None,
             check: bool = False, process: bool = False) -> subprocess.CompletedProcess:
    """The real CLI, as a user runs it, from ``cwd``: in this process (Typer's runner: no
    interpreter start and no imports, 2-3 s of CPU each) unless ``process=True`` or the
    command must re-execute itself (another BFCL release). Tests of what only a process
    shows (signals, kill -9, exit on a crash, the processes left behind) pass ``process=True``.
    ``env`` is laid over this process's environment; a value of None unsets the variable."""
    env = _run_env(args, cwd, env)
    before = subprocess.CompletedProcess(args, 0, "", "")
    if not process:
        done = _in_process(args, cwd, env)
        if not isinstance(done, _Reexec):
            if check and done.returncode != 0:
                raise AssertionError(f"reme {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            return done
        before = done.printed
    proc = reme_process(args, cwd=cwd, env={k: v for k, v in {**os.environ, **env}.items() if v is not None},
                        capture_output=True, text=True, timeout=timeout)
    # A re-executed command's output follows what it printed before re-executing (one stream for a user).
    proc.stdout, proc.stderr = before.stdout + proc.stdout, before.stderr + proc.stderr
    if check and proc.returncode != 0:
        raise AssertionError(f"reme {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def reme_popen(args: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen([sys.executable, "-m", "reme_cli.cli", *args], **kwargs)``: reme in a
    process of its own, for what only a process shows (signals, kill -9, exit codes, what it
    leaves behind). Forked from the worker's warmed interpreter (tests/forkserver.py): the same
    process, without the ~2 s of CPU a fresh interpreter spends importing reme."""
    return forkserver.Popen("reme_cli.cli", list(args), **kwargs)


def reme_process(args: list[str], timeout: float | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` of ``reme ARGS`` in a process of its own (see ``reme_popen``)."""
    return forkserver.run("reme_cli.cli", list(args), timeout=timeout, **kwargs)


def scripted_popen(args: list[str], **kwargs) -> subprocess.Popen:
    """The scripted server (a TEST DOUBLE, ``python -m reme_cli.testing.scripted_server ARGS``)
    in a process of its own, forked as ``reme_popen``."""
    return forkserver.Popen("reme_cli.testing.scripted_server", list(args), **kwargs)


def _run_env(args: list[str], cwd: Path, env: dict | None) -> dict:
    """What a run's environment lays over this process's: ``env``, with REME_CACHE_DIR in
    ``cwd`` unless it names one, and the shared vectors there if the run embeds with MiniLM."""
    env = {"REME_CACHE_DIR": str(cwd / ".reme_cache"), **(env or {})}
    if embeds_with_minilm(args):
        share_vectors(cwd / env["REME_CACHE_DIR"])
    return env


# The bundled MiniLM's vectors, one cache for the whole test run (set by _shared_vector_cache).
_shared_vectors: Path | None = None


def run_root(config: pytest.Config, tmp_path_factory) -> Path:
    """The folder every xdist worker of this test run shares: the parent of a worker's base
    temporary folder (popen-gwN), or the base folder itself without workers. Asked of pytest,
    not of the environment: a pytest that a test starts inherits PYTEST_XDIST_WORKER, and its
    base folder's parent is the user's pytest-of-USER, which outlives every run."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@pytest.fixture(scope="session", autouse=True)
def _shared_vector_cache(pytestconfig, tmp_path_factory) -> None:
    """One vector cache for every run of the test run that embeds with the bundled MiniLM,
    shared by the xdist workers (under the run's common temporary folder, as the toy world).
    The vectors are the model's own, computed by the first run that needs them; the others
    read them instead of loading the model (~5 s of CPU in a fresh process) and embedding the
    same released pools and task queries again. sqlite's locking lets processes share it, as
    reme's parallel runs do."""
    global _shared_vectors
    _shared_vectors = run_root(pytestconfig, tmp_path_factory) / "shared-embeddings"
    _shared_vectors.mkdir(exist_ok=True)


def embeds_with_minilm(args: list[str]) -> bool:
    """Whether a run's overrides leave it embedding with the bundled MiniLM alone: the default
    embedding, or ``embedding=minilm`` after a Qwen3 model (whose file picks Qwen3-Embedding),
    and no ``embedding.*`` setting. Runs on an embedding endpoint keep a cache of their own:
    their tests count the endpoint's requests."""
    chosen = None
    for arg in args:
        if arg.startswith("embedding."):
            return False
        if arg.startswith("embedding="):
            chosen = arg.split("=", 1)[1]
    if chosen is not None:
        return chosen == "minilm"
    return not any(arg.startswith("model=qwen3") for arg in args)


def share_vectors(cache_dir: Path) -> None:
    """Point the vector cache under ``cache_dir`` (a run's REME_CACHE_DIR: ``embeddings/``)
    at the test run's shared one, unless the folder already has a cache of its own."""
    link = cache_dir / "embeddings"
    if _shared_vectors is None or link.exists() or link.is_symlink():
        return
    cache_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # runs side by side (run_reme_together) link it once
        link.symlink_to(_shared_vectors, target_is_directory=True)


def reme_env(cache_dir: Path) -> dict[str, str]:
    """The environment of a ``reme`` process a test starts itself (to signal or kill it) that
    embeds with the bundled MiniLM: REME_CACHE_DIR at ``cache_dir``, the shared vectors in it."""
    share_vectors(cache_dir)
    return {**os.environ, "REME_CACHE_DIR": str(cache_dir)}


# What differs between a live run and its replay from the response cache, or a resumed one:
# the clock readings of a unit and of each step, and whether a step's answer came from the cache.
CLOCK_KEYS = ("started_at", "finished_at", "wall_s", "llm_latency_s", "retrieval_s")


def without_timing(trial: dict) -> dict:
    """A unit's record without its clock readings and cache flags (a replay from the cache
    takes no time and says so)."""
    out = {k: v for k, v in trial.items() if k not in CLOCK_KEYS}
    out["trajectory"] = {**trial["trajectory"], "turns": [
        [{k: v for k, v in step.items() if k not in ("latency_s", "cached")} for step in turn]
        for turn in trial["trajectory"]["turns"]]}
    return out


class _Reexec(Exception):
    """The command asked to run again in a fresh process: the test runs it as a subprocess,
    after what it ``printed`` before asking."""

    printed: subprocess.CompletedProcess


_in_process_lock = threading.Lock()  # the working directory and environment are the process's


def _in_process(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess | _Reexec:
    """One CLI invocation in this process, with the working directory, environment and signal
    handlers it had restored afterwards; a ``_Reexec`` if the command must re-execute itself."""
    import signal
    import traceback

    from rich.console import Console
    from typer.testing import CliRunner

    import reme_cli.cli as cli

    def no_reexec(_env):
        raise _Reexec()

    with _in_process_lock:
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        main = threading.current_thread() is threading.main_thread()
        saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.chdir(cwd)
        real_reexec, cli._reexec = cli._reexec, no_reexec
        # A process's console reads COLUMNS once, when reme starts: so does each invocation here.
        real_console, cli.console = cli.console, Console(stderr=True)
        try:
            result = CliRunner().invoke(cli.app, args, prog_name="reme")
        finally:
            cli._reexec, cli.console = real_reexec, real_console
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            for s, handler in saved_signals.items():
                signal.signal(s, handler)
    if isinstance(result.exception, _Reexec):
        result.exception.printed = subprocess.CompletedProcess(args, 0, result.stdout, result.stderr)
        return result.exception
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # What a user would see: the traceback (a test that expects one line fails on it).
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["reme", *args], result.exit_code, result.stdout, stderr)


@pytest.fixture(scope="session")
def toy_world(pytestconfig, tmp_path_factory) -> Path:
    """The AppWorld toy world (tests/fixtures/appworld_toyworld.py), built once per test run
    in AppWorld's own venv (~30 s of CPU) and shared by the xdist workers: the first to need
    it builds it under the run's common temporary folder while the others wait on its lock.
    Tests only read it (each episode writes its own experiment output under it, named
    uniquely; the sandbox mounts the world read-only)."""
    from filelock import FileLock

    from reme_cli.bench.appworld.venv import default_venv

    python = default_venv() / "bin" / "python"
    assert python.exists(), "AppWorld is not set up: run `reme appworld setup` (.ci/run does)"
    shared = run_root(pytestconfig, tmp_path_factory)
    root, built = shared / "toyworld", shared / "toyworld.built"
    with FileLock(str(shared / "toyworld.lock")):
        if not built.exists():
            subprocess.run([str(python), str(REPO / "tests" / "fixtures" / "appworld_toyworld.py"), str(root),
                            "--force"], check=True, capture_output=True, timeout=600)
            built.touch()
    return root


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory):
    """The embedded CPU model's llama.cpp server (the bundled SmolLM2), started once for the
    tests that need the real model but not reme's own start and stop of it (that is
    tests/llm/test_local_model_e2e.py's, and tests/llm/test_local_server.py tests the server on its
    own): they pass ``llm.base_url=`` its URL. Each reme run so skips a server start, and
    the server's RAM prompt cache serves the BFCL prompt these tests share."""
    from reme_cli.llm.local_server import LocalServer

    with LocalServer(log_path=tmp_path_factory.mktemp("llama") / "server.log") as server:
        group = server._proc.pid
        yield server
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # stopped, with every process of its group


@pytest.fixture
def no_paper_count(monkeypatch) -> None:
    """In-process dry runs plan without the paper-wide clean-cell count: it plans the suite
    again for every paper model, most of a dry run's time, and only
    tests/report/test_fidelity_column.py is about it."""
    from reme_cli.commands import fidelity_count

    monkeypatch.setattr(fidelity_count, "paper_count", lambda *a, **k: None)


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


def _stat(pid: int) -> tuple[str, str, int] | None:
    """(state, start time, parent pid) of a process, or None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], fields[19], int(fields[1])


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """``root``'s live descendants (not zombies): pid -> (start time, command line). This is
    how a test finds its own processes: another test's, or another run's on this machine,
    are never in its tree."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _stat(int(d.name))) is not None:
            children.setdefault(st[2], []).append(int(d.name))
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        st = _stat(pid)
        if st is None:
            continue
        if st[0] != "Z":
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            found[pid] = (st[1], cmd)
        todo += children.get(pid, [])
    return found


def still_running(seen: dict[int, tuple[str, str]]) -> list[str]:
    """Those of ``seen`` (``descendants``) that still run: same pid and start time, not a zombie."""
    left = []
    for pid, (start, cmd) in seen.items():
        st = _stat(pid)
        if st is not None and st[0] != "Z" and st[1] == start:
            left.append(f"{pid} {cmd}")
    return left


def run_watched(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 600,
                every: float = 0.3, watch=None) -> tuple[subprocess.CompletedProcess, dict[int, tuple[str, str]]]:
    """``run_reme``, also returning every descendant the run had while it ran (sampled), to
    check afterwards that none outlived it (``still_running``); ``watch(pid)``, when given,
    is called with each live descendant's pid at each sample."""
    full_env = {**os.environ, **_run_env(args, cwd, env)}
    proc = reme_popen(args, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[int, tuple[str, str]] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = descendants(proc.pid)
            seen.update(now)
            for pid in now if watch else ():
                watch(pid)
            time.sleep(every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        sampler.join()
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), seen


@contextlib.contextmanager
def scripted_server_process(*args: str, env: dict | None = None):
    """The scripted server (a TEST DOUBLE) in its own process: yields its base URL. Its own
    process, so a run can be killed or interrupted without touching the server."""
    server = scripted_popen(list(args), stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        yield server.stdout.readline().strip()
    finally:
        server.kill()
        server.wait()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``REME_TEST_CPU_LOG=FILE`` in the environment (docs/testing.md): each test's CPU
    time, its worker's and that of the processes it started and waited for (user + system),
    one JSON line per test, and the whole machine's busy CPU meanwhile (``host``): run alone
    (``-n0``), that also counts what the test's processes did not wait for (AppWorld's
    sandboxed workers, a server stopped by a signal). On 2 cores the suite is bound by CPU."""
    log = os.environ.get("REME_TEST_CPU_LOG")
    if not log:
        yield
        return
    t0, h0, w0 = os.times(), _host_busy(), time.monotonic()
    yield
    t1 = os.times()
    cpu = sum(getattr(t1, k) - getattr(t0, k) for k in ("user", "system", "children_user", "children_system"))
    with open(log, "a") as f:
        f.write(json.dumps({"test": item.nodeid, "cpu": round(cpu, 2), "host": round(_host_busy() - h0, 2),
                            "wall": round(time.monotonic() - w0, 2), "end": round(time.time(), 1),
                            "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}) + "\n")


def _host_busy() -> float:
    """Seconds of CPU the machine has spent busy since boot (every core, every process)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def small_reme_pool(workdir: Path) -> Path:
    """A two-experience ReMe pool under ``workdir`` (MiniLM vectors): a start for dynamic runs."""
    from reme_cli.llm.embed import make_embedder
    from reme_cli.methods.reme.experience import Experience
    from reme_cli.methods.reme.pool import Pool

    embedder = make_embedder({"kind": "sentence_transformers", "model": "all-MiniLM-L6-v2",
                              "cache_dir": str(workdir / ".reme_cache" / "embeddings")})
    p = Pool.create(workdir / "pool", embedder)
    p.add([Experience(when_to_use="When moving or copying files between directories", source="success",
                      content="cd into the folder first, then use mv or cp with names relative to it."),
           Experience(when_to_use="When sending a message to another user", source="failure",
                      content="Log in with message_login before send_message.")])
    p.save()
    return p.path

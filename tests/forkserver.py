"""Real ``python -m MODULE`` processes for the tests, forked from a warmed interpreter.

A test that checks what only a process shows (signals, kill -9, exit codes, what a run
leaves behind) needs reme in a process of its own; a fresh interpreter spends ~2 s of CPU
importing openai, pandas, Hydra and bfcl-eval before doing anything. Each xdist worker
starts this program once: it imports reme, then forks one child per request. A child is a
real process (its own pid, process tree, signals, exit status and children) that runs the
module as ``python -m`` would, with the test's arguments, working directory, environment
and standard streams; only the imports are already done.

``Popen`` is ``subprocess.Popen`` with the child forked here instead of executed, so a test
uses it as it would the stdlib's (``communicate``, ``wait``, ``send_signal``, text mode).
The child's parent is the fork server, which reports its exit status back; ``pid`` and
``descendants(pid)`` work as for any process.

What a warmed module read from the environment when it was imported stays the worker's
(BFCL's scratch folder); the variables reme set for itself then are set again in each child.
A child whose ``PYTHONPATH`` would shadow a warmed module (another BFCL release) executes a
fresh interpreter instead. Tests of a fresh interpreter's own behaviour start one.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_INT = struct.Struct("!i")  # on the socket to a test: the child's pid, then its wait status

# What the server imports before forking: what reme's commands import, except what reads
# the environment or the home folder when imported (matplotlib's cache, LangMem's
# langchain/langsmith) or starts threads (a forked child gets none of them).
_WARM_SKIP = ("reme_cli.methods.langmem", "reme_cli.report.plots", "reme_cli.bench.appworld.venv_programs",
              "reme_cli.view")


# ---------------------------------------------------------------------------- the server
def _warm_up() -> dict[str, str]:
    """Import reme's modules; the variables reme set for itself while importing (e.g.
    BFCL_PROJECT_ROOT), which each child sets again over its own environment."""
    import gc
    import importlib
    import pkgutil

    import reme_cli
    from reme_cli.core.config import compose
    from reme_cli.core.environ import own_names

    before = own_names()
    for info in pkgutil.walk_packages(reme_cli.__path__, "reme_cli."):
        if not info.name.startswith(_WARM_SKIP):
            importlib.import_module(info.name)
    compose([])  # Hydra's own lazy imports
    # The warmed objects are never collected: a child's collections then leave their pages
    # shared instead of copying them.
    gc.freeze()
    return {name: os.environ[name] for name in own_names() - before if name in os.environ}


def _serve(path: str) -> tuple[dict, list[int], dict[str, str]] | None:
    """Answer requests until the test process ends; returns only in a forked child, with its
    request, its standard streams and what the warm-up set."""
    import selectors

    own = _warm_up()
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    parent_fd = os.pidfd_open(parent)
    sel.register(parent_fd, selectors.EVENT_READ, "parent")
    while True:
        for key, _ in sel.select():
            if key.data == "parent":  # the test process is gone: so are we
                os._exit(0)
            if key.data == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = _receive(conn)
                except (EOFError, OSError, ValueError):  # a test that hung up mid-request: not ours to die of
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:  # every descriptor of the server's closes: the child has its own three
                    for other in list(sel.get_map().values()):
                        if isinstance(other.data, tuple):  # another child's pidfd and its test's socket
                            other.data[1].close()
                        if isinstance(other.fileobj, socket.socket):
                            other.fileobj.close()
                        else:
                            os.close(other.fd)
                    conn.close()
                    sel.close()
                    return request, fds, own
                for fd in fds:
                    os.close(fd)
                conn.sendall(_INT.pack(pid))
                sel.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))
            else:  # a child ended: its status to the test that started it
                pid, conn = key.data
                sel.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(_INT.pack(status))
                except OSError:
                    pass
                conn.close()


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data = b""
    fds: list[int] = []
    while not data.endswith(b"\n"):
        chunk, got, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        if not chunk:
            raise EOFError("the test hung up before its request was complete")
        data += chunk
        fds += got
    return json.loads(data), fds


def _become(request: dict, fds: list[int], own: dict[str, str]) -> None:
    """In the forked child: become ``python -m MODULE ARGS`` as the test asked."""
    import importlib
    import runpy

    from reme_cli.core.environ import set_default

    if request["new_session"]:
        os.setsid()
    # As a fresh interpreter has them (the server's SIGINT is Python's default too).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    # The test's streams; stdin, unless given, is empty (not the server's).
    streams = dict(zip(request["streams"], fds))
    if 0 not in streams:
        streams[0] = os.open(os.devnull, os.O_RDONLY)
    for target, fd in streams.items():
        os.dup2(fd, target)
    for fd in set(streams.values()):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = [request["module"], *request["args"]]
    # sys.path as `python -m` builds it: the working directory, then PYTHONPATH's folders.
    extra = [os.path.abspath(p) for p in request["env"].get("PYTHONPATH", "").split(os.pathsep)
             if p and os.path.abspath(p) not in sys.path[1:]]
    if _shadowed(extra):  # another version of a warmed module (a BFCL release): a fresh interpreter
        os.execv(sys.executable, [sys.executable, "-m", *argv])
    sys.path[:1] = [os.getcwd(), *extra]
    importlib.invalidate_caches()
    if extra:  # the plug-ins installed there are this process's too (the registry read the server's)
        from reme_cli.core.registry import forget_installed

        forget_installed()
    tempfile.tempdir = None  # asked of TMPDIR again, as a fresh process would
    for name, value in own.items():
        set_default(name, value)
    sys.argv = argv
    # `python -m` runs the module as __main__ only: its imported copy stays out of the way.
    sys.modules.pop(request["module"], None)
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT  # an unhandled Ctrl-C ends a Python process by SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    _exit(code)


def _shadowed(folders: list[str]) -> bool:
    """Whether a module this interpreter has imported would come from ``folders`` instead."""
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        if any(name.removesuffix(".py") in sys.modules for name in names):
            return True
    return False


def _exit(code: int) -> None:
    """End as an interpreter does (threads joined, atexit handlers run, streams flushed),
    without tearing down the modules: that would touch, and so copy, every page the child
    shares with the server, ~1 s of CPU."""
    import atexit

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


# ---------------------------------------------------------------------------- the client
class _Server:
    """This process's fork server, started on first use, gone when this process is."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="reme-forkserver-")
        self.path = os.path.join(self.dir, "socket")
        self.proc = subprocess.Popen([sys.executable, __file__, self.path], cwd=REPO, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the fork server did not start (exit {self.proc.wait()})")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        Path(self.path).unlink(missing_ok=True)
        os.rmdir(self.dir)


_server: _Server | None = None
_server_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _server_lock:
        if _server is None or _server.proc.poll() is not None:
            import atexit

            _server = _Server()
            atexit.register(_server.close)
        return _server


class Popen(subprocess.Popen):
    """``subprocess.Popen([sys.executable, "-m", MODULE, *ARGS], ...)`` with the process forked
    from the warmed server: ``Popen(MODULE, ARGS, cwd=..., env=..., stdout=..., ...)``."""

    def __init__(self, module: str, args: list[str], **kwargs) -> None:
        self._module = module
        self._status: socket.socket | None = None
        self._status_lock = threading.Lock()
        super().__init__([sys.executable, "-m", module, *args], **kwargs)

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, gid, gids, uid, umask, start_new_session, *rest) -> None:
        if preexec_fn or pass_fds or shell or gid is not None or gids is not None or uid is not None:
            raise ValueError("the fork server runs plain `python -m` commands")
        # A stream not redirected is this process's own, as a child of this process would have it.
        streams = {0: p2cread, 1: c2pwrite if c2pwrite != -1 else 1, 2: errwrite if errwrite != -1 else 2}
        given = {target: fd for target, fd in streams.items() if fd != -1}
        request = {"module": self._module, "args": list(args[3:]), "cwd": os.fspath(cwd or os.getcwd()),
                   "env": dict(os.environ if env is None else env), "new_session": bool(start_new_session),
                   "streams": list(given)}
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(_the_server().path)
            socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], list(given.values()))
            self.pid = _INT.unpack(_recv_exact(conn, _INT.size))[0]
        except BaseException:
            conn.close()
            raise
        self._status = conn
        self._child_created = True
        # The child's ends of the pipes are the child's now: closed here as subprocess does.
        devnull = getattr(self, "_devnull", None)
        if p2cread != -1 and p2cwrite != -1 and p2cread != devnull:
            os.close(p2cread)
        if c2pwrite != -1 and c2pread != -1 and c2pwrite != devnull:
            os.close(c2pwrite)
        if errwrite != -1 and errread != -1 and errwrite != devnull:
            os.close(errwrite)
        if devnull is not None:
            os.close(devnull)
        self._closed_child_pipe_fds = True

    def _read_status(self, timeout: float | None) -> bool:
        with self._status_lock:
            if self.returncode is not None:
                return True
            self._status.settimeout(timeout)
            try:
                data = _recv_exact(self._status, _INT.size)
            except (TimeoutError, BlockingIOError):
                return False
            except (EOFError, OSError):  # the server died: the child's status is lost with it
                self.returncode = -signal.SIGKILL
            else:
                self.returncode = os.waitstatus_to_exitcode(_INT.unpack(data)[0])
            self._status.close()
            return True

    def _internal_poll(self, _deadstate=None, **_ignored):
        if self.returncode is None and self._status is not None:
            self._read_status(0)
        return self.returncode

    def _wait(self, timeout):
        if self.returncode is not None:
            return self.returncode
        if not self._read_status(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the fork server hung up")
        data += chunk
    return data


def run(module: str, args: list[str], timeout: float | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` of ``python -m MODULE ARGS`` through the fork server (``capture_output``
    and ``text`` as there)."""
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with Popen(module, args, **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            proc.kill()
            raise
        return subprocess.CompletedProcess(proc.args, proc.poll(), out, err)


if __name__ == "__main__":
    sys.path[0] = str(REPO)  # not this script's folder: the tests are no modules of reme's
    job = _serve(sys.argv[1])
    if job is not None:
        _become(*job)

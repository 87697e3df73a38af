"""One writer per directory: an exclusive lock on every run, build and pool directory.

Cluster jobs share network filesystems where ``fcntl`` locks may be ignored, so the lock
is a file created with ``O_EXCL`` (atomic on local filesystems and on NFSv3+) next to the
directory, holding who owns it. The owner touches it every ``HEARTBEAT_S``; a lock is
stale when its owner is gone: on this machine, its process is dead (or the pid now belongs
to a process started later); elsewhere, its heartbeat is older than ``STALE_AFTER_S``.
"This machine" is this kernel boot and pid namespace, not the host name: cluster nodes and
containers can share a host name, and a pid there says nothing about a process here.
A stale lock is taken over; a live one refuses the second writer with one line, or makes
it wait. Readers (``reme report``, ``pool stats``, ``pool show``) never take it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from reme_cli.core.errors import UserError, os_error_message, short_path
from reme_cli.core.reading import Damaged, JsonFile
from reme_cli.core.procs import alive as _alive
from reme_cli.core.procs import proc_start as _proc_start

HEARTBEAT_S = 10.0
STALE_AFTER_S = 60.0
WAIT_POLL_S = 1.0
# Who holds a lock: host, machine, pid, proc_start, started_at, token (``DirLock._info``).
LOCK_INFO = JsonFile("a reme lock file", fix="move it away if no reme is using the directory", max_bytes=64 * 1024,
                     shape={"host": str, "machine": (str, type(None)), "pid": int, "started_at": str, "token": str})


def lock_path(directory: Path) -> Path:
    """Beside the directory, so taking the lock never makes a fresh directory non-empty."""
    directory = Path(directory)
    return directory.parent / f".{directory.name}.lock"


def _machine() -> str | None:
    """Where a pid names the same process as here: this kernel boot and pid namespace."""
    try:
        return f"{Path('/proc/sys/kernel/random/boot_id').read_text().strip()}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


class DirLock:
    """``with DirLock(dir): ...`` holds ``dir`` for this process; see the module doc."""

    def __init__(self, directory: str | Path, wait: bool = False, what: str = "directory"):
        self.directory = Path(directory)
        self.path = lock_path(self.directory)
        self.wait = wait
        self.what = what
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # ------------------------------------------------------------------ owner info
    def _info(self) -> dict[str, Any]:
        return {"host": socket.gethostname(), "machine": _machine(), "pid": os.getpid(),
                "proc_start": _proc_start(os.getpid()), "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "token": self.token}

    def _read(self) -> tuple[dict[str, Any] | None, float | None]:
        try:
            raw = LOCK_INFO.read_bytes(self.path)
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return None, None
        except Damaged as exc:  # a folder, a FIFO, a device, a huge file: not ours to read or move
            what = "a directory" if self.path.is_dir() else exc.why
            raise UserError(f"{self.path} is {what}, not a reme lock file; move it away (reme locks "
                            f"{self.directory} with that name)") from None
        if raw is None:
            return None, None
        try:
            info = LOCK_INFO.parse(raw)
        except ValueError:  # being written this instant (or damaged): treat as live until stale
            info = {}
        return info, mtime

    def _stale(self, info: dict[str, Any], mtime: float) -> bool:
        machine = _machine()
        if machine is not None and info.get("machine") == machine and isinstance(info.get("pid"), int):
            pid = info["pid"]
            if not _alive(pid):
                return True
            start = _proc_start(pid)
            return start is not None and info.get("proc_start") not in (None, start)
        return time.time() - mtime > STALE_AFTER_S

    # ------------------------------------------------------------------ acquire/release
    def acquire(self) -> DirLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # under a file, read-only, in /proc, a name too long...
            raise UserError(f"cannot use {short_path(self.directory)}: {os_error_message(exc)}") from None
        except RecursionError:  # pathlib makes each missing parent in a nested call
            raise UserError(f"cannot use {short_path(self.directory)}: it is nested too deep; "
                            "choose a shorter path") from None
        while True:
            if self._try_create():
                self._beat = threading.Thread(target=self._heartbeat, name="reme-lock", daemon=True)
                self._beat.start()
                return self
            info, mtime = self._read()
            if info is None:
                continue  # released between our attempt and the read: try again
            if self._stale(info, mtime):
                self._break(info)
                continue
            if not self.wait:
                raise UserError(
                    f"{self.directory} is in use by another reme: pid {info.get('pid')} on {info.get('host')}, "
                    f"since {info.get('started_at')}; wait for it to finish, or pass --wait to queue behind it")
            time.sleep(WAIT_POLL_S)

    def _try_create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError as exc:
            raise UserError(f"cannot use {short_path(self.directory)}: {os_error_message(exc)}") from None
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self._info(), f)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # a full disk: an empty lock would look held until it went stale
            with contextlib.suppress(OSError):
                self.path.unlink()
            exc.filename = exc.filename or str(self.path)
            raise UserError(f"cannot use {short_path(self.directory)}: {os_error_message(exc)}") from None
        return True

    def _break(self, stale: dict[str, Any]) -> None:
        """Move a stale lock aside. Rename is atomic: of several breakers one wins; a loser
        that moved a fresh lock (taken just before) puts it back."""
        aside = self.path.with_name(f"{self.path.name}.stale-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        try:
            moved = LOCK_INFO.parse(aside.read_bytes())
        except (OSError, ValueError):
            moved = {}
        if moved.get("token") != stale.get("token"):
            try:
                os.link(aside, self.path)  # fails if yet another lock was created meanwhile
            except FileExistsError:
                pass
        aside.unlink(missing_ok=True)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except FileNotFoundError:
                return

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=2)
            self._beat = None
            info, _ = self._read()
            if info is not None and info.get("token") == self.token:
                self.path.unlink(missing_ok=True)

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()

"""Directories that reme creates, marks as its own, and cleans up: staging directories
beside a target, and private temporary directories.

A staging dir is ``.<target>.<kind>-<random>/`` holding a ``REME_STAGING`` marker (who made
it: host, pid and the pid's start time) and the new content under ``new/``; the content is
renamed over the target at the end. A killed run leaves one behind; the next run on the same
target removes it, but only if it carries reme's marker and its maker is gone (callers hold
the target's ``DirLock``). The swap is two renames (the old target aside to
``.<target>.old-<random>``, the staging content in); a crash between them leaves no target,
and ``recover_swap`` puts the old one back. A private temporary directory (``private_tempdir``: mode 0700, a
fresh name) carries the same marker; ``clean_stale_tempdirs`` removes those of its kind whose
maker is gone (a ``kill -9``, a double Ctrl-C), never a live run's.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reme_cli.core.errors import UserError
from reme_cli.core.io import now
from reme_cli.core.procs import alive, proc_start
from reme_cli.core.reading import JsonFile

MARK = "REME_STAGING"
STAGING_MARK = JsonFile("a staging folder's REME_STAGING", fix="move the folder away", max_bytes=64 * 1024)
CONTENT = "new"


# The system's own trees (Linux, and macOS's): nothing of reme's goes in them.
SYSTEM_TREES = tuple(map(Path, ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                                "/run", "/sbin", "/snap", "/sys", "/usr", "/var/cache", "/var/lib", "/var/log",
                                "/var/spool", "/Applications", "/Library", "/System", "/private/etc",
                                "/private/var/db")))


def system_folder(path: Path) -> str | None:
    """Why ``path`` is no folder for a command to fill, replace or walk (None: it may be one).

    The rule: the file system's root and every folder right under it (/usr, /etc, /home,
    /tmp, ...: a folder of its own goes below them), any folder inside the system's trees
    (SYSTEM_TREES), the home folder and the folders above it, and the current folder and the
    folders above it; each as given and as its symbolic links resolve."""
    given = Path(os.path.abspath(path))
    home, here = Path.home().resolve(), Path.cwd().resolve()
    for p in dict.fromkeys((given, given.resolve())):
        if p.parent == p:
            return "the file system's root"
        if p.parent.parent == p.parent:
            return f"a folder right under {p.parent}, the system's"
        tree = next((t for t in SYSTEM_TREES if p == t or t in p.parents), None)
        if tree is not None:
            return f"inside {tree}, the system's"
        if p == home or p in home.parents:
            return "your home folder" if p == home else "a folder above your home folder"
        if p == here or p in here.parents:
            return "the current folder" if p == here else "a folder above the current folder"
    return None


def refuse_system_folder(path: Path, option: str, example: str = "./reme-out") -> None:
    """One line, before anything is written or walked, if ``path`` is a ``system_folder``."""
    why = system_folder(path)
    if why is not None:
        raise UserError(f"{option} {path} is {why}: reme fills a folder of its own, never that one; "
                        f"give a new folder (e.g. {option} {example})")


def _mark(root: Path, target: str) -> None:
    # Whole or absent (a rename): a half-written marker would read as a dead maker's.
    (root / f".{MARK}.tmp").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                   "proc_start": proc_start(os.getpid()), "target": target,
                                                   "created_at": now()}))
    os.replace(root / f".{MARK}.tmp", root / MARK)


def new_staging(target: Path, kind: str) -> Path:
    """A fresh marked staging dir beside ``target``; fill ``root / CONTENT``."""
    root = target.parent / f".{target.name}.{kind}-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    _mark(root, target.name)
    return root


def private_tempdir(prefix: str, base: str | None = None) -> Path:
    """A fresh directory under ``base`` (default: the temp dir) that only this user can
    enter, marked as this process's (see the module doc)."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    _mark(root, prefix)
    return root


def clean_stale_tempdirs(prefix: str, base: str | None = None) -> list[Path]:
    """Remove this user's marked ``prefix*`` temp dirs whose maker is gone; returns them."""
    removed = []
    for root in sorted(Path(base or tempfile.gettempdir()).glob(f"{prefix}*")):
        try:
            info = root.lstat()
        except OSError:
            continue
        if (root.is_dir() and not root.is_symlink() and info.st_uid == os.getuid() and (root / MARK).is_file()
                and not _maker_alive(root)):
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
    return removed


def _maker_alive(root: Path) -> bool:
    info = STAGING_MARK.probe(root / MARK)
    if info is None or info.get("host") != socket.gethostname() or not isinstance(info.get("pid"), int):
        return False  # another host's: the caller's lock on the target says nobody uses it
    pid = info["pid"]
    if not alive(pid):
        return False
    start = proc_start(pid)
    return start is None or info.get("proc_start") in (None, start)


def clean_stale(target: Path, kind: str) -> list[Path]:
    """Remove the marked staging dirs of ``target`` left by killed runs; returns them."""
    removed = []
    for root in sorted(target.parent.glob(f".{target.name}.{kind}-*")):
        if root.is_dir() and not root.is_symlink() and (root / MARK).is_file() and not _maker_alive(root):
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
    return removed


def replace_dir(dest: Path, fill: Any, kind: str = "building", proof: Any = None) -> Any:
    """Build a directory beside ``dest`` with ``fill(staging)``, then swap it in whole: a
    crash or an error leaves the previous ``dest`` (if any) untouched. Returns ``fill``'s
    result. The staging dir is reme's marked ``.<dest>.<kind>-*``, so
    a rerun after a kill can clean it up (``clean_stale``).

    A ``dest`` that is a symbolic link is written through (the folder it points to is
    replaced; the link stays). ``proof(old)``, when given, is called on the previous folder
    once it is out of the way and must raise if reme cannot prove every file in it is its
    own: the folder is then put back untouched."""
    refuse_system_folder(dest, "the folder")  # a safety net: each command says it first, with its option
    if dest.is_symlink():
        dest = dest.resolve()
    root = new_staging(dest, kind)
    staging = root / CONTENT
    old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:8]}")
    try:
        staging.mkdir()
        result = fill(staging)
        _fsync_tree(staging)  # the content is on disk before the rename makes it the target
        if dest.exists():
            dest.rename(old)
            if proof is not None:
                try:
                    proof(old)
                except BaseException:
                    old.rename(dest)
                    raise
        # A crash right here leaves no ``dest``: ``recover_swap`` moves ``old`` back.
        staging.rename(dest)
        fsync_path(dest.parent)  # the renames themselves are on disk
        shutil.rmtree(old, ignore_errors=True)
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _backups(dest: Path) -> list[Path]:
    return [p for p in dest.parent.glob(f".{dest.name}.old-*") if p.is_dir() and not p.is_symlink()]


def recover_swap(dest: Path, complete: Callable[[Path], bool], wait_s: float = 1.0) -> None:
    """If a ``replace_dir`` died between its two renames (no ``dest``, a backup beside it),
    move the newest backup that ``complete`` accepts back to ``dest``. A writer may just be
    between its renames: it is given ``wait_s`` to finish first. A link is followed, as
    ``replace_dir`` does."""
    dest = dest.resolve() if dest.is_symlink() else dest
    if dest.exists():
        return
    backups = [p for p in _backups(dest) if complete(p)]
    if not backups:
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if dest.exists():
            return
        time.sleep(0.05)
    newest = max(backups, key=lambda p: p.stat().st_mtime)
    try:
        newest.rename(dest)
    except OSError:
        if not dest.exists():
            raise


def clean_backups(dest: Path, complete: Callable[[Path], bool]) -> list[Path]:
    """Remove the backups of ``dest`` that earlier interrupted swaps left behind (those
    ``complete`` recognises as old versions of it), once ``dest`` itself is whole again;
    the caller is ``dest``'s only writer."""
    dest = dest.resolve() if dest.is_symlink() else dest
    removed = [p for p in _backups(dest) if dest.exists() and complete(p)]
    for p in removed:
        shutil.rmtree(p, ignore_errors=True)
    return removed


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):  # files before the dirs holding them
        fsync_path(path)
    fsync_path(root)


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (a directory: its entries, e.g. a rename)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

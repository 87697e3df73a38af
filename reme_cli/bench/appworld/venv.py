"""``reme appworld setup``: AppWorld's own virtualenv, from the pinned version.

What may be deleted is proven, never guessed from a name: the venv folder's ``REME_APPWORLD``
manifest lists every file setup wrote with its sha256, and a folder is cleared for a rebuild
only when every file in it is listed there and unchanged (any other file: refused, in one
line, before anything is written). The network is used first and apart: every package is
fetched into a private wheelhouse, so a machine without network stops there (exit 4) with
the venv folder untouched; the venv is then built from the wheelhouse alone. A setup killed
midway leaves its manifest saying ``building``; the next setup refuses that folder (it cannot
tell pip's files from anything added since) and says to remove it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer

from reme_cli.core.errors import UserError
from reme_cli.core.io import now
from reme_cli.core.procs import alive, proc_start
from reme_cli.core.reading import JsonFile
from reme_cli.core.registry import CommandGroup
from reme_cli.core.staging import clean_stale_tempdirs, private_tempdir

APPWORLD_VERSION = "0.1.3.post1"
STAMP = "REME_APPWORLD"
STAMP_FILE = JsonFile("AppWorld's venv stamp (REME_APPWORLD)", fix="run `reme appworld setup` again",
                      max_bytes=64 * 1024, shape={"status": str, "appworld": str, "host": str, "pid": int})
_WHEELS_PREFIX = "reme-appworld-wheels-"


def default_venv() -> Path:
    return Path(sys.prefix) / "share" / "reme" / "appworld-venv"


def setup(venv: Path | None = None) -> Path:
    """AppWorld's venv at ``venv``, with ``appworld install`` run and verified. Idempotent:
    a complete venv of the pinned version is kept as it is."""
    venv = venv or default_venv()
    if _complete(venv):
        return venv
    _check_replaceable(venv)
    clean_stale_tempdirs(_WHEELS_PREFIX)
    wheels = private_tempdir(_WHEELS_PREFIX)
    try:
        python = shutil.which("python3.11") or sys.executable
        # A throwaway venv for its pip (the interpreter itself may come without one).
        _step([python, "-m", "venv", str(wheels / "pip-venv")], "create a venv for pip")
        _step([str(wheels / "pip-venv" / "bin" / "python"), "-m", "pip", "wheel", "-q", "--wheel-dir",
               str(wheels / "wheels"), "pip", f"appworld=={APPWORLD_VERSION}"], "fetch AppWorld's packages",
              exit_code=4, hint="no network? run reme appworld setup where there is one, and copy the venv")
        _clear_listed(venv)
        venv.mkdir(parents=True, exist_ok=True)
        _write_stamp(venv, {"status": "building", "appworld": APPWORLD_VERSION, "host": os.uname().nodename,
                            "pid": os.getpid(), "proc_start": proc_start(os.getpid()), "started_at": now()})
        _step([python, "-m", "venv", str(venv)], "create the venv")
        offline = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels / "wheels")]
        _step([*offline, "--upgrade", "pip"], "install pip")
        _step([*offline, f"appworld=={APPWORLD_VERSION}"], "install AppWorld")
        _step([str(venv / "bin" / "python"), "-m", "appworld.cli", "install"], "run appworld install", cwd=venv)
        _step([str(venv / "bin" / "python"), "-c", "import appworld.apps.supervisor, uvicorn"], "import AppWorld")
        # `appworld install` unpacks the apps' sources (1.1 MB) with no bytecode, and the sandbox
        # mounts the venv read-only: every supervisor and evaluator would compile them again
        # (0.4-1.1 s of CPU each, measured on a supervisor) instead of loading .pyc files.
        _step([str(venv / "bin" / "python"), "-c", "import compileall, os, sys, appworld.apps as a; "
               "sys.exit(not compileall.compile_dir(os.path.dirname(a.__file__), quiet=1))"], "compile AppWorld's apps")
    finally:
        shutil.rmtree(wheels, ignore_errors=True)
    _write_stamp(venv, {"status": "complete", "appworld": APPWORLD_VERSION, "created_at": now(),
                        "files": _listing(venv)})
    return venv


def _step(cmd: list[str], what: str, exit_code: int = 2, hint: str = "", cwd: Path | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        cause = next((ln for ln in reversed(lines) if ln.startswith(("ERROR", "error"))), lines[-1] if lines else "")
        raise UserError(f"reme appworld setup could not {what}: {cause[:300] or f'exit code {proc.returncode}'}"
                        + (f" ({hint})" if hint else ""), exit_code=exit_code)


def _read_stamp(venv: Path) -> dict[str, Any] | str | None:
    try:
        raw = STAMP_FILE.read_bytes(venv / STAMP)
    except UserError:  # not a file, too large, unreadable: as if none
        return None
    if raw is None:
        return None
    try:
        return STAMP_FILE.parse(raw)
    except ValueError:  # reme before manifests wrote the bare version
        return raw.decode("utf-8", errors="replace").strip()


def _write_stamp(venv: Path, data: dict[str, Any]) -> None:
    tmp = venv / f".{STAMP}.tmp"
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, venv / STAMP)


def _complete(venv: Path) -> bool:
    stamp = _read_stamp(venv)
    if stamp == APPWORLD_VERSION:  # a venv of reme 0.1: complete, written before the manifest
        return True
    return isinstance(stamp, dict) and stamp.get("status") == "complete" and stamp.get("appworld") == APPWORLD_VERSION


def _check_replaceable(venv: Path) -> None:
    """Refuse (one line) a folder setup may not build in: it must be new, empty, or a
    complete venv of reme's whose every file its manifest lists unchanged."""
    if not venv.exists():
        return
    if not venv.is_dir():
        raise UserError(f"--venv {venv} is a file; choose a new or empty folder")
    if not any(venv.iterdir()):
        return
    stamp = _read_stamp(venv)
    if stamp is None:
        raise UserError(f"--venv {venv} exists and is not a reme AppWorld venv (no {STAMP} manifest); "
                        "choose a new or empty folder")
    if isinstance(stamp, dict) and stamp.get("status") == "building":
        if stamp.get("host") == os.uname().nodename and isinstance(stamp.get("pid"), int) and alive(stamp["pid"]) \
                and stamp.get("proc_start") in (None, proc_start(stamp["pid"])):
            raise UserError(f"another reme appworld setup (pid {stamp['pid']}) is building {venv}; wait for it")
        raise UserError(f"--venv {venv} holds an interrupted setup, whose files reme cannot tell from yours: "
                        f"remove it (rm -rf {venv}) and rerun")
    if not (isinstance(stamp, dict) and stamp.get("status") == "complete" and isinstance(stamp.get("files"), dict)):
        raise UserError(f"--venv {venv} has a {STAMP} file but no manifest of its files, so reme cannot prove the "
                        "folder is its own: remove it yourself or choose another --venv")
    extra = _unlisted(venv, stamp["files"])
    if extra:
        raise UserError(f"--venv {venv} holds files reme did not write or that changed since ({extra}); move them "
                        "away or choose another --venv")


def _listing(venv: Path) -> dict[str, str]:
    """Every file and link under ``venv`` but the manifest: sha256 of a file, ``link:``
    and the target of a link."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(venv):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath) / name
            rel = path.relative_to(venv).as_posix()
            if rel in (STAMP, f".{STAMP}.tmp"):
                continue
            out[rel] = f"link:{os.readlink(path)}" if path.is_symlink() else _sha256(path)
    return out


def _unlisted(venv: Path, files: dict[str, str]) -> str | None:
    """The first file in ``venv`` its manifest does not list as it is now, or None."""
    for rel, digest in _listing(venv).items():
        if files.get(rel) != digest:
            return rel
    return None


def _clear_listed(venv: Path) -> None:
    """Remove the files of a proven venv (``_check_replaceable`` passed), then its empty
    folders: only what its manifest lists."""
    stamp = _read_stamp(venv)
    if not (isinstance(stamp, dict) and isinstance(stamp.get("files"), dict)):
        return
    if _unlisted(venv, stamp["files"]):  # changed since the check: refuse now, rather than guess
        _check_replaceable(venv)
    for rel in stamp["files"]:
        (venv / rel).unlink(missing_ok=True)
    (venv / STAMP).unlink()
    for dirpath, _, _ in sorted(os.walk(venv), key=lambda w: -len(w[0])):
        if Path(dirpath) != venv:
            try:
                os.rmdir(dirpath)
            except OSError:
                pass  # not empty: nothing of it was ours to remove


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def setup_command(
    venv: Path | None = typer.Option(None, help="Where to create it (default <prefix>/share/reme/appworld-venv)."),
) -> None:
    """Create AppWorld's virtualenv from the pinned version, run `appworld install`, verify it.

    Idempotent. The task data is separate: `appworld download data` on a networked machine.
    """
    print(setup(venv))


# `reme appworld setup`, found through reme_cli.core.registry.COMMANDS.
COMMANDS = CommandGroup(help="AppWorld's own environment (separate virtualenv).", commands={"setup": setup_command})

"""Whether a process that left its pid behind (in a lock, a staging marker) still runs."""

from __future__ import annotations

import os
from pathlib import Path


def proc_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux), to tell a reused pid from the owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command name


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

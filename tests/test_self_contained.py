"""The repository stands alone: a user clones it and has nothing beside it.

No tracked file may read or name the development machine's reference desk (the folder
beside the checkout) or any absolute path of the folder the checkout sits in.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

DESK = ".." + "/" + "shared"  # spelled in two parts so this file does not name it
# Folders every Linux machine has: a checkout cloned into one of them (as users do) may still
# name them, e.g. the sandbox's own /tmp inside an episode; they say nothing about this machine.
SYSTEM_FOLDERS = {"/", "/tmp", "/var/tmp", "/dev/shm"}


def tracked_files(root: Path) -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
        return [root / name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # an export without .git: every file
        skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".reme_cache"}
        return [p for p in root.rglob("*") if p.is_file() and not skip & set(p.relative_to(root).parts)]


def leaks(root: Path, above: str | None = None) -> list[str]:
    """``file:line: text`` for each line naming the desk or an absolute path above ``root``
    (``above``: the folder ``root`` sits in, its real parent unless a test names another)."""
    above = above or str(root.resolve().parent)
    needles = [DESK] + ([above.rstrip("/") + "/"] if above not in SYSTEM_FOLDERS else [])
    found = []
    for path in tracked_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary (plots)
        for n, line in enumerate(text.splitlines(), 1):
            if any(needle in line for needle in needles):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()[:120]}")
    return found


def test_no_tracked_file_names_a_path_outside_the_repository():
    assert leaks(REPO) == []


def test_the_check_catches_planted_paths(tmp_path):
    repo = tmp_path / "checkout"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "ok.py").write_text("POOL = 'official:bfcl/qwen3-8b'\n")
    (repo / "tests" / "desk.py").write_text(f"SPLIT = '{DESK}/reference/split.json'\n")
    (repo / "notes.md").write_text(f"see {tmp_path}/elsewhere/pools.jsonl\n")
    assert sorted(x.split(":")[0] for x in leaks(repo)) == ["notes.md", "tests/desk.py"]


def test_a_checkout_in_the_system_temp_folder_may_name_it(tmp_path):
    """A clone right under /tmp still flags the desk, but not the sandbox's own /tmp paths."""
    repo = tmp_path / "checkout"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "sandbox.py").write_text("LEAK = '/tmp/reme-leak.txt'\n")
    (repo / "tests" / "desk.py").write_text(f"SPLIT = '{DESK}/reference/split.json'\n")
    assert [x.split(":")[0] for x in leaks(repo, above="/tmp")] == ["tests/desk.py"]

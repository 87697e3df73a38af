"""The run directory: resolved config, manifest, and append-only unit records.

A unit's line is written whole and fsync'ed when the unit ends, so ``kill -9`` loses at
most the units in flight; a torn last line is cut off on reopen, and a unit that appears
twice (it cannot, but a hand-edited file might) counts once.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

import yaml

from reme_cli.errors import UserError

CONFIG_FILE = "config.yaml"
MANIFEST_FILE = "manifest.json"
TRIALS_FILE = "trials.jsonl"
METRICS_FILE = "metrics.json"

_PACKAGES = ("reme", "bfcl-eval", "openai", "llama_cpp_python", "sentence-transformers",
             "faiss-cpu", "hydra-core", "torch", "vllm", "appworld")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, ensure_ascii=False, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def git_state() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root,
                              capture_output=True, text=True, timeout=5)
        commit = head.stdout.strip() if head.returncode == 0 else ""
        dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True,
                                    text=True, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": dirty if commit else None}


@dataclass
class RunDir:
    path: Path

    @classmethod
    def open(cls, path: str | Path, config: dict[str, Any], config_hash: str, kind: str) -> "RunDir":
        """Create the directory, or reopen it for resume if it holds the same config."""
        run = cls(Path(path))
        cfg_file = run.path / CONFIG_FILE
        if cfg_file.exists():
            old = run.manifest().get("config_hash")
            if old != config_hash:
                raise UserError(
                    f"{run.path} holds a run with a different config (hash {old}, now "
                    f"{config_hash}): choose another out_dir, or delete that directory"
                )
            run._repair_trials()
        else:
            if run.path.exists() and any(run.path.iterdir()):
                raise UserError(f"{run.path} exists and is not a reme run directory: choose another out_dir")
            run.path.mkdir(parents=True, exist_ok=True)
            with open(cfg_file, "w") as f:
                yaml.safe_dump(config, f, sort_keys=False)
            write_json_atomic(run.path / MANIFEST_FILE, {
                "kind": kind,
                "status": "created",
                "config_hash": config_hash,
                "created_at": now(),
                "git": git_state(),
                "packages": package_versions(),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
            })
        return run

    def manifest(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / MANIFEST_FILE).read_text())
        except (OSError, json.JSONDecodeError):
            return {}

    def update_manifest(self, **fields: Any) -> None:
        data = self.manifest()
        data.update(fields, updated_at=now())
        write_json_atomic(self.path / MANIFEST_FILE, data)

    def _repair_trials(self) -> None:
        """Cut a torn final line left by a kill in the middle of a write."""
        path = self.path / TRIALS_FILE
        if not path.exists():
            return
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)

    def trials(self) -> list[dict[str, Any]]:
        """Every finished unit; a retried unit (its first attempt errored) keeps its last record."""
        seen: dict[str, dict[str, Any]] = {}
        for rec in _read_jsonl(self.path / TRIALS_FILE):
            seen[rec["unit"]] = rec
        return list(seen.values())

    def finished_units(self) -> set[str]:
        """Units that need not run again (an errored unit is retried)."""
        return {t["unit"] for t in self.trials() if t.get("error") is None}

    def append_trial(self, record: dict[str, Any]) -> None:
        append_lines(self.path / TRIALS_FILE, [record])

    def trial_writer(self) -> JsonlWriter:
        return JsonlWriter(self.path / TRIALS_FILE)

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        write_json_atomic(self.path / METRICS_FILE, metrics)


_append_lock = threading.Lock()


def append_lines(path: Path, records: list[dict[str, Any]]) -> None:
    """Append JSON lines durably: whole lines, then one fsync, so a crash leaves only
    whole lines behind (a torn last line is cut on reopen)."""
    text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
    with _append_lock, open(path, "a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


class JsonlWriter:
    """Durable appends from many coroutines with group commit: every ``write`` returns once
    its line is on disk, and the lines that queue up during one fsync share the next.

    One fsync per line, made while the unit still held its concurrency slot, serialized
    the run at high concurrency (scripts/bench_harness.py)."""

    def __init__(self, path: Path):
        self.path = path
        self._pending: list[tuple[dict[str, Any], asyncio.Future]] = []
        self._flusher: asyncio.Task | None = None

    async def write(self, record: dict[str, Any]) -> None:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((record, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        await future

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await asyncio.to_thread(append_lines, self.path, [r for r, _ in batch])
            except Exception as exc:
                for _, fut in batch:
                    fut.set_exception(exc)
            else:
                for _, fut in batch:
                    fut.set_result(None)


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "unit" in rec:
                yield rec

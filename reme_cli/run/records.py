"""The run directory as its run writes it: resolved config, manifest, and append-only unit
records. Every reader, this one's resume included, reads it through ``core/run_log.py``
(typed, versioned, and importable from every layer).

A unit's line is written whole and fsync'ed when the unit ends, so ``kill -9`` loses at
most the units in flight; a torn last line is cut off on reopen, and a unit that appears
twice (it cannot, but a hand-edited file might) counts once.
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from reme_cli.core.errors import UserError
from reme_cli.core.io import append_lines, now, write_json_atomic
from reme_cli.core.run_log import (CONFIG_FILE, MANIFEST_FILE, MANIFEST_VERSION, METRICS_FILE, REPORT_FILE,
                                   RUN_MANIFEST, TRIALS_FILE, RunLog, read_config, read_run_log)
from reme_cli.core.trials import SCHEMA_VERSION, UnitRecord, read_trials

__all__ = ["CONFIG_FILE", "MANIFEST_FILE", "METRICS_FILE", "REPORT_FILE", "SCHEMA_VERSION", "TRIALS_FILE",
           "JsonlWriter", "RunDir", "UnitRecord", "read_trials"]

# What every run's results may depend on, whatever its benchmark; a benchmark names its own
# (``Benchmark.packages``), so a new one edits nothing here.
_PACKAGES = ("reme-harness", "openai", "xllamacpp", "llama_cpp_python", "sentence-transformers",
             "faiss-cpu", "hydra-core", "torch", "vllm")


def package_versions(benchmark_packages: Sequence[str] = ()) -> dict[str, str]:
    """The installed version of each of reme's packages and ``benchmark_packages`` (those not
    installed here are left out)."""
    out = {}
    for name in dict.fromkeys((*_PACKAGES, *benchmark_packages)):
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
    def open(cls, path: str | Path, config: dict[str, Any], config_hash: str, kind: str,
             packages: Sequence[str] = ()) -> "RunDir":
        """Create the directory, or reopen it for resume if it holds the same config; a new
        one's manifest records the versions of reme's packages and of ``packages`` (the
        benchmark's)."""
        run = cls(Path(path))
        if run.path.exists() and not run.path.is_dir():
            raise UserError(f"{run.path} is a file, not a directory: choose another out_dir")
        cfg_file = run.path / CONFIG_FILE
        if cfg_file.exists() or (run.path / MANIFEST_FILE).exists():
            old = run.check().manifest.config_hash
            if old != config_hash:
                raise UserError(
                    f"{run.path} holds a run with a different config (hash {old}, now "
                    f"{config_hash}): choose another out_dir, or delete that directory"
                )
            run.check_unedited(config)
            run._repair_trials()
            run.trials()  # a damaged record is refused here, before the manifest changes
        else:
            if run.path.exists() and any(run.path.iterdir()):
                raise UserError(f"{run.path} exists and is not a reme run directory: choose another out_dir")
            run.path.mkdir(parents=True, exist_ok=True)
            try:
                with open(cfg_file, "w") as f:
                    yaml.safe_dump(config, f, sort_keys=False)
                write_json_atomic(run.path / MANIFEST_FILE, {
                    "schema_version": MANIFEST_VERSION,
                    "kind": kind,
                    "status": "created",
                    "config_hash": config_hash,
                    "created_at": now(),
                    "git": git_state(),
                    "packages": package_versions(packages),
                    "python": sys.version.split()[0],
                    "platform": platform.platform(),
                })
            except OSError as exc:
                # A config without its manifest would look like another run's: take it back.
                with contextlib.suppress(OSError):
                    cfg_file.unlink(missing_ok=True)
                exc.filename = exc.filename or str(cfg_file)
                raise
        # The unit records are what makes the folder a run (core.run_log.find_runs): a tracker
        # is sent the config and manifest, never them. Empty until a unit ends.
        (run.path / TRIALS_FILE).touch()
        return run

    def check(self) -> RunLog:
        """The run as ``read_run_log`` reads it: a run directory whose config.yaml or
        manifest.json is missing or unreadable is refused in one line naming the damaged file
        and the way out (a resume would misjudge it)."""
        return read_run_log(self.path)

    def check_unedited(self, config: dict[str, Any]) -> None:
        """Refuse to resume a run whose config.yaml says other than the run's config (the
        same hash): a hand edit there changes nothing a resume does, so say it rather than
        ignore it."""
        from reme_cli.core.config import first_difference, hashed_part

        stored = read_config(self.path).data
        diff = first_difference(hashed_part(stored), hashed_part(config))
        if diff:
            key, was, now_ = diff
            raise UserError(f"{self.path / CONFIG_FILE} was edited: {key}={was!r}, but the run was made with "
                            f"{key}={now_!r}; restore it (a resume never reads it), or start a new run with "
                            "the change as an override")

    def manifest(self) -> dict[str, Any]:
        return RUN_MANIFEST.probe(self.path / MANIFEST_FILE) or {}

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

    def trials(self) -> list[UnitRecord]:
        """Every finished unit; a retried unit (its first attempt errored) keeps its last record."""
        return read_trials(self.path)

    def finished_units(self) -> set[str]:
        """Units that need not run again (an errored unit is retried)."""
        return {t.unit for t in self.trials() if t.ok}

    def trial_writer(self) -> JsonlWriter:
        return JsonlWriter(self.path / TRIALS_FILE)


class JsonlWriter:
    """Durable appends from many coroutines with group commit: every ``write`` returns once
    its line is on disk, and the lines that queue up during one fsync share the next.

    One fsync per line, made while the unit still held its concurrency slot, serialized
    the run at high concurrency (scripts/bench_harness.py)."""

    def __init__(self, path: Path):
        self.path = path
        self._pending: list[tuple[dict[str, Any], asyncio.Future]] = []
        self._flusher: asyncio.Task | None = None

    async def write(self, record: dict[str, Any] | UnitRecord) -> None:
        if isinstance(record, UnitRecord):
            record = record.to_dict()
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
                    if not fut.done():
                        fut.set_exception(exc)
            else:
                # A writer cancelled meanwhile (Ctrl-C cancels every stream) has nobody waiting:
                # its line is on disk all the same, and the rest of its batch must still wake.
                for _, fut in batch:
                    if not fut.done():
                        fut.set_result(None)

"""BFCL data releases side by side: the pinned one, and any other ``bfcl-eval`` version.

Data, ground truth, backends and checker must come from one release, and one Python
process can import only one ``bfcl_eval``. So ``benchmark.release`` names a version (or
``paper`` / ``current``, names for two of them); a version other than the imported one is
unpacked beside the venv (``<prefix>/share/reme/bfcl-eval-<version>``, no second
virtualenv), and a command whose config asks for it re-executes itself with that copy
first on ``PYTHONPATH`` (a ``Reexec``, which the CLI carries out).

``paper`` is the release the authors ran: their reproduction FAQ names gorilla commit
ea13468, whose ``bfcl_eval`` package is file for file the ``bfcl-eval==2025.7.17`` wheel
(``results/bfcl_release_evidence.md``). scripts/install.sh installs it, so it works offline;
other versions are downloaded on first use.

    python -m reme_cli.bench.bfcl.release install [RELEASE]   # default paper; what scripts/install.sh runs
    python -m reme_cli.bench.bfcl.release diff                # per-task differences, current vs paper
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from reme_cli.core.errors import Reexec, UserError
from reme_cli.core.reading import JsonFile

# bfcl-eval's data files (JSON lines: tasks, their ground truth, the tools' docs), read whole
# or refused: a release with a damaged file is reinstalled, not used in part.
BFCL_DATA = JsonFile("a bfcl-eval data file", lines=True, shape={"id": str, "question": list, "ground_truth": list},
                     fix="reinstall bfcl-eval (bash scripts/install.sh)")
# reme's train/test split of BFCL-v3 multi-turn base (bundled beside this module).
SPLIT = JsonFile("reme's BFCL split.json", shape={"train": list, "test": list}, required=("train", "test"),
                 fix="restore it from the reme checkout")

RELEASES = {"current": "2026.3.23", "paper": "2025.7.17"}  # current: the pin in pyproject.toml
SWITCHED_ENV = "REME_BFCL_RELEASE"  # set in the re-executed process: never switch twice
ROOT_ENV = "REME_BFCL_RELEASES_DIR"  # where releases are unpacked, if not beside the venv
_VERSION = re.compile(r"\d+(\.\d+)+")


def check_release(release: object) -> None:
    """One line for a value that is neither a name nor a version (the config check)."""
    if release not in RELEASES and not (isinstance(release, str) and _VERSION.fullmatch(release)):
        raise UserError(f"benchmark.release={release!r} is not allowed; give {' or '.join(RELEASES)} "
                        "or a bfcl-eval version such as 2025.6.15")


def version_of(release: str) -> str:
    check_release(release)
    return RELEASES.get(release, release)


def release_dir(release: str) -> Path:
    root = os.environ.get(ROOT_ENV) or Path(sys.prefix) / "share" / "reme"
    return Path(root) / f"bfcl-eval-{version_of(release)}"


def loaded_version() -> str | None:
    """The version of the bfcl_eval this process imports (its dist-info sits beside it)."""
    import importlib.util

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        return None
    for info in Path(spec.origin).parent.parent.glob("bfcl_eval-*.dist-info"):
        return info.name[len("bfcl_eval-"):-len(".dist-info")]
    return None


def ensure(release: str) -> None:
    """Return if this process runs ``release``; else ask for a re-execution with it (``Reexec``),
    downloading it first if it is not unpacked yet."""
    version = version_of(release)
    if loaded_version() == version:
        return
    if os.environ.get(SWITCHED_ENV):
        raise UserError(f"one command cannot mix BFCL releases; run the benchmark.release={release} jobs separately")
    if version == RELEASES["current"]:
        raise UserError(f"bfcl-eval {loaded_version()} is imported, but benchmark.release={release} needs the "
                        f"pinned {version}: bash scripts/install.sh")
    path = installed(release)
    # The same command again, with the release's copy importable first.
    pythonpath = os.pathsep.join(p for p in (str(path), os.environ.get("PYTHONPATH", "")) if p)
    raise Reexec(f"switch to bfcl-eval {version} at {path}", {"PYTHONPATH": pythonpath, SWITCHED_ENV: version})


def installed(release: str) -> Path:
    """The release's unpacked copy; downloaded now (saying so) if this is its first use."""
    path = release_dir(release)
    if not (path / "bfcl_eval").is_dir():
        print(f"note: bfcl-eval {version_of(release)} (benchmark.release={release}) is used for the first time: "
              f"downloading it from PyPI into {path}", file=sys.stderr)
        install(release)
    return path


def install(release: str = "paper") -> Path:
    """Download the release's wheel from PyPI (no dependencies) and unpack it."""
    target = release_dir(release)
    if (target / "bfcl_eval").is_dir():
        return target
    version = version_of(release)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                               "-d", tmp, f"bfcl-eval=={version}"], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("bfcl_eval-*.whl"))
        if proc.returncode or len(wheels) != 1:
            raise UserError(_download_error(release, version, proc.stderr))
        # A private staging folder, renamed into place: a concurrent install cannot see half a release.
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        zipfile.ZipFile(wheels[0]).extractall(staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "bfcl_eval").is_dir():
                raise
            shutil.rmtree(staging)  # another process unpacked the same release first
    return target


def _download_error(release: str, version: str, pip_stderr: str) -> str:
    known = re.search(r"\(from versions: ([^)]*)\)", pip_stderr)
    versions = [v.strip() for v in known.group(1).split(",")] if known and known.group(1) != "none" else []
    if versions and version not in versions:  # PyPI answered, and has no such release
        return (f"bfcl-eval {version} (benchmark.release={release}) is not on PyPI; "
                f"its releases run from {versions[0]} to {versions[-1]}")
    last = next((line.strip() for line in reversed(pip_stderr.splitlines()) if line.strip()), "no output")
    return (f"could not download bfcl-eval {version} (pip: {last}); with network access run: "
            f"python -m reme_cli.bench.bfcl.release install {release}")


def diff(current_dir: Path, paper_dir: Path) -> list[dict]:
    """Per task: which of question, initial_config, ground truth differ between the two."""
    def load(root: Path) -> dict[str, dict]:
        data = root / "bfcl_eval" / "data"
        name = next(f"{v}_multi_turn_base.json" for v in ("BFCL_v4", "BFCL_v3") if (data / f"{v}_multi_turn_base.json").exists())
        entries = {e["id"]: e for e in BFCL_DATA.records(data / name, strict=True)}
        answers = {a["id"]: a["ground_truth"] for a in BFCL_DATA.records(data / "possible_answer" / name, strict=True)}
        return {i: {"question": e["question"], "initial_config": e["initial_config"], "ground_truth": answers[i]}
                for i, e in entries.items()}

    a, b = load(current_dir), load(paper_dir)
    rows = []
    for task in sorted(set(a) | set(b), key=lambda t: int(t.rsplit("_", 1)[1])):
        changed = [k for k in ("question", "initial_config", "ground_truth") if a.get(task, {}).get(k) != b.get(task, {}).get(k)]
        if changed:
            rows.append({"task_id": task, "differs_in": changed})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reme_cli.bench.bfcl.release")
    sub = parser.add_subparsers(dest="cmd", required=True)
    inst = sub.add_parser("install", help="unpack a bfcl-eval release beside the pinned one (default: paper)")
    inst.add_argument("release", nargs="?", default="paper", help="paper, current or a version such as 2025.6.15")
    sub.add_parser("diff", help="per-task differences between the current and the paper release")
    args = parser.parse_args(argv)
    if args.cmd == "install":
        print(install(args.release))
        return 0
    import importlib.util

    current = Path(importlib.util.find_spec("bfcl_eval").origin).parent.parent
    split = SPLIT.read(Path(__file__).parent / "split.json")
    where = {t: s for s in ("train", "test") for t in split[s]}
    rows = diff(current, installed("paper"))
    print(f"| task | split | differs in |  (bfcl-eval {RELEASES['current']} vs {RELEASES['paper']})")
    print("| --- | --- | --- |")
    for r in rows:
        print(f"| {r['task_id']} | {where.get(r['task_id'], '-')} | {', '.join(r['differs_in'])} |")
    print(f"\n{len(rows)} of 200 tasks differ")
    return 0


def diff_command() -> None:
    """Per-task differences between the pinned BFCL release and the paper's (benchmark.release)."""
    main(["diff"])


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except UserError as exc:  # one line, as the CLI says it
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None

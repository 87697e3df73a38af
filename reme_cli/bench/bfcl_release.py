"""BFCL data releases side by side: the pinned current one, and the paper's.

The authors' experience pools fit the multi_turn_base questions of ``bfcl-eval<=2025.6.15``
(``results/bfcl_release_evidence.md``); later releases reworded tasks, fixed ground truth
and changed the backends. Data, ground truth, backends and checker must come from one
release, and one Python process can import only one ``bfcl_eval``. So the paper's release is
unpacked beside the venv (``<prefix>/share/reme/bfcl-eval-<version>``, no second
virtualenv), and a command whose config asks for it re-executes itself with that copy
first on ``PYTHONPATH`` (a ``Reexec``, which the CLI carries out).

    python -m reme_cli.bench.bfcl_release install     # what scripts/install.sh runs
    python -m reme_cli.bench.bfcl_release diff        # per-task differences, current vs paper
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from reme_cli.core.errors import Reexec, UserError

RELEASES = {"current": "2026.3.23", "paper": "2025.6.15"}
SWITCHED_ENV = "REME_BFCL_RELEASE"  # set in the re-executed process: never switch twice


def release_dir(release: str) -> Path:
    version = RELEASES[release]
    override = os.environ.get(f"REME_BFCL_{release.upper()}_DIR")
    return Path(override) if override else Path(sys.prefix) / "share" / "reme" / f"bfcl-eval-{version}"


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
    """Return if this process runs ``release``; else ask for a re-execution with it (``Reexec``)
    or say how to get it."""
    if loaded_version() == RELEASES[release]:
        return
    if release == "current":
        if os.environ.get(SWITCHED_ENV):
            raise UserError("one command cannot mix BFCL releases; run the current-release jobs separately")
        raise UserError(f"bfcl-eval {loaded_version()} is imported, but benchmark.release=current needs "
                        f"{RELEASES['current']}: bash scripts/install.sh")
    path = release_dir(release)
    if not (path / "bfcl_eval").is_dir():
        raise UserError(f"benchmark.release={release} needs bfcl-eval {RELEASES[release]} beside the pinned one: "
                        "python -m reme_cli.bench.bfcl_release install (scripts/install.sh does it)")
    if os.environ.get(SWITCHED_ENV):
        raise UserError("one command cannot mix BFCL releases; run the paper-release jobs separately")
    # The same command again, with the release's copy importable first.
    pythonpath = os.pathsep.join(p for p in (str(path), os.environ.get("PYTHONPATH", "")) if p)
    raise Reexec(f"switch to bfcl-eval {RELEASES[release]} at {path}",
                 {"PYTHONPATH": pythonpath, SWITCHED_ENV: release})


def install(release: str = "paper") -> Path:
    """Download the release's wheel from PyPI (no dependencies) and unpack it."""
    target = release_dir(release)
    if (target / "bfcl_eval").is_dir():
        return target
    version = RELEASES[release]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                        "-d", tmp, f"bfcl-eval=={version}"], check=True)
        (wheel,) = Path(tmp).glob("bfcl_eval-*.whl")
        staging = target.with_name(target.name + ".partial")
        zipfile.ZipFile(wheel).extractall(staging)
        staging.rename(target)
    return target


def diff(current_dir: Path, paper_dir: Path) -> list[dict]:
    """Per task: which of question, initial_config, ground truth differ between the two."""
    def load(root: Path) -> dict[str, dict]:
        data = root / "bfcl_eval" / "data"
        name = next(f"{v}_multi_turn_base.json" for v in ("BFCL_v4", "BFCL_v3") if (data / f"{v}_multi_turn_base.json").exists())
        entries = {e["id"]: e for e in map(json.loads, (data / name).read_text().splitlines())}
        answers = {a["id"]: a["ground_truth"] for a in map(json.loads, (data / "possible_answer" / name).read_text().splitlines())}
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
    parser = argparse.ArgumentParser(prog="python -m reme_cli.bench.bfcl_release")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("install", help="unpack the paper's bfcl-eval release beside the pinned one")
    sub.add_parser("diff", help="per-task differences between the current and the paper release")
    args = parser.parse_args(argv)
    if args.cmd == "install":
        print(install("paper"))
        return 0
    import importlib.util

    current = Path(importlib.util.find_spec("bfcl_eval").origin).parent.parent
    split = json.loads((Path(__file__).parent / "data" / "bfcl_v3_split.json").read_text())
    where = {t: s for s in ("train", "test") for t in split[s]}
    rows = diff(current, release_dir("paper"))
    print(f"| task | split | differs in |  (bfcl-eval {RELEASES['current']} vs {RELEASES['paper']})")
    print("| --- | --- | --- |")
    for r in rows:
        print(f"| {r['task_id']} | {where.get(r['task_id'], '-')} | {', '.join(r['differs_in'])} |")
    print(f"\n{len(rows)} of 200 tasks differ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

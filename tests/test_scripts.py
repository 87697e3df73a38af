"""Every script under scripts/ runs, as a process, with tiny arguments, and what it prints or
writes holds up: the rows it should have and numbers that make sense. A script without a
smoke test fails the suite (``test_every_script_has_a_smoke_test``); the install scripts'
smoke tests are in tests/test_install.py.

Servers here are the scripted server (reme_cli/testing/scripted_server.py, a TEST DOUBLE:
none of its numbers are model results), except for bench_local_model.py, which is about the
embedded model and starts it. The four benchmark runs take seconds of CPU each but mostly
wait (on their servers, AppWorld's workers, imports): they start together when the module
starts (those selected), and their tests, last in the file, check what each wrote."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reme_cli.bench.bfcl.release import RELEASES, release_dir
from reme_cli.run.calibration import Calibration
from tests import test_install
from tests.conftest import REPO, script_module, scripted_server_process

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)

SCRIPTS = REPO / "scripts"
script = pytest.mark.script  # @script("NAME"): the smoke test of scripts/NAME
HARNESS_DELAY = 0.02  # the stand-in server's seconds per request in bench_harness.py's smoke run


def run_script(name: str, *args: str, cwd: Path, env: dict | None = None, timeout: float = 600,
               ok: bool = True) -> subprocess.CompletedProcess:
    command = ["bash"] if name.endswith(".sh") else [sys.executable]
    proc = subprocess.run([*command, str(SCRIPTS / name), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    if ok:
        assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


def table(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the markdown table whose header starts with ``| first_header |``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    cells = lambda line: [c.strip() for c in line.strip().strip("|").split("|")]  # noqa: E731
    header = cells(lines[start])
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, cells(line))))
    return rows


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


class Started:
    """A script's smoke run, started in its own folder and process group; ``result()`` waits."""

    def __init__(self, name: str, args: list[str], cwd: Path):
        cwd.mkdir(parents=True, exist_ok=True)
        self.name, self.cwd = name, cwd
        self._out, self._err = open(cwd / "stdout.txt", "w+"), open(cwd / "stderr.txt", "w+")
        self.proc = subprocess.Popen([sys.executable, str(SCRIPTS / name), *args], cwd=cwd, stdout=self._out,
                                     stderr=self._err, text=True, start_new_session=True)

    def result(self, timeout: float = 600) -> subprocess.CompletedProcess:
        code = self.proc.wait(timeout)
        self._out.seek(0)
        self._err.seek(0)
        done = subprocess.CompletedProcess(self.proc.args, code, self._out.read(), self._err.read())
        assert code == 0, f"{self.name} exited {code}:\n{done.stderr[-3000:]}"
        return done

    def stop(self) -> None:
        """Ctrl-C first (the scripts stop their servers in ``finally``), then the whole group."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._out.close()
        self._err.close()


@pytest.fixture(scope="module", autouse=True)
def started(request, tmp_path_factory):
    """The benchmark scripts' smoke runs whose tests are selected, all started at once."""
    selected = {m.args[0] for item in request.session.items if item.module is sys.modules[__name__]
                for m in item.iter_markers("script")}
    runs: dict[str, Started] = {}
    plans = {
        "bench_harness.py": lambda: ["--delay", str(HARNESS_DELAY), "--concurrency", "1", "4", "--waves", "1",
                                     "--out", "harness.md"],
        "bench_dynamic_workers.py": lambda: ["--tasks", "1", "--runs", "1", "--workers", "2", "--delay", "0.01",
                                             "--concurrency", "2", "--out", "dynamic.md"],
        "bench_hosted_limit.py": lambda: ["--tasks", "3", "--runs", "1", "--latency", "0.05", "--rps", "20",
                                          "--out", "hosted.md"],
        "bench_local_model.py": lambda: ["--threads", "1", "--repeats", "1", "--prompt-sentences", "2",
                                         "--decode-tokens", "8", "--out", "local.md"],
        "bench_json_answers.py": lambda: ["--ways", "plain,reme", "--limit", "2", "--max-tokens", "24",
                                          "--out", "json.md", "--json", "answers.json"],
        # Last: the toy world (a session fixture, ~30 s of CPU) is built while the others run.
        "bench_appworld_overhead.py": lambda: ["--concurrency", "1", "--runs", "1", "--steps", "2", "--world",
                                               str(request.getfixturevalue("toy_world")), "--out", "appworld.md"],
    }
    try:
        for name, args in plans.items():
            if name in selected:
                runs[name] = Started(name, args(), tmp_path_factory.mktemp(name.split(".")[0]))
        yield runs
    finally:
        for run in runs.values():
            run.stop()


# ---------------------------------------------------------------------------------- cost calibration

@script("bench_vllm.py")
def test_bench_vllm_writes_a_calibration_the_cost_estimate_reads(tmp_path):
    delay = 0.05
    with scripted_server_process("--policy", "fixed", "--delay", str(delay)) as url:
        run_script("bench_vllm.py", "--base-url", url, "--concurrency", "1", "2", "--requests", "2",
                   "--prompt-words", "20", "--max-tokens", "4", "--out", "cal.json", cwd=tmp_path)
    data = json.loads((tmp_path / "cal.json").read_text())
    assert (data["model"], data["base_url"]) == ("scripted-fixed", url)
    assert [(p["concurrency"], p["requests"]) for p in data["points"]] == [(1, 2), (2, 2)]
    for p in data["points"]:
        for phase, rate in (("prefill", "prompt_tokens_per_s"), ("decode", "generated_tokens_per_s")):
            took = p[phase]["wall_s"]
            assert took >= 0.9 * delay * p["requests"] / p["concurrency"]  # it waited on the server
            tokens = p[phase]["prompt_tokens" if phase == "prefill" else "completion_tokens"]
            assert p[rate] == pytest.approx(tokens / took, rel=0.01) and p[rate] > 0
    generated, prompt = Calibration.read(str(tmp_path / "cal.json")).rates()
    assert set(generated) == set(prompt) == {1, 2}
    # Nothing listens there: one line, and no file.
    proc = run_script("bench_vllm.py", "--base-url", "http://127.0.0.1:9/v1", "--out", "none.json",
                      cwd=tmp_path, ok=False)
    one_line_error(proc)
    assert not (tmp_path / "none.json").exists()


# ---------------------------------------------------------------------------------- evidence

@script("bfcl_release_evidence.py")
def test_bfcl_release_evidence_reads_unpacked_releases_as_it_read_the_wheels(tmp_path):
    """Offline, on the two releases an install has (the paper's, unpacked beside the venv, and
    the pinned one in site-packages): the same fingerprints as results/bfcl_release_evidence.md
    took from the PyPI wheels, and, against a git repository holding the paper release's files
    where gorilla keeps them, the paper release equal file for file."""
    paper = release_dir("paper")
    assert paper.is_dir(), f"the paper release is not unpacked at {paper}: bash scripts/install.sh"
    pinned = Path(importlib.util.find_spec("bfcl_eval").origin).parent.parent
    gorilla = tmp_path / "gorilla"
    package = gorilla / "berkeley-function-call-leaderboard"
    record = next(paper.glob("bfcl_eval-*.dist-info")) / "RECORD"
    for line in record.read_text().splitlines():
        name = line.rsplit(",", 2)[0]
        if name.startswith("bfcl_eval/"):
            (package / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(paper / name, package / name)
    git = ["git", "-C", str(gorilla), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(gorilla)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "paper"], check=True)

    proc = run_script("bfcl_release_evidence.py", str(paper), str(pinned), "--gorilla", str(gorilla),
                      "--commit", "HEAD", cwd=tmp_path)
    committed = (REPO / "results" / "bfcl_release_evidence.md").read_text()
    fingerprints = ("data hash", "q-hash", "gt-hash", "backend hash", "book_flight travel_cost (doc/backend)",
                    "8B t0/any/fuzzy", "14B t0/any/fuzzy", "32B t0/any/fuzzy")
    measured = {r["release"]: r for r in table(proc.stdout, "release")}
    assert set(measured) == {RELEASES["paper"], RELEASES["current"]}
    then = {r["release"]: r for r in table(committed.split("## Per-release evidence")[1], "release")}
    for version, row in measured.items():
        assert [row[k] for k in fingerprints] == [then[version][k] for k in fingerprints], version
    # gorilla ea13468 is the paper release file for file: this stand-in gives the committed rows.
    same = {r["release"]: r for r in table(proc.stdout.split("## gorilla")[1], "release")}
    then = {r["release"]: r for r in table(committed.split("## gorilla")[1], "release")}
    assert same[RELEASES["paper"]]["differing"] == "0" and same[RELEASES["paper"]]["data hash equal"] == "yes"
    assert same == {version: then[version] for version in same}

    missing = run_script("bfcl_release_evidence.py", str(tmp_path / "nowhere"), cwd=tmp_path, ok=False)
    assert missing.returncode == 2 and "nowhere" in one_line_error(missing)


@script("check_gpu_constraints.py")
def test_check_gpu_constraints_resolves_a_small_project_offline(tmp_path):
    """The whole check through pip's real resolver, offline: a small project (--root) and a
    find-links folder of metadata-only wheels standing in for PyPI."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name, version, deps in (("vllm", "1.0", ["torch==2.0", "numpy>=1.5"]), ("torch", "2.0", []),
                                ("numpy", "1.5", []), ("numpy", "2.0", []), ("alpha", "1.0", ["numpy"]),
                                ("llama_cpp_python", "0.3.36", []), ("antlr4-python3-runtime", "4.9.3", [])):
        test_install.check.write_stub(wheels, {"name": name, "version": version, "requires_dist": deps})
    project = tmp_path / "project"
    project.mkdir()
    extras = {"gpu": ["vllm==1.0"], "local": ["llama-cpp-python==0.3.36"], "engine-wheel": [], "engine-source": [],
              "baselines": [], "dev": [], "cluster": []}
    pyproject = lambda deps: ("[project]\nname = 'small'\nversion = '0'\n"  # noqa: E731
                              f"dependencies = {json.dumps(deps)}\n[project.optional-dependencies]\n"
                              + "".join(f"{k} = {json.dumps(v)}\n" for k, v in extras.items()))
    (project / "pyproject.toml").write_text(pyproject(["alpha>=1"]))
    (project / "constraints.txt").write_text("llama-cpp-python==0.3.36\nantlr4-python3-runtime==4.9.3\n")
    (project / "requirements-bfcl.txt").write_text("bfcl-eval==2025.7.17\n")
    (project / "requirements-model.txt").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    proc = run_script("check_gpu_constraints.py", "--root", str(project), "--write", cwd=tmp_path, env=env)
    assert proc.stdout.splitlines()[-1] == "vllm 1.0: 3 packages alone, 5 with reme; torch 2.0; OK", proc.stdout
    pins = test_install.check.read_pins((project / "constraints-gpu.txt").read_text())
    assert pins == {"vllm": "1.0", "torch": "2.0", "numpy": "2.0", "alpha": "1.0", "llama-cpp-python": "0.3.36",
                    "bfcl-eval": "2025.7.17"}

    # A requirement that forces a package under vLLM's own choice down: named, exit 1, file kept.
    written = (project / "constraints-gpu.txt").read_text()
    (project / "pyproject.toml").write_text(pyproject(["alpha>=1", "numpy<2"]))
    proc = run_script("check_gpu_constraints.py", "--root", str(project), "--write", cwd=tmp_path, env=env, ok=False)
    assert proc.returncode == 1
    assert "error: numpy 2.0 (with vLLM alone) is 1.5 with reme" in proc.stderr.splitlines()
    assert (project / "constraints-gpu.txt").read_text() == written

    bad = run_script("check_gpu_constraints.py", "--root", str(tmp_path / "wheels"), cwd=tmp_path, env=env, ok=False)
    assert bad.returncode == 2 and "pyproject.toml" in one_line_error(bad)


# ---------------------------------------------------------------------------------- install

@script("freeze_constraints.sh")
def test_freeze_constraints_pins_the_active_environment_and_keeps_the_file_on_failure(tmp_path):
    """Run on a copy of the script (it writes beside its own folder), with this venv's python."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPTS / "freeze_constraints.sh", tmp_path / "scripts")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(tmp_path / "scripts" / "freeze_constraints.sh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "constraints.txt").read_text()
    pins = [line for line in text.splitlines() if not line.startswith("#")]
    assert proc.stdout.strip() == f"wrote constraints.txt ({len(pins)} packages)"
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[^+\s]+", line) for line in pins), pins
    names = {line.split("==")[0].lower() for line in pins}
    assert not names & {"pip", "setuptools", "reme-harness", "reme"}
    for name in ("openai", "typer", "hydra-core"):
        assert f"{name}=={importlib.metadata.version(name)}" in pins

    # A python that fails: the error goes out, the file that was there stays, no temp file is left.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\necho 'pip is broken' >&2\nexit 3\n")
    (fake / "python").chmod(0o755)
    proc = subprocess.run(["bash", str(tmp_path / "scripts" / "freeze_constraints.sh")], cwd=tmp_path,
                          env={**env, "PATH": f"{fake}:{env['PATH']}"}, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "pip is broken" in proc.stderr
    assert (tmp_path / "constraints.txt").read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "constraints.txt", "scripts"]


# ---------------------------------------------------------------------------------- benchmarks (started together)

@script("bench_harness.py")
def test_bench_harness_times_reme_eval_against_the_ideal_schedule(started):
    run = started["bench_harness.py"]
    run.result()
    delay = HARNESS_DELAY
    rows = table((run.cwd / "harness.md").read_text(), "concurrency")
    assert [r["concurrency"] for r in rows] == ["1", "4"]
    assert re.search(r"^Measured \d{4}-\d\d-\d\d on \d+ cores; 1-min load average [\d.]+ at the start",
                     (run.cwd / "harness.md").read_text(), re.M)
    # The same 8 episodes at both levels: fixed answers make the same calls.
    calls = {int(r["LLM calls"]) for r in rows}
    assert len(calls) == 1 and calls.pop() >= 8
    one = rows[0]
    # One slot: the ideal is every call's delay end to end, and no run beats it.
    assert float(one["ideal wall s"]) == pytest.approx(int(one["LLM calls"]) * delay, abs=0.006)
    for r in rows:
        assert float(r["wall s"]) >= float(r["ideal wall s"]) - 0.01
        assert 0 < float(r["achieved / ideal"]) <= 1.05
        assert 0 < float(r["harness CPU ms / call"]) < 1000 and float(r["stand-in server CPU ms / call"]) > 0


@script("bench_appworld_overhead.py")
def test_bench_appworld_overhead_runs_both_policies_on_the_toy_world(started):
    run = started["bench_appworld_overhead.py"]
    run.result()
    text = (run.cwd / "appworld.md").read_text()
    steps = {r["policy"]: r for r in table(text, "policy")}
    # gold solves each of the 3 toy tasks in one step; loop runs its 2 steps and solves none.
    assert (steps["gold"]["episodes (solved)"], steps["gold"]["steps"]) == ("3 (3)", "3")
    assert (steps["loop"]["episodes (solved)"], steps["loop"]["steps"]) == ("3 (0)", "6")
    for r in steps.values():
        assert float(r["reme CPU ms / step"]) > 0 and float(r["worker round trips ms / step"]) > 0
    calls = {(r["policy"], r["call"]): int(r["n"]) for r in table(text.split("round trip seen by reme")[1], "policy")}
    # One episode process opened, ended and evaluated per episode; the steps in it.
    assert calls[("gold", "open")] == calls[("gold", "close")] == calls[("loop", "evaluate")] == 3
    assert (calls[("gold", "execute")], calls[("loop", "execute")]) == (3, 6)
    started_ = re.search(r"Supervisors: (\d+) started", text)
    assert started_ and started_[1] == "2", text  # one per run (concurrency 1), each warmed up once
    # AppWorld's memory is counted in its own processes (the supervisor's, under bwrap), not bwrap's few MB.
    rss = {kind: re.search(rf"{kind} (\d+)-(\d+) MB", text) for kind in ("supervisor", "episode", "evaluator")}
    assert all(rss.values()) and all(50 < int(m[1]) <= int(m[2]) for m in rss.values()), text

    bad = run_script("bench_appworld_overhead.py", "--world", str(run.cwd / "nowhere"), cwd=run.cwd, ok=False)
    assert bad.returncode == 2 and "is not a toy world" in one_line_error(bad)


@script("bench_dynamic_workers.py")
def test_bench_dynamic_workers_compares_dynamic_reme_with_no_memory(started):
    run = started["bench_dynamic_workers.py"]
    run.result()
    rows = table((run.cwd / "dynamic.md").read_text(), "setting")
    assert [r["setting"].split(",")[0] for r in rows] == ["no memory", "dynamic", "dynamic"]
    assert rows[1]["setting"] == "dynamic, W=2" and rows[2]["setting"].startswith("dynamic, W=4, memory.rerank=")
    assert {r["units"] for r in rows} == {"1"}
    # Ground-truth replay makes the same executor calls whatever the memory says.
    assert len({r["executor calls"] for r in rows}) == 1 and int(rows[0]["executor calls"]) > 0
    memory = [int(r["memory-side calls"]) for r in rows]
    assert memory[0] == 0 and memory[1] > 0 and memory[2] != memory[1]  # rerank + rewrite flipped
    for r in rows:
        assert float(r["wall s"]) >= float(r["critical path s"]) > 0
    assert rows[0]["wall / no memory"] == "1.0x"


@script("bench_hosted_limit.py")
def test_bench_hosted_limit_compares_fixed_with_adaptive_in_flight_at_the_servers_counts(started):
    run = started["bench_hosted_limit.py"]
    run.result()
    text = (run.cwd / "hosted.md").read_text()
    rows = {r["requests in flight"]: r for r in table(text, "requests in flight")}
    assert list(rows) == ["fixed 32 (main)", "adaptive (this)"]
    # The same replayed episodes either way (BFCL ground truth: every one solved), counted by the server.
    assert {r["requests"] for r in rows.values()} == {rows["adaptive (this)"]["requests"]}
    assert int(rows["adaptive (this)"]["requests"]) > 3 and {r["Avg@k"] for r in rows.values()} == {"1.00"}
    for r in rows.values():
        shares = [float(r[k].rstrip("%")) for k in ("best 10 s / limit", "steady state / limit", "throttled")]
        assert all(0 <= x <= 100 for x in shares) and shares[0] > 0
        assert int(r["peak in flight"]) >= 1 and float(r["reme CPU ms / request"]) > 0
    assert rows["fixed 32 (main)"]["peak in flight"] == "32"
    assert "Made by `python scripts/bench_hosted_limit.py --tasks 3" in text
    assert re.search(r"^Measured \d{4}-\d\d-\d\d on \d+ cores; 1-min load average", text, re.M)

    bad = run_script("bench_hosted_limit.py", "--rps", "0", cwd=run.cwd, ok=False)
    assert bad.returncode == 2 and "--rps" in one_line_error(bad)


@script("bench_local_model.py")
def test_bench_local_model_serves_the_embedded_model_and_measures_it(started):
    run = started["bench_local_model.py"]
    run.result()
    text = (run.cwd / "local.md").read_text()
    (row,) = table(text, "build")
    assert (row["build"], row["threads"], row["correct"]) == (sys.executable, "1", "yes"), text
    assert float(row["prompt tok/s"]) > 0 and float(row["decode tok/s"]) > 0
    prompt, decoded = re.search(r"prompt tokens (\d+), decoded tokens \[(\d+)\]", text).groups()
    assert 50 < int(prompt) < 400 and 2 <= int(decoded) <= 8  # 2 sentences, not the default ~1500 tokens
    assert "Paris" in text


@script("bench_json_answers.py")
def test_bench_json_answers_replays_reme_requests_on_the_installed_engine(started):
    run = started["bench_json_answers.py"]
    run.result()
    text = (run.cwd / "json.md").read_text()
    rows = table(text, "engine")
    assert [r["way"] for r in rows] == ["plain", "reme"], text
    from reme_cli.llm.local_engine import choose

    engine = choose()  # the engine reme starts here, as the script does
    for r in rows:
        assert r["engine"] == f"{engine.name} {engine.version()}" and r["HTTP errors"] == "0", text
        done, asked = r["complete"].split("/")
        assert asked == "2" and 0 <= int(done) <= 2
    answers = json.loads((run.cwd / "answers.json").read_text())
    assert len(answers) == 4 and all(a["text"] is not None for a in answers)


def test_every_script_has_a_smoke_test():
    """A new script under scripts/ needs a test marked @pytest.mark.script("NAME") in some
    test file (most are here; install.sh and install_torch.sh in test_install.py)."""
    def names(path: Path) -> set[str]:
        marks = set()
        for node in ast.walk(ast.parse(path.read_text())):
            for deco in getattr(node, "decorator_list", []):
                if isinstance(deco, ast.Call) and ast.unparse(deco.func) in ("script", "pytest.mark.script"):
                    marks |= {a.value for a in deco.args if isinstance(a, ast.Constant)}
        return marks

    marked = set().union(*(names(path) for path in (REPO / "tests").rglob("test_*.py")))
    scripts = {p.name for p in SCRIPTS.iterdir() if p.is_file()}
    assert scripts - marked == set(), "scripts without a smoke test"
    assert marked - scripts == set(), "smoke tests of scripts that are gone"


@script("bench_tests.py")
def test_bench_tests_times_a_part_of_the_suite(tmp_path):
    out = tmp_path / "suite.md"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_tests.py"), "--top", "3", "--out", str(out), "--",
                           "tests/cli/test_cli_meta.py", "-n", "0"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text == proc.stdout
    assert "| tests passed / failed / skipped | 2 / 0 / 0 |" in text and "| pytest exit code | 0 |" in text
    wall = float(re.search(r"\| wall time \| (\d+) s", text).group(1))
    assert 0 < wall < 300
    assert "| tests/cli/test_cli_meta.py |" in text  # the per-file table names the file that ran


def test_saved_durations_merge_into_the_order_the_suite_starts_its_files_in(tmp_path):
    bench = script_module("bench_tests.py")
    saved = tmp_path / "durations.json"
    saved.write_text(json.dumps({"tests/test_a.py": 50.0, "tests/test_b.py": 5.0}))
    bench.save_durations([{"file": "tests/test_b.py", "time": 70.0}, {"file": "tests/test_b.py", "time": 0.25},
                          {"file": "tests/test_c.py", "time": 1.0}], saved)
    # The run's files take their new times, the others keep theirs; the longest comes first.
    assert list(json.loads(saved.read_text()).items()) == [
        ("tests/test_b.py", 70.2), ("tests/test_a.py", 50.0), ("tests/test_c.py", 1.0)]
    # The suite's own file names files that exist, and starts with the longest of them.
    suite = json.loads((REPO / "tests" / "durations.json").read_text())
    assert all((REPO / f).is_file() for f in suite) and list(suite.values()) == sorted(suite.values(), reverse=True)


# A stand-in for the authors' benchmark/bfcl/bfcl_utils.py (their checkout is not here): the two
# functions the script drives, doing what theirs do (their compile_tools: bfcl's pre-processing of
# the entry's own function list, in place, then OpenAI tools; extract_tool_schema drops each
# tool's response schema), so the script's plumbing and reme's per-turn tools are exercised.
AUTHORS_BFCL_UTILS_STAND_IN = '''
from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
from bfcl_eval.model_handler.model_style import ModelStyle
from bfcl_eval.model_handler.utils import convert_to_tool, func_doc_language_specific_pre_processing


def extract_tool_schema(tools):
    for tool in tools:
        tool["function"].pop("response", None)
    return tools


def handle_user_turn(entry, turn):
    functions = func_doc_language_specific_pre_processing(entry["function"], entry["id"].rsplit("_", 1)[0])
    tools = convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OpenAI_Completions)
    return {"tools": tools} if turn < len(entry["question"]) else {"done": True}
'''


@script("authors_bfcl_tools.py")
def test_authors_bfcl_tools_compares_their_tool_path_with_reme_per_turn(tmp_path):
    (tmp_path / "bfcl_utils.py").write_text(AUTHORS_BFCL_UTILS_STAND_IN)
    proc = subprocess.run([sys.executable, str(SCRIPTS / "authors_bfcl_tools.py"), str(tmp_path), "multi_turn_base_0"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"bfcl-eval {RELEASES['paper']}" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| multi_turn_base_0 |"))
    turns = int(row.split("|")[2])
    assert turns > 1 and row.split("|")[3].strip() == ", ".join(str(k) for k in range(1, turns + 1))
    assert row.rstrip().endswith("| yes |") and proc.stdout.rstrip().endswith("every turn: True")


@script("bench_startup.py")
def test_bench_startup_times_the_answers_that_need_no_run(tmp_path):
    out = tmp_path / "startup.md"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_startup.py"), "--runs", "1", "--python",
                           f"first={sys.executable}", "--python", sys.executable, "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.read_text() == proc.stdout
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| reme ")]
    assert [r[0].strip() for r in rows] == ["reme eval model=nope"] * 2 + ["reme eval eval.runs=0"] * 2 + \
        ["reme eval memory=reme memory.colour=red"] * 2 + ["reme eval --mode fixed eval.runs=0"] * 2 + \
        ["reme --help"] * 2 + ["reme eval --help"] * 2
    assert [r[1].strip() for r in rows[:2]] == ["first", sys.executable]  # a label, else the path
    for command, python, wall, cpu, ratio, heavy in rows:
        assert 0 < float(cpu) and 0 < float(wall) < 60
        assert heavy.strip() == "none"  # what tests/cli/test_cli_startup.py holds it to
    assert all(float(r[4]) == 1.0 for r in rows[::2])  # the first interpreter is the yardstick

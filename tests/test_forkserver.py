"""The fork server the tests start reme processes from (tests/forkserver.py): its children
must behave as `python -m` processes do, or the tests built on them prove nothing."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests import forkserver
from tests.conftest import reme_process, scripted_popen

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_child_runs_the_command_in_its_folder_with_its_environment_and_exit_code(tmp_path):
    done = reme_process(["--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("reme ")
    bad = reme_process(["eval", "benchmark=nope", "out_dir=run"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env={**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")})
    assert bad.returncode == 2 and bad.stderr.startswith("error: bad override or config: benchmark=nope")
    assert "Traceback" not in bad.stderr and not (tmp_path / "run").exists()


def test_a_child_is_a_process_of_its_own_that_signals_end(tmp_path):
    server = scripted_popen(["--policy", "bfcl-replay"], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert server.stdout.readline().startswith("http://127.0.0.1:")
        assert server.pid != os.getpid() and _parent(server.pid) == forkserver._the_server().proc.pid
        assert server.poll() is None
        try:
            server.wait(timeout=0.2)
            raise AssertionError("the server should still be serving")
        except subprocess.TimeoutExpired:
            pass
        os.kill(server.pid, signal.SIGKILL)
        assert server.wait(timeout=30) == -signal.SIGKILL
    finally:
        server.kill()


def test_a_pythonpath_that_shadows_a_warmed_module_gets_a_fresh_interpreter(tmp_path):
    shadow = tmp_path / "site"
    (shadow / "bfcl_eval").mkdir(parents=True)
    (shadow / "bfcl_eval" / "__init__.py").write_text("raise SystemExit('the shadowing bfcl_eval was imported')\n")
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    done = reme_process(["eval", "model=qwen3-8b", "llm.base_url=http://127.0.0.1:9/v1", "benchmark.release=current"],
                        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "the shadowing bfcl_eval was imported" in done.stderr, done.stderr[-2000:]

"""Where the model lives, at cluster scale: a vLLM server reme starts itself (tested with a
stand-in `vllm` executable, since no GPU is here), and several replicas of one model
behind one run. The stand-in and the replicas are the scripted server (a TEST DOUBLE that
replays BFCL ground truth)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


import pytest

from reme_cli.llm.client import Replica, pick_replica
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import ScriptedServer
from tests.conftest import REPO, reme_popen, reme_process, scripted_popen

STAND_IN = f"""#!{sys.executable}
# TEST DOUBLE for `vllm serve MODEL --served-model-name N --host H --port P ...`: one JSON line
# per start (its arguments and environment) in $STAND_IN_STARTS, if set.
import json, os, sys
sys.path.insert(0, {str(REPO)!r})
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy
args = sys.argv[1:]
assert args[0] == "serve", args
port = int(args[args.index("--port") + 1])
if os.environ.get("STAND_IN_STARTS"):
    with open(os.environ["STAND_IN_STARTS"], "a") as f:
        f.write(json.dumps({{"argv": args, "env": dict(os.environ)}}) + "\\n")
print("stand-in vllm serving", args[1], flush=True)
policy = AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())  # a summarizer too
ScriptedServer(policy, port=port, max_model_len=32768, delay=float({{delay}})).serve_forever()
"""


# TEST DOUBLE for `nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits`.
NVIDIA_SMI = f"""#!{sys.executable}
import sys
assert sys.argv[1:] == ["--query-gpu=index,memory.total", "--format=csv,noheader,nounits"], sys.argv
print({{lines!r}}, end="")
"""
H100_MIB = 81559  # what nvidia-smi reports for an 80 GB H100


def stand_in(tmp_path: Path, delay: float = 0.0, gpus: int = 1, mib: int = H100_MIB) -> dict[str, str]:
    """A PATH with the stand-in `vllm` and an `nvidia-smi` listing ``gpus`` GPUs of ``mib`` MiB."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "vllm"
    exe.write_text(STAND_IN.replace("{delay}", str(delay)))
    exe.chmod(0o755)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI.replace("{lines!r}", repr("".join(f"{i}, {mib}\n" for i in range(gpus)))))
    smi.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "REME_CACHE_DIR": str(tmp_path / "cache")}


def stand_ins_running(tmp_path: Path) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "stat,args"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if str(tmp_path / "bin" / "vllm") in l and not l.startswith("Z")]


def reme_cli(tmp_path: Path, env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return reme_process(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_gpu_model_config_without_base_url_starts_and_stops_vllm(tmp_path):
    env = stand_in(tmp_path)
    proc = reme_cli(tmp_path, env, "eval", "model=qwen3-8b", "llm.cache=false", "benchmark.limit=2",
                    "eval.runs=1", "eval.seeds=1", "out_dir=run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    server = manifest["server"]
    assert server["kind"] == "managed-vllm" and server["max_model_len"] == 32768
    assert server["command"][:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert "--reasoning-parser" in server["command"]  # the model config's serve_args
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["avg@1"]["mean"] == 1.0
    assert stand_ins_running(tmp_path) == []  # stopped at exit


@pytest.mark.slow
def test_a_managed_vllm_that_dies_stops_the_run_with_one_line(tmp_path):
    env = stand_in(tmp_path, delay=0.3)
    run = reme_popen(["eval", "model=qwen3-8b", "llm.cache=false",
                      "benchmark.limit=6", "eval.runs=2", "eval.seeds=1", "out_dir=run"],
                     cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    manifest = tmp_path / "run" / "manifest.json"
    deadline = time.time() + 120
    while time.time() < deadline and not (manifest.exists() and '"running"' in manifest.read_text()):
        time.sleep(0.1)
    time.sleep(0.5)
    pid = int(subprocess.run(["pgrep", "-f", str(tmp_path / "bin" / "vllm")], capture_output=True,
                             text=True).stdout.split()[0])
    os.kill(pid, signal.SIGKILL)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 4, err[-2000:]
    (line,) = [l for l in err.splitlines() if l.startswith("error:")]
    assert "managed vLLM server died (signal 9 (SIGKILL))" in line and "vllm_server.log" in line


@pytest.mark.slow
def test_no_vllm_on_path_is_one_line(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "REME_CACHE_DIR": str(tmp_path / "cache")}
    proc = reme_cli(tmp_path, env, "eval", "model=qwen3-8b", "benchmark.limit=1", "out_dir=run")
    assert proc.returncode == 2 and "`vllm` is not on PATH" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run" / "trials.jsonl").exists()


def test_pick_replica_prefers_the_least_loaded_replica_that_is_up():
    a, b, c = Replica("a", None, outstanding=3), Replica("b", None, outstanding=1), Replica("c", None, outstanding=0)
    c.down_until = time.monotonic() + 60
    assert pick_replica([a, b, c]) is b
    b.down_until = a.down_until = time.monotonic() + 30
    assert pick_replica([a, b, c]) in (a, b)  # all down: the first to come back


@pytest.mark.slow
def test_two_replicas_share_the_load_and_a_run_survives_one_dying(tmp_path):
    with ScriptedServer(BFCLReplayPolicy(), delay=0.05) as a:
        other = scripted_popen(["--policy", "bfcl-replay", "--delay", "0.05"], stdout=subprocess.PIPE, text=True,
                               cwd=REPO)
        try:
            b_url = other.stdout.readline().strip()
            env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache")}
            run = reme_popen(
                ["eval", "model=qwen3-8b", "llm.model=replay", "llm.cache=false",
                 f"llm.base_url=[{a.base_url},{b_url}]", "llm.concurrency=4", "benchmark.limit=8", "eval.runs=2",
                 "benchmark.release=current",  # the replay servers replay the pinned release's ground truth
                 "eval.seeds=1", "out_dir=run"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            trials = tmp_path / "run" / "trials.jsonl"
            deadline = time.time() + 120
            while time.time() < deadline and not (trials.exists() and len(trials.read_text().splitlines()) >= 3):
                time.sleep(0.05)
            served_by_a_before = len(a.requests)
            other.kill()  # one replica dies mid-run
            other.wait()
            _, err = run.communicate(timeout=300)
        finally:
            other.kill()
            other.wait()
    assert run.returncode == 0, err[-3000:]
    recs = [json.loads(l) for l in trials.read_text().splitlines()]
    assert len(recs) == 16 and all(r["success"] for r in recs)
    assert 0 < served_by_a_before < len(a.requests)  # A shared the load, then took B's share
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["server"]["base_url"] == [a.base_url, b_url]

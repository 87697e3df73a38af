"""Managed vLLM on a GPU node, proven with stand-ins (no GPU here): the stand-in `vllm` of
tests/llm/test_endpoints.py records each start's arguments and environment, and a stand-in
`nvidia-smi` lists 1, 2 or 8 GPUs. Checked: the tensor parallelism chosen, each server's
CUDA_VISIBLE_DEVICES, one server shared by a suite's jobs, and a server's environment free of
the variables reme sets for itself. The stand-in answers as the scripted server (a TEST
DOUBLE replaying BFCL ground truth): its numbers are not model results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from reme_cli.commands.ablate import plan
from reme_cli.core.config import config_hash
from reme_cli.core.environ import OWN_ENV, set_default
from tests.conftest import reme_popen, run_reme
from tests.llm.test_endpoints import reme_cli, stand_in, stand_ins_running

QUICK = ["llm.cache=false", "benchmark.limit=1", "eval.runs=1", "eval.seeds=1", "benchmark.release=current"]
H200_MIB = 143771


def reme_here(tmp_path: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """reme in this process (tests/conftest.py ``run_reme``) with exactly ``env``: what these
    tests check is what reme gives the servers it starts (the stand-ins record it) and its one
    line, not reme's own process. tests/llm/test_endpoints.py and the last tests here start reme
    as a process."""
    return run_reme(list(args), tmp_path, env={**env, **{k: None for k in os.environ if k not in env}})


def starts(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.slow
def test_a_summarizer_of_another_size_gets_a_managed_server_of_its_own(tmp_path):
    """Table 4's 32B row on one node: build-pool with the executor's server and the
    summarizer's side by side, each on its own GPUs, both stopped at the end."""
    env = {**stand_in(tmp_path, gpus=3, mib=81559), "STAND_IN_STARTS": str(tmp_path / "starts.jsonl")}
    proc = reme_here(tmp_path, env, "build-pool", "model=qwen3-8b", "summarizer=qwen3-32b", "embedding=minilm",
                    "benchmark.release=current", "llm.cache=false", "benchmark.limit=1", "build.samples=1",
                    "out_dir=built")
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = {s["argv"][1]: (flag(s["argv"], "--tensor-parallel-size"), s["env"]["CUDA_VISIBLE_DEVICES"],
                           flag(s["argv"], "--port")) for s in starts(tmp_path / "starts.jsonl")}
    assert {m: v[:2] for m, v in seen.items()} == {"Qwen/Qwen3-8B": ("1", "0"), "Qwen/Qwen3-32B": ("2", "1,2")}
    manifest = json.loads((tmp_path / "built" / "build" / "manifest.json").read_text())
    assert manifest["summarizer_server"]["kind"] == "managed-vllm"
    assert manifest["summarizer_server"]["command"][:3] == ["vllm", "serve", "Qwen/Qwen3-32B"]
    recorded = yaml.safe_load((tmp_path / "built" / "build" / "config.yaml").read_text())["summarizer"]
    assert recorded["base_url"].endswith(f":{seen['Qwen/Qwen3-32B'][2]}/v1") and recorded["serve"] == "qwen3-32b"
    pool = [json.loads(l) for l in (tmp_path / "built" / "pool" / "experiences.jsonl").read_text().splitlines()]
    assert pool and {e["author"] for e in pool} == {"qwen3-32b"}
    assert stand_ins_running(tmp_path) == []


@pytest.mark.parametrize(("gpus", "mib", "model", "extra", "expected"), [
    # (GPUs listed, MiB each, model, overrides, [(tensor parallel, CUDA_VISIBLE_DEVICES) per server])
    (1, H200_MIB, "qwen3-32b", [], [("1", "0")]),                  # 32B fits one 141 GB H200
    (1, 81559, "qwen3-32b", [], [("1", "0")]),                     # ... and, tightly, one 80 GB GPU alone
    (2, 81559, "qwen3-32b", [], [("2", "0,1")]),                   # two 80 GB GPUs: room for KV cache
    (8, 81559, "qwen3-32b", ["llm.replicas=auto"], [("2", "0,1"), ("2", "2,3"), ("2", "4,5"), ("2", "6,7")]),
    (8, 81559, "qwen3-8b", ["llm.replicas=2", "model.tensor_parallel=4"], [("4", "0,1,2,3"), ("4", "4,5,6,7")]),
])
@pytest.mark.slow
def test_a_managed_server_gets_its_tensor_parallelism_and_its_own_gpus(tmp_path, gpus, mib, model, extra, expected):
    env = {**stand_in(tmp_path, gpus=gpus, mib=mib), "STAND_IN_STARTS": str(tmp_path / "starts.jsonl")}
    proc = reme_here(tmp_path, env, "eval", f"model={model}", *QUICK, *extra, "out_dir=run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = sorted((flag(s["argv"], "--tensor-parallel-size"), s["env"]["CUDA_VISIBLE_DEVICES"])
                  for s in starts(tmp_path / "starts.jsonl"))
    assert seen == expected
    for s in starts(tmp_path / "starts.jsonl"):
        assert s["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # nvidia-smi's numbering
        assert s["argv"].count("--tensor-parallel-size") == 1
    server = json.loads((tmp_path / "run" / "manifest.json").read_text())["server"]
    assert server["kind"] == "managed-vllm" and server["replicas"] == len(expected)
    assert server["gpus"] == [[int(i) for i in cuda.split(",")] for _, cuda in expected]
    assert stand_ins_running(tmp_path) == []


@pytest.mark.slow
def test_cuda_visible_devices_narrows_the_gpus_a_managed_server_may_use(tmp_path):
    env = {**stand_in(tmp_path, gpus=8), "STAND_IN_STARTS": str(tmp_path / "starts.jsonl"),
           "CUDA_VISIBLE_DEVICES": "6,7"}
    proc = reme_here(tmp_path, env, "eval", "model=qwen3-32b", *QUICK, "out_dir=run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (start,) = starts(tmp_path / "starts.jsonl")
    assert flag(start["argv"], "--tensor-parallel-size") == "2" and start["env"]["CUDA_VISIBLE_DEVICES"] == "6,7"


@pytest.mark.parametrize(("gpus", "mib", "overrides", "message"), [
    (0, 81559, [], "no GPU visible for a managed vLLM server"),
    (1, 81559, ["llm.replicas=2"], "2 managed vLLM server(s) of qwen3-8b x 1 GPU(s) each need 2 GPUs; 1 visible (0)"),
    (2, 81559, ["model=qwen3-32b", "llm.replicas=2"],
     "2 managed vLLM server(s) of qwen3-32b x 2 GPU(s) each need 4 GPUs; 2 visible (0, 1)"),
    (2, 81559, ["model.tensor_parallel=4"], "model.tensor_parallel=4 needs 4 GPUs; 2 visible"),
    (1, 24564, ["model=qwen3-32b"], "model=qwen3-32b needs about 67 GiB of GPU memory"),
    (1, 81559, ["model.serve_args=[--tensor-parallel-size,2]"], "set model.tensor_parallel=N instead"),
    (1, 81559, ["model.tensor_parallel=two"], "model.tensor_parallel='two': give auto or a whole number"),
])
@pytest.mark.slow
def test_a_node_that_cannot_hold_the_servers_is_one_line(tmp_path, gpus, mib, overrides, message):
    env = {**stand_in(tmp_path, gpus=gpus, mib=mib), "STAND_IN_STARTS": str(tmp_path / "starts.jsonl")}
    if gpus == 0:
        (tmp_path / "bin" / "nvidia-smi").unlink()  # no driver: nvidia-smi is not there
        env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin"
    proc = reme_here(tmp_path, env, "eval", "model=qwen3-8b", *QUICK, *overrides, "out_dir=run")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert message in " ".join(proc.stderr.split()), proc.stderr
    assert "Traceback" not in proc.stderr and starts(tmp_path / "starts.jsonl") == []


@pytest.mark.parametrize(("gpus", "model", "host", "tp", "cuda"), [
    (1, "qwen3-8b", "127.0.0.1", "1", "0"),
    (2, "qwen3-32b", "0.0.0.0", "2", "0,1"),
    (8, "qwen3-14b", "0.0.0.0", "1", "0"),
])
@pytest.mark.slow
def test_reme_serve_binds_the_host_asked_and_sizes_vllm_to_the_node(tmp_path, gpus, model, host, tp, cuda):
    env = stand_in(tmp_path, gpus=gpus)
    proc = reme_here(tmp_path, env, "serve", f"model={model}", "--host", host, "--port", "8011", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    argv = proc.stdout.split()
    assert argv[:3] == ["vllm", "serve", f"Qwen/Qwen3-{model.split('-')[1].upper()}"]
    assert flag(argv, "--host") == host and flag(argv, "--port") == "8011"
    assert flag(argv, "--tensor-parallel-size") == tp


def test_reme_serve_prints_a_command_without_a_gpu_only_when_told_the_tensor_parallelism(tmp_path):
    env = {**stand_in(tmp_path), "PATH": f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin"}
    (tmp_path / "bin" / "nvidia-smi").unlink()
    proc = reme_here(tmp_path, env, "serve", "model=qwen3-32b", "--dry-run")
    assert proc.returncode == 2 and "no GPU visible" in proc.stderr and "Traceback" not in proc.stderr
    proc = reme_here(tmp_path, env, "serve", "model=qwen3-32b", "model.tensor_parallel=2", "--dry-run")
    assert proc.returncode == 0 and flag(proc.stdout.split(), "--tensor-parallel-size") == "2"


@pytest.mark.slow
def test_a_server_gets_the_users_environment_without_reme_own_variables(tmp_path, monkeypatch):
    from reme_cli.core.config import compose
    from reme_cli.llm.vllm_server import managed

    env = stand_in(tmp_path, gpus=2)
    for name in ("PATH", "REME_CACHE_DIR"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("STAND_IN_STARTS", str(tmp_path / "starts.jsonl"))
    monkeypatch.setenv("USERS_OWN", "kept")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # the user's: a server downloads there
    for name in ("HF_HUB_OFFLINE", OWN_ENV, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.setenv(name, "x")  # so that monkeypatch restores them as they were
        monkeypatch.delenv(name)
    set_default("HF_HUB_OFFLINE", "1")  # what the bundled embedder sets for itself
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    cfg = compose(["model=qwen3-8b", "llm.replicas=2"])
    with managed([cfg], lambda m, r: tmp_path / f"vllm-{r}.log") as (group,):
        assert len(group.urls) == 2
    recorded = starts(tmp_path / "starts.jsonl")
    assert sorted(s["env"]["CUDA_VISIBLE_DEVICES"] for s in recorded) == ["0", "1"]
    for s in recorded:
        assert "HF_HUB_OFFLINE" not in s["env"] and OWN_ENV not in s["env"]
        assert s["env"]["USERS_OWN"] == "kept" and s["env"]["HF_HOME"] == str(tmp_path / "hf")


def test_a_variable_the_user_set_reaches_the_server_even_if_reme_also_wants_it(tmp_path, monkeypatch):
    from reme_cli.core.environ import user_env

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the user's own choice
    monkeypatch.setenv(OWN_ENV, "x")
    monkeypatch.delenv(OWN_ENV)
    set_default("HF_HUB_OFFLINE", "0")
    assert user_env()["HF_HUB_OFFLINE"] == "1"


@pytest.mark.slow
def test_a_server_started_by_a_reme_child_process_drops_the_parents_variables_too(tmp_path):
    """reme's own variables, set in an ablate process, reach the jobs it starts; a server one
    of them starts still must not get them."""
    env = {**stand_in(tmp_path), "STAND_IN_STARTS": str(tmp_path / "starts.jsonl")}
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("BFCL_PROJECT_ROOT", None)
    env.update({"HF_HUB_OFFLINE": "1", OWN_ENV: "HF_HUB_OFFLINE"})  # as a parent reme leaves them
    proc = reme_cli(tmp_path, env, "eval", "model=qwen3-8b", *QUICK, "out_dir=run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (start,) = starts(tmp_path / "starts.jsonl")
    # BFCL_PROJECT_ROOT: set by this reme for bfcl_eval; HF_HUB_OFFLINE: by its parent.
    for name in ("HF_HUB_OFFLINE", "BFCL_PROJECT_ROOT", OWN_ENV):
        assert name not in start["env"], name


SUITE = """
description: two runs of one model
table: topk
variants:
  first: {mode: none, overrides: [eval.seed_base=0]}
  second: {mode: none, overrides: [eval.seed_base=1]}
"""


@pytest.mark.parametrize("launcher", ["inline", "joblib"])
@pytest.mark.slow
def test_the_jobs_of_a_suite_share_one_managed_server(tmp_path, launcher, monkeypatch):
    env = {**stand_in(tmp_path, gpus=2), "STAND_IN_STARTS": str(tmp_path / "starts.jsonl")}
    monkeypatch.setenv("REME_CACHE_DIR", env["REME_CACHE_DIR"])  # the plan below composes as the CLI did
    (tmp_path / "two.yaml").write_text(SUITE)
    args = ["ablate", "two.yaml", "model=qwen3-8b", *QUICK, "--launcher", launcher, "--jobs", "2"]
    proc = reme_cli(tmp_path, env, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (start,) = starts(tmp_path / "starts.jsonl")  # started once for both runs
    assert start["env"]["CUDA_VISIBLE_DEVICES"] == "0" and OWN_ENV not in start["env"]
    (suite,) = (tmp_path / "runs" / "ablate").iterdir()
    manifests = {r: json.loads((suite / "runs" / r / "manifest.json").read_text()) for r in ("first", "second")}
    urls = {m["server"]["base_url"] for m in manifests.values()}
    assert len(urls) == 1 and all(m["server"]["kind"] == "managed-vllm-shared" for m in manifests.values())
    assert all(m["status"] == "complete" and m["server"]["command"][:2] == ["vllm", "serve"]
               for m in manifests.values())
    assert stand_ins_running(tmp_path) == []  # stopped with the suite
    # The run is the one a job serving its own model would make: same hash, so it resumes.
    monkeypatch.chdir(tmp_path)
    planned = {j.label: config_hash(j.cfg) for j in plan("two.yaml", ["model=qwen3-8b", *QUICK]).runs}
    assert planned == {r: m["config_hash"] for r, m in manifests.items()}
    proc = reme_cli(tmp_path, env, "eval", "model=qwen3-8b", "eval.mode=none", "eval.seed_base=0", *QUICK,
                    f"out_dir={suite / 'runs' / 'first'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads((suite / "runs" / "first" / "manifest.json").read_text())
    assert again["config_hash"] == manifests["first"]["config_hash"] and again["server"]["kind"] == "managed-vllm"


@pytest.mark.slow
def test_stopping_a_suite_stops_its_shared_server(tmp_path):
    env = {**stand_in(tmp_path, delay=0.3, gpus=1), "STAND_IN_STARTS": str(tmp_path / "starts.jsonl")}
    (tmp_path / "two.yaml").write_text(SUITE)
    run = reme_popen(["ablate", "two.yaml", "model=qwen3-8b",
                      "llm.cache=false", "benchmark.limit=6", "eval.runs=2", "eval.seeds=1",
                      "--launcher", "joblib"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not any(
            '"running"' in p.read_text() for p in tmp_path.glob("runs/ablate/*/runs/*/manifest.json")):
        time.sleep(0.2)
    assert stand_ins_running(tmp_path), "the shared server never started"
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode != 0 and "Traceback" not in err, err[-2000:]
    assert stand_ins_running(tmp_path) == []
    assert len(starts(tmp_path / "starts.jsonl")) == 1


@pytest.mark.parametrize(("gpus", "overrides", "expected"), [
    (2, [], 2),                              # auto, sized to the two 80 GB GPUs of this node
    (0, ["model.tensor_parallel=4"], 4),     # a number holds on any machine
    (0, [], 1),                              # auto with no GPU here: cost.gpus=N says otherwise
])
@pytest.mark.slow
def test_the_cost_estimate_counts_the_gpus_a_managed_server_would_get(tmp_path, monkeypatch, gpus, overrides, expected):
    from reme_cli.core.config import compose
    from reme_cli.run.cost import Assumptions, gpus_per_server

    env = stand_in(tmp_path, gpus=gpus)
    if gpus == 0:
        (tmp_path / "bin" / "nvidia-smi").unlink()
        env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin"
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus_per_server(compose(["model=qwen3-32b", *overrides]), Assumptions()) == expected

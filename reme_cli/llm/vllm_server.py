"""vLLM servers that reme starts and stops itself (a model config with no ``llm.base_url``).

The command is the one ``reme serve`` prints: ``vllm serve HF_ID --served-model-name ...
--host 127.0.0.1 --port FREE --tensor-parallel-size N`` plus the model config's
``serve_args``. N comes from ``model.tensor_parallel`` (``reme_cli.llm.gpus``); each server
(``llm.replicas`` of them) gets its own GPUs through ``CUDA_VISIBLE_DEVICES`` and the user's
environment, none of the variables reme set for itself. Servers are supervised like the
embedded one: started on a free loopback port, ready when ``/v1/models`` answers (loading a
32B model takes minutes: ``llm.startup_timeout``), stopped at exit, on Ctrl-C and SIGTERM,
and a run stops with one line if one dies.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reme_cli.core.config import Config
from reme_cli.core.errors import UserError
from reme_cli.llm import gpus as gpu
from reme_cli.llm.local_engine import choose as choose_engine
from reme_cli.llm.local_server import LocalServer, default_model_path

VLLM_HINT = "`vllm` is not on PATH: bash scripts/install.sh --gpu from the reme checkout on the GPU machine, or point llm.base_url at a running server"
TP_FLAGS = ("--tensor-parallel-size", "-tp")
VLLM_MEMORY_SHARE = 0.9  # vLLM's default --gpu-memory-utilization


def serve_command(cfg: Config, port: int, host: str, tp: int | None = None) -> list[str]:
    """The server command for a model config (`reme serve` prints or runs it); ``tp``: GPUs
    per vLLM server."""
    if cfg.model.kind == "local":
        return choose_engine().command(sys.executable, default_model_path(), cfg.model.served_name or cfg.model.name,
                                       host, port, cfg.model.n_ctx)
    if not cfg.model.hf_id:
        raise UserError(f"model={cfg.model.name} has no hf_id to serve; set model.hf_id=...")
    if any(a == f or a.startswith(f + "=") for a in cfg.model.serve_args for f in TP_FLAGS):
        raise UserError("model.serve_args sets the tensor parallelism; set model.tensor_parallel=N instead "
                        "(auto sizes it to the visible GPUs)")
    cmd = ["vllm", "serve", cfg.model.hf_id, "--served-model-name", served_name(cfg),
           "--host", host, "--port", str(port)]
    return cmd + ["--tensor-parallel-size", str(tp or 1), *context_args(cfg.model.serve_args, served_length(cfg))]


# Qwen3's pre-training context; longer ones take YaRN rope scaling (Qwen's model cards:
# factor 4.0 over 32,768 for 131,072 tokens).
QWEN3_NATIVE_CONTEXT = 32768


def served_length(cfg: Config) -> int | None:
    """The --max-model-len a managed server gets: ``model.max_model_len``, else what the
    benchmark's episodes need (``benchmark.context``: AppWorld's 131,072); None: the serve_args'."""
    return cfg.model.max_model_len or cfg.benchmark.context


def context_args(serve_args: list[str], max_model_len: int | None) -> list[str]:
    """``serve_args`` with ``--max-model-len`` set to ``max_model_len`` (when given) and, past
    Qwen3's native context, YaRN rope scaling as vLLM takes it now (``--hf-overrides`` with
    ``rope_parameters``: vLLM's context-extension docs; the older ``--rope-scaling`` flag is
    gone)."""
    if max_model_len is None:
        return list(serve_args)
    args, i = [], 0
    while i < len(serve_args):
        arg = serve_args[i]
        if arg == "--max-model-len":
            i += 2
            continue
        if not arg.startswith("--max-model-len="):
            args.append(arg)
        i += 1
    args += ["--max-model-len", str(max_model_len)]
    if max_model_len > QWEN3_NATIVE_CONTEXT:
        if any(a == "--hf-overrides" or a.startswith("--hf-overrides=") for a in args):
            raise UserError("model.max_model_len above 32768 adds YaRN through --hf-overrides, which "
                            "model.serve_args already sets: put rope_parameters there yourself, or drop one")
        # rope_theta stays Qwen3's (its config.json), as vLLM's example writes it out.
        rope = {"rope_type": "yarn", "factor": max_model_len / QWEN3_NATIVE_CONTEXT,
                "original_max_position_embeddings": QWEN3_NATIVE_CONTEXT, "rope_theta": 1000000}
        args += ["--hf-overrides", json.dumps({"rope_parameters": rope})]
    return args


def served_name(cfg: Config) -> str:
    return cfg.model.served_name or cfg.model.hf_id or cfg.model.name


def memory_share(cfg: Config) -> float:
    """The share of each GPU's memory vLLM takes (``--gpu-memory-utilization`` in serve_args)."""
    args = list(cfg.model.serve_args)
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--gpu-memory-utilization=") else (
            args[i + 1] if arg == "--gpu-memory-utilization" and i + 1 < len(args) else None)
        if value is not None:
            try:
                return float(value)
            except ValueError:
                raise UserError(f"model.serve_args: --gpu-memory-utilization {value!r} is not a number") from None
    return VLLM_MEMORY_SHARE


def serve_devices(cfg: Config) -> tuple[int, dict[str, str]]:
    """`reme serve`: GPUs per server and the GPU variables for one server on the first of
    the visible GPUs. A number in model.tensor_parallel prints a command with no GPU here."""
    if cfg.model.kind == "local":
        return 1, {}
    visible = gpu.visible_gpus()
    if not visible and cfg.model.tensor_parallel != "auto":
        return int(cfg.model.tensor_parallel), {}
    tp = gpu.tensor_parallel(cfg.model.tensor_parallel, cfg.model.params_b, visible, memory_share(cfg),
                             cfg.model.name)
    return tp, gpu.server_env(gpu.slices(visible, 1, tp)[0])


class VLLMServer(LocalServer):
    kind = "managed vLLM"
    install_hint = VLLM_HINT

    def __init__(self, cfg: Config, tp: int = 1, devices: list[int] | None = None, log_path=None,
                 startup_timeout: float = 1800.0):
        super().__init__(log_path=log_path, startup_timeout=startup_timeout)
        self.cfg, self.tp, self.devices = cfg, tp, list(devices or [])
        self.model_name = served_name(cfg)
        self.extra_env = gpu.server_env(self.devices) if self.devices else {}

    def _prepare(self) -> str:
        if shutil.which("vllm") is None:
            raise UserError(VLLM_HINT)
        return self.cfg.model.hf_id or ""

    def command(self, model_path: str, port: int) -> list[str]:
        return serve_command(self.cfg, port, "127.0.0.1", self.tp)


@dataclass
class ServerPlan:
    """The managed servers of one model: GPUs per server, and each server's GPUs."""

    cfg: Config
    tp: int
    devices: list[list[int]]


def plan_servers(cfgs: list[Config]) -> list[ServerPlan]:
    """Tensor parallelism and GPUs for the managed servers of ``cfgs`` (one model each),
    side by side on this node: every server on GPUs of its own."""
    visible = gpu.visible_gpus()
    tps = [gpu.tensor_parallel(c.model.tensor_parallel, c.model.params_b, visible, memory_share(c), c.model.name)
           for c in cfgs]
    fixed = sum(c.llm.replicas * tp for c, tp in zip(cfgs, tps) if c.llm.replicas != "auto")
    auto_tp = sum(tp for c, tp in zip(cfgs, tps) if c.llm.replicas == "auto")
    # auto: the GPUs the fixed counts leave, shared evenly by the models that ask for auto.
    auto = max(1, (len(visible) - fixed) // auto_tp) if auto_tp else 0
    counts = [auto if c.llm.replicas == "auto" else c.llm.replicas for c in cfgs]
    needed = sum(n * tp for n, tp in zip(counts, tps))
    if needed > len(visible):
        servers = " + ".join(f"{n} managed vLLM server(s) of {c.model.name} x {tp} GPU(s) each"
                             for c, tp, n in zip(cfgs, tps, counts))
        raise UserError(f"{servers} need {needed} GPUs; {len(visible)} visible "
                        f"({', '.join(str(g.index) for g in visible) or 'none'}): lower llm.replicas or "
                        "model.tensor_parallel, or point llm.base_url at running servers")
    plans, free = [], list(visible)
    for c, tp, n in zip(cfgs, tps, counts):
        devices = gpu.slices(free, n, tp)
        free = free[n * tp:]
        plans.append(ServerPlan(c, tp, devices))
    return plans


@dataclass
class ServerGroup:
    """Started servers of one model: replicas behind one run."""

    plan: ServerPlan
    servers: list[VLLMServer]

    @property
    def urls(self) -> list[str]:
        return [s.base_url for s in self.servers]

    def identity(self) -> dict[str, Any]:
        first = self.servers[0]
        return {"kind": "managed-vllm", "command": first.command("", first.port), "tensor_parallel": self.plan.tp,
                "gpus": self.plan.devices, "replicas": len(self.servers),
                "log": str(first.log_path) if len(self.servers) == 1 else [str(s.log_path) for s in self.servers]}

    def failure(self) -> str | None:
        return next((msg for msg in (s.failure() for s in self.servers) if msg), None)


@contextlib.contextmanager
def managed(cfgs: list[Config], log_path: Callable[[int, int], Path]) -> Iterator[list[ServerGroup]]:
    """The managed servers of ``cfgs`` (one model each), started at once and stopped on exit,
    errors and Ctrl-C included; ``log_path(model, replica)`` names each server's log."""
    if shutil.which("vllm") is None:  # the first thing to fix, before any GPU question
        raise UserError(VLLM_HINT)
    plans = plan_servers(cfgs)
    groups = [ServerGroup(p, [VLLMServer(p.cfg, p.tp, devices, log_path=log_path(m, r),
                                         startup_timeout=p.cfg.llm.startup_timeout)
                              for r, devices in enumerate(p.devices)])
              for m, p in enumerate(plans)]
    servers = [s for g in groups for s in g.servers]
    pool = ThreadPoolExecutor(max_workers=len(servers))
    try:
        # Loading weights takes minutes a server: they load side by side. On an error or
        # Ctrl-C the servers are stopped at once, not after the others have loaded.
        for future in [pool.submit(s.start) for s in servers]:
            future.result()
        yield groups
    finally:
        for s in servers:
            s.stop()
        pool.shutdown(wait=False, cancel_futures=True)

"""The GPUs a managed vLLM server may use: which are visible, how many one server needs
(tensor parallelism), and which ones each server gets.

Indices are nvidia-smi's (PCI bus order); the servers get ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
so CUDA numbers the devices the same way (its default, fastest first, may not).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from reme_cli.core.errors import UserError

QUERY = ["nvidia-smi", "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"]
BYTES_PER_PARAM = 2  # bf16 weights
# Room for the KV cache on top of the weights, as a share of them: wanted, and the least a
# server starts with. At 0.25, Qwen3-32B (65.6 GB of weights) does not fit one 80 GB GPU at
# --gpu-memory-utilization 0.9: there it would keep about 12 GiB of KV cache, one and a half
# 32k-token sequences (64 layers x 8 KV heads x 128 x 2 x 2 bytes = 256 KiB a token), too few
# for dozens of episodes in flight, so it gets two such GPUs when two are visible, one when
# only one is; one 141 GB H200 holds it alone.
KV_HEADROOM = 0.25
KV_HEADROOM_MIN = 0.10
GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    index: int
    memory_mib: int


def visible_gpus() -> list[Gpu]:
    """The GPUs this process may use: nvidia-smi's list, narrowed to CUDA_VISIBLE_DEVICES."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(QUERY, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []  # "No devices were found", a driver without a GPU
    gpus = []
    for line in out.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            gpus.append(Gpu(int(fields[0]), int(fields[1])))
    return _narrowed(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))


def _narrowed(gpus: list[Gpu], visible: str | None) -> list[Gpu]:
    if visible is None:
        return gpus
    by_index = {g.index: g for g in gpus}
    out = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry:
            continue
        if not entry.lstrip("-").isdigit():
            raise UserError(f"CUDA_VISIBLE_DEVICES={visible}: reme sizes managed vLLM servers from GPU indices "
                            "(as nvidia-smi numbers them), not UUIDs; give indices, e.g. CUDA_VISIBLE_DEVICES=0,1")
        if int(entry) not in by_index:
            break  # CUDA ignores this entry and every one after it
        out.append(by_index[int(entry)])
    return out


def tensor_parallel(setting: object, params_b: float | None, gpus: list[Gpu], memory_share: float,
                    model: str) -> int:
    """GPUs per server: ``setting`` if a number, else (``auto``) the smallest power of two of
    the visible GPUs whose memory, at vLLM's ``memory_share``, holds the bf16 weights plus
    ``KV_HEADROOM`` (or, if none does, ``KV_HEADROOM_MIN``)."""
    if not gpus:
        raise UserError("no GPU visible for a managed vLLM server (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES "
                        "hides them): run on a GPU machine, or point llm.base_url at a running server "
                        "(`reme serve --dry-run` prints the command without one with model.tensor_parallel=N)")
    if setting != "auto":
        tp = int(setting)  # validated by the config schema
        if tp > len(gpus):
            raise UserError(f"model.tensor_parallel={tp} needs {tp} GPUs; {len(gpus)} visible: "
                            f"lower it, or model.tensor_parallel=auto")
        return tp
    if not params_b:
        raise UserError(f"model={model} has no model.params_b (parameters, in billions) to size tensor "
                        "parallelism from; set it, or model.tensor_parallel=N")
    weights = params_b * 1e9 * BYTES_PER_PARAM
    smallest = min(g.memory_mib for g in gpus) * 1024**2 * memory_share
    for headroom in (KV_HEADROOM, KV_HEADROOM_MIN):
        tp = 1
        while tp <= len(gpus):
            if tp * smallest >= weights * (1 + headroom):
                return tp
            tp *= 2
    raise UserError(f"model={model} needs about {weights * (1 + KV_HEADROOM_MIN) / GIB:.0f} GiB of GPU memory "
                    f"(bf16 weights plus KV cache); the {len(gpus)} visible GPU(s) give "
                    f"{len(gpus) * smallest / GIB:.0f} GiB at --gpu-memory-utilization {memory_share:g}: "
                    "use a bigger node or a smaller model")


def slices(gpus: list[Gpu], servers: int, tp: int) -> list[list[int]]:
    """Each of ``servers`` servers its own ``tp`` GPUs, in order (the caller checked there are enough)."""
    return [[g.index for g in gpus[i * tp:(i + 1) * tp]] for i in range(servers)]


def server_env(indices: list[int]) -> dict[str, str]:
    """What a server on ``indices`` adds to the user's environment."""
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, indices)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

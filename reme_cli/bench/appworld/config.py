"""``AppWorldConfig``: the ``benchmark.*`` keys of ``benchmark=appworld`` (reme_cli/bench/appworld/configs/benchmark/appworld.yaml),
validated before anything runs: the split, the data and venv folders, the sandbox, the
agent's words, and each episode's bounds (see ``benchmark.py``)."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional

from reme_cli.bench import sandbox
from reme_cli.bench.appworld.agent import AGENTS
from reme_cli.bench.appworld.processes import Limits
from reme_cli.bench.base import DEFAULT_PROMPT_FAMILY, BenchmarkConfig
from reme_cli.core.config import check_choices
from reme_cli.core.errors import UserError

SPLITS = ("train", "dev", "test_normal", "test_challenge")
TASK_ID = re.compile(r"[A-Za-z0-9]+_[0-9]+")


def default_data_dir() -> Path:
    return Path(os.environ.get("APPWORLD_ROOT") or Path(sys.prefix) / "share" / "reme" / "appworld")


@dataclass
class AppWorldConfig(BenchmarkConfig):
    name: str = "appworld"
    # The authors' run_appworld.py:58-107: batches of 8 consecutive tasks against one shared
    # pool, each batch starting when the one before it has ended.
    dynamic_workers: ClassVar[int] = 8
    dynamic_batches: ClassVar[bool] = True
    split: str = "test_normal"  # train | dev | test_normal | test_challenge
    tool_protocol: Optional[str] = "code"  # Python code actions against `apis` (over model.tool_protocol)
    thinking: Optional[bool] = False  # Qwen3 thinking off, as in the official AppWorld runs (over model.thinking)
    # Qwen3 with YaRN to 131,072 tokens on a vLLM server reme starts: the authors' runs went on
    # past 32k (their agent's output cap is commented out, appworld_react_agent.py:208-210; a
    # 32k server overflows, their issue #81), where Qwen's vLLM guide advises YaRN (its
    # deployment/vllm.md:252-272). docs/fidelity.md, row "context length".
    context: Optional[int] = 131072
    data_dir: Optional[str] = None  # holds data/ (default $APPWORLD_ROOT, else <prefix>/share/reme/appworld)
    venv: Optional[str] = None  # AppWorld's own virtualenv (default: where `reme appworld setup` puts it)
    timeout: float = 100.0  # seconds per step (AppWorld's own execute default)
    # What one episode may use; a bound that is hit ends the episode with its stop reason.
    # seconds of the model's code per episode, all steps together; also the CPU seconds its
    # threads may use in all, between steps too (RLIMIT_CPU)
    episode_timeout: float = 300.0
    # memory the model's code may hold: what it adds to the opened world's address space, what
    # it writes to its scratch space (a tmpfs of disk_mb) and the kernel memory the files there
    # pin (inodes: 1/16 of memory_mb - disk_mb, at 2 KiB each), together
    memory_mb: int = 2048
    disk_mb: int = 128  # what an episode may write (the world's outputs included)
    max_threads: int = 64  # processes and threads in the sandbox (new processes end the episode)
    output_chars: int = 100_000  # of a step's output, kept and shown to the model
    workers: Optional[int] = None  # episode processes at most (~270 MB each; default: one per open episode)
    sandbox: str = "auto"  # auto | bwrap | none: the OS sandbox around the model's code (none: on the host)
    # authors: the ReMe authors' agent (65971baf benchmark/appworld/); compact: reme's own prompt words
    agent: str = "authors"
    # The summarizer's words: function_calls, the prompts BFCL uses (the authors use one set for
    # both benchmarks); appworld, reme's wording for code and API calls (prompts/families.toml).
    prompt_family: str = DEFAULT_PROMPT_FAMILY

    def check(self) -> None:
        check_choices("benchmark", self, {"split": set(SPLITS), "sandbox": set(sandbox.CHOICES),
                                          "agent": set(AGENTS),
                                          "prompt_family": {DEFAULT_PROMPT_FAMILY, "appworld"}},
                      {"limit": 1, "max_interactions": 1, "timeout": 1, "workers": 1, "episode_timeout": 1,
                       "memory_mb": 64, "disk_mb": 8, "max_threads": 8, "output_chars": 1000})
        if self.memory_mb - self.disk_mb < 64:
            raise UserError(f"benchmark.memory_mb ({self.memory_mb}) must exceed benchmark.disk_mb ({self.disk_mb}) "
                            "by at least 64: an episode's scratch space is memory (a tmpfs) and counts against it")
        bad = [t for t in self.task_ids or [] if not TASK_ID.fullmatch(str(t))]
        if bad:
            raise UserError(f"benchmark.task_ids: {bad[0]!r} is not an AppWorld task id (they look like 82e2fac_1)")

    def limits(self) -> Limits:
        return Limits(step_seconds=self.timeout, episode_seconds=self.episode_timeout,
                      memory_bytes=self.memory_mb << 20, disk_bytes=self.disk_mb << 20,
                      max_threads=self.max_threads, output_chars=self.output_chars)

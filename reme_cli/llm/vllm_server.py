"""A vLLM server that reme starts and stops itself (a model config with no ``llm.base_url``).

The command is the one ``reme serve`` prints: ``vllm serve HF_ID --served-model-name ...
--host 127.0.0.1 --port FREE`` plus the model config's ``serve_args``. It is supervised like
the embedded server: started on a free loopback port, ready when ``/v1/models`` answers
(loading a 32B model takes minutes: ``llm.startup_timeout``), stopped at exit, on Ctrl-C and
SIGTERM, and a run stops with one line if it dies.
"""

from __future__ import annotations

import shutil
import sys

from reme_cli.core.config import Config
from reme_cli.core.errors import UserError
from reme_cli.llm.local_server import LocalServer, default_model_path

VLLM_HINT = "`vllm` is not on PATH: bash scripts/install.sh --gpu from the reme checkout on the GPU machine, or point llm.base_url at a running server"


def serve_command(cfg: Config, port: int, host: str) -> list[str]:
    """The server command for a model config (`reme serve` prints or runs it)."""
    if cfg.model.kind == "local":
        return [sys.executable, "-m", "llama_cpp.server", "--model", default_model_path(),
                "--model_alias", cfg.model.served_name or cfg.model.name, "--host", host,
                "--port", str(port), "--n_ctx", str(cfg.model.n_ctx)]
    if not cfg.model.hf_id:
        raise UserError(f"model={cfg.model.name} has no hf_id to serve; set model.hf_id=...")
    cmd = ["vllm", "serve", cfg.model.hf_id, "--served-model-name", served_name(cfg),
           "--host", host, "--port", str(port)]
    return cmd + list(cfg.model.serve_args)


def served_name(cfg: Config) -> str:
    return cfg.model.served_name or cfg.model.hf_id or cfg.model.name


class VLLMServer(LocalServer):
    kind = "managed vLLM"
    install_hint = VLLM_HINT

    def __init__(self, cfg: Config, log_path=None, startup_timeout: float = 1800.0):
        super().__init__(log_path=log_path, startup_timeout=startup_timeout)
        self.cfg = cfg
        self.model_name = served_name(cfg)

    def _prepare(self) -> str:
        if shutil.which("vllm") is None:
            raise UserError(VLLM_HINT)
        return self.cfg.model.hf_id or ""

    def command(self, model_path: str, port: int) -> list[str]:
        return serve_command(self.cfg, port, "127.0.0.1")

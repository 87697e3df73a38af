"""Managed vLLM servers shared by the jobs of a suite (`reme ablate`).

The suite starts each model's servers once and hands their URLs to the jobs as
``llm.base_url``, or ``summarizer.base_url`` for a summarizer with a server of its own
(keys outside the run hash, so a run is the same run, and resumes,
whether its server was shared or its own). The jobs learn that those URLs are servers reme
manages, and record them so in their manifest, from ``REME_SHARED_SERVERS``: reme's own
variable, inherited by the jobs, never passed to a server.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reme_cli.core.config import Config
from reme_cli.core.environ import set_own

SHARED_ENV = "REME_SHARED_SERVERS"


def is_managed(cfg: Config) -> bool:
    """A job that would start its own vLLM server."""
    return cfg.model.kind != "local" and not cfg.llm.base_url


def summarizer_server_cfg(cfg: Config) -> Config | None:
    """The config of the summarizer's own managed vLLM server (``summarizer.serve``'s model
    settings, one replica), or None when it has a server already or needs none."""
    s = cfg.summarizer
    if not s.serve or s.base_url:
        return None
    from reme_cli.core.config import compose
    from reme_cli.core.errors import UserError

    own = copy.deepcopy(cfg)
    own.model = compose([f"model={s.serve}"]).model
    if own.model.kind == "openai":  # a hosted summarizer: nothing to start, but somewhere to call
        raise UserError(f"summarizer.serve={s.serve} is a hosted provider: set summarizer.base_url=URL")
    own.llm.base_url, own.llm.replicas = None, 1
    return own


def server_key(cfg: Config) -> str:
    """Jobs with the same key can share one server (group of replicas)."""
    from reme_cli.llm.vllm_server import served_length

    m = cfg.model
    return json.dumps([m.name, m.kind, m.hf_id, m.served_name, list(m.serve_args), m.tensor_parallel, m.params_b,
                       cfg.llm.replicas, served_length(cfg)], sort_keys=True)


def shared_identity(urls: list[str]) -> dict[str, Any] | None:
    """The manifest's record of a shared managed server at ``urls``, if the suite started one."""
    try:
        entries = json.loads(os.environ.get(SHARED_ENV) or "[]")
    except json.JSONDecodeError:
        return None
    entry = next((e for e in entries if isinstance(e, dict) and e.get("urls") == urls), None)
    return {**entry["identity"], "kind": "managed-vllm-shared"} if entry else None


@contextlib.contextmanager
def shared_servers(jobs: list[Any], log_dir: Path) -> Iterator[None]:
    """Start one group of servers per model that ``jobs`` (with ``.cfg`` and ``.overrides``)
    would each start, as executor or as summarizer (``summarizer.serve``), point those jobs
    at it, and stop it when the suite ends."""
    groups: dict[str, list[tuple[Any, str]]] = {}
    server_cfgs: dict[str, Config] = {}
    for job in jobs:
        for role, cfg in (("llm", job.cfg if is_managed(job.cfg) else None),
                          ("summarizer", summarizer_server_cfg(job.cfg))):
            if cfg is not None:
                key = server_key(cfg)
                server_cfgs.setdefault(key, cfg)
                groups.setdefault(key, []).append((job, role))
    if not groups:
        yield
        return
    from reme_cli.llm.vllm_server import managed

    cfgs = list(server_cfgs.values())
    names = [c.model.name for c in cfgs]

    def log(model: int, replica: int) -> Path:
        log_dir.mkdir(parents=True, exist_ok=True)
        return log_dir / f"vllm-{names[model]}{'' if replica == 0 else f'-{replica}'}.log"

    with managed(cfgs, log) as started:
        entries = []
        for js, group in zip(groups.values(), started):
            urls = group.urls
            value = urls[0] if len(urls) == 1 else urls
            for job, role in js:
                if role == "llm":
                    job.cfg.llm.base_url = value
                    job.overrides = [*job.overrides, f"llm.base_url={value if len(urls) == 1 else '[' + ','.join(urls) + ']'}"]
                else:  # a summarizer server is one replica
                    job.cfg.summarizer.base_url = urls[0]
                    job.overrides = [*job.overrides, f"summarizer.base_url={urls[0]}"]
            entries.append({"urls": urls, "identity": group.identity()})
        set_own(SHARED_ENV, json.dumps(entries))
        try:
            yield
        finally:
            os.environ.pop(SHARED_ENV, None)

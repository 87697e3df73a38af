"""Which configs serve a paper model at a given provider.

A paper model (``qwen3-8b``) has a config per place it is served: the vLLM one of its own
name, and hosted copies that say whose model they serve (``model.same_as``) at a provider
(``llm.base_url``): ``qwen3-8b-dashscope``. A suite's extra models follow the agent's
provider, so Table 4's 14B and 32B summarizers are ``qwen3-14b`` under ``model=qwen3-8b`` and
``qwen3-14b-dashscope`` under ``model=qwen3-8b-dashscope``; the fidelity count plans the paper's
other models at the same provider the same way.

The configs are read as files (``configs/model``, ``configs/summarizer``): no composition.
"""

from __future__ import annotations

import functools
from typing import Any

import yaml

from reme_cli.core.config import group_files


@functools.cache
def _configs(group: str) -> dict[str, dict[str, Any]]:
    """Every option of ``group`` (reme's and the plug-ins', as Hydra finds them) -> its data."""
    out = {}
    for name, path in sorted(group_files(group).items()):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            continue
        if isinstance(data, dict):
            out[name] = data
    return out


def _model(name: str) -> dict[str, Any]:
    return _configs("model").get(name, {}).get("model") or {}


def paper_model_of(name: str) -> str:
    """The paper's model a model config serves: its ``same_as``, else itself."""
    return str(_model(name).get("same_as") or name)


def provider_of(name: str) -> tuple[str, str | None]:
    """Where a model config is served: its kind and its own ``llm.base_url`` (None for a
    server reme starts or one given on the command line)."""
    data = _configs("model").get(name, {})
    return str(_model(name).get("kind") or "vllm"), (data.get("llm") or {}).get("base_url")


def model_copy(paper: str, like: str) -> str | None:
    """The model config that serves paper model ``paper`` where model config ``like`` is
    served (``like`` itself when it serves it); None if there is none."""
    if paper_model_of(like) == paper:
        return like
    found = [name for name in _configs("model")
             if paper_model_of(name) == paper and provider_of(name) == provider_of(like)]
    return found[0] if len(found) == 1 else None


def summarizer_copy(name: str, like: str) -> str | None:
    """The summarizer config (``configs/summarizer``) that serves what summarizer ``name``
    serves, at model config ``like``'s provider; None if there is none (``same``, a
    summarizer with no model config of its own, or no copy there)."""
    served = (_configs("summarizer").get(name) or {}).get("serve")
    if not served:
        return None
    model = model_copy(paper_model_of(str(served)), like)
    found = [s for s, data in _configs("summarizer").items() if model is not None and data.get("serve") == model]
    return found[0] if len(found) == 1 else None

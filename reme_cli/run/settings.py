"""The settings every episode of a run shares, read from the config and the benchmark."""

from __future__ import annotations

import json
from typing import Any

from reme_cli.agent.protocols import make_protocol, protocol_name
from reme_cli.bench.base import Benchmark
from reme_cli.core.config import Config
from reme_cli.llm.endpoint import request_extra_body
from reme_cli.run.runner import EpisodeSettings


def episode_settings(cfg: Config, bench: Benchmark, temperature: float | None = None) -> EpisodeSettings:
    return EpisodeSettings(
        protocol=make_protocol(protocol_name(cfg), bench.tool_dialect),
        temperature=cfg.model.sampling.temperature if temperature is None else temperature,
        top_p=cfg.model.sampling.top_p,
        max_tokens=cfg.model.sampling.max_tokens,
        seed_base=cfg.eval.seed_base,
        extra_body=request_extra_body(cfg),
        system_prompt=cfg.benchmark.system_prompt or bench.system_prompt,
        max_interactions=cfg.benchmark.max_interactions,
        max_steps_per_turn=_step_limit(bench.max_steps_per_turn, cfg.model.max_steps_per_turn),
        max_stored_chars=cfg.eval.max_stored_chars,
        top_k=cfg.model.sampling.top_k,
        min_p=cfg.model.sampling.min_p,
        history_reasoning=cfg.benchmark.history_reasoning,
        fixed_seed=cfg.model.sampling.seed,
    )


def request_record(cfg: Config, temperature: float | None = None) -> dict[str, Any]:
    """The manifest's record of what every executor request sends: ``sent`` (parameter ->
    value; the seed differs per unit and trial) and ``not_sent`` (the server's default
    applies: on vLLM >= 0.8 the model's generation_config.json)."""
    s = cfg.model.sampling
    values = {"temperature": s.temperature if temperature is None else temperature, "top_p": s.top_p,
              "top_k": s.top_k, "min_p": s.min_p, "max_tokens": s.max_tokens}
    sent: dict[str, Any] = {k: v for k, v in values.items() if v is not None}
    sent["seed"] = (f"per unit and trial (eval.seed_base={cfg.eval.seed_base})" if s.seed is None else s.seed)
    if (extra := request_extra_body(cfg)) is not None:
        sent["extra_body"] = extra
    if cfg.model.parallel_tool_calls is not None:
        sent["parallel_tool_calls"] = f"{str(cfg.model.parallel_tool_calls).lower()} (with tools)"
    if cfg.model.tool_choice is not None:
        sent["tool_choice"] = f"{json.dumps(cfg.model.tool_choice)} (with tools)"
    # How requests travel: the same answer is recorded either way.
    sent["stream"] = {"auto": "when thinking is on", "always": "always", "never": "never"}[cfg.llm.stream]
    not_sent = [k for k, v in values.items() if v is None] + (["tool_choice"] if cfg.model.tool_choice is None else [])
    return {"sent": sent, "not_sent": not_sent}


def _step_limit(*limits: int | None) -> int | None:
    """The tightest of the benchmark's and the model's per-turn limits (None: none)."""
    given = [x for x in limits if x]
    return min(given) if given else None

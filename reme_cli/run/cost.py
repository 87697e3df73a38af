"""What a suite will cost before it runs: LLM calls, tokens, wall time, GPU-hours and, for a
hosted model with prices (``model.price``), money in the price lists' currencies.

Calls are counted from the config the way the code makes them: executor episodes (first
trials, and the retries a method may make, ``Memory.max_attempts``) and the summarizer calls
each method declares it makes (``Memory.expected_summarizer_calls``: its own formula, in its
own package). What depends on outcomes (how many trials succeed, how many steps an episode
takes; a method's own guesses, ``Memory.cost_guesses``) comes from ``Assumptions``, every one
overridable on the command line as ``cost.KEY=VALUE``.

Time is a throughput model: tokens / tokens-per-second at ``llm.concurrency`` requests in
flight, or, for work that must run in order (a dynamic stream's worker chains its units; a
build that folds training tasks into one memory takes one after another,
``Memory.build_in_order``), the chain's latency at the few requests it keeps in flight,
whichever is longer. Jobs run one after another. A hosted
provider (``model.kind=openai``) has no GPU: its time is the largest of three bounds (and a
chain's, for work in order), and the estimate names the one that binds (``HostedTime``): the
token bound (tokens / ``llm.tpm``), the request bound (calls / ``llm.rpm``) and the latency
bound (calls x ``cost.hosted_call_s`` / the requests in flight: ``llm.concurrency``, or the
adaptive ceiling, ``llm/inflight.py``, when it adapts: it rises until a rate binds). The
money is in each price list's currency (``model.price.currency``; USD at a ``usd_rate`` the
user sets), the embedding's tokens included (``embedding.price``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from reme_cli.core.config import Config
from reme_cli.core.errors import UserError
from reme_cli.core.registry import METHODS
from reme_cli.llm.inflight import most_in_flight
from reme_cli.methods.base import Memory, find_method, method_class
from reme_cli.methods.hooks import CostGuess, Guess, expected_attempts
from reme_cli.run import calibration

PREFIX = "cost."

# Generated tokens per second, summed over the requests in flight, on ONE H200 (bf16 weights,
# vLLM, --max-model-len 32768, prefix caching), at 1, 8 and 64 requests in flight; and prompt
# (prefill) tokens per second. ASSUMPTIONS, not measurements: nothing here has a GPU. Derived
# from the H200's 4.8 TB/s memory bandwidth (a decode step at batch 1 reads every weight:
# ~300 steps/s for 16 GB of 8B weights, about half of it reached in practice) and checked in
# order of magnitude against GPUStack's published vLLM baselines on the slower H100
# (docs.gpustack.ai performance-lab: Qwen3-14B ShareGPT 6.6k, Qwen3-32B 2.4k total tokens/s).
# Replace them with your box's numbers: scripts/bench_vllm.py writes a calibration file
# (cost.calibration=FILE), or set cost.tokens_per_s / cost.prompt_tokens_per_s.
H200_ASSUMED = {
    "qwen3-8b": {"generated": {1: 150, 8: 1000, 64: 4500}, "prompt": {1: 40000, 64: 40000}},
    "qwen3-14b": {"generated": {1: 90, 8: 620, 64: 3000}, "prompt": {1: 22000, 64: 22000}},
    "qwen3-32b": {"generated": {1: 40, 8: 280, 64: 1400}, "prompt": {1: 10000, 64: 10000}},
}
H200_SOURCE = "assumed H200 rates (reme_cli/run/cost.py; calibrate with scripts/bench_vllm.py)"


@dataclass
class Assumptions:
    """Outcome-dependent quantities (labelled guesses for Qwen3 on BFCL; a finished run's
    records give the real ones: its interactions, tokens and trials per unit)."""

    calls_per_episode: float = 12.0  # executor calls an episode makes (capped at max_interactions)
    success_rate: float = 0.5  # share of trials that succeed
    prompt_tokens: float = 6000.0  # per executor call: system, tools and the history so far
    completion_tokens: float = 600.0  # per executor call, thinking included
    prefix_cached_share: float = 0.75  # of executor prompt tokens, found in vLLM's prefix cache
    summarizer_prompt_tokens: float = 3000.0
    summarizer_completion_tokens: float = 1000.0
    hosted_call_s: float = 20.0  # seconds one hosted answer takes, thinking included (a guess)
    # Where hosted_call_s came from, as the plan says it: "assumed" (the default above),
    # "cost.hosted_call_s as given", or a kept measurement's "calibrated on DATE against HOST"
    # (``basis``). Not a cost.* key.
    hosted_call_s_source: str = "assumed"
    # Tokens a unit with a memory method embeds (queries, new memories; a guess): priced at
    # embedding.price for a hosted embedding.
    embedding_tokens: float = 300.0
    tokens_per_s: float | None = None  # generated, at llm.concurrency (None: calibration or table)
    prompt_tokens_per_s: float | None = None
    gpus: int | None = None  # per server (None: model.tensor_parallel, auto sized to this node's GPUs, else 1)
    calibration: str | None = None  # a JSON file written by reme check or scripts/bench_vllm.py
    # The methods' own guesses (``Memory.cost_guesses``) given as cost.NAME=VALUE; the rest
    # take their defaults.
    own: dict[str, float] = field(default_factory=dict)
    given: list[str] = field(default_factory=list)  # the keys given as cost.KEY=VALUE

    def guess(self, plugin: type[Memory]) -> CostGuess:
        """What ``plugin``'s cost formula may assume."""
        return CostGuess(self.success_rate, {name: self.own.get(name, g.default)
                                             for name, g in plugin.cost_guesses.items()})


def methods_guesses() -> dict[str, Guess]:
    """Every loadable method's own guesses, by name (the keys cost.NAME=VALUE may set)."""
    found: dict[str, Guess] = {}
    for name in METHODS.names():
        plugin = find_method(name)
        found |= dict(plugin.cost_guesses) if plugin is not None else {}
    return found


def split_overrides(overrides: list[str]) -> tuple[Assumptions, list[str]]:
    """``cost.KEY=VALUE`` into Assumptions (validated: a bad key or value is one line);
    the rest, for the runs."""
    mine = [o[len(PREFIX):] for o in overrides if o.startswith(PREFIX)]
    rest = [o for o in overrides if not o.startswith(PREFIX)]
    shared = {f.name for f in fields(Assumptions)} - {"own", "given", "hosted_call_s_source"}
    methods = methods_guesses() if any(item.split("=", 1)[0] not in shared for item in mine) else {}
    for item in mine:
        key = item.split("=", 1)[0]
        if "=" not in item or key not in shared | set(methods):
            raise UserError(f"{PREFIX}{item}: choose {PREFIX}KEY=VALUE with KEY one of "
                            f"{sorted(shared | set(methods_guesses()))}")
    own = [item for item in mine if item.split("=", 1)[0] in methods]
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Assumptions),
                                 OmegaConf.from_dotlist([i for i in mine if i not in own]))
        out: Assumptions = OmegaConf.to_object(merged)  # type: ignore[assignment]
        out.own = {k: float(v) for k, v in (i.split("=", 1) for i in own)}
        out.given = [item.split("=", 1)[0] for item in mine]
    except (OmegaConfBaseException, ValueError) as exc:
        raise UserError(f"bad {PREFIX}* value: {str(exc).splitlines()[0]}") from None
    if "hosted_call_s" in out.given:
        out.hosted_call_s_source = f"{PREFIX}hosted_call_s as given"
    if out.hosted_call_s <= 0:
        raise UserError(f"{PREFIX}hosted_call_s must be more than 0 seconds")
    if not 0.0 <= out.success_rate <= 1.0 or not 0.0 <= out.prefix_cached_share <= 1.0:
        raise UserError(f"{PREFIX}success_rate and {PREFIX}prefix_cached_share must be between 0 and 1")
    if out.calibration:
        calibration.Calibration.read(out.calibration)  # a bad file fails before the plan is printed
    return out, rest


# ------------------------------------------------------------------------------ calls
@dataclass
class Calls:
    executor_max: float = 0.0  # the bound: every trial runs to benchmark.max_interactions
    executor: float = 0.0  # expected
    summarizer: float = 0.0  # expected
    chains: int = 0  # work that runs in order: how many chains at once (0: none)
    chain_executor: float = 0.0  # expected executor calls along one chain
    chain_summarizer: float = 0.0


def _plugin(cfg: Config) -> type[Memory]:
    """The method the config runs (``--mode none``: none, whatever ``memory`` says)."""
    return method_class("none" if cfg.eval.mode == "none" else cfg.memory.name)


def build_shape(cfg: Config, success_rate: float) -> tuple[int, float, int]:
    """Per training task of a pool build: its units, the episodes they are expected to run,
    and at most (``Memory.build_episodes``: build.samples each, unless the method adapts on
    the training tasks itself, as ACE's live offline loop does)."""
    return method_class(cfg.memory.name).build_episodes(cfg, success_rate)


def max_executor_calls(cfg: Config, units: int, build: bool = False) -> int:
    """The bound: every trial of every unit runs to benchmark.max_interactions."""
    if build:
        per_task, _, most = build_shape(cfg, 0.0)
        return units // per_task * most * cfg.benchmark.max_interactions
    return units * _plugin(cfg).max_attempts(cfg) * cfg.benchmark.max_interactions


def run_calls(cfg: Config, units: int, a: Assumptions) -> Calls:
    """An evaluation run's calls (``units`` = tasks x runs x seeds)."""
    plugin = _plugin(cfg)
    per_episode = min(a.calls_per_episode, cfg.benchmark.max_interactions)
    executor_per_unit = expected_attempts(plugin.max_attempts(cfg), a.success_rate) * per_episode
    summarizer_per_unit = float(plugin.expected_summarizer_calls(cfg, a.guess(plugin), build=False))
    out = Calls(max_executor_calls(cfg, units), units * executor_per_unit, units * summarizer_per_unit)
    if cfg.eval.mode == "dynamic":
        streams = cfg.eval.seeds * (cfg.eval.runs if cfg.eval.scope == "stream" else 1)
        out.chains = max(1, min(units, streams * cfg.eval.dynamic_workers))
        out.chain_executor = executor_per_unit * units / out.chains
        out.chain_summarizer = summarizer_per_unit * units / out.chains
    return out


def build_calls(cfg: Config, units: int, tasks: int, a: Assumptions) -> Calls:
    """A pool build's calls (``units``: ``build_shape``'s per task, x ``tasks``). Methods
    that fold the training tasks into one memory (ACE's playbook, DC's cheatsheet) do so one
    task after another: a chain of their calls (``Memory.build_in_order``), and of their
    episodes too when they run them themselves (ACE's live offline attempts)."""
    plugin = method_class(cfg.memory.name)
    episodes = tasks * build_shape(cfg, a.success_rate)[1]
    out = Calls(max_executor_calls(cfg, units, build=True),
                episodes * min(a.calls_per_episode, cfg.benchmark.max_interactions))
    out.summarizer = tasks * float(plugin.expected_summarizer_calls(cfg, a.guess(plugin), build=True))
    if in_order := plugin.build_in_order(cfg):
        out.chains, out.chain_summarizer = 1, out.summarizer * in_order
        if plugin.adapts_on_training(cfg):
            out.chain_executor = out.executor
    return out


# ------------------------------------------------------------------------------ rates
@dataclass
class Rates:
    generated: dict[int, float]  # concurrency -> generated tokens/s (aggregate)
    prompt: dict[int, float]
    source: str

    def at(self, concurrency: float, prompt: bool = False) -> float:
        return _interpolate(self.prompt if prompt else self.generated, concurrency)


def _interpolate(points: dict[int, float], c: float) -> float:
    """Log-log between measured concurrencies; flat outside them."""
    xs = sorted(points)
    if c <= xs[0]:
        return points[xs[0]]
    if c >= xs[-1]:
        return points[xs[-1]]
    hi = next(x for x in xs if x >= c)
    lo = max(x for x in xs if x <= c)
    if hi == lo:
        return points[lo]
    t = (math.log(c) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return math.exp(math.log(points[lo]) + t * (math.log(points[hi]) - math.log(points[lo])))


def rates_for(cfg: Config, a: Assumptions) -> Rates | None:
    """Explicit cost.tokens_per_s wins, then a calibration file (``cost.calibration``, else
    the one `reme check` kept for this model and host), then the H200 table; None when none
    knows this model, or it is hosted (its limits set its time)."""
    if hosted(cfg):
        return None
    kept = calibration.kept(cfg, a.calibration)
    # A hosted model's measurement has no points (its answer time is what a plan uses).
    base = Rates(*kept.rates(), f"{kept.label} ({kept.model}, {kept.tool})") if kept is not None and kept.points \
        else None
    if base is None and cfg.model.name in H200_ASSUMED:
        table = H200_ASSUMED[cfg.model.name]
        base = Rates(dict(table["generated"]), dict(table["prompt"]), H200_SOURCE)
    if a.tokens_per_s is None and a.prompt_tokens_per_s is None:
        return base
    if base is None and (a.tokens_per_s is None or a.prompt_tokens_per_s is None):
        raise UserError(f"model {cfg.model.name} has no throughput table: set both {PREFIX}tokens_per_s and "
                        f"{PREFIX}prompt_tokens_per_s, or {PREFIX}calibration=FILE")
    c = most_in_flight(cfg.llm.concurrency)
    # A rate given for llm.concurrency scales to fewer requests in flight like the table does.
    gen = {c: a.tokens_per_s} if a.tokens_per_s is not None else base.generated  # type: ignore[union-attr]
    prm = {c: a.prompt_tokens_per_s} if a.prompt_tokens_per_s is not None else base.prompt  # type: ignore[union-attr]
    return Rates(gen, prm, f"{PREFIX}tokens_per_s / {PREFIX}prompt_tokens_per_s as given")


@dataclass
class Basis:
    """What one job's time estimate rests on: the assumptions (a hosted model's answer time
    as measured, where `reme check` measured it), the rates of a served model (None: hosted,
    or unknown), and where the time comes from: "calibrated on DATE against HOST" or "assumed"."""

    assumptions: Assumptions
    rates: Rates | None
    source: str


def basis(cfg: Config, a: Assumptions) -> Basis:
    """The basis of the plan of ``cfg``'s job: a kept measurement of its model and host
    (``calibration.kept``; ``cost.calibration=FILE`` names another) replaces the assumed
    rates, and a hosted model's ``hosted_call_s`` unless ``cost.hosted_call_s`` was given."""
    if not hosted(cfg):
        rates = rates_for(cfg, a)
        return Basis(a, rates, rates.source if rates is not None else "no rates for this model")
    kept = calibration.kept(cfg, a.calibration)
    if kept is None or kept.seconds_per_answer is None or "hosted_call_s" in a.given:
        return Basis(a, None, a.hosted_call_s_source)  # "assumed", or "cost.hosted_call_s as given"
    return Basis(replace(a, hosted_call_s=kept.seconds_per_answer, hosted_call_s_source=kept.label), None, kept.label)


def gpus_per_server(cfg: Config, a: Assumptions) -> int:
    if a.gpus is not None:
        return a.gpus
    if cfg.model.tensor_parallel != "auto":
        return int(cfg.model.tensor_parallel)
    from reme_cli.llm.gpus import tensor_parallel, visible_gpus
    from reme_cli.llm.vllm_server import memory_share

    visible = visible_gpus()  # auto: as a managed server would be sized on this node
    if not visible or not cfg.model.params_b:
        return 1  # a CPU machine: cost.gpus=N or model.tensor_parallel=N for the GPU node's
    return tensor_parallel("auto", cfg.model.params_b, visible, memory_share(cfg), cfg.model.name)


# ------------------------------------------------------------------------------ time
@dataclass
class HostedTime:
    """A hosted provider's hours and the bound that sets them."""

    seconds: float
    bound: str  # tokens | requests | latency | chain
    in_flight: int  # the requests in flight the latency bound assumes


BOUND_WORDS = {"tokens": "the token bound (llm.tpm)", "requests": "the request bound (llm.rpm)",
               "latency": "the latency bound (cost.hosted_call_s at the requests in flight)",
               "chain": "the latency of the work done in order (one answer at a time)"}


@dataclass
class Estimate:
    calls: Calls
    prompt_tokens: float
    completion_tokens: float
    wall_s: float | None  # None: no rates for this model
    gpus: int  # 0: a hosted model
    cost: dict[str, float] | None = None  # a hosted model with prices, by currency; None: unknown
    hosted: HostedTime | None = None

    @property
    def gpu_hours(self) -> float | None:
        if self.gpus == 0:
            return 0.0
        return None if self.wall_s is None else self.wall_s * self.gpus / 3600


def hosted(cfg: Config) -> bool:
    return cfg.model.kind == "openai"


def summarizer_prices(cfg: Config) -> Any:
    """The summarizer's model's prices: the executor's (summarizer=same), the hosted model
    config ``summarizer.serve`` names, or None."""
    from reme_cli.llm.spend import Prices

    if cfg.summarizer.name == "same" or not cfg.summarizer.serve:
        return Prices.of(cfg.model.price) if cfg.summarizer.name == "same" else None
    from reme_cli.methods.summarizer import serve_model

    return Prices.of(serve_model(cfg).price)


def embeds(cfg: Config, build: bool = False) -> bool:
    """Whether a run (or, ``build``, a pool build) embeds at all: a memory method's queries and
    memories."""
    return cfg.memory.name != "none" and (build or cfg.eval.mode != "none")


def money(cfg: Config, calls: Calls, a: Assumptions, units: int = 0, build: bool = False) -> dict[str, float] | None:
    """The cost at the prices of the executor's and the summarizer's models, and of a priced
    embedding, by currency; None if a model's price is unknown. The executor's replies are
    priced as thinking when it thinks on this benchmark; the summarizer's, sent no switch (the
    authors' service sent none), as thinking too: the dearer of the two, since the endpoint's
    default is not documented."""
    from reme_cli.llm.spend import Prices

    ex = Prices.of(cfg.model.price)
    summ = summarizer_prices(cfg) if calls.summarizer else ex
    if ex is None or summ is None:
        return None
    thinking = cfg.model.thinking if cfg.benchmark.thinking is None else cfg.benchmark.thinking
    summ_thinking = cfg.summarizer.thinking is not False
    out: dict[str, float] = {}
    for prices, amount in (
            (ex, ex.cost(calls.executor * a.prompt_tokens, calls.executor * a.completion_tokens, bool(thinking))),
            (summ, summ.cost(calls.summarizer * a.summarizer_prompt_tokens,
                             calls.summarizer * a.summarizer_completion_tokens, summ_thinking))):
        out[prices.currency] = out.get(prices.currency, 0.0) + amount
    embedding = Prices.of(cfg.embedding.price, input_only=True)
    if embedding is not None and embeds(cfg, build):
        out[embedding.currency] = out.get(embedding.currency, 0.0) + embedding.cost(units * a.embedding_tokens, 0, False)
    return out


def hosted_time(cfg: Config, calls: Calls, a: Assumptions, prompt: float, completion: float) -> HostedTime:
    """A hosted provider's time: the largest of what tpm allows, what rpm allows, and answers
    of ``hosted_call_s`` at the requests in flight (``llm.concurrency``, or the adaptive
    ceiling: adaptive in-flight rises until a rate binds, so only a ceiling too low for
    the latency makes this bound the largest); and the longest chain, one answer at a time."""
    total = calls.executor + calls.summarizer
    in_flight = most_in_flight(cfg.llm.concurrency)
    bounds = {"tokens": (prompt + completion) / cfg.llm.tpm * 60 if cfg.llm.tpm else 0.0,
              "requests": total / cfg.llm.rpm * 60 if cfg.llm.rpm else 0.0,
              "latency": total * a.hosted_call_s / in_flight}
    if calls.chains:
        bounds["chain"] = (calls.chain_executor + calls.chain_summarizer) * a.hosted_call_s
    bound = max(bounds, key=lambda k: bounds[k])
    return HostedTime(bounds[bound], bound, in_flight)


def _seconds(executor: float, summarizer: float, a: Assumptions, rates: Rates, inflight: float) -> float:
    """Time to serve these calls with ``inflight`` requests at once (aggregate rates)."""
    prefill = executor * a.prompt_tokens * (1 - a.prefix_cached_share) + summarizer * a.summarizer_prompt_tokens
    decode = executor * a.completion_tokens + summarizer * a.summarizer_completion_tokens
    return prefill / rates.at(inflight, prompt=True) + decode / rates.at(inflight)


def estimate(cfg: Config, calls: Calls, a: Assumptions, rates: Rates | None, units: int = 0,
             build: bool = False) -> Estimate:
    """``units``: the run's (or, ``build``, the pool build's) units, what its embedding is priced by."""
    prompt = calls.executor * a.prompt_tokens + calls.summarizer * a.summarizer_prompt_tokens
    completion = calls.executor * a.completion_tokens + calls.summarizer * a.summarizer_completion_tokens
    if hosted(cfg):
        time = hosted_time(cfg, calls, a, prompt, completion)
        return Estimate(calls, prompt, completion, time.seconds, 0, money(cfg, calls, a, units, build), time)
    wall = None
    if rates is not None:
        c = most_in_flight(cfg.llm.concurrency)
        wall = _seconds(calls.executor, calls.summarizer, a, rates, c)
        if calls.chains:
            # Each chain has one request in flight at a time; k chains share the server.
            k = min(calls.chains, c)
            chain = _seconds(calls.chain_executor, calls.chain_summarizer, a, rates, k) * k
            wall = max(wall, chain)
    return Estimate(calls, prompt, completion, wall, gpus_per_server(cfg, a))


def as_row(e: Estimate) -> dict[str, Any]:
    return {"executor_max": e.calls.executor_max, "executor": e.calls.executor, "summarizer": e.calls.summarizer,
            "tokens": e.prompt_tokens + e.completion_tokens, "wall_h": None if e.wall_s is None else e.wall_s / 3600,
            "gpu_h": e.gpu_hours, "cost": e.cost, "bound": e.hosted.bound if e.hosted else None}

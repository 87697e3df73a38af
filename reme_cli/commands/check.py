"""`reme check`: before a long run, try every endpoint it will use with its own request
shapes, in a minute or two and a few dozen requests, and keep what was measured.

The config is composed as `reme eval` composes it (the same overrides and groups), and what
eval would start is started here (the embedded llama.cpp server, a managed vLLM) and stopped
at the end. The probes (``run/probes.py``) go through the run's own request code; nothing is
cached, so every one reaches the server. One table says what was sent, what came back and
whether the run can use it, with the provider's own words on a refusal; under it, what was
measured. A check that passes keeps the measurement (``run/calibration.py``), and
`reme ablate ... --dry-run` plans with it ("calibrated on DATE against HOST").
"""

from __future__ import annotations

import asyncio
import copy
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reme_cli.bench.registry import make_benchmark
from reme_cli.commands.evaluate import method_plugin
from reme_cli.core.config import Config
from reme_cli.core.errors import RunAborted, UserError
from reme_cli.llm.client import ChatClient, ServerUnreachable, thinking_on
from reme_cli.llm.embed import check_key_for, make_embedder_for
from reme_cli.llm.endpoint import Endpoint, endpoint, make_client
from reme_cli.llm.keys import llm_key
from reme_cli.llm.sweep import Sweep, measure
from reme_cli.methods.summarizer import summarizer_settings
from reme_cli.run import calibration
from reme_cli.run.cost import Assumptions
from reme_cli.run.probes import (Prober, Row, embedding_row, first_token, seconds_per_answer,
                                 tokens_per_second)
from reme_cli.run.settings import episode_settings

EXIT_FAILED = RunAborted.exit_code  # 4: something the run needs does not work
# An answer the run leaves uncapped (the Qwen3 configs send no max_tokens) is capped here, so
# a check stays within minutes; the table says so.
PROBE_MAX_TOKENS = 2048
_STATED_LIMIT = re.compile(r"maximum context length is (\d+)|context (?:size|length|window)[^\d]{0,20}(\d+)", re.I)


def check(cfg: Config, assumptions: Assumptions, console: Console) -> tuple[int, Path | None]:
    """Probe ``cfg``'s endpoints; (exit code, where the measurement was kept or None)."""
    cfg = copy.deepcopy(cfg)
    cfg.llm.cache = False  # every probe must reach the server
    bench = make_benchmark(cfg.benchmark)
    llm_key(cfg)  # a hosted model's key missing from the environment: one line, nothing asked
    embeds = cfg.eval.mode != "none" or cfg.embedding.kind != "sentence_transformers"
    if embeds:
        check_key_for(cfg)
    try:
        with endpoint(cfg) as ep:
            rows, measured = asyncio.run(_probe(cfg, ep, bench, embeds))
    except RunAborted as exc:
        raise RunAborted(_with_region_hint(str(exc), cfg)) from None
    except ServerUnreachable as exc:  # the run would not start: a failed check, not bad input
        console.print(_table(cfg, None, [Row("server", f"GET {cfg.llm.base_url}/models", got="no answer", ok=False,
                                              said=str(exc)[:300])]), soft_wrap=True)
        console.print("[red]check failed: the server does not answer; the run needs it. Nothing kept.[/red]",
                      soft_wrap=True)
        return EXIT_FAILED, None
    console.print(_table(cfg, ep, rows), soft_wrap=True)
    for line in _measured_lines(measured):
        console.print(escape(line), highlight=False, soft_wrap=True)
    failed = [r.probe for r in rows if r.ok is False]
    if failed:
        console.print(f"[red]check failed: {escape(', '.join(failed))}; the run needs each of them. Nothing kept."
                      "[/red]", soft_wrap=True)
        return EXIT_FAILED, None
    path = Path(assumptions.calibration) if assumptions.calibration else calibration.default_path(cfg)
    kept = calibration.Calibration.measured(
        ep.model, ep.base_url if cfg.llm.base_url else None, measured.pop("points"), "reme check",
        host=calibration.host_key(cfg), seconds_per_answer=measured["seconds_per_answer"],
        extra={"model_config": cfg.model.name, **{k: v for k, v in measured.items() if k != "seconds_per_answer"},
               "probes": [asdict(r) for r in rows]})
    kept.write(path)
    console.print(f"check passed: {kept.label}; `reme ablate ... --dry-run` plans with it "
                  f"({calibration.OPTION}={path} reads it from elsewhere)", highlight=False, soft_wrap=True)
    return 0, path


async def _probe(cfg: Config, ep: Endpoint, bench: Any, embeds: bool) -> tuple[list[Row], dict[str, Any]]:
    client = make_client(cfg, ep)  # the run's client, as the run makes it
    client.max_retries = min(cfg.llm.max_retries, 2)  # a check that retries for minutes says nothing
    settings = episode_settings(cfg, bench)
    if settings.max_tokens is None:
        settings = replace(settings, max_tokens=PROBE_MAX_TOKENS)
    seed = settings.fixed_seed if settings.fixed_seed is not None else settings.seed_base
    prober = Prober(client, settings, seed, headers={"X-Reme-Task-Id": "reme-check"})
    own = None
    try:
        code = settings.protocol.name == "code"
        first, step = await prober.plain()
        if first.ok and thinking_on({"extra_body": settings.extra_body or {}}):
            prober.thinking_row(step, first)
        if code:
            await prober.code_action(settings)
        else:
            await prober.one_call()
            if cfg.model.parallel_tool_calls:
                await prober.parallel()
        await prober.seeded_twice()
        if (cfg.eval.mode != "none" and method_plugin(cfg).needs_summarizer) or cfg.summarizer.base_url:
            try:
                summ, own = summarizer_settings(cfg, client)
            except UserError as exc:  # its own server cannot be reached
                prober.add(Row("summarizer", f"reach {cfg.summarizer.base_url}", got="unreachable", ok=False,
                               said=str(exc)[:300]))
            else:
                cap = summ.max_tokens if summ.max_tokens is not None else PROBE_MAX_TOKENS
                await prober.summarizer(summ.llm, summ.temperature, cap)
        if embeds:
            prober.add(await asyncio.to_thread(_embedding, cfg))
        points = await _sweep(cfg, ep, client) if cfg.model.kind != "openai" else []
    finally:
        if own is not None:
            await own.close()
        await client.close()
    rows = prober.rows
    return rows, {
        "seconds_per_answer": seconds_per_answer(rows),
        "time_to_first_token_s": first_token(rows),
        "tokens_per_s": tokens_per_second(rows),
        "seeded_identical": next((r.got == "identical" for r in rows if r.probe == "same seed twice"), None),
        "context_limit": _context_limit(cfg, ep, rows),
        "rate_limit_headers": prober.wires.rate_limits(),
        "points": points,
    }


def _embedding(cfg: Config) -> Row:
    """The run's embedder, uncached (every text is asked), on one batch."""
    e = cfg.embedding
    batch = min(e.batch_size or 4, 10)
    try:
        embedder = make_embedder_for(cfg, batch_size=batch, cache_dir=None)
    except UserError as exc:
        return Row("embedding", f"load {e.model}", got="did not load", ok=False, said=str(exc)[:300])
    return embedding_row(embedder, batch, e.dim)


async def _sweep(cfg: Config, ep: Endpoint, client: ChatClient) -> list[dict[str, Any]]:
    """A short throughput sweep of a served model (the file's ``points``): one request at a
    time, and a few at once where the server batches them (vLLM; llama.cpp serves one)."""
    local = cfg.model.kind == "local"
    sweep = Sweep((1,) if local else (1, min(8, cfg.llm.concurrency)), requests=2 if local else 0,
                  prompt_words=100 if local else 300, max_tokens=32 if local else 64)
    return await measure(lambda c: ChatClient(base_url=ep.base_urls if len(ep.base_urls) > 1 else ep.base_url,
                                              model=ep.model, api_key=client.api_key, concurrency=c,
                                              timeout=cfg.llm.timeout, max_retries=0), sweep)


def _context_limit(cfg: Config, ep: Endpoint, rows: list[Row]) -> dict[str, Any]:
    """The context length where the server states it: vLLM's ``max_model_len`` in /models,
    llama.cpp's ``n_ctx``, the embedded server's own, or a refusal's words."""
    for row in rows:
        if m := _STATED_LIMIT.search(row.said):
            return {"tokens": int(m.group(1) or m.group(2)), "source": f"the {row.probe} refusal"}
    stated = ep.identity.get("max_model_len")
    if isinstance(stated, int):
        return {"tokens": stated, "source": "the server's /models" if cfg.llm.base_url else "the server reme started"}
    return {"tokens": None, "source": f"not stated by the provider (model.n_ctx={cfg.model.n_ctx} is assumed)"}


def _with_region_hint(message: str, cfg: Config) -> str:
    if "dashscope" in str(cfg.llm.base_url) and "refused the API key" in message:
        return (message + " (a DashScope key works in its own region only: dashscope.aliyuncs.com is mainland "
                "China, dashscope-intl.aliyuncs.com international)")
    return message


def _table(cfg: Config, ep: Endpoint | None, rows: list[Row]) -> Table:
    served = f" ({ep.model})" if ep is not None else ""
    table = Table(title=f"reme check: {cfg.model.name}{served} at {calibration.host_key(cfg)}")
    for col in ("probe", "sent", "came back", "result", "provider said"):
        table.add_column(col)
    for r in rows:
        result = {True: "[green]pass[/green]", False: "[red]FAIL[/red]", None: "measured"}[r.ok]
        timing = f" {r.latency_s:.1f}s" if r.latency_s is not None else ""
        streamed = ", streamed" if r.streamed else ""
        table.add_row(escape(r.probe), escape(r.sent + streamed), escape(r.got), result + escape(timing),
                      escape(r.said))
    return table


def _measured_lines(m: dict[str, Any]) -> list[str]:
    def num(x: Any, unit: str) -> str:
        return "not measured" if x is None else f"{x:g} {unit}"

    limit = m["context_limit"]
    lines = [f"time to first token: {num(m['time_to_first_token_s'], 's')}; one answer: "
             f"{num(m['seconds_per_answer'], 's')} (median); one stream: {num(m['tokens_per_s'], 'tokens/s')}",
             "same seed twice: " + {True: "identical", False: "differed", None: "not measured"}[m["seeded_identical"]],
             f"context limit: {limit['tokens'] or '?'} tokens ({limit['source']})",
             "rate limits: " + (", ".join(f"{k}={v}" for k, v in sorted(m["rate_limit_headers"].items()))
                                or "no x-ratelimit-* headers")]
    for p in m["points"]:
        lines.append(f"throughput at {p['concurrency']} in flight: {p['prompt_tokens_per_s']:,.1f} prompt and "
                     f"{p['generated_tokens_per_s']:,.1f} generated tokens/s")
    return lines

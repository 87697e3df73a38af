"""What `reme check` asks the endpoints of a run before it starts: the run's own request
shapes, each sent once and judged, built by the code the run sends them with.

The executor's probes go through the agent loop itself (``run_episode``, one model call, the
run's ``EpisodeSettings``: its protocol, sampling, thinking switch, seed, headers and
history rules) over a probe environment offering two small tools, so a probe cannot drift
from what a run sends; only the task is the probe's own (a question any model answers in
one step). The summarizer is asked through the run's summarizer settings, the embedding
through the run's embedder. Each probe gives one ``Row``: what was sent, what came back,
whether that is what the run needs, and the provider's own words when it refused.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from reme_cli.agent.loop import Step, Trajectory, run_episode
from reme_cli.agent.protocols import extract_code
from reme_cli.bench.base import Outcome, Task, ToolResult
from reme_cli.core.errors import RunAborted, UserError
from reme_cli.llm.client import LLM, ChatClient, Wire, provider_said
from reme_cli.run.runner import EpisodeSettings

# Two tools any model can call from one sentence; their answers are canned (nothing runs).
PROBE_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"}},
                       "required": ["city"]}}},
]
PLAIN = "Without calling any tool, answer in one short sentence: what is the capital of France?"
ONE_CALL = "What is the weather in Paris right now? Call the get_weather tool to find out."
PARALLEL = "What is the weather and the time in Paris? Call get_weather and get_time together, in one reply."
CODE = ("Write Python code that prints the sum of 2 and 3. Reply with the code in one ```python block and "
        "nothing else.")
SUMMARY = ("Summarize in one sentence what this agent did: it called get_weather for Paris, read 'sunny, 21 C' "
           "and told the user the weather.")
EMBED_TEXTS = ["the weather in Paris", "the local time in Tokyo", "file system: list the files of a folder",
               "send a message to a contact", "book a flight to Berlin", "the capital of France",
               "sum two numbers in Python", "read a calendar entry", "cancel an order", "find a song"]


@dataclass
class Row:
    """One probe: what was sent, what came back, and whether the run can use it (None: the
    run does not need it, only measured)."""

    probe: str
    sent: str
    got: str = ""
    ok: bool | None = None
    said: str = ""  # the provider's own words when it refused or failed
    latency_s: float | None = None
    first_token_s: float | None = None
    completion_tokens: int = 0
    streamed: bool = False


@dataclass
class Wires:
    """The transport of every answer the probes got (``ChatClient.on_wire``)."""

    seen: list[Wire] = field(default_factory=list)

    def __call__(self, wire: Wire) -> None:
        self.seen.append(wire)

    def last(self, since: int) -> Wire | None:
        return self.seen[-1] if len(self.seen) > since else None

    def rate_limits(self) -> dict[str, str]:
        """The provider's rate-limit headers, from the last answer that had any."""
        for wire in reversed(self.seen):
            found = {k: v for k, v in wire.headers.items() if "ratelimit" in k.lower()}
            if found:
                return found
        return {}


class ProbeEnv:
    """The environment of a probe episode: the probe tools, canned answers, nothing runs."""

    ANSWERS = {"get_weather": "sunny, 21 C", "get_time": "14:05"}

    def __init__(self, tools: list[dict[str, Any]]):
        self._tools = tools

    def tools(self) -> list[dict[str, Any]]:
        return self._tools

    async def execute(self, name: str, arguments: Any) -> ToolResult:
        known = name in self.ANSWERS
        return ToolResult(call=f"{name}({arguments})", output=self.ANSWERS.get(name, f"no tool {name!r}"),
                          error=not known)

    async def end_step(self) -> None: ...

    async def end_turn(self) -> None: ...

    async def evaluate(self) -> Outcome:
        return Outcome(True, 1.0)

    async def close(self) -> None: ...


def provider_words(exc: BaseException) -> str:
    """What the server said when it refused: its error body's message, else the exception's first line."""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {provider_said(exc)}"[:300]
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"[:300]


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _calls_text(step: Step) -> str:
    return "; ".join(f"{c['name']}({json.dumps(_arguments(c['arguments']), ensure_ascii=False)})"
                     for c in step.calls) or "no call"


def _well_formed(step: Step, names: set[str]) -> list[dict[str, Any]]:
    """The step's calls of an offered tool whose arguments are a JSON object naming a city."""
    good = []
    for call in step.calls:
        args = _arguments(call["arguments"])
        if call["name"] in names and isinstance(args, dict) and isinstance(args.get("city"), str):
            good.append(call)
    return good


def _short(text: str | None, limit: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


@dataclass
class Prober:
    """The probes of one run's endpoints, in the order a run meets them."""

    client: ChatClient  # the run's executor client (no cache: every probe reaches the server)
    settings: EpisodeSettings  # the run's
    seed: int  # what a first unit's first trial sends
    headers: dict[str, str] = field(default_factory=dict)
    wires: Wires = field(default_factory=Wires)
    rows: list[Row] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client.on_wire = self.wires

    async def episode(self, name: str, prompt: str, tools: list[dict[str, Any]],
                      judge: Callable[[Step], tuple[bool, str]], sent: str,
                      settings: EpisodeSettings | None = None, llm: LLM | None = None) -> tuple[Row, Step | None]:
        """One model call of the agent loop, as the run makes it, judged by ``judge``: its row
        (kept in ``rows``) and the step it made (None: refused)."""
        s = settings or self.settings
        task = Task(id=f"reme-check-{name}", turns=[[{"role": "user", "content": prompt}]], query=prompt)
        since = len(self.wires.seen)
        row = Row(name, sent)
        start = time.perf_counter()
        try:
            traj: Trajectory = await run_episode(
                llm or self.client, s.protocol, ProbeEnv(tools), task, s.sampling(self.seed),
                system_prompt=s.system_prompt,
                max_interactions=1, max_steps_per_turn=1, headers=self.headers,
                history_reasoning=s.history_reasoning)
        except RunAborted:
            raise  # a refused key: the check stops here, in one line
        except (openai.APIError, UserError) as exc:
            row.ok, row.said, row.got = False, provider_words(exc), "refused"
            self.rows.append(row)
            return row, None
        row.latency_s = time.perf_counter() - start
        if traj.stop_reason == "context_overflow" or not traj.turns or not traj.turns[0]:
            row.ok, row.got, row.said = False, "refused for length", traj.stop_detail or ""
            self.rows.append(row)
            return row, None
        step = traj.turns[0][0]
        row.completion_tokens = step.completion_tokens
        if (wire := self.wires.last(since)) is not None:
            row.streamed, row.first_token_s = wire.streamed, wire.first_token_s
        row.ok, row.got = judge(step)
        self.rows.append(row)
        return row, step

    async def plain(self) -> tuple[Row, Step | None]:
        def judge(step: Step) -> tuple[bool, str]:
            said = step.text or _calls_text(step)
            return bool(step.text.strip() or step.calls), _short(said)
        offered = "" if self.settings.protocol.name == "code" else ", the tools offered"
        return await self.episode("plain answer", PLAIN, PROBE_TOOLS, judge, f"a question{offered}")

    def thinking_row(self, step: Step | None, plain: Row) -> Row:
        """Thinking, judged on the plain answer's step (a config that thinks sends every
        request so): the reasoning came back apart from the answer, or in ``<think>``."""
        row = Row("thinking", "the plain answer's request: thinking on", streamed=plain.streamed)
        reasoning = step.reasoning if step is not None else None
        row.ok = bool(reasoning)
        row.got = (f"reasoning ({len(reasoning)} chars): {_short(reasoning, 50)}" if reasoning
                   else "no reasoning came back")
        return self.add(row)

    async def one_call(self) -> tuple[Row, Step | None]:
        def judge(step: Step) -> tuple[bool, str]:
            return bool(_well_formed(step, {"get_weather"})), _calls_text(step) if step.calls else \
                f"no call; answer: {_short(step.text, 50)}"
        return await self.episode("one tool call", ONE_CALL, PROBE_TOOLS, judge, "ask for get_weather(Paris)")

    async def parallel(self) -> tuple[Row, Step | None]:
        def judge(step: Step) -> tuple[bool, str]:  # several calls in one reply, whichever tools
            return len(_well_formed(step, {"get_weather", "get_time"})) >= 2, _calls_text(step)
        return await self.episode("parallel tool calls", PARALLEL, PROBE_TOOLS, judge,
                                  "ask for get_weather and get_time in one reply")

    async def code_action(self, settings: EpisodeSettings) -> tuple[Row, Step | None]:
        def judge(step: Step) -> tuple[bool, str]:
            code = extract_code(step.text)
            block = "```python" in step.text and code != step.text
            return block and "print" in code, _short(code)
        return await self.episode("code action", CODE, [], judge, "ask for a ```python block (a code-action turn)",
                                  settings=settings)

    async def seeded_twice(self) -> Row:
        """The plain probe twice with one seed, streamed (for the time to its first token):
        whether the endpoint answers alike (only measured: a run works either way)."""
        stream, self.client.stream = self.client.stream, "always"
        try:
            answers = []
            for _ in range(2):
                before = len(self.rows)
                row, _ = await self.plain()
                del self.rows[before:]  # kept in the measurement below, not as rows of their own
                answers.append(row)
        finally:
            self.client.stream = stream
        first, second = answers
        row = Row("same seed twice", f"the plain answer twice, seed {self.seed}")
        row.ok = None if first.ok and second.ok else False
        row.got = "identical" if first.got == second.got else f"differed: {first.got!r} / {second.got!r}"
        row.said = first.said or second.said
        timed = [a for a in answers if a.latency_s is not None]
        if timed:  # one stream's speed, from the faster of the two
            fast = min(timed, key=lambda a: a.latency_s)
            row.latency_s, row.first_token_s = fast.latency_s, fast.first_token_s
            row.completion_tokens, row.streamed = fast.completion_tokens, fast.streamed
        self.rows.append(row)
        return row

    async def summarizer(self, llm: LLM, temperature: float | None, max_tokens: int | None) -> Row:
        row = Row("summarizer", "a summary request, as its methods send")
        start = time.perf_counter()
        try:
            result = await llm.chat([{"role": "user", "content": SUMMARY}], temperature=temperature,
                                    max_tokens=max_tokens)
        except RunAborted:
            raise
        except (openai.APIError, UserError) as exc:
            row.ok, row.said, row.got = False, provider_words(exc), "refused"
        else:
            row.latency_s = time.perf_counter() - start
            row.ok = bool(result.content.strip())
            row.got = _short(result.content) or f"nothing (finish: {result.finish_reason})"
        self.rows.append(row)
        return row

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row


def embedding_row(embedder: Any, batch: int, dim: int) -> Row:
    """One batch of ``batch`` texts through the run's embedder: the vectors' count and size."""
    texts = (EMBED_TEXTS * (batch // len(EMBED_TEXTS) + 1))[:batch]
    row = Row("embedding", f"{batch} texts, {dim}-d expected")
    start = time.perf_counter()
    try:
        vectors = embedder.embed(texts)
    except UserError as exc:
        row.ok, row.got, row.said = False, "refused", str(exc)[:300]
        return row
    row.latency_s = time.perf_counter() - start
    shape = getattr(vectors, "shape", (0, 0))
    row.ok = tuple(shape) == (batch, dim)
    row.got = f"{shape[0]} vectors of {shape[1] if len(shape) > 1 else 0} numbers"
    return row


def seconds_per_answer(rows: list[Row]) -> float | None:
    """The median time of the executor's answers (what a hosted plan's answer time is)."""
    times = [r.latency_s for r in rows if r.latency_s is not None and r.ok and r.probe != "summarizer"
             and r.probe != "embedding"]
    return round(statistics.median(times), 3) if times else None


def tokens_per_second(rows: list[Row]) -> float | None:
    """One stream's generation speed: tokens after the first over the time they took."""
    rates = [r.completion_tokens / (r.latency_s - r.first_token_s) for r in rows
             if r.streamed and r.first_token_s is not None and r.latency_s and r.completion_tokens > 1
             and r.latency_s > r.first_token_s]
    return round(statistics.median(rates), 1) if rates else None


def first_token(rows: list[Row]) -> float | None:
    times = [r.first_token_s for r in rows if r.first_token_s is not None]
    return round(statistics.median(times), 3) if times else None


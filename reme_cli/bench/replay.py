"""The seam between the test double's server and a benchmark's replay policy (TEST DOUBLE:
never used for results).

A benchmark plug-in may answer its tasks with their ground truth on the scripted server
(``reme_cli/testing/scripted_server.py``): a class registered by policy name in
``reme_cli.core.registry.REPLAY_POLICIES`` (entry-point group ``reme.replay_policies``)
whose instances are the server's policies (``name``, ``reply(body, headers) -> Reply``) and
which may declare

    add_arguments(parser)              # classmethod: its own server options (argparse)
    from_options(corrupt, **options)   # classmethod: an instance from the parsed options

What both sides share lives here, below the benchmarks, because the server sits above them
(a plug-in never imports the server): the reply, the error that becomes an HTTP 400, the
task header and where in a conversation a request stands.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from reme_cli.core.seams import ScriptedAnswers

TASK_HEADER = "X-Reme-Task-Id"
# The harness's JSON tool-call protocol sends tool results as user messages with this
# prefix; they are not turns. The server observes the wire, so it repeats the constant
# rather than importing the agent (which sits above it).
TOOL_RESULTS_PREFIX = "[tool results]"
DONE_TEXT = "Done."

Call = tuple[str, dict[str, Any]]


class PolicyError(Exception):
    """A request the policy cannot answer; becomes an HTTP 400 with this message."""


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[Call] = field(default_factory=list)
    finish_reason: str | None = None  # default: "tool_calls" or "stop"
    raw: bool = False  # send content as is, even when the request has a response_format
    reasoning: str | None = None  # sent as the message's reasoning_content, as vLLM's reasoning parser does


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def conversation_position(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(turn index, step within the turn) of the reply being asked for.

    Turn = user messages so far - 1 (tool-result wrappers of the JSON protocol are not
    user turns); step = assistant messages since the last user turn.
    """
    last_user = -1
    turns = 0
    for i, msg in enumerate(messages):
        if msg.get("role") == "user" and not text_of(msg.get("content")).lstrip().startswith(
            TOOL_RESULTS_PREFIX
        ):
            turns += 1
            last_user = i
    if turns == 0:
        raise PolicyError("the request has no user message")
    step = sum(1 for m in messages[last_user + 1 :] if m.get("role") == "assistant")
    return turns - 1, step


def has_lessons(messages: list[dict[str, Any]]) -> bool:
    """A retry guided by what was learned from a failure: its first user message carries one
    of the methods' ``RETRY_MARKS`` (e.g. a reflection lesson, or the failed attempt's
    reflection)."""
    first_user = text_of(next((m for m in messages if m.get("role") == "user"), {}).get("content"))
    return any(mark in first_user for script in scripted_answers() for mark in getattr(script, "RETRY_MARKS", ()))


# Each memory method scripts the answers to its own prompts in a module of its plug-in,
# registered in ``reme_cli.core.registry.SCRIPTED`` (entry-point group ``reme.scripted``):
#   answer(system, user, body, policy) -> dict | None   # Reply's fields; None: not my prompt
#   RETRY_MARKS: tuple[str, ...]   # optional: text marking a retry guided by a lesson
# ``policy`` is the server's ScriptedSummarizerPolicy (its ``judge_score``, ``fill``); a
# script may raise ValueError for a request of its method's it cannot answer (HTTP 400).


@functools.cache
def scripted_answers() -> tuple[ScriptedAnswers, ...]:
    """Every registered method's script, in name order; looked up once per process (the
    entry points are not scanned per request: a test that registers one for a while,
    ``SCRIPTED.temporarily``, clears this cache around it)."""
    from reme_cli.core.registry import SCRIPTED

    return tuple(SCRIPTED.get(name) for name in SCRIPTED.names())

"""One step of LangMem's prompt optimizer over reme trajectories.

A step: render (task, trajectory, outcome) triples as LangMem renders conversations, ask
``langmem.create_prompt_optimizer(model, kind=...)`` for the updated prompt, and return
it. LangMem and LangChain are imported lazily: without the ``baselines`` extra this module
still imports, and ``require_langmem()`` says in one line how to install it.

Rendering. The trajectory becomes OpenAI-format messages (the user turns from the task,
never the injected guidance; each assistant step with its tool calls; each call's output
as a tool message), converted to LangChain messages so that LangMem's
``get_trajectory_clean`` shows the calls. The batch goes to the optimizer as one string in
``PromptMemoryMultiple``'s own layout (``<trajectory i>`` / ``<feedback i>``): for
``prompt_memory`` that is exactly what LangMem builds from a list; ``metaprompt`` and
``gradient`` would otherwise tag sessions with fresh uuid4s, and a prompt that changes on
every run defeats the response cache (reruns must replay exactly).

Failures. Only the optimizer's own parse/validation failures are caught (a reply with no
JSON, a schema mismatch, trustcall returning no response): the step keeps the previous
prompt and says why. Anything reme's client raises propagates (see chat_model).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from reme_cli.agent.trajectory import Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.core.text import clip, middle_cut
from reme_cli.llm import answer_health
from reme_cli.methods.langmem.conversation import MAX_OUTPUT_CHARS as _MAX_OUTPUT_CHARS, trajectory_messages  # noqa: F401
from reme_cli.methods.langmem.install import INSTALL_HINT, require  # noqa: F401 (INSTALL_HINT: re-exported)


# What LangMem/trustcall raise when a reply does not fit: json/pydantic/LangChain parse
# errors are ValueErrors; trustcall's empty ``responses[0]`` is an IndexError; a reply of the
# wrong shape gives KeyError/TypeError/AttributeError.
OPTIMIZER_FAILURES = (ValueError, KeyError, IndexError, TypeError, AttributeError)

_MAX_REASON_CHARS = 300


def require_langmem() -> Any:
    """``langmem.create_prompt_optimizer``, or a one-line UserError saying how to install it."""
    return require("langmem", "create_prompt_optimizer")


def prompt_version(prompt: str) -> str:
    """A short, stable name of a prompt text (what trials record as the retrieved id)."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:12]


def feedback_text(outcome: Outcome, traj: Trajectory, with_reason: bool) -> str:
    """What the optimizer is told about the episode: the official verdict, and on failure
    (``with_reason``) the checker's reason, clipped."""
    if outcome.success:
        return "Success: the official checker accepted the final state and answers."
    text = "Failure: the official checker rejected the episode."
    details = outcome.details or {}
    if with_reason and (details.get("error_type") or details.get("error_message")):
        reason = str(details.get("error_message") or "").strip().splitlines()
        text += f" Reason ({details.get('error_type') or 'unknown'}): " \
                f"{clip(reason[0] if reason else '', _MAX_REASON_CHARS)}"
    if traj.stop_reason != "answered":
        text += f" The episode stopped early ({traj.stop_reason})."
    return text


def render_batch(batch: list[tuple[Task, Trajectory, Outcome]], *, with_reason: bool, max_chars: int) -> str:
    """LangMem's multi-trajectory layout, numbered (deterministic)."""
    from langchain_core.messages import convert_to_messages
    from langmem.prompts.utils import get_trajectory_clean

    pieces = []
    for i, (task, traj, outcome) in enumerate(batch):
        shown = middle_cut(get_trajectory_clean(convert_to_messages(trajectory_messages(task, traj))), max_chars)
        pieces.append(f"<trajectory {i}>\n{shown}\n</trajectory {i}>\n"
                      f"<feedback {i}>\n{feedback_text(outcome, traj, with_reason)}\n</feedback {i}>")
    return "\n".join(pieces)


def _plain(text: str) -> str:
    """LangMem escapes single braces for f-string templates; the learned prompt is plain
    text injected as is, so they are put back."""
    return text.replace("{{", "{").replace("}}", "}")


@dataclass
class Step:
    prompt: str  # the prompt after the step: the previous one if nothing changed or it failed
    changed: bool
    llm_calls: int
    error: str | None = None  # the optimizer's parse/validation failure, if any


async def optimize(prompt: str, batch: list[tuple[Task, Trajectory, Outcome]], cfg: Any,
                   summarizer: Any) -> Step:
    """One optimizer call over ``batch``, starting from ``prompt``. ``cfg``: LangMemPromptConfig;
    ``summarizer``: SummarizerSettings (its client, sampling and schema format)."""
    create = require_langmem()
    from reme_cli.methods.langmem.chat_model import RemeChatModel

    model = RemeChatModel(llm=summarizer.llm, schema_format=summarizer.schema_format,
                          temperature=summarizer.temperature, max_tokens=summarizer.max_tokens)
    options = None if cfg.kind == "prompt_memory" else {
        "max_reflection_steps": cfg.max_reflection_steps, "min_reflection_steps": cfg.min_reflection_steps}
    optimizer = create(model, kind=cfg.kind, config=options)
    data = render_batch(batch, with_reason=cfg.feedback == "reason", max_chars=cfg.max_trajectory_chars)
    target = {"name": "agent_instructions", "prompt": prompt, "update_instructions": cfg.update_instructions}
    try:
        new = await optimizer.ainvoke({"trajectories": data, "prompt": target})
    except OPTIMIZER_FAILURES as exc:
        model.raise_fault()  # a swallowed transport error comes first, whatever followed it
        # One answer per step: LangMem's own retries make single replies no verdict.
        answer_health.note("langmem_optimize", None, valid=False, truncated=model.truncated > 0)
        first = (str(exc).strip().splitlines() or [""])[0]
        return Step(prompt, False, model.calls, f"{type(exc).__name__}: {clip(first, 300)}")
    model.raise_fault()
    answer_health.note("langmem_optimize", None, valid=True, truncated=model.truncated > 0)
    new = _plain(new).strip() if isinstance(new, str) else ""
    if not new:  # "update_prompt = False and an empty string": LangMem's way of keeping it
        return Step(prompt, False, model.calls)
    return Step(new, new != prompt, model.calls)

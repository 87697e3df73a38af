"""An episode as text for an LLM that learns from it (ReMe's summarizer, A-Mem's notes,
LangMem's optimizer): deterministic, compact, without the checker's ground truth."""

from __future__ import annotations

import json
import re
from typing import Any

from reme_cli.agent.trajectory import Step, Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.core.text import clip, middle_cut

# Per-piece caps inside a rendered trajectory, before the whole-text cap.
_MAX_TEXT_CHARS = 1500
_MAX_CALL_CHARS = 400
_MAX_OUTPUT_CHARS = 600
_MAX_CODE_CHARS = 1500  # one code action does what several calls do
_FENCED = re.compile(r"```.*?```", re.DOTALL)


def _call_text(call: dict[str, Any]) -> str:
    text = call.get("call")
    if not isinstance(text, str) or not text:
        args = call.get("arguments")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
        text = f"{call.get('name', '?')}({args})"
    return text


def _code_step(step: Step) -> list[str]:
    """A code action as its thought, its code and what running it printed; the reply's own
    copy of the code block is left out of the thought, so the code shows once."""
    lines = []
    thought = _FENCED.sub("", step.text or "").strip()
    if thought:
        lines.append(f"[assistant] {clip(thought, _MAX_TEXT_CHARS)}")
    lines.append(f"[code]\n{clip(step.code or '', _MAX_CODE_CHARS)}")
    failed = any(c.get("error") for c in step.calls)
    lines.append(f"{'[error]' if failed else '[output]'} {clip(step.code_output or '', _MAX_OUTPUT_CHARS)}")
    return lines


def render_trajectory(task: Task, traj: Trajectory, outcome: Outcome | None, max_chars: int = 12000) -> str:
    """Compact, deterministic text of an episode for the summarizer.

    User turns come from `task.turns` (never from `traj.messages`, which carry injected
    guidance); then each assistant step's text and calls with truncated outputs (a code
    action: its code and output, see `_code_step`). The
    outcome shows success and reward only: the checker's details can spell out the
    ground truth, which an experience must not memorize. Too long: cut from the middle,
    keeping the task opening and the ending.
    """
    lines: list[str] = []
    for t, steps in enumerate(traj.turns):
        lines.append(f"## Turn {t + 1}")
        user_msgs = task.turns[t] if t < len(task.turns) else []
        for msg in user_msgs:
            lines.append(f"[user] {msg.get('content', '').strip()}")
        for step in steps:
            if step.code is not None:
                lines += _code_step(step)
                continue
            if step.text and step.text.strip():
                lines.append(f"[assistant] {clip(step.text, _MAX_TEXT_CHARS)}")
            for call in step.calls:
                lines.append(f"[call] {clip(_call_text(call), _MAX_CALL_CHARS)}")
                tag = "[error]" if call.get("error") else "[output]"
                lines.append(f"{tag} {clip(str(call.get('output', '')), _MAX_OUTPUT_CHARS)}")
        if not steps:
            lines.append("[assistant] (no reply)")
    unreached = len(task.turns) - len(traj.turns)
    if unreached > 0:
        lines.append(f"({unreached} later user turn(s) never reached)")
    if traj.stop_reason != "answered":
        lines.append(f"(stopped: {traj.stop_reason})")
    if outcome is not None:
        verdict = "success" if outcome.success else "failure"
        lines.append(f"## Outcome: {verdict} (reward {outcome.reward:g})")
    return middle_cut("\n".join(lines), max_chars)

"""TEST DOUBLE: the AppWorld gold policy of the scripted server (``appworld-gold``), found
through ``reme_cli.core.registry.REPLAY_POLICIES``; it contributes the server's
``--appworld-root`` option. Never used for results.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from reme_cli.bench.replay import DONE_TEXT, TASK_HEADER, PolicyError, Reply


class AppWorldGoldPolicy:
    """Answers an AppWorld task with its ground-truth solution code (``data/tasks/ID/
    ground_truth/solution.py`` under ``root``), then "Done." once the code has run. Tasks in
    ``corrupt`` get a solution that completes the task with a wrong answer."""

    name = "appworld-gold"

    def __init__(self, root: str, corrupt: Iterable[str] = ()):
        self.root, self.corrupt = root, set(corrupt)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--appworld-root", help="an AppWorld data root (appworld-gold policies)")

    @classmethod
    def from_options(cls, corrupt: Iterable[str] = (), appworld_root: str | None = None,
                     **_: Any) -> AppWorldGoldPolicy:
        if not appworld_root:
            raise ValueError("the appworld-gold policy needs --appworld-root DIR")
        return cls(appworld_root, corrupt)

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        task_id = headers.get(TASK_HEADER)
        if not task_id:
            raise PolicyError(f"the {TASK_HEADER} header is required by the appworld-gold policy")
        if any(m.get("role") == "assistant" for m in body.get("messages") or []):
            return Reply(content=DONE_TEXT)  # the code ran; nothing more to do
        if task_id in self.corrupt:
            code = "apis.supervisor.complete_task(answer=42)"
        else:
            try:
                with open(f"{self.root}/data/tasks/{task_id}/ground_truth/solution.py") as f:
                    code = f.read()
            except OSError as exc:
                raise PolicyError(f"no solution for {task_id}: {exc}") from None
        return Reply(content=f"I will solve it.\n```python\n{code}\n```")

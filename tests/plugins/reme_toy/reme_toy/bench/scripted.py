"""TEST DOUBLE for the toy benchmark: answers like a perfect agent (one increment per step
up to the target, then DONE), counting the increments it already sent in the history. The
scripted server finds it by name (``--policy toy``) through the ``reme.replay_policies``
entry point, as it finds reme's own (``reme_cli/bench/replay.py`` is the seam)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reme_cli.bench.replay import Reply


class ToyPolicy:
    name = "toy"

    def reply(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        messages = body["messages"]
        task = next(m["content"] for m in messages if m["role"] == "user")
        target = int(re.search(r"counter to (\d+)", task).group(1))
        sent = sum(m["content"].count("CALL increment") for m in messages if m["role"] == "assistant")
        return Reply(content="CALL increment" if sent < target else f"DONE at {target}")

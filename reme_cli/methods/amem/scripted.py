"""TEST DOUBLE: the scripted summarizer's answers to A-Mem's note construction and memory
evolution prompts (``prompts.py``), found by the test server through the registry
(``reme_cli.core.registry.SCRIPTED``). A reply is the server's ``Reply`` fields as a dict.

Construction takes words of the content (keywords, context, tags); evolution links the new
note to the nearest one and retags every neighbour, so one note changes the store predictably.
"""

from __future__ import annotations

import json
import re
from typing import Any


def answer(system: str, user: str, body: Any = None, policy: Any = None) -> dict[str, Any] | None:
    if "Content for analysis:" in user:
        words = re.findall(r"[A-Za-z_]{4,}", user.split("Content for analysis:", 1)[1])
        return {"content": json.dumps({"keywords": words[:5], "context": " ".join(words[:12]),
                                       "tags": ["scripted", *words[5:7]]}), "raw": True}
    if "AI memory evolution agent" in user:
        n = int(re.search(r"The number of neighbors is (\d+)", user).group(1))
        return {"content": json.dumps({
            "should_evolve": True, "actions": ["strengthen", "update_neighbor"],
            "suggested_connections": ["0"], "tags_to_update": ["scripted", "linked"],
            "new_context_neighborhood": [f"Scripted context {i}, evolved." for i in range(n)],
            "new_tags_neighborhood": [["scripted", "evolved"] for _ in range(n)]}), "raw": True}
    return None

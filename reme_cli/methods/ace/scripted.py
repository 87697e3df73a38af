"""TEST DOUBLE: the scripted summarizer's answers to ACE's Reflector and Curator prompts
(``prompts/``), found by the test server through the registry
(``reme_cli.core.registry.SCRIPTED``). A reply is the server's ``Reply`` fields as a dict.

The Reflector tags the first bullet of the playbook it is shown helpful and the second
harmful; the Curator ADDs one bullet naming the task to common_mistakes_and_correct_strategies.
So one task changes a playbook predictably.
"""

from __future__ import annotations

import json
import re
from typing import Any

REFLECTOR = "<<<PLAYBOOK_GUIDE>>>"
CURATOR = "You are a master curator of knowledge."
HISTORY = "=== FULL CONVERSATION HISTORY ==="
# ACE's offline retry (prompts/retry_frame.txt) carries the failed attempt's reflection: the
# replay policy's ``heal_on_retry`` answers it correctly.
RETRY_MARKS = ("In your previous attempt, the ",)


def answer(system: str, user: str, body: Any = None, policy: Any = None) -> dict[str, Any] | None:
    """The reply to an ACE prompt (one user message), or None for any other prompt."""
    if user.startswith(CURATOR):
        task = re.search(r"Task Context \(the actual task instruction\):\*\*\s*`(.*?)`", user, re.DOTALL)
        words = " ".join((task.group(1) if task else "").split()[:12])
        return {"content": json.dumps({"reasoning": "scripted", "operations": [{
            "type": "ADD", "section": "common_mistakes_and_correct_strategies",
            "content": f"Scripted insight for: {words}"}]}), "raw": True}
    if REFLECTOR in user and HISTORY in user:
        ids = re.findall(r"^\[([^\]]+)\]", user.split(REFLECTOR)[1], re.MULTILINE)
        tags = [{"id": i, "tag": tag} for i, tag in zip(ids, ("helpful", "harmful"))]
        return {"content": json.dumps({
            "reasoning": "scripted", "error_identification": "none", "root_cause_analysis": "none",
            "correct_approach": "as done", "key_insight": "Scripted key insight.", "bullet_tags": tags}), "raw": True}
    return None

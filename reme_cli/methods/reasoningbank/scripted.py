"""TEST DOUBLE: the scripted summarizer's answers to ReasoningBank's prompts
(``prompts/``), found by the test server through the registry
(``reme_cli.core.registry.SCRIPTED``). A reply is the server's ``Reply`` fields as a dict.

- the judge says failure when the trajectory shows a corrupted argument (what
  ``BFCLReplayPolicy``'s ``--corrupt`` writes), success otherwise;
- the success / failure extraction prompts get reasoning, then one item in the prompt's
  fenced Markdown format, titled after the prompt and the query's first words (so a test can
  tell which prompt extracted it and from which task).
"""

from __future__ import annotations

from typing import Any

JUDGE_MARK = 'Status: "success" or "failure"'
SUCCESS_MARK = "**how an agent successfully accomplished the task**"
FAILURE_MARK = "**how an agent attempted to resolve the task but failed**"


def _query_words(user: str) -> str:
    query = user.split("**Query:**", 1)[-1].split("**Trajectory:**", 1)[0]
    return " ".join(query.split()[:6])


def answer(system: str, user: str, body: Any = None, policy: Any = None) -> dict[str, Any] | None:
    """The reply to a ReasoningBank prompt, or None for any other prompt."""
    if JUDGE_MARK in system:
        failed = "corrupted" in user
        return {"content": f"Thoughts: scripted: {'an argument was corrupted' if failed else 'all calls ran'}.\n"
                           f"Status: \"{'failure' if failed else 'success'}\"", "raw": True}
    for mark, kind in ((SUCCESS_MARK, "success"), (FAILURE_MARK, "failure")):
        if mark in system:
            words = _query_words(user)
            return {"content": (f"The trajectory shows a scripted {kind}.\n\n```\n# Memory Item 1\n"
                                f"## Title Scripted {kind} item: {words}\n"
                                f"## Description A scripted {kind} lesson.\n"
                                f"## Content Check the state before each call ({kind}).\n```"), "raw": True}
    return None

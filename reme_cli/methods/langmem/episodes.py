"""What LangMem's episodic-memory guide defines: the ``Episode`` schema, the manager's
instructions and namespace, and how found episodes are written into the prompt.

Source: langchain-ai/langmem, docs/docs/guides/extract_episodic_memories.md at c4de781
(MIT; the guide the ReMe authors followed, their issue #67). The schema and instructions
are verbatim; tests/fixtures/langmem_episodic_guide/ holds the guide's text and a test
checks these against it. Imports pydantic only (a core dependency of the extra's stack).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

NAMESPACE = ("memories", "episodes")

# The "With storage" section's instructions (the "Without storage" one differs).
INSTRUCTIONS = ("Extract exceptional examples of noteworthy problem-solving scenarios, including what made them "
                "effective.")

HEADER = "### EPISODIC MEMORY:"


class Episode(BaseModel):
    """Write the episode from the perspective of the agent within it. Use the benefit of hindsight to record the memory, saving the agent's key internal thought process so it can learn over time."""  # noqa: E501

    observation: str = Field(..., description="The context and setup - what happened")
    thoughts: str = Field(
        ...,
        description="Internal reasoning process and observations of the agent in the episode that let it arrive"
        ' at the correct action and result. "I ..."',
    )
    action: str = Field(
        ...,
        description="What was done, how, and in what format. (Include whatever is salient to the success of the action). I ..",  # noqa: E501
    )
    result: str = Field(
        ...,
        description="Outcome and retrospective. What did you do well? What could you do better next time? I ...",
    )


def render(episodes: list[dict[str, Any]]) -> str | None:
    """The guide's step 2 ("### EPISODIC MEMORY:", then "Episode i:" with When / Thought /
    Did / Result), without the stray indentation its f-string carries into the prompt."""
    if not episodes:
        return None
    parts = [HEADER]
    for i, ep in enumerate(episodes, start=1):
        parts.append(f"Episode {i}:\nWhen: {ep.get('observation', '')}\nThought: {ep.get('thoughts', '')}\n"
                     f"Did: {ep.get('action', '')}\nResult: {ep.get('result', '')}")
    return "\n\n".join(parts) + "\n"

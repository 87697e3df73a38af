"""A-Mem's two prompts and JSON schemas, as in the authors' code.

Source: WujiangXu/A-mem-sys (the repository the ReMe authors used, their issue #67),
agentic_memory/memory_system.py at commit aec6d34 (``AgenticMemorySystem.analyze_content``
and ``_evolution_system_prompt``; identical in agiresearch/A-mem at ceffb86); the system
message is the one its OpenAI controller sends (agentic_memory/llm_controller.py). The
text is kept verbatim, indentation aside.
"""

from __future__ import annotations

SYSTEM = "You must respond with a JSON object."

ANALYZE = """Generate a structured analysis of the following content by:
1. Identifying the most salient keywords (focus on nouns, verbs, and key concepts)
2. Extracting core themes and contextual elements
3. Creating relevant categorical tags

Format the response as a JSON object:
{
    "keywords": [
        // several specific, distinct keywords that capture key concepts and terminology
        // Order from most to least important
        // Don't include keywords that are the name of the speaker or time
        // At least three keywords, but don't be too redundant.
    ],
    "context":
        // one sentence summarizing:
        // - Main topic/domain
        // - Key arguments/points
        // - Intended audience/purpose
    ,
    "tags": [
        // several broad categories/themes for classification
        // Include domain, format, and type tags
        // At least three tags, but don't be too redundant.
    ]
}

Content for analysis:
"""

ANALYZE_SCHEMA = {
    "type": "object",
    "properties": {
        "keywords": {"type": "array", "items": {"type": "string"}},
        "context": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}

EVOLVE = """You are an AI memory evolution agent responsible for managing and evolving a knowledge base.
Analyze the the new memory note according to keywords and context, also with their several nearest neighbors memory.
Make decisions about its evolution.

The new memory context:
{context}
content: {content}
keywords: {keywords}

The nearest neighbors memories:
{nearest_neighbors_memories}

Based on this information, determine:
1. Should this memory be evolved? Consider its relationships with other memories.
2. What specific actions should be taken (strengthen, update_neighbor)?
   2.1 If choose to strengthen the connection, which memory should it be connected to? Can you give the updated tags of this memory?
   2.2 If choose to update_neighbor, you can update the context and tags of these memories based on the understanding of these memories. If the context and the tags are not updated, the new context and tags should be the same as the original ones. Generate the new context and tags in the sequential order of the input neighbors.
Tags should be determined by the content of these characteristic of these memories, which can be used to retrieve them later and categorize them.
Note that the length of new_tags_neighborhood must equal the number of input neighbors, and the length of new_context_neighborhood must equal the number of input neighbors.
The number of neighbors is {neighbor_number}.
Return your decision in JSON format with the following structure:
{{
    "should_evolve": True or False,
    "actions": ["strengthen", "update_neighbor"],
    "suggested_connections": ["neighbor_memory_ids"],
    "tags_to_update": ["tag_1",..."tag_n"],
    "new_context_neighborhood": ["new context",...,"new context"],
    "new_tags_neighborhood": [["tag_1",...,"tag_n"],...["tag_1",...,"tag_n"]],
}}
"""

_STRINGS = {"type": "array", "items": {"type": "string"}}

EVOLVE_SCHEMA = {
    "type": "object",
    "properties": {
        "should_evolve": {"type": "boolean"},
        "actions": _STRINGS,
        "suggested_connections": _STRINGS,
        "new_context_neighborhood": _STRINGS,
        "tags_to_update": _STRINGS,
        "new_tags_neighborhood": {"type": "array", "items": _STRINGS},
    },
    "required": ["should_evolve", "actions", "suggested_connections", "tags_to_update",
                 "new_context_neighborhood", "new_tags_neighborhood"],
    "additionalProperties": False,
}

# The neighbour line of the code's find_related_memories (the evolution prompt's input).
NEIGHBOR_LINE = ("memory index:{i}\ttalk start time:{time}\tmemory content: {content}\tmemory context: {context}"
                 "\tmemory keywords: {keywords}\tmemory tags: {tags}")

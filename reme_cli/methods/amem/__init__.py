"""A-Mem (Xu et al., "A-MEM: Agentic Memory for LLM Agents", arXiv 2502.12110) as a memory
method: the A-Mem row of the ReMe paper's Table 1.

Reimplemented from the paper, with the prompts and JSON schemas of the authors' code
(agiresearch/A-mem, agentic_memory/memory_system.py at ceffb86), rather than by importing
a package, because:
- the authors' code is not on PyPI; PyPI ``a-mem`` 0.2.6 is a fork (DiaaAj/a-mem-mcp) that
  adds ~440 MB of dependencies (chromadb, onnxruntime, kubernetes, mcp, a litellm that must
  be pinned by hand to resolve against reme's set), and calls its LLM synchronously at a
  hard-coded temperature;
- here every LLM call goes through reme's client (cache, seeds, retries, usage, the
  embedded model), and notes are embedded with reme's embedder.

The algorithm (paper section 3):
1. note construction: one LLM call turns a memory's content into keywords K, tags G and a
   context sentence X; the note is embedded as concat(content, X, K, G);
2. link generation and memory evolution: the new note's nearest ``neighbors`` notes are
   shown to the LLM, which may link the note to them (``strengthen``, with new tags for the
   note) and rewrite their context and tags (``update_neighbor``); one call, as in the code;
3. retrieval: the top-k notes by cosine similarity to the query, then the notes linked
   from them.

Differences from the authors' code, all on purpose:
- the code builds a note without the analysis call (``add_note`` never calls
  ``analyze_content`` since the package refactor); the paper and the 0.2.6 fork make it;
- the code embeds the content only; the paper (and the fork) embed content + metadata;
- ``update_neighbor`` in the code rewrites the i-th note of the whole memory instead of the
  i-th neighbour shown (an index bug); here it is the neighbour;
- neighbours are shown as ``memory index:i`` (the code's format) and a suggested
  connection may be that index or a note id; anything else is dropped;
- linked notes added at retrieval are deduplicated and capped at k in total;
- no periodic "consolidation" (it only rebuilds the code's chroma index).

What a memory is on BFCL / AppWorld: a training or finished task's trajectory as text (its
query, the steps and the outcome), one note per task (``memory.build_notes=best``: a
successful trajectory if any) or per trajectory (``all``).
"""

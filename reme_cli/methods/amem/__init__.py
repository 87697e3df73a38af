"""A-Mem (Xu et al., "A-MEM: Agentic Memory for LLM Agents", arXiv 2502.12110) as a memory
method: the A-Mem row of the ReMe paper's Table 1.

The authors' repository: the ReMe authors reproduced A-Mem with "the official repo
(WujiangXu/A-mem-sys)" (agentscope-ai/ReMe issue #67, 2026-01-08). Compared here with its
HEAD, aec6d34 (2025-07-27, the last commit before the ReMe paper, so also the version of
its period): ``agentic_memory/memory_system.py`` (prompts, ``add_note``,
``process_memory``, ``search_agentic``) and ``retrievers.py`` (what is embedded). The two
prompts and their JSON schemas are verbatim (``prompts.py``, compared line by line with aec6d34).

Reimplemented rather than imported, because:
- the authors' code is not on PyPI; PyPI ``a-mem`` 0.2.6 is a fork (DiaaAj/a-mem-mcp) that
  adds ~440 MB of dependencies (chromadb, onnxruntime, kubernetes, mcp, a litellm that must
  be pinned by hand to resolve against reme's set), and calls its LLM synchronously at a
  hard-coded temperature;
- here every LLM call goes through reme's client (cache, seeds, retries, usage, the
  embedded model), and notes are embedded with reme's embedder.

The algorithm, as A-mem-sys runs it:
1. note construction (``add_note``): one LLM call (``analyze_content``) turns a memory's
   content into keywords K, tags G and a context sentence X; the note is embedded as
   concat(content, X, K, G) (``ChromaRetriever.add_document``'s enhanced document);
2. link generation and memory evolution (``process_memory``): the notes nearest to the new
   note's *content* (``find_related_memories(note.content, k=5)``) are shown to the LLM,
   which may link the note to them (``strengthen``, with new tags for the note) and rewrite
   their context and tags (``update_neighbor``); one call;
3. retrieval (``search_agentic``): the top-k notes by similarity to the query, then the
   notes linked from them, cut to k in total (``memories[:k]``). The hits are min(k, all
   notes), so a linked note never makes it into the result; ``memory.linked`` is kept for
   the code's shape, and ``memory.top_k`` bounds what is injected.

Differences from A-mem-sys, all on purpose:
- ``update_neighbor`` in the code rewrites the i-th note of the whole memory instead of the
  i-th neighbour shown (an index bug); here it is the neighbour;
- the code updates a rewritten neighbour in its dict but not in chroma (its vector and
  metadata stay stale until a consolidation); here it is re-embedded at once;
- neighbours are shown as ``memory index:i`` (the code's format) and a suggested
  connection may be that index or a note id; anything else is dropped (the code keeps
  whatever string the LLM wrote, which then never resolves to a note);
- a ``strengthen`` with no valid tags keeps the note's tags (the code sets them to the
  answer's list, even an empty one);
- note ids come from the note's source and content (the code: uuid4), so cached answers
  rebuild the same store; sampling is the summarizer's (the code's default: 0.7);
- no periodic "consolidation" (it only rebuilds the code's chroma index).

Memory comes from successful trajectories only (the ReMe paper adds memory only when a
trajectory succeeds): build-pool makes notes of successful training trajectories, and a
dynamic stream adds a note after a task only if an attempt succeeded.

What a memory is on BFCL / AppWorld: a training or finished task's trajectory as text (its
query, the steps and the outcome, cut to ``memory.note_max_chars``), one note per task
(``memory.build_notes=best``: its first successful trajectory) or per successful
trajectory (``all``).
"""

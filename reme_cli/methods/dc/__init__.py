"""Dynamic Cheatsheet (Suzgun et al., "Dynamic Cheatsheet: Test-Time Learning with Adaptive
Memory", arXiv 2504.07952) as a memory method: ``memory=dc``.

Source: suzgunmirac/dynamic-cheatsheet (MIT), compared at 1cf258c (2025-04-11, the newest
commit of the mirror, the paper's period): ``dynamic_cheatsheet/language_model.py``
(``advanced_generate``), ``utils/extractor.py`` (``extract_cheatsheet``), ``run_benchmark.py``
(the loop and its defaults) and ``prompts/``. The two curator prompts are verbatim
(``prompts/curator_*.txt``); the generator prompt is adapted (``prompts/generator_guidance.txt``,
below). Reimplemented, not imported: the authors' code is a script over litellm, not a library.

The algorithm, as the authors run it (temperature 0, one round, ``retrieve_top_k=3``):
- DC-Cu (``memory.variant=cumulative``, the default; the ACE paper's "DC-CU" row): before
  each input the generator sees the whole cheatsheet (``(empty)`` at first); after it, one
  curator call gets the previous cheatsheet, the input and the model's answer and writes the
  new cheatsheet; the text between ``<cheatsheet>`` and ``</cheatsheet>`` replaces the old one,
  and an answer without that block keeps the old one.
- DC-RS (``retrieval_synthesis``): the k past inputs most similar to the current one (cosine
  of input embeddings) and the model's outputs for them are written as "PREVIOUS SOLUTIONS"
  (least similar first, each with its similarity); the curator turns them, the previous
  cheatsheet (the one it synthesized for the input before) and the next input into a
  cheatsheet for that input, which the generator sees. An answer without a block leaves the
  retrieved pairs themselves as the cheatsheet. After the input its (input, output) pair
  joins the past ones.
No labels: the curator judges the answer itself; DC stores every answer, right or wrong.

Here:
- the input is the task's query; the model's answer is the agent's trajectory as text
  (``agent/render.py``: user turns, calls or code, outputs; cut to
  ``memory.trajectory_max_chars``), without the checker's verdict unless
  ``memory.show_outcome=true``;
- the cheatsheet reaches the agent as the generator prompt appended to the first user
  message (where every method's memory goes, after the task). The generator prompt keeps its
  title, instruction, "1. ANALYSIS & STRATEGY" and CHEATSHEET block; its rules for a single
  free-text answer ("FINAL ANSWER", Python via "EXECUTE CODE!", "SOLUTION DEVELOPMENT") are
  dropped because the agent acts by function calls (BFCL) or code actions (AppWorld) under its
  benchmark's own system prompt, and a BFCL text reply ends the turn. The curator prompts are
  domain-neutral and kept verbatim (their "code snippets" read as calls or code actions);
- the context guard (``methods/context_guard.py``): the cheatsheet is cut at item boundaries
  (``<memory_item>`` blocks, retrieved pairs, else paragraphs), keeping the first, to
  ``memory.max_context_share`` of the context; the unit's record says what was cut (``context``).

Modes and records:
- build-pool: each training task's first sampled trajectory (DC answers an input once and
  picks no answer by its verdict) is a pair; DC-Cu folds the tasks into one cheatsheet in
  split order, one curator call per task (``build/dc_curator.jsonl``, resumable per task).
  The pool holds the pairs and their vectors for both variants, the cheatsheet for DC-Cu.
- fixed: DC-Cu shows the pool's cheatsheet to every task; DC-RS synthesizes per task from the
  pool's read-only pairs, always from ``(empty)`` as the previous cheatsheet (units are
  independent in fixed mode; the authors chain it from the input before).
- dynamic: each (seed, run) stream starts from the pool (or, without ``memory.pool``, from
  the authors' empty start). DC-Cu: the curator rewrites the stream's cheatsheet after each
  task; the event is the new text (an unusable answer proposes nothing). DC-RS: the events are
  the task's pair and the cheatsheet synthesized for it (the next task's previous cheatsheet).
  A resumed stream replays them.
- per unit (``method``): ``cheatsheet_version`` (rewrites, sha256 prefix), ``cheatsheet_chars``,
  ``cheatsheet_injected`` (what was kept), ``context``, DC-RS's ``retrieved`` pairs and
  ``previous_cheatsheet``, the curator's ``usable``/``closed``/``truncated`` (``curator`` for
  DC-RS's synthesis, ``rewrite`` for DC-Cu's), after commit ``cheatsheet_after`` (DC-Cu) or
  ``pairs_after`` (DC-RS). Answers are counted per role as ``dc_curator`` and ``dc_synthesis``.

Differences from the authors, each on purpose:
- sampling is the summarizer's (``summarizer.temperature``, ``summarizer.max_tokens``), as for
  every method here (the authors: temperature 0, curator max 4096 tokens);
- embeddings are the run's embedder (default all-MiniLM-L6-v2), not OpenAI's, searched with faiss;
- an empty ``<cheatsheet></cheatsheet>`` keeps the old cheatsheet (the authors' code would
  wipe it); a block cut by max_tokens is kept, as the authors do, and recorded ``closed: false``;
- DC-RS in fixed mode does not chain the previous cheatsheet (above);
- with ``eval.dynamic_workers`` > 1 a stream's workers rewrite one cheatsheet concurrently: a
  rewrite of an older version replaces newer ones (recorded ``stale_rewrite``); the authors
  run one input at a time.
"""

"""ReasoningBank (Ouyang et al., "ReasoningBank: Scaling Agent Self-Evolving with Reasoning
Memory", arXiv 2509.25140) as a memory method: ``memory=reasoningbank``.

The authors' code: google-research/google-research, folder ``ReasoningBank/`` (Apache-2.0),
read at commit 5b09c22d73a9d35eb6c5d2a99b95677a45053466: ``WebArena/pipeline_memory.py``
(the loop), ``WebArena/autoeval/{evaluate_trajectory,evaluator,prompts}.py`` (the judge),
``WebArena/induce_memory.py`` and ``WebArena/prompt/instruction.py`` (extraction),
``WebArena/memory_management.py`` and ``WebArena/run.py`` (retrieval), and
``WebArena/agents/legacy/agent.py`` (injection). Prompts are in ``prompts/``, each with a
provenance header; the loader drops the header.

The algorithm, as that code runs it, task after task:
1. retrieval (run.py, memory_management.select_memory): embed the task's query, rank the
   past tasks by cosine similarity of their queries, take the top n=1 and inject all the
   memory items extracted from it;
2. the agent runs with them; the injected text is the authors' sentence ("Below are some
   memory items that I accumulated ...") then the items, separated by blank lines;
3. judge (evaluate_trajectory.py, the "text" judge of autoeval/prompts.py): an LLM reads the
   intent, the action history and the agent's response and answers ``Thoughts:`` /
   ``Status: "success" or "failure"``; anything but success is a failure;
4. extraction (induce_memory.py): the success prompt (SUCCESSFUL_SI) or the failure prompt
   (FAILED_SI) turns "**Query:** ... **Trajectory:** ..." into at most 3 items
   ``# Memory Item i / ## Title / ## Description / ## Content``, appended to the bank.

Here: build-pool runs steps 3-4 on the shared training trajectories (``memory.build_trajectories``:
the first of each task, or all); fixed mode runs step 1 on the read-only pool; dynamic mode
runs 1-4 with a bank per stream that the seam's events replay on resume. Each unit records
the items retrieved (ids, scores; the trial's ``guidance`` is the injected text), the
judge's verdict, the checker's, whether they agree, and the items extracted (count, titles).

The judge: ``memory.judge=llm`` (default) is the method's own LLM judge, even though both
benchmarks have a checker (the paper's setting: no ground truth at test time);
``memory.judge=checker`` uses the benchmark's verdict instead (the authors' ``--criteria gt``).
Either way the record holds both verdicts.

Adapted to the benchmarks (the originals are about web navigation), by prompt family
(``prompts/domains.toml``: function_calls for BFCL, appworld for AppWorld):
- extraction prompts: verbatim except "You are an expert in web navigation" (-> function
  calling / writing code that calls apps' APIs) and "Do not mention specific websites"
  (-> files, ids / people, accounts, records);
- judge: "web navigation agent ... navigate a website" -> a function-calling agent / an agent
  writing code against app APIs; of its three task types, information seeking is kept (from
  the environment / apps), site navigation is dropped (neither benchmark has it), content
  modification becomes state modification; the "final state of the webpage" block is dropped
  (the tool or code outputs inside the action history are what the agent saw). Output format
  verbatim;
- the trajectory both read is reme's rendering of the episode (render_trajectory: user
  turns, replies, calls or code with outputs; never the checker's verdict) instead of the
  agent's <think>/<action> log.

Other deviations, each with its reason:
- the bank is searched with the plain query: the authors prefix the query with an
  instruction for Gemini's instruction-aware embedding ("Instruct: Given the prior web
  navigation queries ..."), which reme's default embedder (MiniLM) is not;
- items are parsed into {title, description, content} and re-rendered in the prompt's
  Markdown format, at most ``memory.max_items`` (3) per trajectory; the authors store the raw
  answer split at blank lines (reasoning before the items included) and inject it as is;
- a trajectory whose extraction gives no item adds no record (the authors add a record of
  whatever text came back), so top-1 never lands on an empty record;
- the released induce_memory.py maps ``reward == 0`` to the success prompt (inverted for
  both its criteria); here success goes to the success prompt, as the paper says;
- injection goes after the task in the first user message, as every reme method's does
  (the authors: the system prompt);
- sampling is the summarizer's (the authors: temperature 1.0 for extraction); record ids
  come from the source and query (the authors: task ids), so cached answers rebuild the
  same bank; MaTTS (parallel/sequential scaling) is not implemented.
"""

"""ACE, Agentic Context Engineering (Zhang et al., arXiv 2510.04618), as a memory method.

Sources: ace-agent/ace-appworld 748a9dc (Apache-2.0): ``experiments/code/ace/
adaptation_agent.py`` (the offline and online loops), ``adaptation_react.py``
(``reflector_call``, ``curator_call``), ``playbook.py`` (ids, sections, the ADD merge),
``experiments/prompts/appworld_react_{generator,reflector_with_gt,reflector_no_gt,curator}
_prompt.txt``, ``experiments/playbooks/appworld_initial_playbook.txt`` and
``experiments/configs/ACE_{offline_with_GT_adaptation,online_no_GT}.jsonnet``; and
ace-agent/ace ba78d34 (Apache-2.0) for the bullet tags (``ace/prompts/reflector.py``,
``playbook_utils.update_bullet_counts``) and the optional de-duplication
(``ace/core/bulletpoint_analyzer.py``). Prompt files in ``prompts/`` carry their provenance.

The algorithm:
1. the playbook, sections of bullets ``[id] content`` each with helpful/harmful counters,
   rides whole in the agent's prompt (no retrieval), framed as the authors' generator
   prompt frames it ("### PLAYBOOK BEGIN ... ### PLAYBOOK END");
2. after a trajectory the Reflector diagnoses it (reasoning, error, root cause, correct
   approach, key insight) and tags the playbook's bullets helpful / harmful / neutral; a
   tag adds one to the bullet's counter;
3. the Curator reads the playbook, the task, the trajectory and the reflection and answers
   JSON ADD operations; code merges them (``playbook.py``): a fresh id
   ``{section slug}-{global n:05d}``, at the end of its section. Nothing is rewritten or
   deleted (the authors' code supports ADD only);
4. offline (``reme build-pool``, ``StarAgent.solve_task_with_gt``): each training task in
   split order is attempted live with the current playbook, up to 5 times
   (``num_retries``), until its unit tests pass; every attempt is reflected on with ground
   truth and curated, so the next attempt sees the grown playbook, and a failed attempt's
   reflection opens the next one (the authors' three retry messages,
   ``prompts/retry_frame.txt``). One epoch (the released adaptation code runs the train
   split once; the paper's ablation credits several epochs: set ``memory.epochs``). The
   pool is the resulting playbook. Fixed mode injects it read-only. Online (dynamic mode):
   after every task, success or not, a Reflector without ground truth and a Curator update
   the stream's playbook (ACE_online_no_GT).

Deviations, each on purpose:
- retries: the default ``memory.offline_attempts=live`` runs ACE's own attempts through
  the seam (build-pool's units, one stream, one worker: ``Memory.adapts_on_training``), so
  ACE does not learn from the trajectories sampled for every other method; ``until_success``
  (at most ``memory.offline_max_attempts=5``) and ``all`` read a task's shared samples
  (``build.samples``, drawn without a playbook) as its attempts instead. Live retries differ
  from the authors' in three ways: one Reflector call per attempt serves both the Curator and
  the next retry (the authors call it twice, the first time with the previous retry's test
  report); the retry messages are text after the playbook in the first user message, where
  every method's guidance goes (the authors: three chat messages after the prompt); and the
  episodes sample at ``build.temperature``, as every method's training trajectories do (the
  authors: temperature 0);
- ground truth: the harness hands methods the checker's verdict and feedback, not
  AppWorld's solution code: with ground truth (offline by default,
  ``memory.offline_ground_truth``) the Reflector's test report is the verdict, reward and
  the checker's details of that attempt (the authors' loop passes the previous retry's
  report there, a quirk); the solution-code slot says it is unavailable;
- tags: ace-appworld's Reflector prompt asks for a tag per bullet but its answer format has
  no field for them and its code never counts them; the field is added from ace-agent/ace's
  reflector prompt, and the counters are kept (``memory.show_counts`` renders them);
- what the Reflector and Curator read: the harness's rendering of the trajectory (task
  turns, steps, calls, clipped outputs, never the injected playbook) under the authors'
  "=== FULL CONVERSATION HISTORY ===" header, instead of the agent's raw messages;
- the generator prompt: only its playbook part is injected, appended to the first user
  message as every method's guidance is; the rest of it (AppWorld's ReAct instructions and
  demo) is the harness's agent prompt, the same for every method;
- function calling (BFCL): the authors' prompts are written for code actions. On BFCL the
  Reflector's role line ("expert AppWorld coding agent"), its "generated code" / "unit
  tests" slot names and the Curator's "For coding tasks" read tool calls instead
  (``texts.FUNCTION_CALLING`` lists every rewrite); the initial playbook is the AppWorld
  one's section headers without its bullets (they name AppWorld's APIs). AppWorld uses the
  prompts and the initial playbook verbatim. Which applies is asked of the run's tool-call
  protocol (``agent.protocols.acts_with_code``: AppWorld's ``code``), not of the benchmark's
  name;
- the context guard: the playbook is cut at bullet boundaries to
  ``memory.max_context_share`` of the context (headers kept, the first bullets in playbook
  order win), for the agent and for the Reflector and Curator alike, and every unit
  records what was cut (``context``). The authors never cut it;
- de-duplication (``memory.dedup``, off as in both repositories' defaults): an ADD whose
  embedding is at least ``memory.dedup_threshold`` (0.90, theirs) similar to a bullet is
  dropped as its duplicate; the authors' analyzer can also merge a group with an LLM call,
  which is not done;
- one Reflector call per trajectory, as ace-appworld makes it (ace-agent/ace's finance code
  refines a reflection up to ``max_num_rounds=3`` times; not done);
- parallel workers of a dynamic stream reflect on the playbook as it is when their task
  ends; ids are given when the unit commits, in commit order (one worker: the authors'
  sequential loop).
"""

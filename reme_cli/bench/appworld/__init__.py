"""AppWorld (``benchmark=appworld``), a benchmark plug-in: everything particular to AppWorld
lives in this package, and reme reaches it only through ``reme_cli.core.registry``.

- ``benchmark.py``: the ``Benchmark`` (tasks, data, before-run checks) and its environment,
  whose episodes run in AppWorld's own processes;
- ``config.py``: ``AppWorldConfig``, the ``benchmark.*`` keys and each episode's bounds;
- ``agent.py``: the agent's words (the authors' prompt or reme's compact one);
- ``metrics.py``: its own scores (SGC, success per difficulty) and its words for tables;
- ``processes.py``: the episode supervisors and the evaluator, in the sandbox;
- ``venv.py``: ``reme appworld setup``, AppWorld's own virtualenv;
- ``venv_programs/``: the programs AppWorld's interpreter runs (never imported by reme);
- ``scripted.py``: its gold-solution policy on the scripted server (a TEST DOUBLE);
- ``authors_prompts/``: the authors' prompt file, verbatim (see its NOTICE).

Nothing is imported here, so that naming one module loads only what it needs.
"""

"""BFCL-v3 multi-turn base (``benchmark=bfcl_v3``), a benchmark plug-in: everything particular
to BFCL lives in this package, and reme reaches it only through ``reme_cli.core.registry``.

- ``benchmark.py``: the ``Benchmark`` (tasks, the authors' 50/150 split, isolated episodes over
  bfcl-eval's backends, the official checker) and its environment;
- ``config.py``: ``BFCLConfig``, the ``benchmark.*`` keys;
- ``calls.py``: safe parsing and serialising of tool calls (no model output reaches ``eval``);
- ``tool_notes.py``: the language note bfcl appends to tool descriptions, from the active release;
- ``release.py``: bfcl-eval releases side by side (``benchmark.release``, ``reme bfcl-diff``);
- ``scripted.py``: its ground-truth replay policy on the scripted server (a TEST DOUBLE);
- ``split.json``: the official train/test split of the task ids.

Nothing is imported here: naming a module of the package (``python -m
reme_cli.bench.bfcl.release``) must not import bfcl-eval.
"""

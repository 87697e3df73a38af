"""Programs that run under AppWorld's own interpreter (its venv, pydantic<2), never in reme.

reme starts them as scripts (``python -E -s -B <this dir>/worker.py``), in the sandbox
(this directory bound read-only at ``/reme/scripts``, ``processes.INSIDE_SCRIPTS``) or on the
host with ``benchmark.sandbox=none``, and talks to them with one JSON object per line
(``reme_cli.bench.worker``). They import only the standard library, ``appworld`` and each
other by plain name (``import protocol``: the script's folder is first on ``sys.path``), so
they keep working wherever this folder is bound, as long as they stay in it together; nothing
of reme's is installed there.

- ``worker.py``: the episode supervisor. It warms AppWorld up once, then runs each episode
  in a process forked for it, which no other episode ever ran in, and hands the episode's
  saved world state back at its end.
- ``evaluator.py``: AppWorld's evaluation, in a process where model code never ran, each
  evaluation in a process forked for it.
- ``seccomp.py``: the system-call filter an episode's process puts on itself before the
  model's first step (sandboxed runs).
- ``protocol.py``: the JSON-lines plumbing both share.
"""

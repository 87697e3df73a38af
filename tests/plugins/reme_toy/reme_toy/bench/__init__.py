"""The toy benchmark, in the shape every benchmark has (reme's own: reme_cli/bench/bfcl/,
reme_cli/bench/appworld/): one package holding what is particular to it, found by reme only
through the entry points its pyproject.toml declares.

- ``benchmark.py``: the ``Benchmark`` class with its ``config_class`` (a benchmark with many
  keys keeps them in ``config.py`` beside it) and its environment;
- ``metrics.py``: what it scores beside Avg@k and Pass@k, and its words for tables;
- ``scripted.py``: its answers on the scripted server (a TEST DOUBLE, ``--policy toy``);
- its config group option: ``reme_toy/configs/benchmark/toy.yaml``.
"""

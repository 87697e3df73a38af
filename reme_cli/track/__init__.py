"""Experiment trackers: every run also logged to MLflow or Weights & Biases (``tracker=``).

    base.py            the seam (``Tracker``) and ``Link``: a failing tracker is one warning
    content.py         what a run tells a tracker, read from its directory alone
    run.py             one run's tracker run: started when it opens, continued on resume
    group.py           a suite's or sweep's own tracker run: the parent (W&B: group) of its runs
    mlflow_tracker.py  MLflow (a local SQLite store by default)
    wandb_tracker.py   W&B (offline by default)

A third tracker is one module implementing ``Tracker``, registered in
``reme_cli.core.registry.TRACKERS`` (or by a package under the ``reme.trackers`` entry point).
"""

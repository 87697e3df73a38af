"""AppWorld's evaluation, where model code never ran: one forked process per evaluation.

Run by reme under AppWorld's interpreter with ``APPWORLD_ROOT`` holding ``data/`` (the whole
task data, ground truth included, read-only) and ``experiments/outputs/`` (read-only: the
saved states reme wrote there, one experiment per episode). Requests (one JSON line each):

  hello     answers once AppWorld's evaluator is imported
  evaluate  {task_id, experiment}: ``appworld.evaluator.evaluate_task`` on the episode's saved
            state, in a process forked for it (the state's SQL and whatever it leaves in
            memory die with that process), as ``TestTracker.to_dict``; a state the
            evaluation cannot load is an ``error`` in the answer, scored as a failure
  apps      the app descriptions of AppWorld's worlds (``world.task.app_descriptions``)
"""

import os
import signal
import time

import protocol

EVAL_SECONDS = 300.0
RESULT_CAP = 64 << 20


def warm_up():
    import appworld.evaluator  # noqa: F401

    protocol.warm_up_common(apis=False)


def evaluate(task_id, experiment):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            result = _evaluate_here(task_id, experiment)
        except BaseException as exc:  # noqa: BLE001 - the answer says it
            result = {"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
        try:
            protocol.send_line(write, result)
        finally:
            os._exit(0)
    os.close(write)
    try:
        return protocol.LineReader(read).read(RESULT_CAP, time.monotonic() + EVAL_SECONDS)
    except protocol.Broken as broken:
        return {"error": f"the evaluation process failed ({broken})"}
    finally:
        os.close(read)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def _evaluate_here(task_id, experiment):
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    from appworld.evaluator import evaluate_task

    tracker = evaluate_task(task_id=task_id, experiment_name=experiment, suppress_errors=True, save_report=False)
    return tracker.to_dict(stats_only=False)


def apps():
    from appworld.apps import APP_TO_DESCRIPTION, get_all_apps

    return {a: APP_TO_DESCRIPTION[a] for a in get_all_apps(skip_admin=True)}


def main():
    def hello():
        warm_up()
        return {"pid": os.getpid()}

    protocol.serve({"hello": hello, "evaluate": evaluate, "apps": apps})


if __name__ == "__main__":
    main()

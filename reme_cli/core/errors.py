"""Errors that reach the user as one line, never as a traceback, and the exit codes.

Exit codes of every command (documented in the README):
  0    every unit finished without error
  2    bad input or an unusable environment: nothing was run (``UserError``)
  3    the run finished, but some units ended in an error (recorded with their traceback;
       rerun the same command to retry them)
  4    the run was stopped because something underneath broke: the LLM server died or
       stopped answering (``RunAborted``); finished units are kept, rerun to resume
  130  interrupted by Ctrl-C (SIGINT); 143 by SIGTERM
"""

EXIT_UNIT_ERRORS = 3


class UserError(Exception):
    """Bad input or an unusable environment: the message says what to fix.

    The CLI prints ``error: <message>`` and exits with ``exit_code``.
    """

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class RunAborted(UserError):
    """Something the run depends on broke (a dead server, a tripped circuit breaker).

    Never recorded as a unit's result: the units in flight are dropped and rerun later.
    """

    exit_code = 4


class Interrupted(KeyboardInterrupt):
    """The user (Ctrl-C) or the system (SIGTERM: SLURM, `timeout`, `docker stop`) stopped
    the run. Like a ``KeyboardInterrupt``, and it remembers which signal it was."""

    def __init__(self, signum: int = 2):
        super().__init__(signum)
        self.signum = signum
        self.exit_code = 128 + signum

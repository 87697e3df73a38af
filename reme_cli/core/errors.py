"""Errors that reach the user as one line, never as a traceback, and the exit codes.

Exit codes of every command (documented in the README):
  0    every unit finished without error
  2    bad input or an unusable environment: nothing was run (``UserError``)
  3    the run finished, but some units ended in an error (recorded with their traceback;
       rerun the same command to retry them), or everything was written but too many of
       the summarizer's answers failed (``summarizer.max_failed_share``, llm.answer_health)
  4    the run was stopped because something underneath broke: the LLM server died or
       stopped answering (``RunAborted``); finished units are kept, rerun to resume
  130  interrupted by Ctrl-C (SIGINT); 143 by SIGTERM
"""

import errno

EXIT_UNIT_ERRORS = 3  # units in error, or failing summarizer answers: the run itself finished


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


class Reexec(Exception):
    """Run this same command again in a fresh process whose environment has ``env`` set
    (the CLI does it): what the command needs cannot be loaded into this process, e.g.
    a second release of a library already imported."""

    def __init__(self, reason: str, env: dict[str, str]):
        super().__init__(reason)
        self.env = env


class Interrupted(KeyboardInterrupt):
    """The user (Ctrl-C) or the system (SIGTERM: SLURM, `timeout`, `docker stop`) stopped
    the run. Like a ``KeyboardInterrupt``, and it remembers which signal it was."""

    def __init__(self, signum: int = 2):
        super().__init__(signum)
        self.signum = signum
        self.exit_code = 128 + signum


# What to do about a file-system error, by errno: the path is named with it.
_OS_HINTS = {
    errno.ENOSPC: "the disk is full: free some space, or choose another directory",
    errno.EDQUOT: "the disk quota is used up: free some space, or choose another directory",
    errno.EROFS: "the file system is read-only: choose a writable directory",
    errno.EACCES: "permission denied: fix its permissions, or choose another path",
    errno.EPERM: "not permitted: fix its permissions, or choose another path",
    errno.ENOTDIR: "a part of this path is a file, not a directory: choose another path",
    errno.EEXIST: "it exists and is not a directory: choose another path",
    errno.EISDIR: "it is a directory: give a file",
    errno.ENAMETOOLONG: "the path or one of its names is too long: choose a shorter path",
    errno.ELOOP: "too many symbolic links: choose another path",
    errno.ENOENT: "it does not exist (or cannot be created there): choose another path",
}


def os_error_message(exc: OSError) -> str:
    """One line for a file-system error (a path that is a file, read-only, full, too long...)."""
    hint = _OS_HINTS.get(exc.errno, exc.strerror or str(exc))
    return hint if exc.filename is None else f"{short_path(exc.filename)}: {hint}"


def short_path(path: object) -> str:
    """A path as it fits on one line: a very long one by its two ends and its length."""
    text = str(path)
    return text if len(text) <= 160 else f"{text[:60]}...{text[-60:]} ({len(text)} characters)"

"""Errors that reach the user as one line, never as a traceback."""


class UserError(Exception):
    """Bad input or an unusable environment: the message says what to fix.

    The CLI prints ``error: <message>`` and exits with ``exit_code``.
    """

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

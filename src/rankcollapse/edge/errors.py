"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2; a library's error
that reaches a user is told in one line too (``edge.inputs.error_line``)."""


class RankCollapseError(ValueError):
    """Bad user input: the message is one line naming the bad value and what is allowed."""


class RankCollapseTypeError(RankCollapseError, TypeError):
    """An argument of the wrong type (a numpy array or a string where a tensor is expected...).

    Both a :class:`RankCollapseError` (the CLI's exit 2) and a ``TypeError`` (what Python callers
    expect for a wrong type).
    """


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what was kept: the CLI prints ``rankcollapse: interrupted; <message>`` (one line)
    and exits 130. Raise it from a command (``raise Interrupted("3 finished runs kept in out/")``)
    to say more than the default "results already written are kept"."""

    def __init__(self, message: str = "results already written are kept") -> None:
        super().__init__(message)
        self.message = message

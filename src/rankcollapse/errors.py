"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""


class RankCollapseError(ValueError):
    """Bad user input: the message is one line naming the bad value and what is allowed."""

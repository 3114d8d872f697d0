"""The one deprecation path: an old spelling is accepted for one release, with one warning.

Every renamed flag, config field or preset goes through :func:`renamed` (a value under an old and a new
name) or :func:`warn` (an old value that maps to a new one). Both raise a ``FutureWarning`` from the
caller's line (so Python users see where, and can filter it), and the command line prints each such
warning as one line ``rankcollapse: warning: ...`` on stderr once the command succeeded
(:func:`collected`, used by the CLI's ``main``). Giving both names is one line and exit 2, never a
silent choice.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from rankcollapse.errors import RankCollapseError

T = TypeVar("T")


class RankCollapseDeprecation(FutureWarning):
    """A spelling rankcollapse still accepts for one release."""


def warn(message: str, stacklevel: int = 3) -> None:
    """Warn once, from the caller's caller: ``old is deprecated; use new``."""
    warnings.warn(message, RankCollapseDeprecation, stacklevel=stacklevel)


def renamed(new: str, value: T | None, old: str, old_value: T | None, hint: str = "") -> T | None:
    """The value given under ``new`` or, deprecated, under ``old`` (one warning); both given is refused.

    >>> renamed("d_qk", 4.0, "temperature", None)
    4.0
    """
    if old_value is None:
        return value
    if value is not None:
        raise RankCollapseError(f"give {new} or its old name {old}, not both")
    warn(f"{old} is deprecated; use {new}" + (f" ({hint})" if hint else ""), stacklevel=4)
    return old_value


@contextmanager
def collected() -> Iterator[list[str]]:
    """Inside the block, every rankcollapse deprecation is collected (each message once) instead of
    shown; other warnings pass through. The CLI prints them as ``rankcollapse: warning: ...`` lines
    once its command succeeded, so that a refused command stays one line."""
    lines: list[str] = []
    with warnings.catch_warnings():  # restores the filters and showwarning afterwards
        previous = warnings.showwarning

        def show(message: Any, category: type, filename: str, lineno: int, file: Any = None,
                 line: Any = None) -> None:
            if issubclass(category, RankCollapseDeprecation):
                if str(message) not in lines:
                    lines.append(str(message))
                return
            previous(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        warnings.simplefilter("always", RankCollapseDeprecation)
        yield lines

"""The one channel of rankcollapse's own lines on stderr: ``rankcollapse: KIND: message``.

- :func:`warning` (``rankcollapse: warning: ...``): something the user should know, the run goes on;
- :func:`note` (``rankcollapse: note: ...``): what a run did or did not find, in plain words;
- :func:`say` (``rankcollapse: ...``): any other line of ours (a download announced, a look begun);
- :func:`printable_stdout`: the CLI's standard output for the length of a command: every line any command
  prints (tables, paths, titles read from a YAML) keeps its line breaks and tabs, every other control
  character escaped, so no command's echo of a user string can bypass the rule;
- :func:`printable`: what every one of them passes through. A message is one line whatever it quotes:
  a string read from a file, an exception or a path cannot move the cursor, clear the screen, ring the
  bell or forge a second line (C0 and C1 control characters and DEL become ``\\xNN`` escapes; a line
  break becomes ``\\n``). The CLI's error line (``cli.main``) goes through :func:`printable` too.

Nothing here imports anything heavy; a closed or broken stream never raises from here.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: C0 controls (tab included), DEL and C1 controls: never written raw.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: object) -> str:
    """``text`` as one safe line: every control character escaped (``\\n``, ``\\r``, ``\\t`` by name,
    the others as ``\\xNN``), printable characters (any language) unchanged.

    >>> printable("run\\x1b[2J done\\nrankcollapse: error: forged")
    'run\\\\x1b[2J done\\\\nrankcollapse: error: forged'
    """
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), str(text))


#: Control characters but the line break and the tab: what standard output escapes.
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable_lines(text: object) -> str:
    """``text`` with its line breaks and tabs kept and every other control character escaped (``\\r``
    by name, the others as ``\\xNN``): what standard output writes."""
    return _CONTROL_IN_TEXT.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), str(text))


class _PrintableStream(io.TextIOBase):
    """A text stream writing :func:`printable_lines` of everything to ``stream``."""

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # a text stream: click probes for a binary one with write(b"")
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._stream.write(printable_lines(text))  # type: ignore[attr-defined]
        return len(text)

    def flush(self) -> None:
        self._stream.flush()  # type: ignore[attr-defined]

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return bool(self._stream.isatty())  # type: ignore[attr-defined]

    def fileno(self) -> int:
        return int(self._stream.fileno())  # type: ignore[attr-defined]

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self._stream, "encoding", None) or "utf-8")  # a capture's None is no codec


@contextmanager
def printable_stdout() -> Iterator[None]:
    """Inside the block, ``sys.stdout`` writes :func:`printable_lines` (the CLI's ``main`` wraps each
    command in it); restored afterwards."""
    before = sys.stdout
    sys.stdout = _PrintableStream(before)
    try:
        yield
    finally:
        sys.stdout = before


def say(message: object, kind: str = "") -> None:
    """``rankcollapse: [KIND: ]message`` on stderr, :func:`printable`, flushed."""
    head = f"rankcollapse: {kind}: " if kind else "rankcollapse: "
    try:
        print(head + printable(message), file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # the stream closed under us: nothing to tell it
        pass


def warning(message: object) -> None:
    """``rankcollapse: warning: message`` on stderr (the run goes on)."""
    say(message, "warning")


def note(message: object) -> None:
    """``rankcollapse: note: message`` on stderr."""
    say(message, "note")

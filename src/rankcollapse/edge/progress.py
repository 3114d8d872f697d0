"""Progress of a long command on stderr: a bar on a terminal, plain periodic lines anywhere else.

:func:`progress` returns a :class:`Progress` with ``update(k)`` and ``close()``. On a terminal it
is a tqdm bar that appears only after ``delay`` seconds (short runs print nothing). When the
stream is not a terminal (a log file, a pipe, CI) it writes no ``\\r`` frames and no cursor codes:
one plain line every ``every`` seconds, the first after ``delay``, and a last one at ``close()``
if any was written::

    rankcollapse: analyze minilm: 40/129 layers (31%), 12 s, about 27 s left

``enabled=False`` gives a :class:`Progress` that prints nothing. The clock is injectable
(``clock``) so the line schedule is tested without waiting.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

#: Seconds before anything is shown, and between two plain lines.
DELAY_S = 2.0
EVERY_S = 10.0


def is_terminal(stream: Any) -> bool:
    """True when ``stream`` is an interactive terminal (``isatty()``; False if it cannot say)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def terminal_size(stream: Any) -> tuple[int, int]:
    """(columns, lines) the terminal of ``stream`` reports; (0, 0) when it reports none (a
    pseudo-terminal without a size, as under ``script``)."""
    import os

    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return 0, 0
    return int(size.columns), int(size.lines)


def duration_text(s: float) -> str:
    """``"42 s"`` or ``"13 min 05 s"``; a negative duration (an estimate behind the clock) is ``"0 s"``."""
    s = max(float(s), 0.0) if s == s else 0.0
    if s < 60:
        return f"{s:.0f} s"
    return f"{int(s // 60)} min {s % 60:02.0f} s"


class Progress:
    """Counts done units out of ``total``; shown as plain lines (module docstring) or a tqdm bar.

    ``desc`` names the work (``"analyze minilm"``), ``unit`` what is counted (``"layers"``);
    ``delay`` and ``every`` default to :data:`DELAY_S` and :data:`EVERY_S`.
    """

    def __init__(self, total: int, desc: str, unit: str = "layers", *, stream: TextIO | None = None,
                 enabled: bool = True, delay: float | None = None, every: float | None = None,
                 bar: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(int(total), 0)
        self.desc, self.unit = desc, unit
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.delay = DELAY_S if delay is None else delay
        self.every = EVERY_S if every is None else every
        self.clock = clock
        self.done = 0
        self.lines = 0
        self._start = clock()
        self._next = self._start + self.delay
        self._bar: Any = None
        if enabled and (is_terminal(self.stream) if bar is None else bar):
            from tqdm import tqdm

            # a pseudo-terminal without a size (under `script`, some IDE consoles) reports 0 x 0: tqdm
            # then takes every row as off-screen and draws nothing; give it a fixed size instead
            cols, rows = terminal_size(self.stream)
            sized = cols > 0 and rows > 0
            self._bar = tqdm(total=self.total, desc=desc, unit=unit.rstrip("s") or unit, file=self.stream,
                             delay=self.delay, leave=False, dynamic_ncols=sized,
                             ncols=None if sized else 80, nrows=None if sized else 24)

    def line(self) -> str:
        """The plain progress line for the current count (no newline)."""
        elapsed = self.clock() - self._start
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        left = ""
        if 0 < self.done < self.total:
            left = f", about {duration_text(elapsed * (self.total - self.done) / self.done)} left"
        count = f"{self.done}/{self.total} {self.unit}{share}"
        return f"rankcollapse: {self.desc}: {count}, {duration_text(elapsed)}{left}"

    def _write(self) -> None:
        try:
            print(self.line(), file=self.stream, flush=True)
        except (OSError, ValueError):  # the stream went away: progress is not worth a crash
            self.enabled = False
        self.lines += 1

    def update(self, k: int = 1) -> None:
        """``k`` more units done."""
        self.done += k
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(k)
            return
        self.poll()

    def poll(self) -> None:
        """Write a plain line if one is due (also when no unit was done since the last: a long step)."""
        if not (self.enabled and self._bar is None and self.done):
            return
        now = self.clock()
        if now >= self._next:
            self._write()
            self._next = now + self.every

    def close(self) -> None:
        """Finish: close the bar, or write the last count if a plain line was written before."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and self.lines:
            self._write()
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(total: int, desc: str, unit: str = "layers", *, enabled: bool = True,
             stream: TextIO | None = None, **kw: Any) -> Progress:
    """A :class:`Progress` on ``stream`` (default stderr): a bar on a terminal, plain lines elsewhere."""
    return Progress(total, desc, unit, stream=stream, enabled=enabled, **kw)

"""Figures: the one way rankcollapse sets up and saves a matplotlib figure.

- :func:`new_figure`: a ``width x height`` inch :class:`matplotlib.figure.Figure` that is not registered
  with pyplot (no backend, no global state: collected like any object, nothing to close), its title (a
  user's string) drawn literally (:func:`~rankcollapse.edge.validate.plain_text`).
- :func:`pyplot`: ``matplotlib.pyplot`` on the Agg backend, chosen once, on the first call (never at
  import), for drawing code written against pyplot (the report's stories).
- :func:`save_figure`: each path in the format its suffix names, at :data:`DPI`, through
  :func:`~rankcollapse.edge.atomic.atomic_path` (a crash never leaves half a picture); a suffix matplotlib
  does not write, or an ``OSError`` (a read-only folder, a full disk), is one line naming the path
  (:func:`~rankcollapse.edge.inputs.os_error`); a pyplot figure is closed afterwards, on error too.

Nothing here imports matplotlib at import time: ``rankcollapse --help`` stays fast.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from rankcollapse.edge.atomic import atomic_path
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import os_error, quote_path
from rankcollapse.edge.validate import plain_text, quote

#: Resolution of every raster file (PNG) rankcollapse writes, in dots per inch.
DPI = 150
#: The format of a path without a suffix.
DEFAULT_FORMAT = "png"


def new_figure(
    width: float,
    height: float,
    *,
    layout: str | None = None,
    title: str = "",
    title_size: float | None = None,
) -> Any:
    """A ``matplotlib.figure.Figure`` of ``width x height`` inches, not registered with pyplot.

    ``layout``: matplotlib's layout engine (``"constrained"``, ``"tight"`` or None). ``title``: the
    figure's title (``suptitle``), drawn literally: a ``$`` in a user's mask spec or folder name is never
    read as mathtext. Draw with ``fig.subplots(rows, cols)``; save with :func:`save_figure`.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout=layout)
    if title:
        fig.suptitle(plain_text(title), **({} if title_size is None else {"fontsize": title_size}))
    return fig


@functools.cache
def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` with the Agg backend, chosen on the first call only (never at import): a
    figure drawn through pyplot never opens a window. Prefer :func:`new_figure`, which needs no backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_format(fig: Any, path: str | os.PathLike[str], what: str = "figure") -> str:
    """The format ``path``'s suffix names (lower case; :data:`DEFAULT_FORMAT` without one); a suffix
    matplotlib does not write is one line listing the ones it does."""
    fmt = Path(path).suffix.lstrip(".").lower() or DEFAULT_FORMAT
    known = sorted(fig.canvas.get_supported_filetypes())
    if fmt not in known:
        raise RankCollapseError(
            f"cannot write {what} {quote_path(path)}: format {quote(fmt)} (the file's suffix) is not one "
            f"matplotlib writes; allowed: {', '.join(known)}"
        )
    return fmt


def close_figure(fig: Any) -> None:
    """Release ``fig`` from pyplot if it is registered there (a figure of :func:`new_figure` is not:
    nothing to do; it is collected like any object)."""
    if getattr(fig.canvas, "manager", None) is not None:
        import matplotlib.pyplot as plt  # imported already: the figure is pyplot's

        plt.close(fig)


def save_figure(
    fig: Any,
    path: str | os.PathLike[str],
    *more: str | os.PathLike[str],
    what: str = "figure",
    dpi: int = DPI,
    tight: bool = False,
) -> list[Path]:
    """Write ``fig`` to ``path`` (and each of ``more``), each in the format of its suffix, atomically;
    return the paths written.

    Every suffix is checked before anything is written (:func:`figure_format`); an ``OSError`` is one
    line, ``cannot write {what} 'PATH': Permission denied (EACCES)``. The figure is closed afterwards
    (:func:`close_figure`), also when a write fails. ``dpi``: the raster resolution (:data:`DPI`);
    ``tight``: the picture cut to what is drawn (else the figure's own size, whatever matplotlib's
    ``savefig.bbox`` setting says).
    """
    import matplotlib

    paths = [Path(p) for p in (path, *more)]
    try:
        formats = [figure_format(fig, p, what) for p in paths]
        with matplotlib.rc_context({"savefig.bbox": "tight" if tight else "standard"}):
            for p, fmt in zip(paths, formats, strict=True):
                try:
                    with atomic_path(p) as tmp:
                        fig.savefig(tmp, format=fmt, dpi=dpi)
                except OSError as err:
                    raise os_error(what, p, err, verb="write") from None
    finally:
        close_figure(fig)
    return paths

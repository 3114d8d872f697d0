"""The picture of a mask (``rankcollapse mask --plot``): :func:`plot_mask` draws the allowed pairs, each
cell the share allowed in an ``f x f`` block (:func:`block_counts`) once n exceeds :data:`PLOT_MAX_PIXELS`.

``block_counts(mask, n, f)[I, J]`` = number of allowed ``(i, j)`` with ``i // f == I`` and
``j // f == J``. Interval masks are counted from their runs in closed form (row ``i`` adds
``|[start_i, stop_i) ∩ [J f, (J + 1) f)|`` to cell ``(i // f, J)``; prefix sums over the sorted run
ends give every cell in O(n + cells^2 log n), any n whose O(n) arrays fit); other masks from the
sparse form (O(edges)).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rankcollapse.core.names import label
from rankcollapse.edge.figures import new_figure, save_figure
from rankcollapse.edge.validate import plain_text
from rankcollapse.masks.base import Mask

PLOT_MAX_PIXELS = 1024
"""``--plot`` draws at most this many rows/columns; larger masks show the share of allowed pairs per cell."""


def block_counts(mask: Mask, n: int, f: int) -> np.ndarray:
    """int64 [cells, cells], ``cells = ceil(n / f)``: allowed pairs per block (module docstring)."""
    cells = -(-n // f)
    iv = mask.intervals(n)
    if iv is None:
        s = mask.sparse(n)
        flat = (s.row_ids() // f) * cells + s.indices // f
        return np.bincount(flat, minlength=cells * cells).reshape(cells, cells).astype(np.int64)
    start, stop = iv
    edges = np.minimum(np.arange(cells + 1, dtype=np.int64) * f, n)[None, :]  # column boundaries x
    r0 = np.minimum(np.arange(cells, dtype=np.int64) * f, n)[:, None]
    r1 = np.minimum(r0 + f, n)
    # pairs of rows [r0, r1) in columns [0, x): sum_i min(x, stop_i) - min(x, start_i); with v sorted,
    # sum_i min(x, v_i) = (prefix of the v_i < x) + x * #(v_i >= x).
    below = _sum_min(stop, r0, r1, edges) - _sum_min(start, r0, r1, edges)
    return np.diff(below, axis=1)


def _sum_min(values: np.ndarray, r0: np.ndarray, r1: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_{r0 <= i < r1} min(x, values[i])`` for sorted ``values`` ([cells, 1] rows, [1, m] x)."""
    prefix = np.concatenate([[0], np.cumsum(values)]).astype(np.int64)
    p = np.clip(np.searchsorted(values, x, side="left"), r0, r1)
    return prefix[p] - prefix[r0] + x * (r1 - p)


def plot_mask(
    mask: Mask, n: int, centers: Sequence[int], path: str | os.PathLike[str], title: str
) -> Path:
    """Draw the mask matrix of ``n`` tokens (row = query i, column = key j), the center nodes marked on
    the diagonal, and save it at ``path`` (the format its suffix names); return the path.

    For n > PLOT_MAX_PIXELS each cell is the share of allowed pairs in an f x f block
    (:func:`block_counts`: from the runs of interval masks, else O(edges)). ``title``: drawn literally.
    """
    f = -(-n // PLOT_MAX_PIXELS)
    cells = -(-n // f)
    counts = block_counts(mask, n, f)
    sizes = np.bincount(np.arange(n) // f, minlength=cells).astype(np.float64)
    share = counts / np.outer(sizes, sizes)

    block = f"\n(each cell: share allowed in {f}x{f} block)" if f > 1 else ""
    fig = new_figure(6, 6)
    ax = fig.subplots()
    extent = (-0.5, n - 0.5, n - 0.5, -0.5)
    ax.imshow(share, cmap="Greys", vmin=0, vmax=1, interpolation="nearest", extent=extent)
    if len(centers):
        marks = np.unique(np.asarray(centers) // f) * f + (f - 1) / 2
        # a red rug above the matrix at the center tokens' columns, plus diagonal dots when few
        ax.plot(marks, np.full(marks.shape, -0.5 - 0.01 * n), "|", color="tab:red", ms=8, clip_on=False,
                label="center nodes")
        if marks.size <= 200:
            ax.scatter(marks, marks, s=14, c="tab:red", zorder=3)
        ax.legend(loc="lower left", fontsize=8)
    ax.set_xlabel(label("key_index"))
    ax.set_ylabel(label("query_index"))
    ax.set_title(plain_text(title) + block, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, what="plot")[0]

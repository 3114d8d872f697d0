"""Allowed-pair counts per ``f x f`` block of a mask: what ``rankcollapse mask --plot`` draws.

``block_counts(mask, n, f)[I, J]`` = number of allowed ``(i, j)`` with ``i // f == I`` and
``j // f == J``. Interval masks are counted from their runs in closed form (row ``i`` adds
``|[start_i, stop_i) ∩ [J f, (J + 1) f)|`` to cell ``(i // f, J)``; prefix sums over the sorted run
ends give every cell in O(n + cells^2 log n), any n whose O(n) arrays fit); other masks from the
sparse form (O(edges)).
"""

from __future__ import annotations

import numpy as np

from rankcollapse.masks.base import Mask


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

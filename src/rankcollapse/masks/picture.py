"""Allowed-pair counts per ``f x f`` block of a mask: what ``rankcollapse mask --plot`` draws.

``block_counts(mask, n, f)[I, J]`` = number of allowed ``(i, j)`` with ``i // f == I`` and
``j // f == J``. Interval masks are counted from their runs (row ``i`` adds
``|[start_i, stop_i) ∩ [J f, (J + 1) f)|`` to cell ``(i // f, J)``; O(n * cells), any n whose O(n)
arrays fit); other masks from the sparse form (O(edges)).
"""

from __future__ import annotations

import numpy as np

from rankcollapse.masks.base import Mask

_ROW_CHUNK = 4096


def block_counts(mask: Mask, n: int, f: int) -> np.ndarray:
    """int64 [cells, cells], ``cells = ceil(n / f)``: allowed pairs per block (module docstring)."""
    cells = -(-n // f)
    iv = mask.intervals(n)
    if iv is None:
        s = mask.sparse(n)
        flat = (s.row_ids() // f) * cells + s.indices // f
        return np.bincount(flat, minlength=cells * cells).reshape(cells, cells).astype(np.int64)
    start, stop = iv
    edges = np.minimum(np.arange(cells + 1, dtype=np.int64) * f, n)  # cell boundaries in columns
    out = np.zeros((cells, cells), dtype=np.int64)
    for a in range(0, n, _ROW_CHUNK):
        b = min(n, a + _ROW_CHUNK)
        s0, s1 = start[a:b, None], stop[a:b, None]
        below = np.clip(edges[None, :], s0, s1) - s0  # |[start, stop) ∩ [0, edge)| per row and boundary
        per_cell = np.diff(below, axis=1)
        group = np.arange(a, b) // f
        first = np.concatenate([[0], np.flatnonzero(np.diff(group)) + 1])
        out[group[first]] += np.add.reduceat(per_cell, first, axis=0)
    return out

"""Interval masks: graph analysis and composition in O(n log n), without the n^2 pairs.

An *interval mask* lets query ``i`` attend to the keys ``start[i] <= j < stop[i]`` (one run per
row) with ``start``, ``stop`` non-decreasing in ``i`` and ``start[i] <= i < stop[i]`` (self-loops).
complete, causal, window, causal-window, block, prefix, document and any ``&`` of them are interval
masks (``Mask._intervals``); so is the composition of interval masks (below). Facts used, each
following from monotonicity (ours; the tests check them against BFS and networkx):

- One-hop reach of key ``j`` (the queries that attend to it) is the run ``[q_j, p_j)`` with
  ``p_j = #{i: start[i] <= j}`` and ``q_j = #{i: stop[i] <= j}``, both non-decreasing in ``j``.
  Hence the ``h``-hop reach of ``c`` is a run ``[lo_h(c), hi_h(c)]`` with
  ``lo_{h+1} = q[lo_h]`` and ``hi_{h+1} = p[hi_h] - 1``, both non-decreasing in ``c``.
- ``ecc(c) = max(dl(c), dr(c))``, ``dl`` = hops of ``x -> q[x]`` from ``c`` down to 0, ``dr`` = hops of
  ``x -> p[x] - 1`` up to ``n - 1`` (infinite when stuck); pointer jumping gives all of them at once.
- Strongly connected components are runs; tokens ``x`` and ``x + 1`` share one iff
  ``start[x + 1] <= x`` and ``stop[x] >= x + 2``. The run ``[a, b]`` is closed iff
  ``start[a] >= a`` and ``stop[b] <= b + 1``.
- Composition: row ``i`` of ``M2 M1`` (first ``M1``, then ``M2``) is the union of the rows ``k`` of
  ``M1`` over ``start2[i] <= k < stop2[i]``, i.e. ``[start1[start2[i]], stop1[stop2[i] - 1])``.
"""

from __future__ import annotations

import numpy as np

from rankcollapse.masks.limits import require_memory

Intervals = tuple[np.ndarray, np.ndarray]
INTERVAL_BYTES_PER_TOKEN = 160


def check_interval_size(n: int, what: str) -> None:
    """Refuse an interval computation whose O(n) arrays do not fit (``INTERVAL_BYTES_PER_TOKEN``)."""
    require_memory(INTERVAL_BYTES_PER_TOKEN * float(n), what)


def compose(first: Intervals, then: Intervals) -> Intervals:
    """Runs of ``M_then M_first`` (boolean product; the graph path first -> then), O(n)."""
    s1, e1 = first
    s2, e2 = then
    return s1[s2], e1[e2 - 1]


def has_one_hop_center(iv: Intervals) -> bool:
    """True iff some key is in every row (a token that every token attends to)."""
    return bool(iv[0].max() < iv[1].min())


def one_hop_centers(iv: Intervals) -> np.ndarray:
    """The keys in every row: ``max(start) <= c < min(stop)`` (int64, maybe empty)."""
    return np.arange(int(iv[0].max()), max(int(iv[1].min()), int(iv[0].max())), dtype=np.int64)


def _hops_to_fixed_point(step: np.ndarray, target: int) -> np.ndarray:
    """Number of applications of ``step`` from each ``x`` until ``target`` (-1 if never). Pointer jumping.

    ``step`` moves monotonically toward ``target`` or stays; a node that stays before ``target`` is stuck.
    """
    n = step.size
    stuck = (step == np.arange(n)) & (np.arange(n) != target)
    jump = step.copy()
    count = (jump != np.arange(n)).astype(np.int64)
    while True:
        nxt = jump[jump]
        if np.array_equal(nxt, jump):
            break
        count = count + count[jump]
        jump = nxt
    reach = (jump == target) & ~stuck
    return np.where(reach, count, -1)


def interval_analysis(start: np.ndarray, stop: np.ndarray) -> dict:
    """Graph facts of an interval mask (the fields of ``MaskAnalysis`` except ``spec``)."""
    n = start.size
    i = np.arange(n, dtype=np.int64)
    p = np.searchsorted(start, i, side="right")  # #{rows with start <= j}
    q = np.searchsorted(stop, i, side="right")  # #{rows with stop <= j}
    down = _hops_to_fixed_point(q.astype(np.int64), 0)
    up = _hops_to_fixed_point((p - 1).astype(np.int64), n - 1)
    joined = (start[1:] <= i[:-1]) & (stop[:-1] >= i[:-1] + 2)
    run_start = np.concatenate([[0], np.flatnonzero(~joined) + 1]).astype(np.int64)
    run_stop = np.concatenate([run_start[1:], [n]]).astype(np.int64)
    closed_mask = (start[run_start] >= run_start) & (stop[run_stop - 1] <= run_stop)
    closed = [np.arange(a, b, dtype=np.int64) for a, b in zip(run_start[closed_mask], run_stop[closed_mask],
                                                              strict=True)]
    quasi = len(closed) == 1
    centers = closed[0] if quasi else np.zeros(0, dtype=np.int64)
    ecc = np.maximum(down[centers], up[centers]) if quasi else np.zeros(0, dtype=np.int64)
    radius = best = hops = None
    if quasi:
        pos = int(np.argmin(ecc))
        radius, best = int(ecc[pos]), int(centers[pos])
        hops = _hop_distances(best, p, q, n)
    return {
        "n": n,
        "edges": int((stop - start).sum()),
        "self_loops": True,
        "missing_self_loops": np.zeros(0, dtype=np.int64),
        "strongly_connected": run_start.size == 1,
        "quasi_strongly_connected": quasi,
        "num_components": int(run_start.size),
        "closed_components": closed,
        "center_nodes": centers,
        "center_eccentricities": ecc.astype(np.int64),
        "radius": radius,
        "best_center": best,
        "hop_distances": hops,
        "band": _band(start, stop),
    }


def _hop_distances(c: int, p: np.ndarray, q: np.ndarray, n: int) -> np.ndarray:
    """``dist(c, v)`` for every v (c a center): walk the reach run outward level by level."""
    lows, highs = [c], [c]
    while lows[-1] > 0 or highs[-1] < n - 1:
        lows.append(int(q[lows[-1]]))
        highs.append(int(p[highs[-1]] - 1))
    lows_a, highs_a = np.asarray(lows), np.asarray(highs)
    v = np.arange(n, dtype=np.int64)
    # v < c: first level whose low end is <= v (lows non-increasing); v > c: first high end >= v.
    left = np.searchsorted(-lows_a, -v, side="left")
    right = np.searchsorted(highs_a, v, side="left")
    return np.where(v <= c, left, right).astype(np.int64)


def _band(start: np.ndarray, stop: np.ndarray) -> tuple[int, int] | None:
    """``(lo, hi)`` iff the runs are the band ``lo <= j - i <= hi`` clipped to 0..n-1."""
    n = start.size
    i = np.arange(n, dtype=np.int64)
    lo, hi = int((start - i).min()), int((stop - 1 - i).max())
    ok = np.array_equal(start, np.clip(i + lo, 0, n - 1))
    ok = ok and np.array_equal(stop, np.clip(i + hi, 0, n - 1) + 1)
    return (lo, hi) if ok else None

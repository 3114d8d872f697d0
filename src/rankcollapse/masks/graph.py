"""Graph facts of a mask (SPEC §4, Definitions 1-5), computed on the sparse form only.

Edge convention (SPEC §1): edge ``j -> i`` iff ``M[i, j]`` (token ``i`` attends to ``j``, so
information flows from ``j`` to ``i``). ``dist(u, v)`` is the fewest hops along edges from ``u``
to ``v``; ``v`` is reachable from ``u`` iff ``(M^k)[v, u] > 0`` for some ``k``.

- *strongly connected*: one strongly connected component (SCC).
- *closed component*: an SCC with no edge entering it from outside: its tokens attend only
  within it. In the Markov chain of a row-stochastic ``A`` supported on ``M`` it is a closed
  class. Every other token eventually feels one or more closed components, never the reverse.
- *center*: a node from which every node is reachable. Centers exist iff there is exactly one
  closed component (the unique source of the condensation DAG), and then the centers are exactly
  its nodes. *Quasi-strongly connected* iff a center exists.
- *eccentricity* ``ecc(c) = max_v dist(c, v)``; *radius* ``r = min_c ecc(c)`` over centers
  (0 for n = 1; None without a center). ``hop_distances`` are ``dist(c*, v)`` from the best center
  ``c*`` (smallest eccentricity, then smallest index).

Eccentricities of ALL centers are exact without one BFS per center (bounding algorithm in the
spirit of Takes & Kosters, 2011). Centers form one SCC ``C``. For a BFS source ``u`` in ``C``
(forward BFS gives ``dist(u, .)`` and ``ecc(u)``, backward BFS ``dist(., u)``), every ``v`` in
``C`` satisfies, by the triangle inequality,

    max(dist(v, u), ecc(u) - dist(u, v))  <=  ecc(v)  <=  dist(v, u) + ecc(u).

Sources are picked alternately as the unresolved center with the largest upper bound and the one
with the smallest lower bound (ties: larger in+out degree, then smaller index) until every lower
bound equals its upper bound. Each BFS resolves at least its source, so the result is exact in
every case; on band-like masks a handful of BFS suffice. BFS is scipy's compiled
``breadth_first_order``; depths come from the BFS tree by pointer jumping (O(n log depth)).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.errors import RankCollapseError
from rankcollapse.masks.analysis import (
    ANALYSIS_BYTES_PER_EDGE,
    MaskAnalysis,
    analyze_sparse,
    bfs_distances,
    bitset_eccentricities,
    center_eccentricities,
)
from rankcollapse.masks.fixed import from_dense
from rankcollapse.masks.sparse import SparseMask, check_n
from rankcollapse.masks.spec import parse_mask

__all__ = [
    "ANALYSIS_BYTES_PER_EDGE",
    "MaskAnalysis",
    "analyze_dense",
    "analyze_mask",
    "analyze_sparse",
    "bfs_distances",
    "bitset_eccentricities",
    "center_eccentricities",
]

MaskLike = Any
"""A spec string, a ``Mask``, a ``SparseMask``, or a boolean ``[n, n]`` numpy array / torch tensor."""


def _is_array(x: object) -> bool:
    return isinstance(x, np.ndarray) or type(x).__module__.startswith("torch")


def analyze_mask(mask: MaskLike, n: int | None = None) -> MaskAnalysis:
    """Graph facts of ``mask`` at length ``n`` (a spec, a ``Mask``, a ``SparseMask`` or a dense bool [n, n]).

    A spec or ``Mask`` goes through ``Mask.analysis(n)``: computed once per mask object and length
    (``parse_mask`` returns one object per spec string, so repeated calls are cache hits). Work is
    O(n + edges) for SCCs and closed components, plus two BFS per eccentricity source; no n x n
    matrix is built unless a dense array is passed in. ``n`` may be omitted for arrays and sparse
    forms (it is their size).
    """
    if isinstance(mask, SparseMask):
        if n is not None and check_n(n) != mask.n:
            raise RankCollapseError(f"sparse mask has n={mask.n} but n={n} was given; allowed: n={mask.n}")
        return analyze_sparse(mask, None)
    if _is_array(mask):
        m = from_dense(mask)
        size = m.size  # type: ignore[attr-defined]
        if n is not None and check_n(n) != size:
            raise RankCollapseError(f"mask array is {size} x {size} but n={n}; allowed: n={size}")
        return m.analysis(size)
    parsed = parse_mask(mask)
    if n is None:
        raise RankCollapseError(f"analyze_mask({parsed.spec[:60]!r}) needs n; allowed: an integer >= 1")
    return parsed.analysis(n)


def analyze_dense(dense: Any) -> MaskAnalysis:
    """Graph facts of a boolean ``[n, n]`` numpy array or torch tensor, without any spec string.

    ``analyze_dense(m).radius`` / ``.center_nodes`` are what a caller holding a matrix needs;
    equal to ``analyze_mask`` of the spec that made the matrix (``spec`` is a content label).
    """
    return analyze_mask(dense)



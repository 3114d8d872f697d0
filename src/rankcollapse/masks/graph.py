"""Entry points of the graph analysis: ``analyze_mask`` (a spec, a ``Mask``, a sparse or dense mask)
and ``analyze_dense`` (a boolean matrix, no spec string). The analysis itself (the paper's §3,
Definitions 1-5, on the sparse form only) lives in :mod:`rankcollapse.masks.analysis`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
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
        size = m.size
        if n is not None and check_n(n) != size:
            raise RankCollapseError(f"mask array is {size} x {size} but n={n}; allowed: n={size}")
        return m.analysis(size)
    parsed = parse_mask(mask)
    if n is None:
        raise RankCollapseError(f"analyze_mask({quote(parsed.spec)}) needs n; allowed: an integer >= 1")
    return parsed.analysis(n)


def analyze_dense(dense: Any) -> MaskAnalysis:
    """Graph facts of a boolean ``[n, n]`` numpy array or torch tensor, without any spec string.

    ``analyze_dense(m).radius`` / ``.center_nodes`` are what a caller holding a matrix needs;
    equal to ``analyze_mask`` of the spec that made the matrix (``spec`` is a content label).
    """
    return analyze_mask(dense)



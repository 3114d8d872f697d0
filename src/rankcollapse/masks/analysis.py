"""Graph facts of a mask (the paper's §3, Definitions 1-5), computed on the sparse form only.

Edge convention (the paper's §3): edge ``j -> i`` iff ``M[i, j]`` (token ``i`` attends to ``j``, so
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

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankcollapse.masks.limits import ANALYSIS_BYTES_PER_EDGE
from rankcollapse.masks.sparse import SparseMask, band_of_sparse

if TYPE_CHECKING:  # scipy is imported where used: interval masks never need it
    import scipy.sparse as sp

__all__ = ["ANALYSIS_BYTES_PER_EDGE", "MaskAnalysis", "analyze_sparse"]

FULL_LIST_MAX_N = 4096
"""``to_dict()`` lists per-token arrays in full up to this n (see ``MaskAnalysis.to_dict``)."""


@dataclass
class MaskAnalysis:
    """Graph facts of one mask at length ``n`` (tokens 0-based; edge ``j -> i`` iff ``M[i, j]``).

    Node lists a reader reads, Python ints: ``center_nodes`` [c] sorted, ``missing_self_loops`` (the
    tokens without a self-loop), ``best_center``. Per-token data, numpy: ``center_eccentricities``
    int64 [c] aligned with ``center_nodes``, ``hop_distances`` int64 [n] from ``best_center`` (None
    without a center), each of ``closed_components`` an int64 sorted array (components ordered by
    smallest token). Built from numpy arrays (kept internally as such).
    """

    spec: str | None
    n: int
    edges: int
    self_loops: bool
    missing_self_loops: list[int]
    strongly_connected: bool
    quasi_strongly_connected: bool
    num_components: int
    closed_components: list[np.ndarray]
    center_nodes: list[int]
    center_eccentricities: np.ndarray
    radius: int | None
    best_center: int | None
    hop_distances: np.ndarray | None
    band: tuple[int, int] | None
    bfs_runs: int = field(default=0)
    _centers: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._centers = np.asarray(self.center_nodes, dtype=np.int64).reshape(-1)
        self.center_nodes = self._centers.tolist()
        self.missing_self_loops = np.asarray(self.missing_self_loops, dtype=np.int64).reshape(-1).tolist()
        self.best_center = None if self.best_center is None else int(self.best_center)
        self.radius = None if self.radius is None else int(self.radius)

    @property
    def theorem1_applies(self) -> bool:
        """Theorem 1's graph conditions: self-loops and quasi-strong connectivity."""
        return self.self_loops and self.quasi_strongly_connected

    def to_frame(self) -> Any:
        """One row per token, a pandas DataFrame: ``token``, ``is_center``, ``center_eccentricity``
        (NaN for a non-center), ``hop_distance`` (hops from ``best_center``; NaN without a center) and
        ``closed_component`` (its index in ``closed_components``, -1 outside every one)."""
        import pandas as pd

        ecc = np.full(self.n, np.nan)
        ecc[self._centers] = self.center_eccentricities
        comp = np.full(self.n, -1, dtype=np.int64)
        for k, c in enumerate(self.closed_components):
            comp[c] = k
        hops = self.hop_distances.astype(float) if self.hop_distances is not None else np.full(self.n, np.nan)
        return pd.DataFrame({"token": np.arange(self.n), "is_center": ~np.isnan(ecc),
                             "center_eccentricity": ecc, "hop_distance": hops, "closed_component": comp})

    def to_dict(self, full: bool | None = None) -> dict[str, Any]:
        """JSON-ready dict.

        Always present: scalars, ``center_nodes`` (full list), ``closed_component_sizes``,
        ``eccentricity_histogram`` and ``hop_distance_histogram`` (``{value: count}``, as lists
        of ``[value, count]``). Per-token lists (``center_eccentricities``, ``hop_distances``,
        ``closed_components``) are included when ``full`` is True, or when ``full`` is None and
        ``n <= FULL_LIST_MAX_N``; otherwise ``summarised`` names the lists left out.
        """
        full = self.n <= FULL_LIST_MAX_N if full is None else full
        out: dict[str, Any] = {
            "spec": self.spec,
            "n": self.n,
            "edges": self.edges,
            "self_loops": self.self_loops,
            "missing_self_loops": self.missing_self_loops[:20],
            "strongly_connected": self.strongly_connected,
            "quasi_strongly_connected": self.quasi_strongly_connected,
            "theorem1_applies": self.theorem1_applies,
            "num_components": self.num_components,
            "num_closed_components": len(self.closed_components),
            "closed_component_sizes": [int(c.size) for c in self.closed_components],
            "center_nodes": list(self.center_nodes),
            "num_centers": len(self.center_nodes),
            "radius": self.radius,
            "best_center": self.best_center,
            "max_center_eccentricity": (
                int(self.center_eccentricities.max()) if self.center_nodes else None
            ),
            "eccentricity_histogram": _histogram(self.center_eccentricities),
            "hop_distance_histogram": (
                _histogram(self.hop_distances) if self.hop_distances is not None else None
            ),
            "band": list(self.band) if self.band is not None else None,
            "bfs_runs": self.bfs_runs,
        }
        listed = {
            "center_eccentricities": self.center_eccentricities.tolist(),
            "hop_distances": self.hop_distances.tolist() if self.hop_distances is not None else None,
            "closed_components": [c.tolist() for c in self.closed_components],
        }
        if full:
            out.update(listed)
            out["summarised"] = []
        else:
            out["summarised"] = sorted(listed)
        return out


def _histogram(values: np.ndarray) -> list[list[int]]:
    uniq, counts = np.unique(values, return_counts=True)
    return [[int(v), int(c)] for v, c in zip(uniq, counts, strict=True)]


def _csr(indptr: np.ndarray, indices: np.ndarray, n: int) -> sp.csr_matrix:
    """float64 / int32 CSR that scipy.csgraph accepts without copying each call."""
    idx_t = np.int32 if max(n, indices.size) < 2**31 - 1 else np.int64
    data = np.ones(indices.size, dtype=np.float64)
    import scipy.sparse as sp

    return sp.csr_matrix((data, indices.astype(idx_t), indptr.astype(idx_t)), shape=(n, n))


def bfs_distances(graph: sp.csr_matrix, source: int) -> np.ndarray:
    """Hop distances from ``source`` along ``graph[u, v]`` edges ``u -> v``: int64 [n], -1 if unreachable.

    scipy's compiled BFS gives the visit order and BFS-tree parents; in order positions the parent
    of position ``k`` is ``p[k] < k``, and depths follow by pointer jumping
    (``depth += depth[p]; p = p[p]``, ceil(log2(max depth)) + 1 rounds of O(n)).
    """
    n = graph.shape[0]
    from scipy.sparse import csgraph

    order, pred = csgraph.breadth_first_order(graph, source, directed=True, return_predecessors=True)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(order.size, dtype=np.int64)
    parent = np.zeros(order.size, dtype=np.int64)
    parent[1:] = pos[pred[order[1:]]]
    depth = np.ones(order.size, dtype=np.int64)
    depth[0] = 0
    while parent.any():
        depth += depth[parent]
        parent = parent[parent]
    dist = np.full(n, -1, dtype=np.int64)
    dist[order] = depth
    return dist


def bitset_eccentricities(s: SparseMask, sources: np.ndarray) -> np.ndarray:
    """Exact ``ecc`` of up to 64 sources at once by bit-parallel BFS (each source reaches every node).

    Bit ``b`` of ``reached[v]`` (uint64 [n]) says ``dist(sources[b], v) <= level``; one level is
    ``reached[i] |= OR_{j: M[i, j]} reached[j]`` (a gather and ``bitwise_or.reduceat`` over the
    CSR rows, O(edges)). ``ecc(sources[b])`` is the first level at which bit ``b`` is set everywhere.
    Cheap when eccentricities are small (random, global-token masks), where bounds resolve little.
    """
    n = s.n
    bits = np.left_shift(np.uint64(1), np.arange(sources.size, dtype=np.uint64))
    reached = np.zeros(n, dtype=np.uint64)
    reached[sources] |= bits
    want = np.bitwise_or.reduce(bits)
    ecc = np.full(sources.size, -1, dtype=np.int64)
    nonempty = np.diff(s.indptr) > 0
    starts = s.indptr[:-1][nonempty]
    level = 0
    while True:
        done = np.bitwise_and.reduce(reached)
        newly = ((done & bits) != 0) & (ecc < 0)
        ecc[newly] = level
        if (done & want) == want:
            return ecc
        level += 1
        step = np.zeros(n, dtype=np.uint64)
        step[nonempty] = np.bitwise_or.reduceat(reached[s.indices], starts)
        reached |= step


def center_eccentricities(
    s: SparseMask, forward: sp.csr_matrix, backward: sp.csr_matrix, centers: np.ndarray
) -> tuple[np.ndarray, int]:
    """Exact ``ecc(c) = max_v dist(c, v)`` for every center (bounding algorithm, module docstring).

    forward[u, v]: edge u -> v; backward is its transpose (= the mask); centers: sorted int64 [k]
    (one SCC that reaches every node). Starting bounds: ``ecc = 0`` if n = 1; ``ecc = 1`` if ``c``
    has an edge to every other node; else ``ecc >= 2``. The first source is the center of largest
    in+out degree. When bounds resolve too few centers per BFS for what is left (estimated cost
    ``2 * open / rate`` BFS versus ``5 * ceil(open / 64) * max upper bound`` bit-parallel levels),
    the open centers are finished with ``bitset_eccentricities``.
    Returns (eccentricities int64 [k], number of BFS sources used, bit-parallel ones included).
    """
    n = forward.shape[0]
    k = centers.size
    diag = (forward[centers, centers] != 0).A1
    out_others = np.diff(forward.indptr)[centers] - diag
    one_hop = out_others == n - 1
    lower = np.where(one_hop, min(n - 1, 1), 2).astype(np.int64)
    upper = np.where(one_hop, lower, np.iinfo(np.int64).max).astype(np.int64)
    deg = (np.diff(forward.indptr) + np.diff(backward.indptr))[centers]
    runs = 0
    pick_largest_upper = True
    while True:
        open_ = np.flatnonzero(lower < upper)
        if open_.size == 0:
            return lower, runs
        if runs > 0:
            rate = (k - open_.size) / runs
            levels = int(upper[open_].max())
            if 5 * -(-open_.size // 64) * levels < 2 * open_.size / max(rate, 1e-9):
                for a in range(0, open_.size, 64):
                    chunk = open_[a : a + 64]
                    lower[chunk] = upper[chunk] = bitset_eccentricities(s, centers[chunk])
                return lower, runs + int(open_.size)
            candidates = open_
        else:
            candidates = np.arange(k)
        if runs == 0:
            key = np.lexsort((candidates, -deg[candidates]))
        elif pick_largest_upper:
            key = np.lexsort((candidates, -deg[candidates], -upper[candidates]))
        else:
            key = np.lexsort((candidates, -deg[candidates], lower[candidates]))
        pick_largest_upper = not pick_largest_upper if runs > 0 else True
        pos = int(candidates[key[0]])
        u = int(centers[pos])
        d_from_u = bfs_distances(forward, u)  # dist(u, .)
        d_to_u = bfs_distances(backward, u)  # dist(., u)
        runs += 1
        ecc_u = int(d_from_u.max())
        to_u, from_u = d_to_u[centers], d_from_u[centers]
        np.maximum(lower, np.maximum(to_u, ecc_u - from_u), out=lower)
        np.minimum(upper, to_u + ecc_u, out=upper)
        lower[pos] = upper[pos] = ecc_u


def documents(s: SparseMask) -> list[np.ndarray]:
    """The independent parts of a mask: weakly connected components of its graph, each an int64
    sorted token array, ordered by first token.

    Tokens in different parts never exchange information in any number of layers, so each part
    (a ``document:`` document, a ``block:`` block, a ``tree:`` root's subtree) evolves as a sequence
    of its own; a causal or complete mask is one part.
    """
    from scipy.sparse import csgraph

    count, labels = csgraph.connected_components(_csr(s.indptr, s.indices, s.n), directed=True,
                                                 connection="weak")
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(count + 1))
    parts = [order[a:b].astype(np.int64) for a, b in itertools.pairwise(bounds)]
    parts.sort(key=lambda c: int(c[0]))
    return parts


def analyze_sparse(s: SparseMask, spec: str | None, band: Any = "compute") -> MaskAnalysis:
    """Graph facts of a sparse form (``band`` given when the caller knows it, else computed)."""
    n = s.n
    rows = s.row_ids()
    keys = s.indices
    diag = np.zeros(n, dtype=bool)
    diag[rows[rows == keys]] = True
    missing = np.flatnonzero(~diag)
    # backward[i, j] = M[i, j] (edge j -> i reversed); forward = transpose: forward[j, i] iff M[i, j].
    backward = _csr(s.indptr, keys, n)
    forward = backward.T.tocsr()
    from scipy.sparse import csgraph

    num_components, labels = csgraph.connected_components(backward, directed=True, connection="strong")
    entered = np.zeros(num_components, dtype=bool)
    cross = labels[rows] != labels[keys]
    entered[labels[rows[cross]]] = True  # an edge keys -> rows enters the component of the query
    closed_labels = np.flatnonzero(~entered)
    order = np.argsort(labels, kind="stable")
    starts = np.searchsorted(labels[order], closed_labels)
    sizes = np.bincount(labels, minlength=num_components)[closed_labels]
    closed = [order[a : a + b].astype(np.int64) for a, b in zip(starts, sizes, strict=True)]
    closed.sort(key=lambda c: int(c[0]))
    quasi = len(closed) == 1
    centers = closed[0] if quasi else np.zeros(0, dtype=np.int64)
    ecc = np.zeros(0, dtype=np.int64)
    runs = 0
    radius: int | None = None
    best: int | None = None
    hops: np.ndarray | None = None
    if quasi:
        ecc, runs = center_eccentricities(s, forward, backward, centers)
        best_pos = int(np.argmin(ecc))
        radius, best = int(ecc[best_pos]), int(centers[best_pos])
        hops = bfs_distances(forward, best)
    return MaskAnalysis(
        spec=spec,
        n=n,
        edges=s.nnz,
        self_loops=missing.size == 0,
        missing_self_loops=missing.astype(np.int64),
        strongly_connected=num_components == 1,
        quasi_strongly_connected=quasi,
        num_components=int(num_components),
        closed_components=closed,
        center_nodes=centers,
        center_eccentricities=ecc,
        radius=radius,
        best_center=best,
        hop_distances=hops,
        band=band_of_sparse(s) if isinstance(band, str) else band,
        bfs_runs=runs,
    )

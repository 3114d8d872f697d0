"""Masks as Hasse diagrams (Li & Guo, arXiv 2606.09951): where the composed information flow ends up.

A stack of layers with masks ``M_0, M_1, ...`` (one mask repeated, or a schedule's period repeated) lets
information of token ``j`` reach token ``i`` after ``L`` layers iff ``P_L[i, j]``, ``P_L = M_{L-1} ... M_0``
(the boolean product: ``masks.composed``). With a self-loop at every token in every layer (A1), ``P_L``
only grows with ``L`` and is bounded, so it stops changing: its limit ``P_inf`` is the reflexive
transitive closure of the union of the period's graphs (edge ``j -> i`` iff some ``M_t[i, j]``). Li & Guo
prove that "with sufficient depth" the flow converges to "a Hasse diagram — a directed acyclic graph
representing a partial order" [abstract]; ``P_inf`` is a preorder on the tokens, whose strongly connected
parts (tokens that hear each other) condense to a partial order, drawn by its covering pairs.

:func:`hasse_analysis` (``HasseAnalysis``) reports, for a mask or a schedule at ``n`` tokens:

- ``depth``: the fewest layers ``L*`` with ``P_L = P_inf`` for every ``L >= L*`` (found by composing whole
  periods until one adds nothing: ``P_{L+p} = P_L`` at a period boundary means every later product is
  ``P_L``); ``pairs_by_depth`` the number of pairs of ``P_L``, ``L = 0 .. L*``. For one mask ``L*`` is the
  largest finite hop distance of its graph (``window:w``, ``causal-window:w``: ``ceil((n - 1) / w)``;
  ``causal``, ``complete``, ``block``, ``prefix``: 1; the two-stream masks: 1, being transitive);
- the condensation of ``P_inf``: ``component_of`` (int64 [n], components numbered in a topological order:
  by the number of components each hears), ``is_dag`` (the component relation is a strict partial order:
  antisymmetric and transitive);
- ``hasse_edges`` (int64 [e, 2]): the transitive reduction of that order, ``(a, b)`` when information
  flows from component ``a`` to ``b`` with no component between: ``R = H & not(H H)`` for the strict
  relation ``H``; ``partial_order_on_tokens``: every component a single token (the flow is a partial
  order on the tokens themselves, no condensing needed: causal, sliding windows one way, trees).

:func:`hasse_reference` recomputes every fact the plain way (dense boolean matrix products layer by layer,
networkx's transitive closure, condensation, DAG test and transitive reduction, and its shortest paths
for one mask); :func:`check_hasse` compares the two (the story ``hasse`` judges those comparisons).
Both need a self-loop at every token of every layer; without one the product need not converge and the
request is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.masks.base import Mask
from rankcollapse.masks.composed import BITSET_MAX_WORK, _BitsetPath, _IntervalPath, _path
from rankcollapse.masks.limits import require_memory
from rankcollapse.masks.schedule import MaskSchedule, parse_schedule
from rankcollapse.masks.sparse import SparseMask, check_n

#: Most condensation components whose order and transitive reduction are formed (a dense k x k product).
HASSE_MAX_COMPONENTS = 4096
#: Most tokens the plain reference (dense n x n products, networkx) accepts.
REFERENCE_MAX_N = 1024


@dataclass
class HasseAnalysis:
    """Where the composed flow of a mask or schedule ends up at ``n`` tokens (module docstring).

    ``limit``: ``P_inf`` in CSR form (row ``i``: the tokens whose information reaches ``i``).
    ``component_of``: int64 [n]; ``hasse_edges``: int64 [e, 2], rows ``(a, b)``: component ``a`` flows to
    ``b``, nothing between."""

    spec: str
    n: int
    period: int
    depth: int
    pairs_by_depth: list[int]
    component_of: np.ndarray
    hasse_edges: np.ndarray
    is_dag: bool
    method: str
    limit: SparseMask = field(repr=False)

    @property
    def limit_pairs(self) -> int:
        """Pairs ``(i, j)`` of ``P_inf`` (self-pairs included)."""
        return self.pairs_by_depth[-1]

    @property
    def components(self) -> int:
        """Strongly connected parts of ``P_inf`` (tokens that hear each other), the Hasse diagram's nodes."""
        return int(self.component_of.max()) + 1 if self.n else 0

    @property
    def component_sizes(self) -> np.ndarray:
        """Tokens per component, int64 [components], in the topological numbering."""
        return np.bincount(self.component_of, minlength=self.components)

    @property
    def partial_order_on_tokens(self) -> bool:
        """Every component one token: the flow orders the tokens themselves (antisymmetric ``P_inf``)."""
        return self.components == self.n

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready facts (``hasse_edges`` listed when at most 200, else counted)."""
        edges = self.hasse_edges.tolist()
        return {
            "spec": self.spec,
            "n": self.n,
            "period": self.period,
            "depth": self.depth,
            "pairs_by_depth": list(self.pairs_by_depth),
            "limit_pairs": self.limit_pairs,
            "components": self.components,
            "component_sizes_max": int(self.component_sizes.max()) if self.n else 0,
            "is_dag": self.is_dag,
            "partial_order_on_tokens": self.partial_order_on_tokens,
            "hasse_edge_count": len(edges),
            "hasse_edges": edges if len(edges) <= 200 else None,
            "method": self.method,
            "source": "ours (Li & Guo 2026's limit: the reflexive transitive closure, condensed, reduced)",
        }


def _schedule(mask: MaskSchedule | Mask | str | Any) -> MaskSchedule:
    return parse_schedule(mask)


def _count(path: _IntervalPath | _BitsetPath, state: Any) -> int:
    if isinstance(path, _IntervalPath):
        return int((state[1] - state[0]).sum())
    return int(np.bitwise_count(state).sum())


def _to_sparse(path: _IntervalPath | _BitsetPath, state: Any, n: int) -> SparseMask:
    if isinstance(path, _IntervalPath):
        return SparseMask.from_intervals(*state)
    require_memory(float(n) * n, f"the composed flow at n={n} (dense)")
    dense = np.unpackbits(state.view(np.uint8), axis=1, bitorder="little")[:, :n].astype(bool)
    return SparseMask.from_numpy(dense)


def _require_self_loops(sched: MaskSchedule, n: int) -> None:
    for m in dict.fromkeys(sched.period):
        missing = m.analysis(n).missing_self_loops
        if len(missing):
            first = ", ".join(str(int(v)) for v in list(missing)[:5])
            raise RankCollapseError(
                f"mask {quote(m.spec)} has no self-loop at token(s) {first} at n={n}: without one in every "
                "layer the composed flow need not converge; allowed: masks with every self-loop (A1)"
            )


def limit_depth(
    mask: MaskSchedule | Mask | str, n: int
) -> tuple[list[int], Any, _IntervalPath | _BitsetPath]:
    """``(pairs_by_depth, state of P_inf, path)``: whole periods composed until one adds nothing (module
    docstring); ``pairs_by_depth`` cut at the depth ``L*`` where ``P_L`` reaches its limit."""
    n = check_n(n)
    sched = _schedule(mask)
    _require_self_loops(sched, n)
    period = list(sched.period)
    p = len(period)
    path = _path(period, n)
    words = -(-n // 64)
    per_layer = [(m._nnz_hint(n) + n) * words for m in period]
    state = path.identity()
    pairs = [n]
    work = 0.0
    while True:
        before = pairs[-1]
        for t in range(p):
            if isinstance(path, _BitsetPath):
                work += per_layer[t]
                if work > BITSET_MAX_WORK:
                    raise RankCollapseError(
                        f"the composed flow of {quote(sched.spec)} at n={n} needs more than "
                        f"{BITSET_MAX_WORK:.0e} word operations; allowed: a smaller n or interval masks"
                    )
            state = path.step(state, t)
            pairs.append(_count(path, state))
        if pairs[-1] == before:
            break
        if len(pairs) > p * (n + 1) + 1:  # impossible with self-loops: each useful period adds a pair
            raise RankCollapseError(f"the composed flow of {quote(sched.spec)} did not settle at n={n}")
    depth = pairs.index(pairs[-1])  # monotone: the first depth at the limit's size is the limit
    return pairs[: depth + 1], state, path


def composed_flows(mask: MaskSchedule | Mask | str, n: int, depth: int) -> list[np.ndarray]:
    """``[P_1, ..., P_depth]``, each a dense bool ``[n, n]`` (``P_L[i, j]``: token ``j``'s information reaches
    token ``i`` after ``L`` layers), of the mask or the schedule's period repeated to ``depth`` layers;
    ``n <= REFERENCE_MAX_N``."""
    n = check_n(n)
    if n > REFERENCE_MAX_N:
        raise RankCollapseError(f"composed_flows builds dense products: n <= {REFERENCE_MAX_N}, got n={n}")
    sched = _schedule(mask)
    sched = MaskSchedule(sched.period, depth)
    path = _path(list(sched.masks), n)
    state, out = path.identity(), []
    for t in range(depth):
        state = path.step(state, t)
        out.append(_to_sparse(path, state, n).to_numpy())
    return out


def _order(limit: SparseMask) -> tuple[np.ndarray, np.ndarray]:
    """``(component_of, strict)``: the condensation of a reflexive transitive ``limit``, components numbered
    in a topological order, and its strict relation ``strict[b, a]`` (bool [k, k]): ``b`` hears ``a``."""
    from scipy.sparse.csgraph import connected_components

    k, labels = connected_components(limit.to_scipy(), directed=True, connection="strong")
    if k > HASSE_MAX_COMPONENTS:
        raise RankCollapseError(
            f"the flow has {k} strongly connected parts; allowed: at most {HASSE_MAX_COMPONENTS} for the "
            "Hasse diagram (a dense product of their relation)"
        )
    rows = labels[limit.row_ids()]
    cols = labels[limit.indices]
    hears = np.zeros((k, k), dtype=bool)
    hears[rows, cols] = True
    np.fill_diagonal(hears, False)
    first = np.full(k, limit.n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(limit.n))
    order = np.lexsort((first, hears.sum(axis=1)))  # fewer heard first (a topological order), then by token
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    return rank[labels].astype(np.int64), hears[np.ix_(order, order)]


def hasse_analysis(mask: MaskSchedule | Mask | str, n: int) -> HasseAnalysis:
    """Facts of the limit of the composed flow of ``mask`` (a mask, a spec, or a schedule repeated without
    end) at ``n`` tokens: its depth, condensation and transitive reduction (module docstring)."""
    sched = _schedule(mask)
    pairs, state, path = limit_depth(sched, n)
    limit = _to_sparse(path, state, n)
    component_of, strict = _order(limit)
    s = strict.astype(np.float32)
    two_step = (s @ s) > 0  # b hears a through some c
    is_dag = not bool((strict & strict.T).any()) and not bool((two_step & ~strict).any())
    cover = strict & ~two_step
    b, a = np.nonzero(cover)
    edges = np.stack([a, b], axis=1).astype(np.int64) if a.size else np.zeros((0, 2), dtype=np.int64)
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))] if len(edges) else edges
    return HasseAnalysis(
        spec=sched.spec, n=n, period=len(sched.period), depth=len(pairs) - 1, pairs_by_depth=pairs,
        component_of=component_of, hasse_edges=edges, is_dag=is_dag, method=path.method, limit=limit,
    )


@dataclass
class HasseReference:
    """The plain reference's facts (:func:`hasse_reference`): ``limit`` (bool [n, n]), ``depth``, networkx's
    ``is_dag`` of the condensation, its transitive reduction as token-set pairs, and, for one mask, the
    largest finite shortest-path distance of its graph (None for a schedule)."""

    limit: np.ndarray
    depth: int
    is_dag: bool
    reduction: set[tuple[frozenset[int], frozenset[int]]]
    longest_shortest_path: int | None


def hasse_reference(mask: MaskSchedule | Mask | str, n: int) -> HasseReference:
    """The facts of :func:`hasse_analysis`, recomputed the plain way: ``P_{L+1} = (M_t P_L > 0)`` by dense
    0/1 products until a whole period adds nothing; networkx's ``transitive_closure`` of the union graph
    (must equal the limit: checked by :func:`check_hasse`), ``condensation``, ``is_directed_acyclic_graph``
    and ``transitive_reduction``; for one mask ``max`` of the finite ``all_pairs_shortest_path_length``."""
    import networkx as nx

    n = check_n(n)
    if n > REFERENCE_MAX_N:
        raise RankCollapseError(f"the plain reference takes n <= {REFERENCE_MAX_N}, got n={n}")
    sched = _schedule(mask)
    _require_self_loops(sched, n)
    dense = [m.dense_numpy(n).astype(np.float64) for m in sched.period]  # 0/1: exact products in float64
    p = len(dense)
    reach = np.eye(n)
    sizes = [n]
    while True:
        before = sizes[-1]
        for m in dense:
            reach = ((m @ reach) > 0).astype(np.float64)
            sizes.append(int(reach.sum()))
        if sizes[-1] == before:
            break
    depth = sizes.index(sizes[-1])
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for m in dense:
        q, k = np.nonzero(m)
        graph.add_edges_from(zip(k.tolist(), q.tolist(), strict=True))  # j -> i iff M[i, j]
    closure = nx.transitive_closure(graph, reflexive=True)
    limit = np.zeros((n, n), dtype=bool)
    for j, i in closure.edges():
        limit[i, j] = True
    cond = nx.condensation(graph)
    members = {c: frozenset(int(v) for v in cond.nodes[c]["members"]) for c in cond.nodes}
    reduction = {(members[a], members[b]) for a, b in nx.transitive_reduction(cond).edges()}
    longest = None
    if p == 1:
        lengths = dict(nx.all_pairs_shortest_path_length(graph))
        longest = max(max(d.values()) for d in lengths.values())
    return HasseReference(limit, depth, bool(nx.is_directed_acyclic_graph(cond)), reduction, longest)


@dataclass(frozen=True)
class HasseCheck:
    """:func:`hasse_analysis` against :func:`hasse_reference` (each True where they agree)."""

    analysis: HasseAnalysis
    reference_depth: int
    longest_shortest_path: int | None
    limit_is_closure: bool
    depth_matches: bool
    condensation_is_dag: bool
    reduction_matches: bool

    @property
    def holds(self) -> bool:
        """Every comparison agrees (and, for one mask, the depth is the longest shortest path)."""
        return (self.limit_is_closure and self.depth_matches and self.condensation_is_dag
                and self.reduction_matches and self.analysis.is_dag)


def check_hasse(mask: MaskSchedule | Mask | str, n: int) -> HasseCheck:
    """Compare every fact of :func:`hasse_analysis` with :func:`hasse_reference` (module docstring)."""
    ours = hasse_analysis(mask, n)
    ref = hasse_reference(mask, n)
    comp = ours.component_of
    groups = [frozenset(np.flatnonzero(comp == c).tolist()) for c in range(ours.components)]
    reduction = {(groups[a], groups[b]) for a, b in ours.hasse_edges.tolist()}
    depth_ok = ours.depth == ref.depth and (ref.longest_shortest_path is None
                                             or ours.depth == max(ref.longest_shortest_path, 0))
    return HasseCheck(
        analysis=ours,
        reference_depth=ref.depth,
        longest_shortest_path=ref.longest_shortest_path,
        limit_is_closure=bool(np.array_equal(ours.limit.to_numpy(), ref.limit)),
        depth_matches=bool(depth_ok),
        condensation_is_dag=ref.is_dag,
        reduction_matches=reduction == ref.reduction,
    )


def window_depth(n: int, w: int) -> int:
    """The closed form of ``depth`` for ``window:w`` and ``causal-window:w`` (``w >= 1``):
    ``ceil((n - 1) / w)`` (the farthest pair, ``n - 1`` apart, moves ``w`` per layer; 0 for ``n = 1``)."""
    if w < 1:
        raise RankCollapseError(f"w={w!r} is invalid; allowed: an integer >= 1")
    return math.ceil((check_n(n) - 1) / w)

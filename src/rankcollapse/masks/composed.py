"""A mask schedule as a sequence of graphs: the composed (product) graph and what depth buys.

For layer masks ``M_0 .. M_{L-1}`` (layer ``t`` maps ``X(t)`` to ``X(t + 1)``) the *composed graph*
of layers ``a .. b-1`` is the boolean product ``P = M_{b-1} ... M_a``: edge ``j -> i`` iff a path
``j -> ... -> i`` takes one edge of layer ``t`` at step ``t`` (self-loops let it wait). The support
of ``A(b-1) ... A(a)`` is exactly ``P`` when every attention weight on an edge is positive.

``analyze_schedule(schedule, n)`` reports

- ``product``: the graph facts (``MaskAnalysis``) of ``P_L`` over all ``L`` layers: reachability,
  closed components, center nodes, radius (in passes through the whole stack);
- ``layers_to_center``: the fewest layers ``k`` after which some token is in the context of every
  token (``P_k`` has a column of ones: a one-hop center), None if the ``L`` layers never get there.
  For one mask repeated, this is that mask's radius;
- ``windows``: consecutive layer windows ``[a, b)``, chosen greedily from layer 0, each of whose
  products has a one-hop center, and the Theorem-1-style bound over them (ours: Theorem 1's
  argument applied to each window; under A1-A3 and ``A_ij(t) >= eps`` on every edge, the window's
  product has a column ``>= eps^(b-a)``, which contracts the spread by ``1 - eps^(b-a)``)::

      mu(X(L)) <= C * prod_w (1 - eps^(b_w - a_w)).

  For one mask of radius ``r`` over ``t`` layers this is ``(1 - eps^r)^floor(t/r)``, Theorem 1's rate.

Two exact paths: *intervals* (every layer an interval mask, ``masks/intervals.py``: O(n) per
layer, any n) and *bitset* (rows of ``P`` packed in uint64 words: O(edges * n / 64) per layer,
refused above ``BITSET_MAX_WORK`` word operations). With self-loops in every layer a product that
became complete stays complete, so the product pass stops there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import human_bytes
from rankcollapse.masks.base import Mask, check_n
from rankcollapse.masks.graph import MaskAnalysis, analyze_sparse
from rankcollapse.masks.intervals import compose, has_one_hop_center, interval_analysis, one_hop_centers
from rankcollapse.masks.limits import require_memory
from rankcollapse.masks.schedule import MaskSchedule, parse_schedule
from rankcollapse.masks.sparse import SparseMask

BITSET_MAX_WORK = 2e9
"""Largest ``2 * sum_t (nnz(M_t) + n) * ceil(n / 64)`` (uint64 word operations: the product pass and
the windows pass) the bitset path accepts; about 25 ns each on a loaded 2-core machine."""

_CHUNK_BYTES = 1 << 26


@dataclass
class ScheduleAnalysis:
    """Facts of a schedule at length ``n`` (module docstring). ``first_centers``: the centers of the first
    window's composed graph, sorted, Python ints (built from a numpy array)."""

    spec: str
    n: int
    depth: int
    layer_specs: list[str]
    layer_radii: list[int | None]
    self_loops: bool
    product: MaskAnalysis
    layers_to_center: int | None
    first_centers: list[int]
    windows: list[tuple[int, int]]
    method: str
    period: int = field(default=1)

    def __post_init__(self) -> None:
        self.first_centers = np.asarray(self.first_centers, dtype=np.int64).reshape(-1).tolist()

    @property
    def theorem1_applies(self) -> bool:
        """Self-loops in every layer and at least one window with a one-hop center."""
        return self.self_loops and bool(self.windows)

    def log_bound(self, eps: float) -> float:
        """``log prod_w (1 - eps^(b_w - a_w))`` (natural log; 0 without windows)."""
        if not 0.0 < eps <= 1.0:
            raise RankCollapseError(f"eps={eps!r} is invalid; allowed: 0 < eps <= 1")
        return float(sum(math.log1p(-(eps ** (b - a))) if eps ** (b - a) < 1 else -math.inf
                         for a, b in self.windows))

    def to_frame(self) -> Any:
        """One row per layer, a pandas DataFrame: ``layer`` (1..L), ``spec``, ``radius`` (None
        without a center) and ``window`` (index of the window of ``windows`` the layer is in, -1
        after the last). The composed graph's own table: ``product.to_frame()``."""
        import pandas as pd

        window = [-1] * self.depth
        for k, (a, b) in enumerate(self.windows):
            for t in range(a, b):
                window[t] = k
        return pd.DataFrame({"layer": range(1, self.depth + 1), "spec": self.layer_specs,
                             "radius": self.layer_radii, "window": window})

    def to_dict(self, full: bool | None = None) -> dict[str, Any]:
        """JSON-ready dict; ``product`` is ``MaskAnalysis.to_dict(full)`` of the composed graph."""
        lengths = [b - a for a, b in self.windows]
        return {
            "schedule": self.spec,
            "n": self.n,
            "layers": self.depth,
            "period": self.period,
            "method": self.method,
            "layer_specs": self.layer_specs,
            "layer_radii": self.layer_radii,
            "self_loops": self.self_loops,
            "layers_to_center": self.layers_to_center,
            "first_centers": list(self.first_centers),
            "windows": [list(w) for w in self.windows],
            "theorem1_product": {
                "applies": self.theorem1_applies,
                "window_lengths": lengths,
                "bound": "mu(X(L)) <= C * prod_w (1 - eps^k_w), k_w = window_lengths",
                "source": "ours (Theorem 1's argument per window)",
            },
            "product": self.product.to_dict(full),
        }


class _IntervalPath:
    method = "intervals"

    def __init__(self, forms: list[tuple[np.ndarray, np.ndarray]], n: int) -> None:
        self.forms, self.n = forms, n

    def identity(self) -> tuple[np.ndarray, np.ndarray]:
        i = np.arange(self.n, dtype=np.int64)
        return i, i + 1

    def step(self, state: Any, t: int) -> Any:
        return compose(state, self.forms[t])

    def has_center(self, state: Any) -> bool:
        return has_one_hop_center(state)

    def is_full(self, state: Any) -> bool:
        return bool((state[0] == 0).all() and (state[1] == self.n).all())

    def centers(self, state: Any) -> np.ndarray:
        return one_hop_centers(state)

    def analysis(self, state: Any, label: str) -> MaskAnalysis:
        return MaskAnalysis(spec=label, **interval_analysis(*state))


class _BitsetPath:
    """``P`` as uint64 [n, W]: bit ``j`` of row ``i`` set iff ``P[i, j]``."""

    method = "bitset"

    def __init__(self, forms: list[SparseMask], n: int) -> None:
        self.forms, self.n, self.words = forms, n, -(-n // 64)

    def identity(self) -> np.ndarray:
        i = np.arange(self.n)
        out = np.zeros((self.n, self.words), dtype=np.uint64)
        out[i, i // 64] = np.left_shift(np.uint64(1), (i % 64).astype(np.uint64))
        return out

    def step(self, state: np.ndarray, t: int) -> np.ndarray:
        """Row ``i`` of ``M_t P``: OR of the rows ``k`` of ``P`` with ``M_t[i, k]``, in row chunks."""
        s = self.forms[t]
        out = np.zeros_like(state)
        per_row = max(1, _CHUNK_BYTES // (8 * self.words))
        r0 = 0
        while r0 < s.n:
            a = int(s.indptr[r0])
            r1 = int(np.searchsorted(s.indptr, a + per_row, side="right")) - 1
            r1 = min(max(r1, r0 + 1), s.n)
            b = int(s.indptr[r1])
            starts = s.indptr[r0:r1] - a
            nonempty = np.flatnonzero(np.diff(s.indptr[r0 : r1 + 1]) > 0)
            if nonempty.size:
                gathered = state[s.indices[a:b]]
                out[r0 + nonempty] = np.bitwise_or.reduceat(gathered, starts[nonempty], axis=0)
            r0 = r1
        return out

    def _column_and(self, state: np.ndarray) -> np.ndarray:
        return np.bitwise_and.reduce(state, axis=0)

    def has_center(self, state: np.ndarray) -> bool:
        return bool(self._column_and(state).any())

    def is_full(self, state: np.ndarray) -> bool:
        return int(np.bitwise_count(state).sum()) == self.n * self.n

    def centers(self, state: np.ndarray) -> np.ndarray:
        bits = np.unpackbits(self._column_and(state).view(np.uint8), bitorder="little")[: self.n]
        return np.flatnonzero(bits).astype(np.int64)

    def analysis(self, state: np.ndarray, label: str) -> MaskAnalysis:
        dense = np.unpackbits(state.view(np.uint8), axis=1, bitorder="little")[:, : self.n].astype(bool)
        return analyze_sparse(SparseMask.from_numpy(dense), label)


def _path(masks: list[Mask], n: int) -> _IntervalPath | _BitsetPath:
    distinct = list(dict.fromkeys(masks))
    forms = {m: m.intervals(n) for m in distinct}
    if all(f is not None for f in forms.values()):
        return _IntervalPath([forms[m] for m in masks], n)
    words = -(-n // 64)
    work = 2 * sum(m._nnz_hint(n) + n for m in masks) * words  # before building anything
    if work > BITSET_MAX_WORK:
        raise RankCollapseError(
            f"composing the schedule at n={n} needs about {work:.3g} word operations (estimate, "
            f"{human_bytes(8 * work)} moved); allowed: at most {BITSET_MAX_WORK:.0e} (a smaller n, fewer "
            "layers, or interval masks: complete, causal, window, causal-window, block, prefix, document)"
        )
    require_memory(3 * 8.0 * n * words, f"the composed graph of the schedule at n={n} (bit matrix)")
    sparse = {m: m.sparse(n) for m in distinct}
    return _BitsetPath([sparse[m] for m in masks], n)


def analyze_schedule(
    schedule: MaskSchedule | str | Mask, n: int, depth: int | None = None
) -> ScheduleAnalysis:
    """Facts of a schedule (spec, ``Mask`` or ``MaskSchedule``) at length ``n`` (module docstring)."""
    n = check_n(n)
    sched = parse_schedule(schedule, depth)
    masks = list(sched.masks)
    path = _path(masks, n)
    per_mask = {m: m.analysis(n) for m in dict.fromkeys(masks)}
    self_loops = all(a.self_loops for a in per_mask.values())
    state = path.identity()
    for t in range(len(masks)):
        state = path.step(state, t)
        if self_loops and path.is_full(state):  # complete stays complete when every layer has self-loops
            break
    product = path.analysis(state, f"<product of {len(masks)} layers>")
    windows: list[tuple[int, int]] = []
    first_centers = np.zeros(0, dtype=np.int64)
    start, state = 0, path.identity()
    for t in range(len(masks)):
        state = path.step(state, t)
        if path.has_center(state):
            if not windows:
                first_centers = path.centers(state)
            windows.append((start, t + 1))
            start, state = t + 1, path.identity()
    return ScheduleAnalysis(
        spec=sched.spec,
        n=n,
        depth=sched.depth,
        layer_specs=[m.spec for m in masks],
        layer_radii=[per_mask[m].radius for m in masks],
        self_loops=self_loops,
        product=product,
        layers_to_center=windows[0][1] if windows else None,
        first_centers=first_centers,
        windows=windows,
        method=path.method,
        period=len(sched.period),
    )

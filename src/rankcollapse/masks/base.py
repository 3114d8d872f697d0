"""The ``Mask`` interface and the ``&`` / ``|`` combinators.

A ``Mask`` is a rule, parsed once, that gives a boolean matrix ``M [n, n]`` for any sequence
length ``n >= 1``: ``M[i, j]`` True iff query token ``i`` may attend to key token ``j``.
Graph convention: edge ``j -> i`` iff ``M[i, j]``.

Each ``Mask`` object caches, per length ``n``, what it has computed: the dense form, the sparse
form, the band, completeness and the graph analysis. Each is built lazily, at most once per ``n``
(``cache_info()`` counts the builds). The cache keeps the ``CACHE_LENGTHS`` most recently used
lengths; a dense form of more than ``CACHE_MAX_ENTRIES`` pairs, or a sparse form with more allowed
pairs, is built but not kept. ``dense(n)`` returns a fresh tensor each call (callers may modify
it); cached sparse forms are read-only arrays.
"""

from __future__ import annotations

import operator
import threading
from abc import ABC, abstractmethod
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rankcollapse.edge.validate import quote
from rankcollapse.masks.limits import DENSE_BYTES_PER_PAIR, SPARSE_BYTES_PER_EDGE, require_memory
from rankcollapse.masks.sparse import SparseMask, band_of_sparse, check_n

if TYPE_CHECKING:  # torch is imported only where a tensor is made (keeps `rankcollapse mask` light)
    import torch

    from rankcollapse.masks.analysis import MaskAnalysis

CACHE_LENGTHS = 8
"""Lengths ``n`` whose forms a ``Mask`` keeps (least recently used dropped first)."""

CACHE_MAX_ENTRIES = 2**24
"""Largest dense form (``n * n``) or sparse form (``nnz``) kept in the cache."""

_CACHE_LOCK = threading.Lock()  # guards the cache dictionaries (builds run outside it)

# A vectorised rule: (i, j) index arrays (numpy or torch, broadcastable) -> boolean array.
Predicate = Callable[[Any, Any], Any]

# Interval form: row i allows keys start[i] <= j < stop[i] (int64 [n] each); see masks/intervals.py.
Intervals = tuple[np.ndarray, np.ndarray]


class Mask(ABC):
    """A mask family (or a combination) that yields ``M [n, n]`` for every ``n >= 1``."""

    @property
    @abstractmethod
    def spec(self) -> str:
        """Canonical spec string; ``parse_mask(m.spec)`` gives the same mask."""

    @abstractmethod
    def predicate(self, n: int) -> Predicate:
        """Vectorised rule ``(i, j) -> M[i, j]`` for length ``n``; works on numpy arrays and torch
        tensors (only operators are used), so it doubles as a FlexAttention ``mask_mod`` body."""

    @abstractmethod
    def _sparse(self, n: int) -> SparseMask:
        """Sparse form, built without an n x n matrix where the family allows it."""

    def _band(self, n: int) -> tuple[int, int] | None:
        iv = self.intervals(n)
        if iv is not None:
            from rankcollapse.masks.intervals import _band

            return _band(*iv)
        return band_of_sparse(self.sparse(n))

    def _intervals(self, n: int) -> Intervals | None:
        """Closed-form interval form (monotone runs containing the diagonal), or None."""
        return None

    def _nnz_hint(self, n: int) -> float:
        """Rough number of allowed pairs at length n (picks the cheapest part of an ``&``)."""
        return float(n) * n

    #: True when ``predicate`` is a cheap closed-form rule (no n x n table behind it).
    cheap_rule: bool = True

    # ---- the per-length cache -----------------------------------------------------------------
    def _cached(
        self, n: int, kind: str, build: Callable[[], Any], keep: bool | Callable[[Any], bool] = True
    ) -> Any:
        """The ``kind`` form at length ``n``: from the cache, else ``build()`` (counted), kept if ``keep``."""
        with _CACHE_LOCK:
            memo: OrderedDict[int, dict[str, Any]] | None = self.__dict__.get("_memo")
            if memo is None:
                memo = self.__dict__["_memo"] = OrderedDict()
                self.__dict__["_builds"] = Counter()
            forms = memo.get(n)
            if forms is None:
                forms = memo[n] = {}
                while len(memo) > CACHE_LENGTHS:
                    memo.popitem(last=False)
            else:
                memo.move_to_end(n)
            if kind in forms:
                return forms[kind]
        value = build()
        with _CACHE_LOCK:
            self.__dict__.setdefault("_builds", Counter())[kind] += 1
            if keep(value) if callable(keep) else keep:
                forms[kind] = value
        return value

    def cache_info(self) -> dict[str, Any]:
        """``{"lengths": [cached n ...], "builds": {kind: count}}``; kinds: dense, sparse, band,
        complete, analysis. A build count above the number of lengths used means a cache miss."""
        memo = self.__dict__.get("_memo") or {}
        return {"lengths": list(memo), "builds": dict(self.__dict__.get("_builds") or {})}

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the rule, not the cache (a worker process rebuilds what it uses)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_memo", "_builds")}

    def clear_cache(self) -> None:
        """Forget every cached form (build counts restart at zero)."""
        self.__dict__.pop("_memo", None)
        self.__dict__.pop("_builds", None)

    def _check_dense_size(self, n: int) -> None:
        what = f"the dense form of mask {quote(self.spec)} at n={n}"
        require_memory(DENSE_BYTES_PER_PAIR * float(n) * n, what, "allowed: a smaller n (the graph analysis "
                       "does not need the dense form)")

    def _check_sparse_size(
        self, n: int, per_edge: float = SPARSE_BYTES_PER_EDGE, what: str = "sparse form"
    ) -> None:
        require_memory(per_edge * (self._nnz_hint(n) + n), f"the {what} of mask {quote(self.spec)} at n={n}")

    # ---- public API ---------------------------------------------------------------------------
    def dense_numpy(self, n: int) -> np.ndarray:
        """Boolean numpy [n, n] (a fresh copy) from the vectorised rule on the index grid (O(n^2)).

        Refused (``RankCollapseError`` naming the estimate) when ``n^2`` pairs do not fit in memory.
        """
        n = check_n(n)

        def build() -> np.ndarray:
            self._check_dense_size(n)
            i = np.arange(n, dtype=np.int64)
            out = self.predicate(n)(i[:, None], i[None, :])
            table = np.broadcast_to(np.asarray(out, dtype=bool), (n, n)).copy()
            table.setflags(write=False)
            return table

        return self._cached(n, "dense", build, keep=n * n <= CACHE_MAX_ENTRIES).copy()

    def dense(self, n: int) -> torch.Tensor:
        """``torch.bool [n, n]``: ``M[i, j]`` True iff query ``i`` may attend to key ``j`` (fresh tensor)."""
        import torch

        return torch.from_numpy(self.dense_numpy(n))

    def sparse(self, n: int) -> SparseMask:
        """CSR form (int64 ``indptr [n+1]``, ``indices [nnz]``), equal to ``dense(n)``; cached, read-only."""
        n = check_n(n)

        def build() -> SparseMask:
            self._check_sparse_size(n)
            s = self._sparse(n)
            s.indptr.setflags(write=False)
            s.indices.setflags(write=False)
            return s

        return self._cached(n, "sparse", build, keep=lambda s: s.nnz <= CACHE_MAX_ENTRIES)

    def band(self, n: int) -> tuple[int, int] | None:
        """``(lo, hi)`` if ``M[i, j] iff lo <= j - i <= hi`` for ``0 <= i, j < n``, else None.

        Tight offsets: complete -> ``(-(n-1), n-1)``, causal -> ``(-(n-1), 0)``,
        ``window:w=W`` -> ``(-min(W, n-1), min(W, n-1))``, ``causal-window:w=W`` -> ``(-min(W, n-1), 0)``;
        ``a & b`` of bands is the intersection, ``a | b`` the union (both contain offset 0).
        """
        n = check_n(n)
        return self._cached(n, "band", lambda: self._band(n))

    def is_complete(self, n: int) -> bool:
        """True iff every pair (i, j) is allowed at length ``n``."""
        n = check_n(n)
        return self._cached(n, "complete", lambda: self.band(n) == (-(n - 1), n - 1))

    def intervals(self, n: int) -> Intervals | None:
        """``(start, stop)`` int64 [n] if row ``i`` is the run ``start[i] <= j < stop[i]`` of an
        interval mask (``masks/intervals.py``), from the family's closed form; else None. Cached."""
        n = check_n(n)

        def build() -> Intervals | None:
            from rankcollapse.masks.intervals import check_interval_size

            if type(self)._intervals is Mask._intervals:  # the family has no interval form
                return None
            check_interval_size(n, f"the interval form of mask {quote(self.spec)} at n={n}")
            iv = self._intervals(n)
            if iv is not None:
                for a in iv:
                    a.setflags(write=False)
            return iv

        return self._cached(n, "intervals", build)

    def analysis(self, n: int) -> MaskAnalysis:
        """Graph facts at length ``n`` (``rankcollapse.masks.graph.analyze_mask``), computed once per n.

        Interval masks (complete, causal, windows, block, prefix, document and their ``&`` / ``|``)
        are analysed from their runs in O(n log n) (``masks/intervals.py``), for any n whose O(n)
        arrays fit; the others on the sparse form.
        """
        n = check_n(n)

        def build() -> MaskAnalysis:
            from rankcollapse.masks.analysis import MaskAnalysis, analyze_sparse
            from rankcollapse.masks.intervals import interval_analysis
            from rankcollapse.masks.limits import ANALYSIS_BYTES_PER_EDGE

            spec = None if self.spec.startswith("<") else self.spec  # a matrix has a label, not a spec
            iv = self.intervals(n)
            if iv is not None:
                return MaskAnalysis(spec=spec, **interval_analysis(*iv))
            self._check_sparse_size(n, ANALYSIS_BYTES_PER_EDGE, "graph analysis")
            return analyze_sparse(self.sparse(n), spec, band=self.band(n))

        return self._cached(n, "analysis", build)

    def radius(self, n: int) -> int | None:
        """Radius of the graph at length ``n`` (None without a center); from the cached analysis."""
        return self.analysis(n).radius

    def documents(self, n: int) -> list[np.ndarray]:
        """Independent parts at length ``n`` (weakly connected components, ordered by first token;
        ``rankcollapse.masks.analysis.documents``), computed once per n. One part for a connected
        mask; one per document of ``document:``, per block of ``block:``."""
        n = check_n(n)

        def build() -> list[np.ndarray]:
            from rankcollapse.masks.analysis import documents
            from rankcollapse.masks.limits import ANALYSIS_BYTES_PER_EDGE

            if self.is_complete(n) or self.analysis(n).quasi_strongly_connected:
                return [np.arange(n, dtype=np.int64)]  # a center reaches every token: one part
            self._check_sparse_size(n, ANALYSIS_BYTES_PER_EDGE, "document split")
            parts = documents(self.sparse(n))
            for p in parts:
                p.setflags(write=False)
            return parts

        return self._cached(n, "documents", build)

    def __and__(self, other: Mask) -> Mask:
        return AndMask((self, other))

    def __or__(self, other: Mask) -> Mask:
        return OrMask((self, other))

    def _identity(self) -> Any:
        """What makes two masks one: the canonical spec; a mask holding a Python object (a predicate)
        overrides it with that object's identity."""
        return self.spec

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mask) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"parse_mask({self.spec!r})"


class _Combined(Mask):
    op: str
    combine: Callable[[Any, Any], Any]  # elementwise & or | of two boolean arrays

    def __init__(self, parts: tuple[Mask, ...]) -> None:
        flat: list[Mask] = []
        for part in parts:
            flat.extend(part.parts if type(part) is type(self) else (part,))
        self.parts = tuple(flat)

    def _identity(self) -> Any:
        return (self.op, tuple(p._identity() for p in self.parts))

    def predicate(self, n: int) -> Predicate:
        preds = [p.predicate(n) for p in self.parts]
        combine = type(self).combine

        def rule(i: Any, j: Any) -> Any:
            out = preds[0](i, j)
            for pred in preds[1:]:
                out = combine(out, pred(i, j))
            return out

        return rule

    @property
    def cheap_rule(self) -> bool:
        return all(p.cheap_rule for p in self.parts)


class AndMask(_Combined):
    """``a & b``: allowed iff allowed by every part. Binds tighter than ``|``."""

    op = "&"
    combine = operator.and_

    @property
    def spec(self) -> str:
        return "&".join(f"({p.spec})" if isinstance(p, OrMask) else p.spec for p in self.parts)

    def _nnz_hint(self, n: int) -> float:
        return min(p._nnz_hint(n) for p in self.parts)

    def _sparse(self, n: int) -> SparseMask:
        """Sparse form of the sparsest part, then filtered by the cheap rules of the others
        (O(nnz) predicate calls) and intersected with the sparse forms of table-backed parts."""
        parts = sorted(self.parts, key=lambda p: p._nnz_hint(n))
        out = parts[0]._sparse(n)
        for p in parts[1:]:
            out = out.filter(p.predicate(n)) if p.cheap_rule else out & p._sparse(n)
        return out

    def _band(self, n: int) -> tuple[int, int] | None:
        bands = [p._band(n) for p in self.parts]
        if any(b is None for b in bands):
            return Mask._band(self, n)
        return max(b[0] for b in bands), min(b[1] for b in bands)

    def _intervals(self, n: int) -> Intervals | None:
        """Intersection of runs that all contain ``i``: ``(max start, min stop)``."""
        forms = [p._intervals(n) for p in self.parts]
        if any(f is None for f in forms):
            return None
        return np.max([f[0] for f in forms], axis=0), np.min([f[1] for f in forms], axis=0)


class OrMask(_Combined):
    """``a | b``: allowed iff allowed by some part."""

    op = "|"
    combine = operator.or_

    @property
    def spec(self) -> str:
        return "|".join(p.spec for p in self.parts)

    def _nnz_hint(self, n: int) -> float:
        return min(float(n) * n, sum(p._nnz_hint(n) for p in self.parts))

    def _sparse(self, n: int) -> SparseMask:
        out = self.parts[0]._sparse(n)
        for p in self.parts[1:]:
            out = out | p._sparse(n)
        return out

    def _band(self, n: int) -> tuple[int, int] | None:
        bands = [p._band(n) for p in self.parts]
        if any(b is None for b in bands):
            return Mask._band(self, n)
        return min(b[0] for b in bands), max(b[1] for b in bands)

    def _intervals(self, n: int) -> Intervals | None:
        """Union of runs that all contain ``i`` (so they overlap): ``(min start, max stop)``."""
        forms = [p._intervals(n) for p in self.parts]
        if any(f is None for f in forms):
            return None
        return np.min([f[0] for f in forms], axis=0), np.max([f[1] for f in forms], axis=0)

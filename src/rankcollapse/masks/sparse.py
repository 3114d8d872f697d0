"""Sparse (CSR) form of a mask: memory and graph work scale with the number of allowed pairs.

``SparseMask(n, indptr, indices)``: row ``i`` is query ``i``; its allowed keys are
``indices[indptr[i]:indptr[i + 1]]``, sorted ascending, no duplicates. Both arrays are int64.
This is exactly the CSR layout of the boolean matrix ``M [n, n]`` with ``M[i, j]`` True iff
query ``i`` may attend to key ``j`` (graph edge ``j -> i``).

Builders make band-like families directly in this form (``from_intervals``,
``from_two_intervals``, ``from_row_counts``); ``&`` and ``|`` combine two sparse forms without
densifying (scipy's sorted CSR intersection / union, O(nnz)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rankcollapse.edge.errors import RankCollapseError

if TYPE_CHECKING:  # scipy and torch are imported where used (keeps `rankcollapse mask` start-up light)
    import scipy.sparse as sp
    import torch


@dataclass(frozen=True, eq=False)
class SparseMask:
    """CSR boolean mask. ``indptr``: int64 [n + 1]; ``indices``: int64 [nnz], sorted within rows."""

    n: int
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def nnz(self) -> int:
        """Number of allowed (query, key) pairs, self-loops included."""
        return int(self.indptr[-1])

    def row(self, i: int) -> np.ndarray:
        """Keys that query ``i`` may attend to (sorted)."""
        return self.indices[self.indptr[i] : self.indptr[i + 1]]

    def row_ids(self) -> np.ndarray:
        """Query index of every stored entry: int64 [nnz] (the COO row array)."""
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))

    def has_self_loops(self) -> bool:
        """True iff ``M[i, i]`` for every ``i``."""
        diag = np.zeros(self.n, dtype=bool)
        rows = self.row_ids()
        diag[rows[rows == self.indices]] = True
        return bool(diag.all())

    def to_numpy(self) -> np.ndarray:
        """Dense boolean [n, n] (builds n^2 entries: for tests and small n)."""
        out = np.zeros((self.n, self.n), dtype=bool)
        out[self.row_ids(), self.indices] = True
        return out

    def to_torch(self) -> torch.Tensor:
        """Dense ``torch.bool`` [n, n]."""
        import torch

        return torch.from_numpy(self.to_numpy())

    def to_scipy(self) -> sp.csr_array:
        """scipy CSR array [n, n] with int8 ones at allowed pairs (row = query, column = key)."""
        data = np.ones(self.nnz, dtype=np.int8)
        import scipy.sparse as sp

        return sp.csr_array((data, self.indices, self.indptr), shape=(self.n, self.n))

    def transpose(self) -> SparseMask:
        """The transposed mask: row ``j`` lists the queries that may attend to key ``j``."""
        return SparseMask.from_scipy(self.to_scipy().T.tocsr())

    def __and__(self, other: SparseMask) -> SparseMask:
        _check_same_n(self, other)
        return SparseMask.from_scipy(self.to_scipy().multiply(other.to_scipy()))

    def __or__(self, other: SparseMask) -> SparseMask:
        _check_same_n(self, other)
        return SparseMask.from_scipy(self.to_scipy() + other.to_scipy())

    def filter(self, keep: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> SparseMask:
        """Entries ``(i, j)`` with ``keep(i, j)`` True (vectorised over the COO arrays, O(nnz))."""
        rows = self.row_ids()
        kept = np.broadcast_to(np.asarray(keep(rows, self.indices), dtype=bool), rows.shape)
        counts = np.bincount(rows[kept], minlength=self.n)
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return SparseMask(self.n, indptr, self.indices[kept])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SparseMask):
            return NotImplemented
        return (
            self.n == other.n
            and np.array_equal(self.indptr, other.indptr)
            and np.array_equal(self.indices, other.indices)
        )

    __hash__ = None

    def __repr__(self) -> str:
        return f"SparseMask(n={self.n}, nnz={self.nnz})"

    # ---- builders -------------------------------------------------------------------------
    @classmethod
    def from_numpy(cls, dense: np.ndarray) -> SparseMask:
        """From a dense boolean [n, n] array."""
        dense = np.asarray(dense, dtype=bool)
        rows, cols = np.nonzero(dense)  # row-major order: sorted within rows
        counts = np.bincount(rows, minlength=dense.shape[0])
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return cls(dense.shape[0], indptr, cols.astype(np.int64))

    @classmethod
    def from_scipy(cls, matrix: sp.sparray | sp.spmatrix) -> SparseMask:
        """From any scipy sparse matrix; explicit zeros are dropped, indices sorted."""
        import scipy.sparse as sp

        csr = sp.csr_array(matrix)
        csr.sum_duplicates()
        csr.eliminate_zeros()
        csr.sort_indices()
        return cls(csr.shape[0], csr.indptr.astype(np.int64), csr.indices.astype(np.int64))

    @classmethod
    def from_row_counts(
        cls, counts: np.ndarray, key_of: Callable[[np.ndarray, np.ndarray], np.ndarray]
    ) -> SparseMask:
        """Row ``i`` has ``counts[i]`` keys; key number ``t`` of row ``i`` is ``key_of(i, t)``.

        ``key_of`` is vectorised over the int64 arrays (rows [nnz], t [nnz]) and must be
        strictly increasing in ``t`` within a row. Work and memory: O(n + nnz).
        """
        counts = np.asarray(counts, dtype=np.int64)
        n = counts.shape[0]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        t = np.arange(indptr[-1], dtype=np.int64) - indptr[:-1][rows]
        return cls(n, indptr, np.asarray(key_of(rows, t), dtype=np.int64))

    @classmethod
    def from_intervals(cls, start: np.ndarray, stop: np.ndarray) -> SparseMask:
        """Row ``i`` allows keys ``start[i] <= j < stop[i]`` (one contiguous run per row)."""
        start = np.asarray(start, dtype=np.int64)
        counts = np.maximum(np.asarray(stop, dtype=np.int64) - start, 0)
        return cls.from_row_counts(counts, lambda rows, t: start[rows] + t)

    @classmethod
    def from_two_intervals(cls, a1: np.ndarray, b1: np.ndarray, a2: np.ndarray, b2: np.ndarray) -> SparseMask:
        """Row ``i`` allows ``[a1, b1) ∪ [a2, b2)`` (per-row arrays, ``a1 <= a2``); overlaps merged."""
        a1, b1, a2, b2 = (np.asarray(x, dtype=np.int64) for x in (a1, b1, a2, b2))
        merged = a2 <= b1
        end1 = np.where(merged, np.maximum(b1, b2), b1)
        len1 = np.maximum(end1 - a1, 0)
        len2 = np.where(merged, 0, np.maximum(b2 - a2, 0))
        return cls.from_row_counts(
            len1 + len2,
            lambda rows, t: np.where(t < len1[rows], a1[rows] + t, a2[rows] + t - len1[rows]),
        )

    @classmethod
    def from_band(cls, n: int, lo: int, hi: int) -> SparseMask:
        """Band ``lo <= j - i <= hi`` clipped to ``0 <= j < n``."""
        i = np.arange(n, dtype=np.int64)
        return cls.from_intervals(np.clip(i + lo, 0, n), np.clip(i + hi + 1, 0, n))

    @classmethod
    def from_offsets(cls, n: int, offsets: np.ndarray) -> SparseMask:
        """Row ``i`` allows ``i + o`` for each offset ``o`` (sorted, unique) that lands in ``0..n-1``."""
        offsets = np.unique(np.asarray(offsets, dtype=np.int64))
        keys = np.arange(n, dtype=np.int64)[:, None] + offsets[None, :]
        valid = (keys >= 0) & (keys < n)
        counts = valid.sum(axis=1)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(n, indptr, keys[valid])

    @classmethod
    def from_row_keys(cls, keys: np.ndarray) -> SparseMask:
        """Row ``i`` allows the keys ``keys[i, :]`` ([n, r], any order, duplicates allowed)."""
        n = keys.shape[0]
        rows = np.repeat(np.arange(n), keys.shape[1])
        data = np.ones(rows.shape[0], dtype=np.int32)
        import scipy.sparse as sp

        coo = sp.coo_array((data, (rows, keys.reshape(-1))), shape=(n, n))
        return cls.from_scipy(coo.tocsr())


def _check_same_n(a: SparseMask, b: SparseMask) -> None:
    if a.n != b.n:
        raise ValueError(f"cannot combine sparse masks of sizes {a.n} and {b.n}")


def check_n(n: object) -> int:
    """Validate a sequence length: an int ``n >= 1``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) < 1:
        raise RankCollapseError(f"sequence length n={n!r} is invalid; allowed: an integer >= 1")
    return int(n)


def band_of_sparse(s: SparseMask) -> tuple[int, int] | None:
    """``(lo, hi)`` if ``M[i, j] iff lo <= j - i <= hi`` (clipped to 0..n-1), else None. O(nnz).

    ``lo``/``hi`` are tight: the smallest / largest offset ``j - i`` that occurs.
    """
    counts = np.diff(s.indptr)
    if (counts == 0).any():
        return None
    i = np.arange(s.n, dtype=np.int64)
    first = s.indices[s.indptr[:-1]]
    last = s.indices[s.indptr[1:] - 1]
    lo, hi = int((first - i).min()), int((last - i).max())
    start, stop = np.clip(i + lo, 0, s.n - 1), np.clip(i + hi, 0, s.n - 1)
    ok = (first == start) & (last == stop) & (counts == stop - start + 1)
    return (lo, hi) if bool(ok.all()) else None

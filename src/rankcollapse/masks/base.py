"""The ``Mask`` interface and the ``&`` / ``|`` combinators.

A ``Mask`` is a rule, parsed once, that gives a boolean matrix ``M [n, n]`` for any sequence
length ``n >= 1``: ``M[i, j]`` True iff query token ``i`` may attend to key token ``j``.
Graph convention (SPEC §1): edge ``j -> i`` iff ``M[i, j]``.
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rankcollapse.errors import RankCollapseError
from rankcollapse.masks.sparse import SparseMask

# A vectorised rule: (i, j) index arrays (numpy or torch, broadcastable) -> boolean array.
Predicate = Callable[[Any, Any], Any]


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
        return band_of_sparse(self._sparse(n))

    def _nnz_hint(self, n: int) -> float:
        """Rough number of allowed pairs at length n (picks the cheapest part of an ``&``)."""
        return float(n) * n

    #: True when ``predicate`` is a cheap closed-form rule (no n x n table behind it).
    cheap_rule: bool = True

    # ---- public API ---------------------------------------------------------------------------
    def dense_numpy(self, n: int) -> np.ndarray:
        """Boolean numpy [n, n] from the vectorised rule on the index grid (O(n^2))."""
        n = check_n(n)
        i = np.arange(n, dtype=np.int64)
        out = self.predicate(n)(i[:, None], i[None, :])
        return np.broadcast_to(np.asarray(out, dtype=bool), (n, n)).copy()

    def dense(self, n: int) -> torch.Tensor:
        """``torch.bool [n, n]``: ``M[i, j]`` True iff query ``i`` may attend to key ``j``."""
        return torch.from_numpy(self.dense_numpy(n))

    def sparse(self, n: int) -> SparseMask:
        """CSR form (int64 ``indptr [n+1]``, ``indices [nnz]``), equal to ``dense(n)``."""
        return self._sparse(check_n(n))

    def band(self, n: int) -> tuple[int, int] | None:
        """``(lo, hi)`` if ``M[i, j] iff lo <= j - i <= hi`` for ``0 <= i, j < n``, else None.

        Tight offsets: complete -> ``(-(n-1), n-1)``, causal -> ``(-(n-1), 0)``,
        ``window:w=W`` -> ``(-min(W, n-1), min(W, n-1))``, ``causal-window:w=W`` -> ``(-min(W, n-1), 0)``;
        ``a & b`` of bands is the intersection, ``a | b`` the union (both contain offset 0).
        """
        return self._band(check_n(n))

    def is_complete(self, n: int) -> bool:
        """True iff every pair (i, j) is allowed at length ``n``."""
        n = check_n(n)
        return self._band(n) == (-(n - 1), n - 1)

    def __and__(self, other: Mask) -> Mask:
        return AndMask((self, other))

    def __or__(self, other: Mask) -> Mask:
        return OrMask((self, other))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mask) and self.spec == other.spec

    def __hash__(self) -> int:
        return hash(self.spec)

    def __repr__(self) -> str:
        return f"parse_mask({self.spec!r})"


class _Combined(Mask):
    op: str
    combine: Callable[[Any, Any], Any]  # elementwise & or | of two boolean arrays

    def __init__(self, parts: tuple[Mask, ...]) -> None:
        flat: list[Mask] = []
        for part in parts:
            flat.extend(part.parts if type(part) is type(self) else (part,))  # type: ignore[attr-defined]
        self.parts = tuple(flat)

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
    def cheap_rule(self) -> bool:  # type: ignore[override]
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
            return band_of_sparse(self._sparse(n))
        return max(b[0] for b in bands), min(b[1] for b in bands)  # type: ignore[index]


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
            return band_of_sparse(self._sparse(n))
        return min(b[0] for b in bands), max(b[1] for b in bands)  # type: ignore[index]

"""The seeded random families: ``bigbird:w=W,global=G,random=R,seed=S`` and ``random:p=P,seed=S``.

Randomness: for length ``n`` the draw comes from ``numpy.random.default_rng(seed)`` created afresh,
so ``dense(n)`` and ``sparse(n)`` agree and repeat exactly (details in ``families.py``).
"""

from __future__ import annotations

import numpy as np

from rankcollapse.masks.base import Predicate
from rankcollapse.masks.families import Family, Longformer, Param
from rankcollapse.masks.lookup import _table_predicate
from rankcollapse.masks.sparse import SparseMask


def bigbird_random_keys(n: int, r: int, seed: int) -> np.ndarray:
    """int64 [n, min(r, n)]: distinct uniform keys per row (vectorised Floyd's algorithm)."""
    r = min(r, n)
    rng = np.random.default_rng(seed)
    keys = np.empty((n, r), dtype=np.int64)
    for step in range(r):
        top = n - r + step
        t = rng.integers(0, top + 1, size=n, dtype=np.int64)
        taken = (keys[:, :step] == t[:, None]).any(axis=1)
        keys[:, step] = np.where(taken, top, t)
    return keys


class BigBird(Family):
    name = "bigbird"
    params = (
        Param("w"),
        Param("global"),
        Param("random", meaning="random keys per query"),
        Param("seed", maximum=2**63 - 1),
    )
    summary = "longformer rule plus `random` seeded random keys per query (BigBird)"

    cheap_rule = False

    def _nnz_hint(self, n: int) -> float:
        v = self.values
        return min(n * n, n * (2 * v["w"] + 1 + 2 * v["global"] + v["random"]))

    def _longformer(self) -> Longformer:
        return Longformer(w=self.values["w"], **{"global": self.values["global"]})

    def _random_part(self, n: int) -> SparseMask:
        return SparseMask.from_row_keys(bigbird_random_keys(n, self.values["random"], self.values["seed"]))

    def predicate(self, n: int) -> Predicate:
        return _table_predicate(self._longformer().dense_numpy(n) | self._random_part(n).to_numpy())

    def _sparse(self, n: int) -> SparseMask:
        return self._longformer()._sparse(n) | self._random_part(n)


class RandomMask(Family):
    name = "random"
    params = (
        Param("p", kind="prob", meaning="probability of each non-self pair"),
        Param("seed", maximum=2**63 - 1),
    )
    summary = "self, plus each other pair independently with probability p (seeded)"

    cheap_rule = False

    def _nnz_hint(self, n: int) -> float:
        return n + self.values["p"] * n * n

    def predicate(self, n: int) -> Predicate:
        rng = np.random.default_rng(self.values["seed"])
        table = rng.random((n, n)) < self.values["p"]
        np.fill_diagonal(table, True)
        return _table_predicate(table)

    def _sparse(self, n: int) -> SparseMask:
        rng = np.random.default_rng(self.values["seed"])
        chunk = max(1, (1 << 22) // n)
        indptr = [np.zeros(1, dtype=np.int64)]
        indices = []
        total = 0
        for start in range(0, n, chunk):
            rows = min(chunk, n - start)
            block = rng.random((rows, n)) < self.values["p"]
            block[np.arange(rows), np.arange(start, start + rows)] = True
            r, c = np.nonzero(block)
            counts = np.bincount(r, minlength=rows)
            indptr.append(total + np.cumsum(counts))
            total += int(counts.sum())
            indices.append(c.astype(np.int64))
        return SparseMask(n, np.concatenate(indptr), np.concatenate(indices))

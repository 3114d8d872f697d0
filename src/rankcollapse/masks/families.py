"""One small factory per mask family: the rule as a vectorised predicate, plus a sparse generator.

Conventions (the paper's §3): ``M[i, j]`` True iff query ``i`` may attend to key ``j``; ``w`` counts
neighbours on EACH side, self always included. Every family contains all self-loops.

| spec | ``M[i, j]`` iff |
|---|---|
| ``complete`` | always |
| ``causal`` | ``j <= i`` |
| ``window:w=W`` | ``|i - j| <= W`` |
| ``causal-window:w=W`` | ``0 <= i - j <= W`` |
| ``dilated:w=W,dilation=K`` | ``|i - j| <= W*K`` and ``K | (i - j)`` |
| ``strided:stride=S`` | ``j <= i`` and (``i - j < S`` or ``S | (i - j)``) |
| ``block:size=B`` | ``i // B == j // B`` |
| ``prefix:k=K`` | ``j < K`` or ``j <= i`` |
| ``longformer:w=W,global=G`` | ``|i - j| <= W`` or ``i < G`` or ``j < G`` |
| ``bigbird:w=W,global=G,random=R,seed=S`` | longformer, or ``j`` in R random keys of row ``i`` |
| ``sinks:w=W,sinks=K`` | ``0 <= i - j <= W`` or ``j < K`` |
| ``random:p=P,seed=S`` | ``i == j``, or ``U[i, j] < P`` |
| ``document:lengths=A,B,...`` | ``i`` and ``j`` in the same document (consecutive runs of A, B, ... tokens) |
| ``tree:parents=P0,P1,...`` | ``j`` is ``i`` or an ancestor of ``i`` (``P_i < i`` the parent, -1 a root) |
| ``file:PATH`` | the boolean ``.npy`` matrix at PATH |

The seeded families (``bigbird``, ``random``) live in ``seeded.py``, the fixed-length ones (``document``,
``tree``, ``file:``, matrices) in ``fixed.py``; the
registry of names in ``registry.py``.

Large parameters are never an error: each rule is well defined for every ``n`` (e.g. ``window:w=W``
with ``W >= n - 1`` is the complete mask), so one spec serves a sweep over ``n``. The two list
families (``document``, ``tree``) and ``file:`` fix the length: ``n`` must equal the number of tokens
they describe.

Randomness: for length ``n`` the draw comes from ``numpy.random.default_rng(seed)`` created
afresh, so ``dense(n)`` and ``sparse(n)`` agree and repeat exactly.
``random``: ``U = rng.random((n, n))`` (row-major, float64); the sparse form draws the same
stream in row chunks, so memory stays O(chunk * n + nnz) (time is O(n^2) by nature).
``bigbird``: row ``i`` gets ``min(R, n)`` distinct keys uniform on ``0..n-1`` by Floyd's
algorithm, vectorised over rows (draw ``r`` is ``rng.integers(0, n - R' + r + 1, size=n)``);
they may coincide with window or global keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.masks.base import Intervals, Mask, Predicate
from rankcollapse.masks.sparse import SparseMask

LIST_MAX_ITEMS = 1_000_000
"""Most entries a list parameter (``lengths``, ``parents``) may have."""


@dataclass(frozen=True)
class Param:
    """A spec parameter: an integer in ``minimum..maximum``, a probability in [0, 1] (``kind='prob'``),
    or a comma-separated list of such integers (``kind='list'``, at most ``LIST_MAX_ITEMS``).

    Sizes are capped at ``2**31 - 1`` so index arithmetic (e.g. ``w * dilation``) stays in int64.
    """

    name: str
    kind: str = "int"
    minimum: int = 0
    meaning: str = ""
    maximum: int = 2**31 - 1

    def parse(self, family: str, raw: str) -> int | float | tuple[int, ...]:
        where = f"parameter {self.name}={quote(raw)} of {family}"
        if self.kind == "list":
            items = raw.split(",")
            if len(items) > LIST_MAX_ITEMS:
                msg = f"{where} has {len(items)} entries; allowed: at most {LIST_MAX_ITEMS}"
                raise RankCollapseError(msg)
            one = Param(self.name, minimum=self.minimum, maximum=self.maximum)
            return tuple(int(one.parse(family, item)) for item in items)
        if self.kind == "prob":
            try:
                value = float(raw)
            except ValueError:
                msg = f"{where} is not a number; allowed: a probability 0 <= p <= 1"
                raise RankCollapseError(msg) from None
            if not (0.0 <= value <= 1.0):
                raise RankCollapseError(f"{where} is out of range; allowed: a probability 0 <= p <= 1")
            return value
        text = raw.strip()
        if not text.lstrip("+-").isdigit():
            raise RankCollapseError(f"{where} is not an integer; allowed: an integer >= {self.minimum}")
        if len(text.lstrip("+-")) > 20:
            raise RankCollapseError(f"{where} is too large; allowed: an integer <= {self.maximum}")
        value = int(text)
        if value < self.minimum:
            raise RankCollapseError(f"{where} is too small; allowed: an integer >= {self.minimum}")
        if value > self.maximum:
            raise RankCollapseError(f"{where} is too large; allowed: an integer <= {self.maximum}")
        return value

    def format(self, value: Any) -> str:
        if self.kind == "list":
            return ",".join(str(int(v)) for v in value)
        return repr(float(value)) if self.kind == "prob" else str(int(value))


class Family(Mask):
    """A named mask family with parameters; subclasses define ``rule`` and ``_sparse``."""

    name: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    summary: ClassVar[str] = ""

    def __init__(self, **values: Any) -> None:
        allowed = {p.name for p in self.params}
        for key in values:
            if key not in allowed:
                raise RankCollapseError(
                    f"unknown parameter {quote(key)} for {self.name}; allowed: {self.usage()}"
                )
        self.values: dict[str, Any] = {}
        for p in self.params:
            if p.name not in values:
                msg = f"missing parameter {p.name!r} for {self.name}; usage: {self.usage()}"
                raise RankCollapseError(msg)
            raw = values[p.name]
            self.values[p.name] = p.parse(self.name, str(raw))

    @classmethod
    def usage(cls) -> str:
        if not cls.params:
            return f"{cls.name} (no parameters)"
        return f"{cls.name}:" + ",".join(
            f"{p.name}={p.name.upper()}" + (",..." if p.kind == "list" else "") for p in cls.params
        )

    @property
    def spec(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}:" + ",".join(f"{p.name}={p.format(self.values[p.name])}" for p in self.params)

    def rule(self, i: Any, j: Any) -> Any:
        """Vectorised rule on index arrays (numpy or torch); n-independent families override it."""
        raise NotImplementedError

    def predicate(self, n: int) -> Predicate:
        return self.rule


def _arange(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


class Complete(Family):
    name = "complete"
    summary = "every token attends to every token"

    def rule(self, i: Any, j: Any) -> Any:
        return (i >= 0) & (j >= 0)

    def _sparse(self, n: int) -> SparseMask:
        return SparseMask.from_band(n, -(n - 1), n - 1)

    def _band(self, n: int) -> tuple[int, int]:
        return -(n - 1), n - 1

    def _intervals(self, n: int) -> Intervals:
        return np.zeros(n, dtype=np.int64), np.full(n, n, dtype=np.int64)


class Causal(Family):
    name = "causal"
    summary = "j <= i (decoder / GPT)"

    def _nnz_hint(self, n: int) -> float:
        return n * (n + 1) / 2

    def rule(self, i: Any, j: Any) -> Any:
        return j <= i

    def _sparse(self, n: int) -> SparseMask:
        return SparseMask.from_band(n, -(n - 1), 0)

    def _band(self, n: int) -> tuple[int, int]:
        return -(n - 1), 0

    def _intervals(self, n: int) -> Intervals:
        return np.zeros(n, dtype=np.int64), _arange(n) + 1


class Window(Family):
    name = "window"
    params = (Param("w", meaning="neighbours on each side"),)
    summary = "|i - j| <= w (bidirectional sliding window, 2w+1 keys)"

    def _nnz_hint(self, n: int) -> float:
        return n * min(n, 2 * self.values["w"] + 1)

    def rule(self, i: Any, j: Any) -> Any:
        return abs(i - j) <= self.values["w"]

    def _sparse(self, n: int) -> SparseMask:
        w = self.values["w"]
        return SparseMask.from_band(n, -w, w)

    def _band(self, n: int) -> tuple[int, int]:
        w = min(self.values["w"], n - 1)
        return -w, w

    def _intervals(self, n: int) -> Intervals:
        i, w = _arange(n), self.values["w"]
        return np.maximum(i - w, 0), np.minimum(i + w + 1, n)


class CausalWindow(Family):
    name = "causal-window"
    params = (Param("w", meaning="previous tokens attended"),)
    summary = "0 <= i - j <= w (uni-directional sliding window, w+1 keys)"

    def _nnz_hint(self, n: int) -> float:
        return n * min(n, self.values["w"] + 1)

    def rule(self, i: Any, j: Any) -> Any:
        return (i - j >= 0) & (i - j <= self.values["w"])

    def _sparse(self, n: int) -> SparseMask:
        return SparseMask.from_band(n, -self.values["w"], 0)

    def _band(self, n: int) -> tuple[int, int]:
        return -min(self.values["w"], n - 1), 0

    def _intervals(self, n: int) -> Intervals:
        i = _arange(n)
        return np.maximum(i - self.values["w"], 0), i + 1


class Dilated(Family):
    name = "dilated"
    params = (Param("w"), Param("dilation", minimum=1))
    summary = "|i - j| <= w*dilation and dilation divides i - j"

    def _nnz_hint(self, n: int) -> float:
        return n * min(n, 2 * self.values["w"] + 1)

    def rule(self, i: Any, j: Any) -> Any:
        w, k = self.values["w"], self.values["dilation"]
        return (abs(i - j) <= w * k) & ((i - j) % k == 0)

    def _sparse(self, n: int) -> SparseMask:
        w, k = self.values["w"], self.values["dilation"]
        m = min(w, (n - 1) // k)  # offsets beyond n - 1 never land
        return SparseMask.from_offsets(n, k * np.arange(-m, m + 1))


class Strided(Family):
    name = "strided"
    params = (Param("stride", minimum=1),)
    summary = "causal, and (i - j < stride or stride divides i - j) (Sparse Transformer)"

    def _nnz_hint(self, n: int) -> float:
        stride = self.values["stride"]
        return n * min(n, stride) + n * n / (2 * stride)

    def rule(self, i: Any, j: Any) -> Any:
        s = self.values["stride"]
        return (j <= i) & ((i - j < s) | ((i - j) % s == 0))

    def _sparse(self, n: int) -> SparseMask:
        s = self.values["stride"]
        i = _arange(n)
        far = i // s  # offsets s, 2s, ..., far*s (all >= s: disjoint from the local run)
        near = np.minimum(s, i + 1)  # offsets 0 .. near-1

        def key_of(rows: np.ndarray, t: np.ndarray) -> np.ndarray:
            f = far[rows]
            return np.where(t < f, rows - (f - t) * s, rows - (near[rows] - 1) + (t - f))

        return SparseMask.from_row_counts(far + near, key_of)


class Block(Family):
    name = "block"
    params = (Param("size", minimum=1),)
    summary = "same block of `size` consecutive tokens (block-diagonal)"

    def _nnz_hint(self, n: int) -> float:
        return n * min(n, self.values["size"])

    def rule(self, i: Any, j: Any) -> Any:
        b = self.values["size"]
        return i // b == j // b

    def _sparse(self, n: int) -> SparseMask:
        b = self.values["size"]
        start = (_arange(n) // b) * b
        return SparseMask.from_intervals(start, np.minimum(start + b, n))

    def _intervals(self, n: int) -> Intervals:
        b = self.values["size"]
        start = (_arange(n) // b) * b
        return start, np.minimum(start + b, n)


class Prefix(Family):
    name = "prefix"
    params = (Param("k", meaning="prefix length"),)
    summary = "j < k or j <= i (prefix LM: bidirectional prefix, causal after)"

    def _nnz_hint(self, n: int) -> float:
        return n * (n + 1) / 2 + n * min(n, self.values["k"])

    def rule(self, i: Any, j: Any) -> Any:
        return (j < self.values["k"]) | (j <= i)

    def _sparse(self, n: int) -> SparseMask:
        i = _arange(n)
        stop = np.minimum(np.maximum(i + 1, self.values["k"]), n)
        return SparseMask.from_intervals(np.zeros(n, dtype=np.int64), stop)

    def _intervals(self, n: int) -> Intervals:
        i = _arange(n)
        return np.zeros(n, dtype=np.int64), np.minimum(np.maximum(i + 1, self.values["k"]), n)


class Longformer(Family):
    name = "longformer"
    params = (Param("w"), Param("global"))
    summary = "|i - j| <= w, or i < global, or j < global (window + global tokens)"

    def _nnz_hint(self, n: int) -> float:
        return min(n * n, n * (2 * self.values["w"] + 1 + 2 * self.values["global"]))

    def rule(self, i: Any, j: Any) -> Any:
        w, g = self.values["w"], self.values["global"]
        return (abs(i - j) <= w) | (i < g) | (j < g)

    def _sparse(self, n: int) -> SparseMask:
        w, g = self.values["w"], min(self.values["global"], n)
        i = _arange(n)
        is_global = i < g
        a2 = np.where(is_global, 0, np.maximum(i - w, 0))
        b2 = np.where(is_global, n, np.minimum(i + w + 1, n))
        return SparseMask.from_two_intervals(np.zeros(n, dtype=np.int64), np.full(n, g), a2, b2)


class Sinks(Family):
    name = "sinks"
    params = (Param("w"), Param("sinks", meaning="attention-sink tokens"))
    summary = "0 <= i - j <= w, or j < sinks (StreamingLLM attention sinks)"

    def _nnz_hint(self, n: int) -> float:
        return min(n * n, n * (self.values["w"] + 1 + self.values["sinks"]))

    def rule(self, i: Any, j: Any) -> Any:
        w, k = self.values["w"], self.values["sinks"]
        return ((i - j >= 0) & (i - j <= w)) | (j < k)

    def _sparse(self, n: int) -> SparseMask:
        w, k = self.values["w"], min(self.values["sinks"], n)
        i = _arange(n)
        zeros = np.zeros(n, dtype=np.int64)
        return SparseMask.from_two_intervals(zeros, np.full(n, k), np.maximum(i - w, 0), i + 1)

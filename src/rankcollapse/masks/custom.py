"""A user's own mask in Python: a predicate ``f(i, j)`` (any length) or a boolean tensor (up to its size).

In attention-gym's style a mask is a named predicate with a dense reference form; here both become a
``Mask`` like every family, so they go wherever a mask goes (``simulate``, ``AnalyzeConfig(mask=...)``,
schedules, ``analyze_mask`` / ``analyze_schedule``). ``parse_mask`` wraps a callable or an array itself.

- ``PredicateMask(f, name=None)``: ``M[i, j] = f(i, j)``, called ONCE per length ``n`` on int64 index
  tensors ``i [n, 1]``, ``j [1, n]`` (CPU); it returns a boolean tensor (or 0/1 values) of shape
  ``[n, n]`` or broadcastable to it (``[n, 1]``, ``[1, n]``, a scalar). A FlexAttention ``mask_mod(b, h,
  q_idx, kv_idx)`` (four parameters) is called with ``b = h = 0``. A plain Python function of two ints
  that fails on tensors (``and`` / ``or`` / ``if``) is called pair by pair, up to ``n =
  SCALAR_MAX_N``. The rule must give every token a self-loop (``M[i, i]``), as every family does.
  ``spec`` is the label ``<predicate NAME>`` (NAME: ``name``, else ``f.__name__``, ``lambda`` for a
  lambda); equality is the function's identity (two functions of one name stay two masks).
- ``TensorMask(m)``: a boolean ``[N, N]`` torch tensor or numpy array (or 0/1 integers or floats),
  validated once here: 2-D square, finite, 0/1, every row with a kept key, every self-loop. At
  ``n <= N`` it is the top-left ``n x n`` block (attention-gym crops the same way), so one tensor
  serves texts padded to different lengths; ``n > N`` is refused naming both sizes. ``spec`` is the
  label ``<tensor NxN sha1:XXXXXXXXXXXX>`` (a content hash: equal tensors are one mask).

Neither label is a spec ``parse_mask`` reads back: a run's ``config.json`` records the name (or the
shape and hash) and :func:`in_memory_note` says so; the callable or tensor itself is not saved.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote, type_name
from rankcollapse.masks.base import CACHE_MAX_ENTRIES, Mask, Predicate
from rankcollapse.masks.limits import DENSE_BYTES_PER_PAIR, require_memory
from rankcollapse.masks.lookup import _table_predicate
from rankcollapse.masks.sparse import SparseMask, check_n

SCALAR_MAX_N = 1024
"""Largest ``n`` at which a predicate that fails on index tensors is called pair by pair (n^2 calls)."""

_CALL = "f(i, j) on int64 index tensors i [n, 1], j [1, n] returning a bool [n, n] (or broadcastable)"


def is_array(value: object) -> bool:
    """A numpy array or a torch tensor (torch is not imported to tell)."""
    return isinstance(value, np.ndarray) or type(value).__module__.startswith("torch")


def _to_numpy(value: Any) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu()
        if value.is_floating_point() and value.dtype.itemsize == 2:  # bfloat16 has no numpy dtype
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def bool_table(value: Any, what: str) -> np.ndarray:
    """``value`` as a boolean numpy array: bool, or integers / finite floats that are all 0 or 1.

    One ``RankCollapseError`` line (naming ``what``, the bad entry and what is allowed) otherwise.
    """
    a = _to_numpy(value)
    if a.dtype == np.bool_:
        return a
    if a.dtype.kind not in "iuf":
        raise RankCollapseError(f"{what} has dtype {a.dtype}; allowed: bool (or 0/1 integers or floats)")
    if a.dtype.kind == "f":
        bad = np.argwhere(~np.isfinite(a))
        if bad.size:
            at = tuple(int(k) for k in bad[0])
            raise RankCollapseError(f"{what} has {a[at]} at {at}; allowed: finite 0/1 values (or bool)")
    bad = np.argwhere((a != 0) & (a != 1))
    if bad.size:
        at = tuple(int(k) for k in bad[0])
        raise RankCollapseError(f"{what} has {a[at]} at {at}; allowed: 0/1 values (or bool)")
    return a != 0


def check_rows(table: np.ndarray, what: str) -> None:
    """Every row keeps a key and its self-loop ``M[i, i]`` (the paper's A1; no empty softmax row)."""
    empty = np.flatnonzero(~table.any(axis=1))
    if empty.size:
        raise RankCollapseError(
            f"{what} has no kept key in row {int(empty[0])}"
            f"{f' (and {empty.size - 1} more)' if empty.size > 1 else ''}; "
            "allowed: every query attends to at least itself"
        )
    missing = np.flatnonzero(~np.diagonal(table))
    if missing.size:
        raise RankCollapseError(
            f"{what} lacks self-loops at tokens {missing[:5].tolist()}"
            f"{'...' if missing.size > 5 else ''}; allowed: M[i, i] True for every i"
        )


def _arity(fn: Callable[..., Any], name: str) -> int:
    """2 for ``f(i, j)``, 4 for a FlexAttention ``mask_mod(b, h, q_idx, kv_idx)``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: assume f(i, j)
        return 2
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    required = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(required) not in (2, 4):
        raise RankCollapseError(
            f"mask predicate {name!r} takes {len(required)} arguments; allowed: "
            "f(i, j) or a FlexAttention mask_mod(b, h, q_idx, kv_idx)"
        )
    return len(required)


class PredicateMask(Mask):
    """``M[i, j] = f(i, j)`` at every length (module docstring); the dense table is built once per n."""

    cheap_rule = False

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        if not callable(fn) or isinstance(fn, type):
            raise RankCollapseError(f"mask predicate must be a function f(i, j), got {type_name(fn)}")
        if name is None:
            name = getattr(fn, "__name__", None) or type(fn).__name__
            name = "lambda" if name == "<lambda>" else name
        if not isinstance(name, str) or not name.strip() or len(name) > 80 or any(c in name for c in "\n<>"):
            raise RankCollapseError(
                f"mask predicate name {quote(name, 40)} is invalid; allowed: a "
                "non-empty string of at most 80 characters without newlines or '<', '>'"
            )
        self.fn, self.name = fn, name.strip()
        self._arity = _arity(fn, self.name)

    @property
    def spec(self) -> str:
        return f"<predicate {self.name}>"

    def _identity(self) -> Any:
        return ("predicate", id(self.fn), self.name)

    def _call(self, i: Any, j: Any) -> Any:
        if self._arity == 4:
            import torch

            zero = torch.zeros((), dtype=torch.int64)
            return self.fn(zero, zero, i, j)
        return self.fn(i, j)

    def _evaluate(self, n: int) -> np.ndarray:
        """The dense boolean table [n, n], checked (shape, values, self-loops)."""
        import torch

        what = f"mask predicate {self.name!r}"
        require_memory(
            DENSE_BYTES_PER_PAIR * float(n) * n,
            f"the dense form of {what} at n={n}",
            "allowed: a smaller n (a predicate is evaluated on the n x n grid)",
        )
        idx = torch.arange(n, dtype=torch.int64)
        try:
            out = self._call(idx[:, None], idx[None, :])
        except Exception as err:
            out = self._pairwise(n, err)
        if not is_array(out) and not isinstance(out, bool | int | float | np.bool_):
            raise RankCollapseError(f"{what} returned {type_name(out)} at n={n}; allowed: {_CALL}")
        table = bool_table(out, f"the result of {what} at n={n}")
        if table.ndim not in (0, 2) or any(s not in (1, n) for s in table.shape):
            raise RankCollapseError(
                f"{what} returned shape {tuple(table.shape)} at n={n}; allowed: "
                f"({n}, {n}) or broadcastable to it ({n}, 1), (1, {n}), a scalar"
            )
        table = np.broadcast_to(table, (n, n)).copy()
        check_rows(table, f"mask predicate {self.name!r} at n={n}")
        table.setflags(write=False)
        return table

    def _pairwise(self, n: int, err: Exception) -> np.ndarray:
        """A plain Python function of two ints, called pair by pair (up to ``SCALAR_MAX_N``)."""
        why = f"{type(err).__name__}: {' '.join(str(err).split())[:120]}"
        if n <= SCALAR_MAX_N:
            try:
                return np.array([[bool(self._call(i, j)) for j in range(n)] for i in range(n)], dtype=bool)
            except Exception:
                pass
        scalar = (
            f"; a function of two ints is called pair by pair only up to n={SCALAR_MAX_N}"
            if n > SCALAR_MAX_N
            else ""
        )
        raise RankCollapseError(
            f"mask predicate {self.name!r} raised {why} at n={n}; allowed: {_CALL}{scalar}"
        )

    def table(self, n: int) -> np.ndarray:
        """The checked boolean table [n, n] (read-only; cached per length)."""
        n = check_n(n)
        return self._cached(n, "table", lambda: self._evaluate(n), keep=n * n <= CACHE_MAX_ENTRIES)

    def predicate(self, n: int) -> Predicate:
        return _table_predicate(self.table(n))

    def _sparse(self, n: int) -> SparseMask:
        return SparseMask.from_numpy(self.table(n))

    def _nnz_hint(self, n: int) -> float:
        return float(n) * n

    def __repr__(self) -> str:
        return f"PredicateMask({self.fn!r}, name={self.name!r})"


class TensorMask(Mask):
    """A boolean ``[N, N]`` matrix, used at ``n <= N`` as its top-left block (module docstring)."""

    cheap_rule = False

    def __init__(self, matrix: Any) -> None:
        if not is_array(matrix):
            raise RankCollapseError(
                f"mask tensor must be a torch tensor or numpy array, got {type_name(matrix)}"
            )
        shape = tuple(matrix.shape)
        if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
            raise RankCollapseError(f"mask tensor has shape {shape}; allowed: a square [n, n] matrix")
        require_memory(2.0 * shape[0] * shape[0], f"the mask tensor of shape {shape}")
        table = np.ascontiguousarray(bool_table(matrix, f"mask tensor of shape {shape}"))
        check_rows(table, f"mask tensor of shape {shape}")
        table.setflags(write=False)
        self.matrix, self.max_n = table, shape[0]
        digest = hashlib.sha1(np.packbits(table).tobytes() + str(self.max_n).encode()).hexdigest()[:12]
        self._spec = f"<tensor {self.max_n}x{self.max_n} sha1:{digest}>"

    @property
    def spec(self) -> str:
        return self._spec

    def block(self, n: int) -> np.ndarray:
        """The top-left ``[n, n]`` block (a read-only view); ``n`` above the size is refused."""
        n = check_n(n)
        if n > self.max_n:
            raise RankCollapseError(
                f"mask {self.spec} is {self.max_n} x {self.max_n} but n={n}; "
                f"allowed: n <= {self.max_n} (its top-left n x n block)"
            )
        return self.matrix[:n, :n]

    def predicate(self, n: int) -> Predicate:
        return _table_predicate(np.ascontiguousarray(self.block(n)))

    def _sparse(self, n: int) -> SparseMask:
        return SparseMask.from_numpy(self.block(n))

    def _nnz_hint(self, n: int) -> float:
        return float(self.block(n).sum())

    def __repr__(self) -> str:
        return f"TensorMask({self.spec})"


def in_memory_note(mask: Any) -> str | None:
    """One sentence for a run's record when ``mask`` (a ``Mask`` or ``MaskSchedule``) holds a Python
    predicate or a tensor, which a ``config.json`` records by label only; None otherwise."""
    masks = getattr(mask, "period", None) or ([mask] if mask is not None else [])
    found: dict[str, None] = {}

    def walk(m: Any) -> None:
        if isinstance(m, PredicateMask | TensorMask):
            found[m.spec] = None
        for part in getattr(m, "parts", ()):
            walk(part)

    for m in masks:
        walk(m)
    if not found:
        return None
    return (
        f"the mask holds {', '.join(found)}: a Python predicate is recorded by its name, a tensor by "
        "its shape and content hash; neither is saved, so this record cannot re-run the mask"
    )


__all__ = ["SCALAR_MAX_N", "PredicateMask", "TensorMask", "bool_table", "check_rows", "in_memory_note"]

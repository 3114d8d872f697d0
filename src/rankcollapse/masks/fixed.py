"""Masks of one fixed length: packed documents, token trees, a matrix in memory, a ``.npy`` file.

- ``document:lengths=A,B,...``: ``M[i, j]`` iff ``doc(i) == doc(j)``, the documents being
  consecutive runs of A, B, ... tokens; ``n = A + B + ...``.
- ``tree:parents=P0,P1,...``: ``M[i, j]`` iff ``j == i`` or ``j`` is an ancestor of ``i`` (parent
  ``P_i < i``; -1 marks a root); ``n`` = the number of entries.
- ``file:PATH``: the boolean ``.npy`` matrix at PATH (self-loops required); ``n`` = its size.
- ``from_dense(m)``: the boolean matrix ``m`` (no spec string; self-loops not required).

``document`` is bidirectional inside each document (packed encoder batches); the causal packing of
decoders is ``document:lengths=...&causal``. Every document is a closed component, so with two or
more documents there is no center and Theorem 1 does not apply to the whole sequence.
``tree`` is tree attention (shared prefixes, speculative decoding trees): a token attends to its
path from the root; each root's subtree is one closed component whose only center is the root
(radius 1: the root is an ancestor of every token of its tree).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import read_npy
from rankcollapse.edge.validate import quote
from rankcollapse.masks.base import Mask, Predicate
from rankcollapse.masks.families import Family, Param
from rankcollapse.masks.limits import require_memory
from rankcollapse.masks.lookup import _lookup, _table_predicate
from rankcollapse.masks.sparse import SparseMask


class _FixedLength(Mask):
    """A mask defined for one length ``size`` only."""

    size: int

    def _check(self, n: int) -> None:
        if n != self.size:
            raise RankCollapseError(
                f"mask {quote(self.spec)} is {self.size} x {self.size} but n={n}; allowed: n={self.size}"
            )


class _TableMask(_FixedLength):
    """A fixed boolean table ``[n, n]``."""

    cheap_rule = False
    table: np.ndarray

    def _set_table(self, table: np.ndarray) -> None:
        self.table = np.ascontiguousarray(table)
        self.table.setflags(write=False)
        self.size = int(table.shape[0])

    def _nnz_hint(self, n: int) -> float:
        return float(self.table.sum())

    def predicate(self, n: int) -> Predicate:
        self._check(n)
        return _table_predicate(self.table)

    def _sparse(self, n: int) -> SparseMask:
        self._check(n)
        return SparseMask.from_numpy(self.table)


def _check_square_bool(shape: tuple[int, ...], dtype: Any, what: str) -> None:
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
        raise RankCollapseError(f"{what} has shape {tuple(shape)}; allowed: a square n x n matrix")
    if dtype != np.bool_:
        raise RankCollapseError(f"{what} has dtype {dtype}; allowed: bool")


class MatrixMask(_TableMask):
    """``from_dense(m)``: a boolean ``[n, n]`` numpy array or torch tensor held in memory.

    Its ``spec`` is ``<matrix NxN sha1:XXXXXXXXXXXX>`` (a content hash: equal matrices compare equal);
    it is a label, not a spec ``parse_mask`` reads.
    """

    def __init__(self, dense: Any) -> None:
        if type(dense).__module__.startswith("torch"):
            dense = dense.detach().cpu().numpy()
        if not isinstance(dense, np.ndarray):
            got = type(dense).__name__
            raise RankCollapseError(f"mask matrix must be a numpy array or torch tensor, got {got}")
        _check_square_bool(dense.shape, dense.dtype, "mask array")
        self._set_table(dense)
        digest = hashlib.sha1(np.packbits(self.table).tobytes() + str(self.size).encode()).hexdigest()[:12]
        self._spec = f"<matrix {self.size}x{self.size} sha1:{digest}>"

    @property
    def spec(self) -> str:
        return self._spec


#: Characters that end or group a mask or schedule spec: a ``file:`` path holding one goes in quotes.
SPECIAL = frozenset("&|()*;[]")
QUOTES = "'\""


def quoted_path(path: str) -> str:
    """``path`` as a spec writes it: in quotes when it holds a special character or a quote."""
    if not (set(path) & SPECIAL or any(q in path for q in QUOTES) or path != path.strip()):
        return path
    mark = "'" if "'" not in path else '"'
    if mark in path:
        raise RankCollapseError(f"mask file {quote(path, 100)}: a path with both ' and \" cannot be "
                                "written in a spec; allowed: rename the file")
    return f"{mark}{path}{mark}"


class FileMask(_TableMask):
    """``file:PATH``: a boolean square ``.npy`` matrix with all self-loops, loaded once at parse time.

    The header is read first: a shape that is not square, a dtype that is not bool, a size larger
    than the file or than the available memory is refused before any array is allocated.
    """

    name = "file"
    summary = "boolean n x n matrix saved with numpy.save (.npy); n must match"

    def __init__(self, path: str) -> None:
        self.path = path.strip()
        if not self.path:
            raise RankCollapseError("file: needs a path, e.g. file:mask.npy (a boolean n x n .npy matrix)")
        where = f"mask file {quote(self.path, 100)}"
        table = self._load(Path(self.path), where)
        missing = np.flatnonzero(~np.diagonal(table))
        if missing.size:
            raise RankCollapseError(
                f"{where} lacks self-loops at tokens {missing[:5].tolist()}"
                f"{'...' if missing.size > 5 else ''}; allowed: M[i, i] True for every i"
            )
        self._set_table(table)

    @staticmethod
    def _load(path: Path, where: str) -> np.ndarray:
        """Through the one input opener (regular files only, never blocking, one line per OS error);
        the header is checked (square, bool, within the file and the memory) before any data."""

        def check(shape: tuple[int, ...], dtype: Any) -> None:
            _check_square_bool(shape, dtype, where)

        def reserve(shape: tuple[int, ...], nbytes: int) -> None:
            require_memory(2.0 * nbytes, f"loading {where} of shape {tuple(shape)}")

        return read_npy(path, "mask file", check, reserve=reserve)

    @property
    def spec(self) -> str:
        return f"file:{quoted_path(self.path)}"


class Document(Family, _FixedLength):
    name = "document"
    params = (Param("lengths", kind="list", minimum=1, meaning="tokens per document, in order"),)
    summary = "same document (packed sequences, bidirectional inside each; '&causal' for decoders)"
    cheap_rule = False

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        lengths = np.asarray(self.values["lengths"], dtype=np.int64)
        self.size = int(lengths.sum())
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.doc_of = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
        self.lengths = lengths

    def _nnz_hint(self, n: int) -> float:
        return float((self.lengths.astype(np.float64) ** 2).sum())

    def predicate(self, n: int) -> Predicate:
        self._check(n)
        doc = self.doc_of

        def rule(i: Any, j: Any) -> Any:
            return _lookup(doc, i) == _lookup(doc, j)

        return rule

    def _sparse(self, n: int) -> SparseMask:
        self._check(n)
        start = self.starts[self.doc_of]
        return SparseMask.from_intervals(start, start + self.lengths[self.doc_of])

    def _band(self, n: int) -> tuple[int, int] | None:
        self._check(n)
        return (-(n - 1), n - 1) if self.lengths.size == 1 else None

    def _intervals(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        self._check(n)
        start = self.starts[self.doc_of]
        return start, start + self.lengths[self.doc_of]


class Tree(Family, _FixedLength):
    name = "tree"
    params = (Param("parents", kind="list", minimum=-1, meaning="parent of each token (-1: a root)"),)
    summary = "j is i or an ancestor of i (tree attention; parent P_i < i, -1 for a root)"
    cheap_rule = False

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        parents = np.asarray(self.values["parents"], dtype=np.int64)
        bad = np.flatnonzero(parents >= np.arange(parents.size))
        if bad.size:
            i = int(bad[0])
            raise RankCollapseError(
                f"tree parent P_{i}={int(parents[i])} is not before token {i}; allowed: -1 or an index < {i}"
            )
        self.size = int(parents.size)
        self.parents = parents
        depth = np.zeros(parents.size, dtype=np.int64)  # tokens on the path root..i, i included
        for i, p in enumerate(parents.tolist()):
            depth[i] = 1 if p < 0 else depth[p] + 1
        self.depth = depth

    def _nnz_hint(self, n: int) -> float:
        return float(self.depth.sum())

    def predicate(self, n: int) -> Predicate:
        return _table_predicate(self.sparse(n).to_numpy())

    def _sparse(self, n: int) -> SparseMask:
        self._check(n)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(self.depth, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        for i, p in enumerate(self.parents.tolist()):  # row i = row of its parent, then i (ascending)
            a = int(indptr[i])
            if p >= 0:
                b = a + int(indptr[p + 1] - indptr[p])
                indices[a:b] = indices[indptr[p] : indptr[p + 1]]
                a = b
            indices[a] = i
        return SparseMask(n, indptr, indices)


def fixed_length(mask: Mask) -> int | None:
    """The one length a mask is defined for (document, tree, file, matrix, or a combination), else None."""
    size = getattr(mask, "size", None)
    if isinstance(size, int):
        return size
    for part in getattr(mask, "parts", ()):
        found = fixed_length(part)
        if found is not None:
            return found
    return None


__all__ = ["Document", "FileMask", "MatrixMask", "Tree", "fixed_length"]


def from_dense(dense: Any) -> Mask:
    """A fixed-size ``Mask`` from a boolean ``[n, n]`` numpy array or torch tensor (no spec string).

    Self-loops are not required (the analysis reports them). Use it to get the radius and
    centers of a matrix the caller already holds: ``from_dense(m).analysis(n)``.
    """
    return MatrixMask(dense)

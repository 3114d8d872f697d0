"""Block Two-Stream attention (Li & Guo, arXiv 2606.09951): a block-generation mask over two streams.

Li & Guo name the mask in their abstract only ("a block-generation attention mask that ensures
training-inference consistency"); its definition in their text was not available to us, so the rule
below is **ours, built from that description** and from the two-stream layout of block-generation
training (a clean *content* stream and a *query* stream of the tokens to generate, block by block).

``block-two-stream:size=B`` at length ``n = 2N`` (``n`` must be even): tokens ``0 .. N-1`` are the content
stream ``c_p`` (position ``p``), tokens ``N .. 2N-1`` the query stream ``q_p``; ``blk(p) = p // B``.

| query | may attend to |
|---|---|
| ``c_p`` | ``c_r`` with ``blk(r) <= blk(p)`` (block-causal: its own block and every earlier one) |
| ``q_p`` | ``c_r``, ``blk(r) < blk(p)`` (the clean earlier blocks), and ``q_r``, ``blk(r) == blk(p)`` |

so ``M[i, j]`` for ``i = (s_i, p)``, ``j = (s_j, r)`` (``s`` the stream) is
``(s_i = s_j = c and blk(r) <= blk(p)) or (s_i = q, s_j = c, blk(r) < blk(p))
or (s_i = s_j = q, blk(r) = blk(p))``.
Every token attends to itself (A1).

The flow it is designed for (our reading of "training-inference consistency"): after any number of
layers, the query tokens of block ``k`` have heard exactly the clean blocks ``< k`` and their own block:
what block-by-block generation sees at inference. The mask is transitive (``M M = M`` as boolean
matrices), so its composed flow equals the mask at every depth: :func:`two_stream_flow` checks it on a
composed graph. :func:`two_stream_dense` is the plain reference (loops over pairs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.masks.base import Predicate
from rankcollapse.masks.families import Family, Param
from rankcollapse.masks.sparse import SparseMask


def stream_length(spec: str, n: int, streams: int) -> int:
    """``N = n / streams``, the length of each stream of a multi-stream mask at ``n`` tokens; one line
    (RankCollapseError) where ``n`` is not a positive multiple of ``streams``."""
    if n < streams or n % streams:
        raise RankCollapseError(
            f"mask {quote(spec)} lays out {streams} streams of equal length; n={n} is not a multiple of "
            f"{streams}; allowed: n = {streams} N with N >= 1"
        )
    return n // streams


def runs_to_sparse(n: int, runs: list[tuple[np.ndarray, np.ndarray]]) -> SparseMask:
    """Row ``i`` allows the union of ``[a_k[i], b_k[i])`` over the runs ``(a_k, b_k)`` (int64 [n] each),
    given in increasing, non-overlapping order within every row (an empty run: ``b <= a``)."""
    lens = [np.maximum(np.asarray(b, dtype=np.int64) - np.asarray(a, dtype=np.int64), 0) for a, b in runs]
    starts = [np.asarray(a, dtype=np.int64) for a, _ in runs]
    before = np.cumsum([np.zeros(n, dtype=np.int64), *lens], axis=0)  # [R + 1, n]: keys before run k

    def key_of(rows: np.ndarray, t: np.ndarray) -> np.ndarray:
        out = np.zeros_like(t)
        for k, a in enumerate(starts):
            inside = (t >= before[k][rows]) & (t < before[k + 1][rows])
            out = np.where(inside, a[rows] + t - before[k][rows], out)
        return out

    return SparseMask.from_row_counts(before[-1], key_of)


class BlockTwoStream(Family):
    """``block-two-stream:size=B`` (module docstring): content stream block-causal, query stream reading
    the clean earlier blocks and its own block. Ours, built from Li & Guo's one-line description."""

    name = "block-two-stream"
    params = (Param("size", minimum=1, meaning="tokens per generated block"),)
    summary = ("two streams of n/2 tokens: content block-causal; query q_p attends to content of earlier "
               "blocks and to its own block (Li & Guo 2026, our reading)")
    cheap_rule = False  # the rule needs n (the stream length): FlexAttention's mask_mod must be given n

    def _nnz_hint(self, n: int) -> float:
        half = n / 2
        return half * (half + 1) / 2 + half * half / 2 + half * min(half, self.values["size"])

    def predicate(self, n: int) -> Predicate:
        big = stream_length(self.spec, n, 2)
        b = self.values["size"]

        def rule(i: Any, j: Any) -> Any:
            qi, qj = i >= big, j >= big
            bi, bj = (i % big) // b, (j % big) // b
            content = ~qi & ~qj & (bj <= bi)
            reads = qi & ~qj & (bj < bi)
            own = qi & qj & (bj == bi)
            return content | reads | own

        return rule

    def _sparse(self, n: int) -> SparseMask:
        big = stream_length(self.spec, n, 2)
        b = self.values["size"]
        p = np.arange(n, dtype=np.int64) % big
        first = (p // b) * b  # first position of the token's block
        last = np.minimum(first + b, big)  # one past its last
        query = np.arange(n) >= big
        zero = np.zeros(n, dtype=np.int64)
        run1 = (zero, np.where(query, first, last))  # content keys: earlier blocks (query) or up to own block
        run2 = (np.where(query, big + first, zero), np.where(query, big + last, zero))  # own query block
        return runs_to_sparse(n, [run1, run2])


def two_stream_dense(n: int, size: int) -> np.ndarray:
    """The plain reference of ``block-two-stream:size=<size>``: bool [n, n] by a loop over the pairs."""
    big = stream_length(f"block-two-stream:size={size}", n, 2)
    out = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            si, sj = ("q" if i >= big else "c"), ("q" if j >= big else "c")
            bi, bj = (i % big) // size, (j % big) // size
            if si == "c" and sj == "c":
                out[i, j] = bj <= bi
            elif si == "q" and sj == "c":
                out[i, j] = bj < bi
            elif si == "q" and sj == "q":
                out[i, j] = bj == bi
    return out


def two_stream_flow(reach: np.ndarray, size: int) -> dict[str, bool]:
    """The flows ``block-two-stream:size=<size>`` is designed for, checked on a composed reachability
    ``reach`` (bool [n, n], ``reach[i, j]`` iff information of token ``j`` reaches token ``i``):

    - ``query_sees_earlier_clean_blocks``: ``q_p`` reaches ``c_r`` iff ``blk(r) < blk(p)`` (what
      block-by-block generation sees at inference: the clean earlier blocks, nothing of its own block's
      content);
    - ``query_blocks_sealed``: ``q_p`` reaches ``q_r`` iff ``blk(r) == blk(p)`` (no query block hears
      another);
    - ``content_never_hears_queries``: no content token reaches a query token;
    - ``content_block_causal``: ``c_p`` reaches ``c_r`` iff ``blk(r) <= blk(p)``.
    """
    n = reach.shape[0]
    big = stream_length(f"block-two-stream:size={size}", n, 2)
    blk = np.arange(big) // size
    cc, cq = reach[:big, :big], reach[:big, big:]
    qc, qq = reach[big:, :big], reach[big:, big:]
    return {
        "query_sees_earlier_clean_blocks": bool(np.array_equal(qc, blk[None, :] < blk[:, None])),
        "query_blocks_sealed": bool(np.array_equal(qq, blk[None, :] == blk[:, None])),
        "content_never_hears_queries": not bool(cq.any()),
        "content_block_causal": bool(np.array_equal(cc, blk[None, :] <= blk[:, None])),
    }

"""Butterfly attention (Li & Guo, arXiv 2606.09951): a fully supervised bidirectional mask, three streams.

Li & Guo name the mask in their abstract only ("a fully supervised bidirectional attention mask"); its
definition in their text was not available to us, so the rule below is **ours, built from that
description**: every position is a prediction target (fully supervised, as in a causal language model)
and each prediction reads both sides of the sequence (bidirectional), never its own token. Three copies
of the sequence of ``N`` positions do it: a forward stream ``f_p`` (causal), a backward stream ``b_p``
(anti-causal) and a query stream ``g_p`` that predicts token ``p`` from ``f_r, r < p`` and ``b_r, r > p``.
Drawn as a matrix, the query rows hold a strictly lower and a strictly upper triangle meeting at the
diagonal: two wings.

``butterfly`` at length ``n = 3N`` (``n`` a multiple of 3): tokens ``0 .. N-1`` are ``f_p``, ``N .. 2N-1``
``b_p``, ``2N .. 3N-1`` ``g_p``.

| query | may attend to |
|---|---|
| ``f_p`` | ``f_r`` with ``r <= p`` |
| ``b_p`` | ``b_r`` with ``r >= p`` |
| ``g_p`` | ``f_r`` with ``r < p``, ``b_r`` with ``r > p``, and ``g_p`` itself |

Every token attends to itself (A1). The mask is transitive (``M M = M``), so after any number of layers
``g_p`` has heard every position but ``p`` and never ``p`` (:func:`butterfly_flow`);
:func:`butterfly_dense` is the plain reference (loops over pairs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.masks.base import Predicate
from rankcollapse.masks.families import Family
from rankcollapse.masks.sparse import SparseMask
from rankcollapse.masks.two_stream import runs_to_sparse, stream_length


class Butterfly(Family):
    """``butterfly`` (module docstring): forward, backward and query streams of ``n/3`` tokens each. Ours,
    built from Li & Guo's one-line description."""

    name = "butterfly"
    summary = ("three streams of n/3 tokens: forward causal, backward anti-causal, query g_p reads f_<p and "
               "b_>p (Li & Guo 2026, our reading)")
    cheap_rule = False  # the rule needs n (the stream length): FlexAttention's mask_mod must be given n

    def _nnz_hint(self, n: int) -> float:
        third = n / 3
        return 2 * third * (third + 1) / 2 + third * third

    def predicate(self, n: int) -> Predicate:
        big = stream_length(self.spec, n, 3)

        def rule(i: Any, j: Any) -> Any:
            si, sj = i // big, j // big  # 0 forward, 1 backward, 2 query
            p, r = i % big, j % big
            forward = (si == 0) & (sj == 0) & (r <= p)
            backward = (si == 1) & (sj == 1) & (r >= p)
            left = (si == 2) & (sj == 0) & (r < p)
            right = (si == 2) & (sj == 1) & (r > p)
            own = (si == 2) & (i == j)
            return forward | backward | left | right | own

        return rule

    def _sparse(self, n: int) -> SparseMask:
        big = stream_length(self.spec, n, 3)
        i = np.arange(n, dtype=np.int64)
        s, p = i // big, i % big
        zero = np.zeros(n, dtype=np.int64)
        fwd, bwd, qry = s == 0, s == 1, s == 2
        run1 = (zero, np.where(fwd, p + 1, np.where(qry, p, zero)))  # f_0 .. f_p (f) or f_0 .. f_{p-1} (g)
        run2 = (np.where(bwd, big + p, np.where(qry, big + p + 1, zero)),
                np.where(bwd | qry, 2 * big, zero))  # b_p .. b_{N-1} (b) or b_{p+1} .. b_{N-1} (g)
        run3 = (np.where(qry, i, zero), np.where(qry, i + 1, zero))  # g_p itself
        return runs_to_sparse(n, [run1, run2, run3])


def butterfly_dense(n: int) -> np.ndarray:
    """The plain reference of ``butterfly``: bool [n, n] by a loop over the pairs."""
    big = stream_length("butterfly", n, 3)
    out = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            si, sj, p, r = i // big, j // big, i % big, j % big
            if si == 0:
                out[i, j] = sj == 0 and r <= p
            elif si == 1:
                out[i, j] = sj == 1 and r >= p
            else:
                out[i, j] = (sj == 0 and r < p) or (sj == 1 and r > p) or i == j
    return out


def butterfly_flow(reach: np.ndarray) -> dict[str, bool]:
    """The flows ``butterfly`` is designed for, checked on a composed reachability ``reach`` (bool [n, n],
    ``reach[i, j]`` iff information of token ``j`` reaches token ``i``):

    - ``query_never_hears_its_token``: ``g_p`` reaches neither ``f_p`` nor ``b_p`` (no leak of its target);
    - ``query_hears_every_other_position``: for every ``r != p``, ``g_p`` reaches ``f_r`` or ``b_r``;
    - ``queries_sealed``: no query token reaches another query token, nor does any stream token reach one;
    - ``streams_directed``: ``f_p`` reaches exactly ``f_r, r <= p``; ``b_p`` exactly ``b_r, r >= p``.
    """
    n = reach.shape[0]
    big = stream_length("butterfly", n, 3)
    f, b, g = slice(0, big), slice(big, 2 * big), slice(2 * big, 3 * big)
    r = np.arange(big)
    lower = r[None, :] <= r[:, None]
    eye = np.eye(big, dtype=bool)
    heard = reach[g, f] | reach[g, b]
    return {
        "query_never_hears_its_token": not bool((reach[g, f] & eye).any() or (reach[g, b] & eye).any()),
        "query_hears_every_other_position": bool(heard[~eye].all()),
        "queries_sealed": bool(np.array_equal(reach[g, g], eye)) and not bool(reach[: 2 * big, g].any()),
        "streams_directed": bool(np.array_equal(reach[f, f], lower) and np.array_equal(reach[b, b], lower.T)
                                 and not reach[f, b].any() and not reach[b, f].any()),
    }

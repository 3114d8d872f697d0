"""What a mask's graph predicts about the cumulative context's concentration on the first token.

Wu, Wang, Jegelka, Jadbabaie (ICML 2025): under a causal mask the cumulative context
``P(t) = A(t) ... A(1)`` (``metrics.rollout``) converges to the first token exponentially with depth,
and a sliding window slows it, at a rate set by ``ceil((N - 1) / (w - 1))``. The graph facts behind it
(edge ``j -> i`` iff ``M[i, j]``; ``dist`` in hops, ``masks.analysis``):

- **Token 0 must be a sink and a center**: its only key is itself (a closed component ``{0}``), and
  every token is reachable from it. Then ``P(t)[0, 0] = 1`` for every ``t`` and, for row-stochastic
  ``M(s)`` with weight at least ``eps`` on every edge, every token's share tends to 1. Without it the
  limit (if any) is a stationary mix, not the first token: ``applies`` is False.
- **Reach**: ``P(t)[i, 0] > 0`` exactly from layer ``t = dist(0, i)`` on (a path of ``t`` edges from
  0 to ``i``, padded with self-loops; before that no path exists), so the first-token gap
  ``1 - P(t)[i, 0]`` is exactly 1 for ``t < dist(0, i)``.
- **Hops** ``r = max_i dist(0, i)``: the layers the first token needs to reach the last. Causal: 1;
  ``causal-window:w=W`` (``0 <= i - j <= W``, our convention; Wu et al.'s window of ``w = W + 1``
  tokens): ``ceil((N - 1) / W)``, their ``ceil((N - 1) / (w - 1))``.
- **Rate**: with ``u(t) = max_i (1 - P(t)[i, 0])`` and ``eps`` the smallest weight on an edge,
  ``u(t) <= (1 - eps^r)^floor(t / r)`` (a block of ``r`` layers gives every token at least ``eps^r``
  on token 0, and ``u`` never grows), a per-layer factor of at most ``(1 - eps^r)^(1 / r)``, which
  grows with ``r``: wider windows concentrate faster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError


@dataclass(frozen=True)
class FirstTokenPrediction:
    """The graph's predictions for one mask at ``n`` tokens (module docstring).

    ``applies``: token 0 is a sink (its only key is itself) and a center; ``reach``: int64 [n],
    ``dist(0, i)``, the first layer with ``P(t)[i, 0] > 0`` (-1: never); ``hops``: ``max_i reach[i]``
    (None when it does not apply); ``why``: one line when it does not apply.
    """

    spec: str | None
    n: int
    applies: bool
    reach: np.ndarray
    hops: int | None
    why: str = ""

    def gap_bound(self, eps: float, t: int) -> float:
        """``(1 - eps^r)^floor(t / r)``: the bound on ``max_i (1 - P(t)[i, 0])`` after ``t`` layers."""
        r = self._hops()
        _check_eps(eps)
        return float((1.0 - eps**r) ** (t // r))

    def rate_bound(self, eps: float) -> float:
        """``(1 - eps^r)^(1 / r)``: the bound's per-layer factor (1.0 where ``eps^r`` underflows)."""
        r = self._hops()
        _check_eps(eps)
        return float((1.0 - eps**r) ** (1.0 / r))

    def _hops(self) -> int:
        if not self.applies or self.hops is None:
            raise RankCollapseError(f"mask {self.spec or '<matrix>'} at n = {self.n}: {self.why}")
        return max(self.hops, 1)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "n": self.n, "applies": self.applies, "hops": self.hops, "why": self.why}


def _check_slope(slope: float, low_open: bool) -> None:
    bad = isinstance(slope, bool) or not isinstance(slope, int | float) or not math.isfinite(slope)
    if bad or slope < 0 or (low_open and slope == 0):
        allowed = "> 0" if low_open else ">= 0"
        raise RankCollapseError(
            f"slope={slope!r} is invalid; allowed: a finite number {allowed} (the decay m)")


def _check_eps(eps: float) -> None:
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0.0 < float(eps) <= 1.0:
        raise RankCollapseError(f"eps={eps!r} is invalid; allowed: the smallest edge weight, in (0, 1]")


def first_token_prediction(mask: Any, n: int) -> FirstTokenPrediction:
    """The predictions for ``mask`` (a spec string, a ``Mask`` or a boolean [n, n] matrix) at ``n`` tokens."""
    from rankcollapse.edge.validate import check_int
    from rankcollapse.masks.analysis import bfs_distances
    from rankcollapse.masks.fixed import from_dense
    from rankcollapse.masks.spec import parse_mask

    n = check_int("n", n, low=1)
    if isinstance(mask, str):
        mask = parse_mask(mask)
    elif not hasattr(mask, "sparse"):
        mask = from_dense(mask)
    spec = getattr(mask, "spec", None)
    s = mask.sparse(n)
    keys0 = s.indices[s.indptr[0] : s.indptr[1]]
    import scipy.sparse as sp

    # edge j -> i iff M[i, j]: the forward graph is the transpose of the CSR rows (i: its keys j)
    rows = np.repeat(np.arange(n), np.diff(s.indptr))
    graph = sp.csr_matrix((np.ones(rows.size), (s.indices, rows)), shape=(n, n))
    reach = bfs_distances(graph, 0)
    if not np.array_equal(np.sort(keys0), [0]):
        why = f"token 0 attends to {keys0.size} keys, not only itself: it is not a sink"
        return FirstTokenPrediction(spec, n, False, reach, None, why)
    if bool((reach < 0).any()):
        missing = int(np.flatnonzero(reach < 0)[0])
        why = f"token {missing} is not reachable from token 0 (token 0 is not a center)"
        return FirstTokenPrediction(spec, n, False, reach, None, why)
    return FirstTokenPrediction(spec, n, True, reach, int(reach.max()))


def window_hops(n: int, w: int) -> int:
    """Wu et al.'s ``ceil((N - 1) / (w - 1))`` for a causal sliding window of ``w`` tokens (itself and
    the ``w - 1`` before it; ``causal-window:w=<w - 1>`` here), ``w >= 2``."""
    if w < 2 or n < 1:
        raise RankCollapseError(f"window of w = {w} tokens at n = {n}: allowed w >= 2, n >= 1")
    return math.ceil((n - 1) / (w - 1))


def decay_bias(n: int, slope: float) -> Any:
    """The decay (ALiBi-type) bias ``B[i, j] = -m |i - j|``, float64 torch [n, n], added to the logits
    through ``core.attention.masked_softmax(..., bias=B)``.

    Under a causal mask it is Wu et al. 2025's decay mask ``log(gamma^(i - j))`` with ``m = -log gamma``
    (ALiBi's linear bias of one head, slope ``m``); with uniform content every row is a truncated
    geometric distribution over the distance ``i - j``. RankCollapseError for ``n < 1`` or a slope that is
    not a finite number ``>= 0``.
    """
    import torch

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise RankCollapseError(f"n={n!r} is invalid; allowed: an integer >= 1 (tokens)")
    _check_slope(slope, low_open=False)
    idx = torch.arange(n, dtype=torch.float64)
    return -float(slope) * (idx[:, None] - idx[None, :]).abs()


def decay_critical_distance(t: int, slope: float) -> float:
    """Wu et al. 2025's critical point of the decay mask's cumulative context, ``x* = t / (e^m - 1)``: the
    distance ``i - j`` at which token ``i``'s influence profile after ``t`` layers peaks (before the first
    token's sink), for uniform content.

    Derivation (ours): with uniform content each layer moves influence back by a geometric distance,
    ``P(k) = (1 - q) q^k``, ``q = e^-m``, far from the first token; after ``t`` layers the distance is
    negative binomial, ``C(x + t - 1, x) (1 - q)^t q^x``, with mean ``t q / (1 - q) = x*`` and its mode
    at ``floor((t q - 1) / (1 - q)) + 1`` (within one position below ``x*``), so the profile rises from
    the token itself (``x = 0``) to ``x*`` and falls after it whenever ``t q > 1``: non-monotone.
    RankCollapseError for ``t < 0`` or a slope that is not a finite number ``> 0``.
    """
    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        raise RankCollapseError(f"t={t!r} is invalid; allowed: an integer >= 0 (layers)")
    _check_slope(slope, low_open=True)
    return t / math.expm1(float(slope))


def decay_uniform_context(n: int, slope: float, t: int) -> Any:
    """The cumulative context ``P(t) = A^t`` (float64 torch [n, n]) of uniform content under the causal
    decay mask: ``A = softmax_causal(B)``, ``B = decay_bias(n, slope)``, every logit 0 but the bias (through
    ``core.attention.masked_softmax``, the one masked softmax): the oracle Wu et al. 2025's critical point
    ``x* = t / (e^m - 1)`` is about (``decay_critical_distance``), truncation at the first token included."""
    import torch

    from rankcollapse.core.attention import masked_softmax

    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        raise RankCollapseError(f"t={t!r} is invalid; allowed: an integer >= 0 (layers)")
    bias = decay_bias(n, slope)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    a = masked_softmax(torch.zeros(n, n, dtype=torch.float64), causal, bias)
    return torch.linalg.matrix_power(a, t)

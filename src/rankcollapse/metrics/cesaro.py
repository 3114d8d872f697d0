"""Causal attention at initialisation as powers of the Cesàro matrix (Chowdhury, arXiv 2603.10123).

Uniform causal attention is the Cesàro matrix ``C[i, j] = 1 / (i + 1)`` for ``j <= i`` (0 above the
diagonal): each token averages itself and every token before it, which is what softmax attention does
when its logits are all equal (a random init's logits are near zero). ``H`` such layers give the rollout
``C^H`` (``metrics.rollout``: ``P(H) = A(H) ... A(1)``); the last token's row ``C^H[n-1, :]`` is its
influence profile. Chowdhury's abstract models multi-layer causal attention so [abstract]; the
formulas below are ours (derived here, tested in ``tests/metrics/test_cesaro.py``):

- *exact row*, :func:`cesaro_row`: ``v <- v C`` ``H`` times from ``v = e_i``; ``(v C)[j] = sum_{k >= j}
  v_k / (k + 1)`` is a reversed cumulative sum, so the row costs O(n H). With a residual share ``lam``
  (:func:`mixed_row`): ``v <- lam v + (1 - lam) v C``, the row of ``(lam I + (1 - lam) C)^H``.
- *continuous limit*, :func:`cesaro_density`: ``C`` is the chain that jumps from ``i`` to a uniform
  position ``<= i``; after ``H`` jumps the position over ``n`` is a product of ``H`` uniforms, whose
  density on ``y in (0, 1]`` is ``f_H(y) = ln(1/y)^(H-1) / (H-1)!`` (``-ln y`` is a sum of ``H``
  exponentials: Gamma(H, 1)). So ``n C^H[n-1, j] -> f_H(y)`` with ``y = j / n`` as ``n`` grows with
  ``H`` fixed. Its three parts are the abstract's: a logarithmic divergence at ``y -> 0`` (the
  *primacy tail*), ``f_H(1) = 0`` for ``H >= 2`` (no recency from attention alone), and, where
  ``ln(1/y) = 1`` (``y = 1/e``), exactly ``1 / (H-1)!``: the *factorial dead zone* of order
  ``1/(H-1)!``.
- *the recency delta* [abstract: "residual connections create an isolated O(1) anchor at the final
  token"]: a residual path carries the last token's own input with weight 1; :func:`theory_profile` is
  ``C^H[n-1, :] + e_{n-1}``, the abstract's two terms. Its rank order (all that a Spearman correlation
  reads) is the same for every mixture ``sum_k w_k C^k[n-1, :]`` with ``w_k >= 0`` and some ``w_k > 0``
  at ``k >= 2``, plus a delta above the first position: decreasing over ``j < n - 1`` (every ``C^k`` row
  of ``k >= 2`` decreases strictly in ``j``, ``k = 1`` is flat), largest at ``n - 1``.

The finite-``n`` discrete row reaches its limit slowly for deep stacks: at ``y = 1/e`` the ratio
``n C^H[n-1, j] (H-1)!`` is 1.02, 1.14, 1.9, 4.9 at ``H`` = 4, 8, 16, 24 for ``n = 256`` and 0.98, 1.4,
8.0, 172 for ``n = 64`` (the limit needs ``ln n`` large against ``H``: ``-ln y`` is a sum of ``H``
exponentials, while a finite sequence stops the chain at its first token).
"""

from __future__ import annotations

import math

import numpy as np

from rankcollapse.edge.errors import RankCollapseError


def _check(n: int, depth: int) -> tuple[int, int]:
    for name, v, low in (("n", n, 1), ("depth", depth, 0)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
            raise RankCollapseError(f"{name}={v!r} is invalid; allowed: an integer >= {low}")
    return int(n), int(depth)


def cesaro_matrix(n: int) -> np.ndarray:
    """``C [n, n]`` float64: ``C[i, j] = 1 / (i + 1)`` for ``j <= i``, else 0 (row-stochastic)."""
    n, _ = _check(n, 0)
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]


def _step(v: np.ndarray) -> np.ndarray:
    """``v C`` for row vectors ``v [..., n]``: ``sum_{k >= j} v_k / (k + 1)``."""
    n = v.shape[-1]
    w = v / np.arange(1, n + 1)
    return np.flip(np.cumsum(np.flip(w, -1), -1), -1)


def mixed_row(n: int, depth: int, lam: float = 0.0, i: int = -1) -> np.ndarray:
    """Row ``i`` of ``(lam I + (1 - lam) C)^depth``, float64 [n]: token ``i``'s influence profile after
    ``depth`` layers of uniform causal attention with a residual share ``lam`` in [0, 1] (0: ``C^depth``)."""
    n, depth = _check(n, depth)
    if isinstance(lam, bool) or not isinstance(lam, int | float) or not 0.0 <= float(lam) <= 1.0:
        raise RankCollapseError(f"lam={lam!r} is invalid; allowed: a number in [0, 1]")
    if isinstance(i, bool) or not isinstance(i, int) or not -n <= i < n:
        raise RankCollapseError(f"i={i!r} is invalid; allowed: a token index in {-n}..{n - 1}")
    v = np.zeros(n)
    v[i] = 1.0
    for _ in range(depth):
        v = float(lam) * v + (1.0 - float(lam)) * _step(v) if lam else _step(v)
    return v


def cesaro_row(n: int, depth: int, i: int = -1) -> np.ndarray:
    """Row ``i`` of ``C^depth``, float64 [n] (:func:`mixed_row` with ``lam = 0``)."""
    return mixed_row(n, depth, 0.0, i)


def cesaro_density(y: np.ndarray | float, depth: int) -> np.ndarray:
    """``f_H(y) = ln(1/y)^(H-1) / (H-1)!`` on ``y in (0, 1]`` (``H = depth >= 1``; ``f_1 = 1``), the density
    of a product of ``H`` uniforms: the continuous limit of ``n C^H[n-1, y n]``. Formed in logs (finite for
    large ``H``); 0 at ``y = 1`` for ``H >= 2``. RankCollapseError for ``y`` outside (0, 1]."""
    _, depth = _check(1, depth)
    if depth < 1:
        raise RankCollapseError(f"depth={depth!r} is invalid; allowed: an integer >= 1")
    y = np.asarray(y, dtype=float)
    if not ((y > 0) & (y <= 1)).all():
        raise RankCollapseError("y must lie in (0, 1]")
    if depth == 1:
        return np.ones_like(y)
    lg = -np.log(y)
    logs = (depth - 1) * np.log(np.where(lg > 0, lg, 1.0)) - math.lgamma(depth)
    return np.where(lg > 0, np.exp(logs), 0.0)


def dead_zone(depth: int) -> float:
    """``1 / (H-1)!``: ``f_H`` at ``y = 1/e``, the abstract's order of the middle trough (``H >= 1``)."""
    _, depth = _check(1, depth)
    if depth < 1:
        raise RankCollapseError(f"depth={depth!r} is invalid; allowed: an integer >= 1")
    return math.exp(-math.lgamma(depth))


def middle_position(n: int) -> int:
    """The position ``j`` of an ``n``-position profile nearest ``y = j / n = 1/e`` (where ``ln(1/y) = 1``),
    clipped to ``1 .. n - 2`` (``n >= 3``): where :func:`dead_zone` is the continuous limit's value."""
    n, _ = _check(n, 0)
    if n < 3:
        raise RankCollapseError(f"n={n} is too small; allowed: n >= 3 (a middle between the two ends)")
    return int(min(max(round(n / math.e), 1), n - 2))


def theory_profile(n: int, depth: int) -> np.ndarray:
    """``C^depth[n-1, :] + e_{n-1}``, float64 [n]: the Cesàro power and the recency delta, the abstract's two
    terms (module docstring); the reference a Spearman correlation with a measured profile reads."""
    out = cesaro_row(n, depth)
    out[-1] += 1.0
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two profiles ``[n]`` (average ranks for ties; NaN where either is
    constant or ``n < 3``)."""
    from scipy.stats import rankdata

    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise RankCollapseError(f"profiles of lengths {a.size} and {b.size}; allowed: equal lengths")
    if a.size < 3:
        return math.nan
    ra, rb = rankdata(a), rankdata(b)
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])

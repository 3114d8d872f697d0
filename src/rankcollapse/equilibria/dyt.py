"""The paper's LayerNorm constructions with DyT in the normalisation's place (ours; DyT: arXiv 2503.10622).

The NeurIPS paper's counterexample (§4.3.1, Figs. 1 and 5: N = d = 2, ``W_V = [[1, w], [0, 1]]``) and Theorem
3's construction (§4.3.2, App. F.1: N = d, ``W_V = I + w J`` upper bidiagonal) both use the causal mask with
``W_Q = W_K = 0``, so that token ``k`` (1-based) averages tokens ``1..k``: ``A[k, i] = 1/k`` for ``i <= k``.
With the sphere normalisation they have equilibria of every rank. Here the normalisation is DyT with
``gamma = 1, beta = 0`` (``core.norms.dyt``), row convention ``x -> x W_V``:

    X(t+1) = F(X(t)) = tanh(alpha A X(t) W_V)      (element-wise, no projection onto a sphere).

Unlike LayerNorm, DyT is not invariant to the scale of ``W_V``: only ``alpha W_V`` matters, so ``alpha`` is
the whole scale (the paper's ``W_V`` keeps its unit diagonal).

**The structure is triangular** (``W_V`` upper triangular with diagonal ``delta_j > 0``): entry ``(k, j)`` of
``F(X)`` reads tokens ``1..k`` and coordinates ``1..j`` only. At a fixed point, with ``S = x_1 + ... +
x_{k-1}`` the earlier tokens' sum, coordinate ``u = x_{k, j}`` solves the scalar equation

    u = tanh(beta u + c),   beta = alpha delta_j / k,
    c = (alpha / k) (delta_j S_j + sum_{i < j} W_ij (S_i + x_{k,i})),

which has one root for ``beta <= 1`` and at most three for ``beta > 1`` (:func:`scalar_roots`). So every
equilibrium is found by walking the roots coordinate by coordinate (:func:`enumerate_equilibria`, exact to
the root finder's 1e-15). The Jacobian of ``F`` at a fixed point is lower triangular in the order (token,
coordinate), so its eigenvalues are exactly its diagonal, ``beta_kj (1 - x_kj^2)``: an equilibrium is
linearly stable iff every one is below 1 (:attr:`DytEquilibrium.radius`).

Two consequences, checked by the tests and measured by the story ``dyt``: for ``alpha <= 1`` the only
equilibrium is ``X = 0``; for ``alpha <= 2`` every token ``k >= 2`` has one root per coordinate, and since
``x_k = x_1`` solves token ``k``'s equations when the earlier tokens all equal ``x_1``, every equilibrium has
all tokens equal: rank at most 1.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote

#: Where the story's rows say the DyT map comes from.
SOURCE = "ours: the paper's counterexample and Theorem 3 construction, DyT (arXiv 2503.10622) in LN's place"
#: Equilibria :func:`enumerate_equilibria` lists at most (3 roots per coordinate: up to 3^(N d)).
MAX_EQUILIBRIA = 200_000
NORMS = ("dyt", "sphere")


def uniform_causal(n: int) -> Tensor:
    """The attention of ``W_Q = W_K = 0`` under the causal mask: ``A[k, i] = 1 / (k + 1)`` for ``i <= k``
    (0-based), float64 [n, n]."""
    a = torch.ones(n, n, dtype=torch.float64).tril()
    return a / a.sum(dim=1, keepdim=True)


def _check(w_v: Tensor, alpha: float) -> np.ndarray:
    w = w_v.detach().cpu().to(torch.float64).numpy()
    if w.ndim != 2 or w.shape[0] != w.shape[1] or not np.isfinite(w).all():
        raise RankCollapseError(f"w_v must be a finite square matrix, got {quote(w_v)}")
    if np.abs(np.tril(w, -1)).max(initial=0.0) > 0 or (np.diag(w) <= 0).any():
        raise RankCollapseError("the DyT equilibria need an upper-triangular W_V with a positive diagonal")
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and alpha > 0):
        raise RankCollapseError(f"alpha must be a positive finite number, got {quote(alpha)}")
    return w


def dyt_map(x: Tensor, w_v: Tensor, alpha: float, norm: str = "dyt") -> Tensor:
    """One step ``F(X) = tanh(alpha A X W_V)`` (``norm="dyt"``) or the paper's ``D A X W_V`` with ``D`` the
    sphere normalisation (``norm="sphere"``), uniform causal ``A``. x: [..., n, d] -> [..., n, d]."""
    from rankcollapse.core.norms import dyt, sphere_normalize

    if norm not in NORMS:
        raise RankCollapseError(f"norm must be one of {', '.join(NORMS)}, got {quote(norm)}")
    y = uniform_causal(x.shape[-2]).to(x.dtype) @ x @ w_v.to(x.dtype)
    return dyt(y, alpha) if norm == "dyt" else sphere_normalize(y)


def scalar_roots(beta: float, c: float, tol: float = 1e-15) -> list[float]:
    """Every real root of ``u = tanh(beta u + c)`` (``beta > 0``), ascending: one for ``beta <= 1``, up to
    three otherwise. ``h(u) = tanh(beta u + c) - u`` has ``h(-1) > 0 > h(1)`` and is monotone between its
    critical points ``beta u + c = +- acosh(sqrt(beta))``; each sign change is bisected to ``tol``; a root
    where ``h`` only touches 0 (a double root, at a critical point) is kept when ``|h| <= tol`` there."""
    from scipy.optimize import brentq

    def h(u: float) -> float:
        return math.tanh(beta * u + c) - u

    cuts = [-1.0, 1.0]
    if beta > 1:
        s = math.acosh(math.sqrt(beta))
        cuts += [u for u in ((-s - c) / beta, (s - c) / beta) if -1.0 < u < 1.0]
    cuts = sorted(cuts)
    roots: list[float] = []
    for a, b in itertools.pairwise(cuts):
        ha, hb = h(a), h(b)
        if ha == 0.0:
            roots.append(a)
        elif ha * hb < 0:
            roots.append(float(brentq(h, a, b, xtol=tol, rtol=4 * np.finfo(float).eps)))
    for u in cuts[1:-1]:  # a tangency: h touches 0 at a critical point
        if abs(h(u)) <= tol and all(abs(u - r) > 1e-9 for r in roots):
            roots.append(u)
    if abs(h(1.0)) == 0.0:
        roots.append(1.0)
    out: list[float] = []
    for r in sorted(roots):
        if not out or abs(r - out[-1]) > 1e-12:
            out.append(r)
    return out


@dataclass
class DytEquilibrium:
    """One fixed point ``X`` [n, d] of ``F``; ``diagonal`` [n, d] the Jacobian's eigenvalues
    ``beta_kj (1 - x_kj^2)`` (exact: the Jacobian is triangular, module docstring), ``radius`` their largest
    (stable iff < 1), ``rank`` the numerical rank of ``X``, ``residual`` ``max |F(X) - X|``."""

    x: Tensor
    diagonal: Tensor
    rank: int = 0
    residual: float = 0.0

    @property
    def radius(self) -> float:
        return float(self.diagonal.max())

    @property
    def stable(self) -> bool:
        return self.radius < 1.0


@dataclass
class DytEquilibria:
    """Every equilibrium of ``F`` for ``(w_v, alpha, n)`` (``complete``: the walk was not cut at
    ``max_count``), with its ranks."""

    n: int
    d: int
    alpha: float
    equilibria: list[DytEquilibrium] = field(default_factory=list)
    complete: bool = True

    def ranks(self, stable: bool | None = None) -> list[int]:
        """The ranks present (``stable``: only of the stable equilibria, or only of the unstable ones)."""
        return sorted({e.rank for e in self.equilibria if stable is None or e.stable is stable})

    def count(self, rank: int, stable: bool | None = None) -> int:
        return sum(e.rank == rank and (stable is None or e.stable is stable) for e in self.equilibria)


def enumerate_equilibria(w_v: Tensor, n: int, alpha: float, max_count: int = MAX_EQUILIBRIA) -> DytEquilibria:
    """Every equilibrium of ``F(X) = tanh(alpha A X W_V)`` with ``n`` tokens (module docstring): a walk over
    the scalar roots of each coordinate in the order (token, coordinate). Cut after ``max_count`` leaves
    (``complete`` False). Each equilibrium's residual is measured on ``F`` itself (float64)."""
    from rankcollapse.metrics import num_rank

    w = _check(w_v, alpha)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise RankCollapseError(f"n must be a positive integer, got {quote(n)}")
    d = w.shape[0]
    delta = np.diag(w)
    out = DytEquilibria(n, d, float(alpha))
    x = np.zeros((n, d))
    diag = np.zeros((n, d))

    def walk(k: int, j: int, s: np.ndarray) -> bool:
        """Fill coordinate (k, j) with each root in turn; False once the cut is reached."""
        if k == n:
            if len(out.equilibria) >= max_count:
                out.complete = False
                return False
            out.equilibria.append(DytEquilibrium(torch.tensor(x.copy()), torch.tensor(diag.copy())))
            return True
        beta = alpha * delta[j] / (k + 1)
        c = alpha / (k + 1) * (delta[j] * s[j] + float(w[:j, j] @ (s[:j] + x[k, :j])))
        for u in scalar_roots(beta, c):
            x[k, j], diag[k, j] = u, beta * (1.0 - u * u)
            nxt = (k, j + 1, s) if j + 1 < d else (k + 1, 0, s + x[k])
            if not walk(*nxt):
                return False
        return True

    walk(0, 0, np.zeros(d))
    w_t = torch.tensor(w)
    for e in out.equilibria:
        e.rank = int(num_rank(e.x))
        e.residual = float((dyt_map(e.x, w_t, alpha) - e.x).abs().max())
    return out


def rescaled_residual(x: Tensor, w_v: Tensor, alpha: float) -> tuple[float, float]:
    """``(min over c > 0 of max |F(c X) - c X| / c, the best c)``: how far the best rescaled copy of ``X``
    (a sphere equilibrium) is from being a DyT fixed point, relative to its size (golden-section search on
    ``log c`` over ``[1e-3, 1]``: DyT's fixed points lie in ``(-1, 1)^d``)."""
    from scipy.optimize import minimize_scalar

    _check(w_v, alpha)

    def gap(log_c: float) -> float:
        c = math.exp(log_c)
        return float((dyt_map(c * x, w_v, alpha) - c * x).abs().max()) / c

    res = minimize_scalar(gap, bounds=(math.log(1e-3), 0.0), method="bounded", options={"xatol": 1e-10})
    return float(res.fun), float(math.exp(res.x))


@dataclass
class Basins:
    """Where ``starts`` [b, n, d] end after iterating the map: per start the final ``rank``, ``converged``
    (``max |F(X) - X| <= tol``: the sphere map's rank-one ends converge like ``1/t``, never to ``tol`` in a
    few thousand steps, while their rank is already exact), ``zero`` (every token below ``tol``) and
    ``spread`` (``mu_rel`` of the end: 0 when all tokens coincide)."""

    rank: Tensor
    converged: Tensor
    zero: Tensor
    spread: Tensor
    steps: int

    def share(self, at_least: int) -> float:
        """The share of starts whose end has a rank of at least ``at_least``."""
        return float((self.rank >= at_least).to(torch.float64).mean())


def basins(
    starts: Tensor, w_v: Tensor, alpha: float, norm: str = "dyt", steps: int = 4000, tol: float = 1e-9
) -> Basins:
    """Iterate ``dyt_map`` (``norm``) from every start [b, n, d] for ``steps`` steps (float64) and classify
    the end (:class:`Basins`); the rank counts singular values above ``1e-6`` of the largest (states reached
    by iteration, not built exactly: at N = 2 and 4 the sphere map's ends have ``sigma_2 / sigma_1`` either
    below 1e-12 or above 1e-2 after 1,000 steps, DyT's below 1e-12)."""
    from rankcollapse.metrics import mu_rel, num_rank

    if norm == "dyt":
        _check(w_v, alpha)
    x = starts.to(torch.float64)
    w = w_v.to(torch.float64)
    for _ in range(steps):
        x = dyt_map(x, w, alpha, norm)
    change = (dyt_map(x, w, alpha, norm) - x).abs().flatten(1).amax(dim=1)
    zero = x.abs().flatten(1).amax(dim=1) <= tol
    rank = torch.where(zero, torch.zeros_like(change), num_rank(x, rtol=1e-6)).to(torch.int64)
    spread = torch.where(zero, torch.zeros_like(change), mu_rel(x))
    return Basins(rank, change <= tol, zero, spread, steps)

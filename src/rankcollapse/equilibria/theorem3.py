"""Theorem 3 as published (§4.3.2, App. F.1): one value matrix with equilibria of every rank.

Causal mask, ``W_Q = W_K = 0`` (uniform causal attention: token ``i`` (1-based) averages tokens ``1..i``),
sphere LayerNorm, row convention ``x -> x W_V``. For ``N = d`` the paper's ``W_V`` is upper bidiagonal,
``W_V = I + w J`` (1 on the diagonal, ``w`` above it). Token ``i`` is at rest iff, with ``S`` the sum of the
earlier tokens,

    (S + x_i) W_V = lambda_i x_i,  lambda_i = ||(S + x_i) W_V|| > 0,  i.e.  x_i (lambda_i I - W_V) = S W_V.

Every real solution of that equation is a *branch*; :func:`enumerate_equilibria` walks all of them token by
token (the equations are triangular). For a unipotent ``W_V = I + K`` (``K`` nilpotent, one-dimensional left
kernel ``span(k)``):

- ``lambda = 1`` (the *Jordan* branch): ``x K = -S W_V``; solvable iff ``S W_V`` lies in the row space of
  ``K``; then ``x = p + c k`` (``p`` the least-norm solution, ``p perp k``) with ``c = +-sqrt(1 - ||p||^2)``:
  the paper's free sign per token (none when ``||p|| = 1``, no solution when ``||p|| > 1``).
- ``lambda != 1``: ``x = S W_V (lambda I - W_V)^{-1} = sum_k mu^{k+1} S W_V K^k``, ``mu = 1 / (lambda - 1)``,
  and ``||x|| = 1`` is a polynomial equation of degree ``2d`` in ``mu``; real roots with ``lambda > 0``.

The **paper's family**: the first ``N - k + 1`` tokens at ``s e_d`` (token 1 on the Jordan branch, the copies
on ``lambda = 2, 3, ...``), then ``k - 1`` Jordan-branch tokens (the chain) with their signs: ``2^k``
equilibria of rank ``k``, sufficient condition ``w >= N``. Every other branch is reported as ``other``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote

SOURCE = "paper (Theorem 3, App. F.1: upper-bidiagonal W_V, W_Q = W_K = 0, causal)"
#: Equilibria :func:`enumerate_equilibria` lists at most (the tree can grow like (2 + 2d)^N).
MAX_EQUILIBRIA = 20_000


def check_size(n: int, d: int, w: float, need_square: bool = True) -> float:
    """Validate ``n``, ``d``, ``w`` for the construction; return ``w`` as a float."""
    for name, v in (("n", n), ("d", d)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise RankCollapseError(f"{name} must be a positive integer, got {quote(str(v), 40)}")
    if need_square and n != d:
        raise RankCollapseError(f"Theorem 3's construction needs N = d, got N = {n}, d = {d}")
    if d > 12:
        raise RankCollapseError(f"d = {d} is too large for the exhaustive enumeration; allowed: d <= 12")
    from rankcollapse.equilibria.counterexample_paper import check_w

    return check_w(w, "the construction")


def bidiagonal_value(d: int, w: float) -> Tensor:
    """``W_V = I + w J`` [d, d] float64: 1 on the diagonal, ``w`` on the superdiagonal (App. F.1)."""
    w = check_size(d, d, w)
    return torch.eye(d, dtype=torch.float64) + w * torch.diag(torch.ones(d - 1, dtype=torch.float64), 1)


def appendix_f1_value(d: int, k: int, w: float) -> Tensor:
    """App. F.1's rank-``k`` example: identity with a trailing ``k x k`` bidiagonal block (``k = 1``: ``I``;
    ``k = 2``: trailing ``[[1, w], [0, 1]]``; ``k = d``: :func:`bidiagonal_value`)."""
    w = check_size(d, d, w)
    if not 1 <= k <= d:
        raise RankCollapseError(f"k must be in 1..d = 1..{d}, got {k}")
    out = torch.eye(d, dtype=torch.float64)
    if k > 1:
        out[d - k :, d - k :] = bidiagonal_value(k, w)
    return out


def zero_qk(d: int) -> Tensor:
    """``W_QK = 0``: uniform attention over each token's context."""
    return torch.zeros(d, d, dtype=torch.float64)


@dataclass
class BranchStep:
    """One token's solution: ``x`` [d], ``lam`` (its norm factor), ``branch`` ("jordan" or "lambda"), ``sign``
    of the free coordinate on the Jordan branch (0 when none)."""

    x: np.ndarray
    lam: float
    branch: str
    sign: int


def _kernel(nil: np.ndarray) -> np.ndarray:
    """Unit left-kernel vector of the nilpotent part (x K = 0); RankCollapseError unless one-dimensional."""
    _, s, vt = np.linalg.svd(nil.T)
    tol = 1e-12 * max(1.0, float(s[0]) if s.size else 1.0)
    null = vt[s <= tol] if s.size else vt
    null = np.concatenate([null, vt[len(s) :]]) if vt.shape[0] > len(s) else null
    if null.shape[0] != 1:
        raise RankCollapseError(
            f"W_V - I has a {null.shape[0]}-dimensional left kernel: its equilibria form a continuum "
            "(the enumeration needs a single Jordan block)"
        )
    k = null[0]
    j = int(np.argmax(np.abs(k)))
    return k if k[j] > 0 else -k


def token_solutions(
    s_sum: np.ndarray, w_v: np.ndarray, nil: np.ndarray, kern: np.ndarray
) -> list[BranchStep]:
    """Every unit ``x`` with ``x (lambda I - W_V) = S W_V``, ``lambda > 0`` (module docstring)."""
    d = w_v.shape[0]
    v = s_sum @ w_v
    out: list[BranchStep] = []
    # Jordan branch, lambda = 1: x K = -v
    p, *_ = np.linalg.lstsq(nil.T, -v, rcond=None)
    p = p - (p @ kern) * kern
    if np.linalg.norm(p @ nil + v) <= 1e-10 * max(1.0, float(np.linalg.norm(v))):
        rest = 1.0 - float(p @ p)
        if rest > 1e-14:
            for sgn in (1, -1):
                out.append(BranchStep(p + sgn * math.sqrt(rest) * kern, 1.0, "jordan", sgn))
        elif rest > -1e-12:
            out.append(BranchStep(p / np.linalg.norm(p), 1.0, "jordan", 0))
    # lambda != 1: x(mu) = sum_k mu^{k+1} v K^k
    if float(np.abs(v).max()) == 0.0:
        return out
    c = [v]
    for _ in range(d - 1):
        c.append(c[-1] @ nil)
    gram = np.array([[float(a @ b) for b in c] for a in c])
    coeff = np.zeros(2 * d + 1)  # coeff[m] multiplies mu^m
    for a in range(d):
        for b in range(d):
            coeff[a + b + 2] += gram[a, b]
    coeff[0] -= 1.0
    for root in np.roots(coeff[::-1]):
        if abs(root.imag) > 1e-7 * (1 + abs(root)):
            continue
        mu = float(root.real)
        for _ in range(4):  # Newton polish on ||x(mu)||^2 - 1
            f = sum(coeff[m] * mu**m for m in range(2 * d + 1))
            df = sum(m * coeff[m] * mu ** (m - 1) for m in range(1, 2 * d + 1))
            if df == 0:
                break
            mu -= f / df
        lam = 1.0 + 1.0 / mu
        if not lam > 1e-12:
            continue
        x = sum(mu ** (k + 1) * c[k] for k in range(d))
        if abs(float(np.linalg.norm(x)) - 1.0) > 1e-9 or any(np.abs(x - o.x).max() < 1e-9 for o in out):
            continue
        out.append(BranchStep(x / np.linalg.norm(x), lam, "lambda", 0))
    return out


@dataclass
class PaperEquilibrium:
    """One equilibrium of the construction: ``x`` [N, d], per token ``lambdas``, ``branches``, ``signs``;
    ``family`` "paper" or "other"; checks filled in by :func:`verify`."""

    x: Tensor
    lambdas: list[float]
    branches: list[str]
    signs: list[int]
    family: str
    rank: int = 0
    residual: float = math.nan
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "x": self.x.tolist(),
            "residual": self.residual,
            "signs": self.signs,
            "family": self.family,
            "lambdas": self.lambdas,
            "branches": self.branches,
            **self.extra,
        }


def _family(steps: list[BranchStep], d: int) -> str:
    """``paper`` iff tokens 1..m sit at s e_d (token 1 Jordan, copies lambda = 2..m), the rest Jordan."""
    e_d = np.zeros(d)
    e_d[-1] = 1.0
    s = 1.0 if steps[0].x[-1] > 0 else -1.0
    if steps[0].branch != "jordan" or np.abs(steps[0].x - s * e_d).max() > 1e-12:
        return "other"
    m = 1
    while (
        m < len(steps) and np.abs(steps[m].x - s * e_d).max() < 1e-12 and abs(steps[m].lam - (m + 1)) < 1e-9
    ):
        m += 1
    return "paper" if all(st.branch == "jordan" for st in steps[m:]) else "other"


def enumerate_equilibria(
    w_v: Tensor, n: int, family: str = "all", max_count: int = MAX_EQUILIBRIA
) -> list[PaperEquilibrium]:
    """Every equilibrium of the causal, ``W_QK = 0`` LN map for a unipotent ``w_v`` [d, d] and ``n`` tokens.

    ``family="paper"`` walks only the paper's branches (``2^k`` per rank ``k``); ``"all"`` every real branch
    (module docstring). Sorted by rank, then family ("paper" first).
    """
    if family not in ("all", "paper"):
        raise RankCollapseError(f"family must be 'all' or 'paper', got {quote(str(family), 40)}")
    w = w_v.detach().cpu().to(torch.float64).numpy()
    d = w.shape[0]
    nil = w - np.eye(d)
    if np.abs(np.triu(nil, 1) - nil).max() > 0 or not np.isfinite(w).all():
        raise RankCollapseError(
            "the enumeration needs a finite unipotent upper-triangular W_V (I + strictly upper)"
        )
    kern = _kernel(nil)
    found: list[list[BranchStep]] = []

    def walk(prefix: list[BranchStep], s_sum: np.ndarray) -> None:
        if len(found) > max_count:
            raise RankCollapseError(f"more than {max_count} equilibria; use family='paper' or a smaller n")
        if len(prefix) == n:
            found.append(list(prefix))
            return
        options = token_solutions(s_sum, w, nil, kern)
        if family == "paper":
            options = [o for o in options if _keeps_paper(prefix, o, d)]
        for o in options:
            walk([*prefix, o], s_sum + o.x)

    walk([], np.zeros(d))
    from rankcollapse.metrics import num_rank

    out = []
    for steps in found:
        x = torch.tensor(np.stack([st.x for st in steps]), dtype=torch.float64)
        eq = PaperEquilibrium(
            x,
            [st.lam for st in steps],
            [st.branch for st in steps],
            [st.sign for st in steps],
            _family(steps, d),
        )
        eq.rank = int(num_rank(x))
        out.append(eq)
    out.sort(key=lambda e: (e.rank, e.family != "paper"))
    return out


def _keeps_paper(prefix: list[BranchStep], o: BranchStep, d: int) -> bool:
    """Whether appending ``o`` can still give a paper-family equilibrium."""
    steps = [*prefix, o]
    if _family(steps, d) == "paper":
        return True
    return False


def paper_chain(n: int, w: float, sign: int = 1) -> Tensor:
    """The paper's closed-form full-rank equilibrium for ``N = d = n`` (all chain signs ``+``, token 1 at
    ``sign e_d``): ``X_1 = e_d``, ``X_2 = (0, .., -1/w, -sqrt(1 - 1/w^2))``, ``X_3 = (0, .., 1/w^2,
    sqrt(1/w^2 - 1/w^4), sqrt(1 - 1/w^2))``, ... as printed in App. F.1 (first three tokens)."""
    w = check_size(n, n, w)
    x = torch.zeros(n, n, dtype=torch.float64)
    x[0, -1] = 1.0
    if n >= 2:
        x[1, -2:] = torch.tensor([-1 / w, -math.sqrt(1 - 1 / w**2)], dtype=torch.float64)
    if n >= 3:
        third = [1 / w**2, math.sqrt(1 / w**2 - 1 / w**4), math.sqrt(1 - 1 / w**2)]
        x[2, -3:] = torch.tensor(third, dtype=torch.float64)
    return sign * x

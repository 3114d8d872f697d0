"""App. F.4 searched: equilibria of the complete mask with the paper's bidiagonal W_V and a free W_QK.

The map is the paper's eq. (3) under the complete mask: ``F(X) = D A X W_V`` with
``A = softmax(X M X^T)`` (every token attends to every token), ``M = W_Q W_K^T / sqrt(d_QK)`` (the
temperature folded into M: the package's map with ``w_qk = M``, ``d_qk = 1``) and ``W_V`` upper bidiagonal,
1 on the diagonal and ``w`` above (:func:`~rankcollapse.equilibria.theorem3.bidiagonal_value`). Index
letters: n/i/j tokens, d features, k the rank searched; N = d throughout (the paper's setting).

- **Structure.** At an equilibrium ``A X W_V = C X`` with ``C = diag(||(A X W_V)_i||) > 0``: every row of
  X is a combination of rows of ``X W_V``, so the row space of X is W_V-invariant (W_V is invertible).
  The invariant subspaces of ``x -> x W_V`` (one Jordan block) are ``span{e_(d-k+1), ..., e_d}``, so a
  rank-k equilibrium is ``X = [0 | Y]``, ``Y`` [n, k] with unit rows, and only the trailing k x k block
  ``M_k`` of M acts: ``normalize_rows(softmax(Y M_k Y^T) Y J_k) = Y``, ``J_k`` the trailing k x k block of
  W_V (itself bidiagonal).
- **Cone test** (:func:`cone_margin`): a condition on Y alone, necessary under *any* positive attention:
  each token ``y_i`` is a combination of the rows of ``Y J_k`` with positive weights and a positive norm
  factor (a linear programme per token).
- **Search** (:func:`search_rank`): a start is a random Y (Gaussian rows, normalised) that passes the cone
  test (margin > :data:`CONE_MIN`; for k < n only) and a random M_k in the box ``|M_ab| <= m_bound``
  (Gaussian, clipped). Least squares on the reduced residual ``normalize_rows(softmax(Y M_k Y^T) Y J_k) - Y``
  (``scipy.optimize.least_squares``, trust region, the exact Jacobian of :func:`reduced_residual`): over
  M_k alone, then over (Y, M_k) jointly, inside the box; ends within :data:`POLISH_FROM` then get Newton
  at fixed M_k (:func:`~rankcollapse.equilibria.finder.newton_polish`). Every end is embedded
  (``X = [0 | Y]``, M zero but its trailing block) and measured on the full d-dimensional map
  (:func:`~rankcollapse.equilibria.lnmap.ln_attention_map`, mask None): :class:`SearchEnd`. Which ends
  count as equilibria is the story's rule (its residual and attention thresholds), not this module's.
- **Full rank** (k = n = d) cannot exist for any M (Perron-Frobenius; the proof is in docs/equilibria.md):
  with X invertible, ``A X W_V = C X`` makes ``C^-1 A = X W_V^-1 X^-1``; ``C^-1 A`` is entrywise positive,
  so its dominant eigenvalue is simple and strictly above every other modulus, while ``W_V^-1`` has the
  eigenvalue 1 N times. :func:`perron_gap` measures that gap for any (X, M); :func:`full_rank_checks`
  draws random (X, M) for it and for the cone test (which no invertible Y can pass, by the same
  argument); the full-rank search is the same least squares without the cone test.
- **Stability** (:func:`stability`): the tangent spectrum on the product of spheres
  (:func:`~rankcollapse.equilibria.theorem3_checks.tangent_moduli`, mask None, ``w_qk = M``) and the
  share of starts :data:`RADIUS` away (random tangent directions, every token perturbed) back within
  :data:`RADIUS` after the given number of layers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.draws import gaussian
from rankcollapse.core.norms import sphere_normalize
from rankcollapse.equilibria.finder import RANK_TOL, newton_polish, residual
from rankcollapse.equilibria.lnmap import attention_matrix, iterate
from rankcollapse.equilibria.theorem3 import bidiagonal_value
from rankcollapse.equilibria.theorem3_checks import direction_counts, tangent_moduli
from rankcollapse.metrics import num_rank, singular_values

#: A start's Y must pass the cone test by this margin (its smallest positive attention weight).
CONE_MIN = 1e-3
#: Function evaluations allowed to the least squares over M_k alone, then over (Y, M_k).
STAGE_EVALS = (200, 500)
#: The Newton polish starts from least-squares ends within this residual (the others are left as they are).
POLISH_FROM = 1e-6
#: Ends this close to rest (on the full map) and of the searched rank get a tangent spectrum and nearby
#: starts; the story's ``residual_max`` (at most this) decides which are equilibria.
ANALYSED_RESIDUAL = 1e-8
#: Distance of the nearby starts, and of "back".
RADIUS = 1e-3


def embed(y: np.ndarray, m_k: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``X = [0 | Y]`` [n, d] and M [d, d] with ``m_k`` [k, k] as its trailing block, zero elsewhere."""
    n, k = y.shape
    x = np.zeros((n, d))
    x[:, d - k :] = y
    m = np.zeros((d, d))
    m[d - k :, d - k :] = m_k
    return x, m


def reduced_residual(
    p: np.ndarray, n: int, k: int, j_k: np.ndarray, jacobian: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The reduced equilibrium residual ``normalize_rows(softmax(Y M Y^T) Y J_k) - Y``, raveled [n k], at
    ``p = (Z, M)`` raveled [n k + k k], ``Y = normalize_rows(Z)``; with ``jacobian`` also its exact
    Jacobian [n k, n k + k k] (forward mode, every parameter direction at once)."""
    nk = n * k
    z, m = p[:nk].reshape(n, k), p[nk:].reshape(k, k)
    nu = np.linalg.norm(z, axis=-1, keepdims=True)
    y = z / nu
    s = y @ m @ y.T
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    yj = y @ j_k
    v = a @ yj
    nv = np.linalg.norm(v, axis=-1, keepdims=True)
    out = v / nv
    r = (out - y).ravel()
    if not jacobian:
        return r
    dirs = np.eye(nk + k * k)
    dz, dm = dirs[:, :nk].reshape(-1, n, k), dirs[:, nk:].reshape(-1, k, k)
    dy = (dz - y * (dz * y).sum(-1, keepdims=True)) / nu
    ds = dy @ m @ y.T + y @ dm @ y.T + (y @ m) @ dy.transpose(0, 2, 1)
    da = a * (ds - (a * ds).sum(-1, keepdims=True))
    dv = da @ yj + a @ (dy @ j_k)
    dout = (dv - out * (dv * out).sum(-1, keepdims=True)) / nv
    return r, (dout - dy).reshape(-1, nk).T


def cone_margin(y: np.ndarray, j_k: np.ndarray) -> float:
    """The cone test of Y [n, k] (unit rows): the largest ``t`` such that every token ``y_i`` has weights
    ``a >= t`` (summing to 1) with ``a Y J_k = c y_i`` and ``c >= t``, the smallest over tokens (a linear
    programme per token). Positive iff every token is a positive combination of the rows of ``Y J_k``
    with a positive norm factor, which an equilibrium under any entrywise positive attention needs
    (-inf where a token's linear conditions have no solution at all)."""
    from scipy.optimize import linprog

    n, k = y.shape
    u = y @ j_k  # [n, k]: the rows a token's update combines
    worst = math.inf
    for i in range(n):
        perp = np.linalg.svd(np.eye(k) - np.outer(y[i], y[i]))[0][:, : k - 1]  # [k, k-1]: y_i's complement
        cost = np.zeros(n + 1)
        cost[-1] = -1.0  # maximise t
        upper = np.vstack([np.hstack([-np.eye(n), np.ones((n, 1))]), np.append(-(u @ y[i]), 1.0)])
        equal = np.vstack([np.hstack([(u @ perp).T, np.zeros((k - 1, 1))]), np.append(np.ones(n), 0.0)])
        rhs = np.append(np.zeros(k - 1), 1.0)
        lp = linprog(
            cost, A_ub=upper, b_ub=np.zeros(n + 1), A_eq=equal, b_eq=rhs, bounds=[(None, None)] * (n + 1)
        )
        worst = min(worst, -float(lp.fun) if lp.status == 0 else -math.inf)
    return worst


@dataclass(frozen=True)
class SearchEnd:
    """Where one start of the search ended, measured on the full map.

    ``x`` [n, d] (``[0 | Y]``), ``m`` [d, d] (M, zero but its trailing k x k block); ``residual``:
    ``max_i ||F(X)_i - X_i||`` (post-LN, complete mask, ``w_qk = M``); ``rank``:
    ``num_rank(X, rtol=RANK_TOL)``;
    ``sigma_ratio``: ``sigma_k / sigma_1`` of X (``sigma_k`` the k-th singular value, k the rank searched);
    ``attention_min``: the smallest entry of ``A = softmax(X M X^T)`` (a saturated softmax can fake an
    equilibrium to rounding); ``m_max``: ``max |M_ab|``; ``outside``: ``max |X[:, :d-k]|`` (0 by
    construction: the W_V-invariant subspace)."""

    k: int
    start: int
    x: np.ndarray
    m: np.ndarray
    residual: float
    rank: int
    sigma_ratio: float
    attention_min: float
    m_max: float
    outside: float

    def to_row(self) -> dict[str, Any]:
        """A table row (``x`` and ``m`` as JSON lists, round-trip exact)."""
        return {
            "k": self.k,
            "start": self.start,
            "residual": self.residual,
            "rank": self.rank,
            "sigma_ratio": self.sigma_ratio,
            "attention_min": self.attention_min,
            "m_max": self.m_max,
            "outside": self.outside,
            "x": json.dumps(self.x.tolist()),
            "m": json.dumps(self.m.tolist()),
        }


@dataclass(frozen=True)
class RankSearch:
    """The search for rank ``k``: ``starts`` least-squares starts (each Y passed the cone test, for
    k < n), ``drawn`` random Y drawn to get them, and every start's :class:`SearchEnd`."""

    k: int
    starts: int
    drawn: int
    ends: tuple[SearchEnd, ...]


def measure_end(y: np.ndarray, m_k: np.ndarray, w_v: Tensor, start: int) -> SearchEnd:
    """Embed the reduced state (Y [n, k], M_k [k, k]) into d = ``w_v``'s size and measure it on the full
    map (:class:`SearchEnd`)."""
    k = y.shape[1]
    d = int(w_v.shape[0])
    x_np, m_np = embed(y, m_k, d)
    x, m = torch.from_numpy(x_np), torch.from_numpy(m_np)
    sv = singular_values(x)
    return SearchEnd(
        k=k,
        start=start,
        x=x_np,
        m=m_np,
        residual=residual(x, w_v, None, m),
        rank=int(num_rank(x, rtol=RANK_TOL)),
        sigma_ratio=float(sv[k - 1] / sv[0]),
        attention_min=float(attention_matrix(x, None, m).min()),
        m_max=float(np.abs(m_np).max()),
        outside=float(np.abs(x_np[:, : d - k]).max()) if d > k else 0.0,
    )


def search_rank(
    n: int, k: int, w: float, *, starts: int, m_bound: float, rng: np.random.Generator
) -> RankSearch:
    """Search rank-``k`` equilibria at N = d = ``n`` (module docstring, **Search**) from ``starts``
    starts drawn with ``rng``; at k = n without the cone test (no invertible Y passes it). At most
    ``100 starts`` random Y are drawn for the cone test; fewer starts are recorded if they run out."""
    from scipy.optimize import least_squares

    if not 2 <= k <= n:
        raise ValueError(f"rank k must be in 2..N = 2..{n}, got {k}")
    w_v = bidiagonal_value(n, w)
    j_k = bidiagonal_value(k, w).numpy()
    nk = n * k
    box = (np.full(k * k, -m_bound), np.full(k * k, m_bound))
    full_box = (np.concatenate([np.full(nk, -np.inf), box[0]]), np.concatenate([np.full(nk, np.inf), box[1]]))
    ends, drawn = [], 0
    for start in range(starts):
        while True:
            z0 = rng.standard_normal((n, k))
            drawn += 1
            if k == n or cone_margin(z0 / np.linalg.norm(z0, axis=-1, keepdims=True), j_k) > CONE_MIN:
                break
            if drawn >= 100 * starts:
                return RankSearch(k, start, drawn, tuple(ends))
        m0 = np.clip(rng.standard_normal(k * k), 0.99 * box[0], 0.99 * box[1])

        def on_m(q: np.ndarray, z0: np.ndarray = z0) -> np.ndarray:
            return reduced_residual(np.concatenate([z0.ravel(), q]), n, k, j_k)

        def on_m_jac(q: np.ndarray, z0: np.ndarray = z0) -> np.ndarray:
            return reduced_residual(np.concatenate([z0.ravel(), q]), n, k, j_k, jacobian=True)[1][:, nk:]

        first = least_squares(
            on_m, m0, jac=on_m_jac, bounds=box, xtol=1e-12, ftol=1e-12, max_nfev=STAGE_EVALS[0]
        )
        joint = least_squares(
            lambda p: reduced_residual(p, n, k, j_k),
            np.concatenate([z0.ravel(), first.x]),
            jac=lambda p: reduced_residual(p, n, k, j_k, jacobian=True)[1],
            bounds=full_box,
            xtol=1e-15,
            ftol=1e-15,
            gtol=1e-15,
            max_nfev=STAGE_EVALS[1],
        )
        z, m_k = joint.x[:nk].reshape(n, k), joint.x[nk:].reshape(k, k)
        y = torch.from_numpy(z / np.linalg.norm(z, axis=-1, keepdims=True))
        if float(np.abs(joint.fun).max()) <= POLISH_FROM:
            y = newton_polish(y, torch.from_numpy(j_k), None, torch.from_numpy(m_k))
        ends.append(measure_end(y.numpy(), m_k, w_v, start))
    return RankSearch(k, starts, drawn, tuple(ends))


@dataclass(frozen=True)
class PerronGap:
    """The spectrum of ``B = C^-1 A`` at (X, M): ``top`` its dominant eigenvalue (real, positive: Perron),
    ``second`` the largest modulus of the others, ``gap = 1 - second / top`` (> 0: ``top`` is simple and
    strictly dominant, so B is not similar to ``W_V^-1``, whose N eigenvalues are all 1: X is no full-rank
    equilibrium), ``top_imag`` the imaginary part of ``top`` (0 for a real eigenvalue)."""

    top: float
    second: float
    gap: float
    top_imag: float


def perron_gap(x: Tensor, m: Tensor, w_v: Tensor) -> PerronGap:
    """:class:`PerronGap` of ``C^-1 A`` at x [n, d], M [d, d]: ``A = softmax(X M X^T)`` (complete mask),
    ``C = diag(||(A X W_V)_i||)`` (the LayerNorm scales)."""
    a = attention_matrix(x, None, m)
    c = torch.linalg.vector_norm(a @ x @ w_v, dim=-1)
    ev = torch.linalg.eigvals(a / c[:, None]).numpy()
    order = np.argsort(-np.abs(ev))
    top = ev[order[0]]
    second = float(np.abs(ev[order[1]])) if len(ev) > 1 else 0.0
    return PerronGap(float(top.real), second, 1.0 - second / float(abs(top)), float(top.imag))


@dataclass(frozen=True)
class FullRankChecks:
    """Random checks of the full-rank impossibility at N = d = ``n``: over ``draws`` random (X, M) (tokens
    uniform on the sphere, M Gaussian with entries clipped to the box): ``min_gap`` the smallest
    :attr:`PerronGap.gap`, ``max_imag`` the largest ``|top_imag|``; ``max_cone`` the largest
    :func:`cone_margin` of the same X (<= 0: no positive attention of any kind makes X an equilibrium)."""

    draws: int
    min_gap: float
    max_imag: float
    max_cone: float


def full_rank_checks(
    n: int, w: float, *, draws: int, m_bound: float, rng: np.random.Generator
) -> FullRankChecks:
    """:class:`FullRankChecks` from ``draws`` random (X, M) drawn with ``rng``."""
    w_v = bidiagonal_value(n, w)
    j = w_v.numpy()
    gaps, imags, cones = [], [], []
    for _ in range(draws):
        z = rng.standard_normal((n, n))
        y = z / np.linalg.norm(z, axis=-1, keepdims=True)
        m = np.clip(rng.standard_normal((n, n)), -m_bound, m_bound)
        pg = perron_gap(torch.from_numpy(y), torch.from_numpy(m), w_v)
        gaps.append(pg.gap)
        imags.append(abs(pg.top_imag))
        cones.append(cone_margin(y, j))
    return FullRankChecks(draws, min(gaps), max(imags), max(cones))


@dataclass(frozen=True)
class Stability:
    """An equilibrium's tangent spectrum on the product of spheres (``N (d - 1)`` directions, mask None):
    ``top_modulus`` its largest clustered eigenvalue modulus and the ``unstable`` / ``neutral`` /
    ``stable`` counts (``theorem3_checks.direction_counts``); ``share_back``: the share of ``nearby``
    starts :data:`RADIUS` away (random tangent directions, every token perturbed) within :data:`RADIUS`
    of it after ``layers`` layers."""

    top_modulus: float
    unstable: int
    neutral: int
    stable: int
    share_back: float
    nearby: int
    layers: int


def stability(
    x: Tensor, m: Tensor, w_v: Tensor, *, nearby: int, layers: int, generator: torch.Generator
) -> Stability:
    """:class:`Stability` of the equilibrium x [n, d] of the complete-mask map with ``w_qk = m`` [d, d]."""
    mods = tangent_moduli(x, w_v, None, m, block_triangular=False)
    counts = direction_counts(mods)
    n, d = x.shape
    noise = gaussian((nearby, n, d), generator)
    noise = noise - (noise * x).sum(-1, keepdim=True) * x
    noise = noise / torch.linalg.vector_norm(noise, dim=(-2, -1), keepdim=True)
    end = iterate(sphere_normalize(x + RADIUS * noise), w_v, layers, None, m)
    back = torch.linalg.vector_norm(end - x, dim=-1).amax(-1) < RADIUS
    return Stability(
        float(mods[0]), **counts, share_back=float(back.double().mean()), nearby=nearby, layers=layers
    )


@dataclass(frozen=True)
class CompleteMaskSummary:
    """App. F.4 measured for one (N = d = ``n``, ``w``), typed: ``starts`` / ``drawn`` per searched rank
    (``ranks``: 2..N-1 and then N, the full-rank search, whose starts draw no cone test), and the random
    full-rank checks (:class:`FullRankChecks`). A run stores it flat (:meth:`to_summary`: ``starts_k2``,
    ``drawn_k2``, ...); :meth:`from_summary` reads those columns back once, typed."""

    n: int
    w: float
    ranks: tuple[int, ...]
    starts: tuple[int, ...]
    drawn: tuple[int, ...]
    checks: FullRankChecks

    def __post_init__(self) -> None:
        if not (len(self.ranks) == len(self.starts) == len(self.drawn)):
            raise ValueError("CompleteMaskSummary: starts and drawn for every searched rank needed")

    def to_summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ranks": ",".join(str(k) for k in self.ranks),
            "draws": self.checks.draws,
            "min_gap": self.checks.min_gap,
            "max_imag": self.checks.max_imag,
            "max_cone": self.checks.max_cone,
        }
        for k, s, dr in zip(self.ranks, self.starts, self.drawn, strict=True):
            out[f"starts_k{k}"], out[f"drawn_k{k}"] = s, dr
        return out

    @classmethod
    def from_summary(cls, n: int, w: float, summary: Mapping[str, Any]) -> CompleteMaskSummary:
        ranks = tuple(int(k) for k in str(summary["ranks"]).split(","))
        return cls(
            n=int(n),
            w=float(w),
            ranks=ranks,
            starts=tuple(int(summary[f"starts_k{k}"]) for k in ranks),
            drawn=tuple(int(summary[f"drawn_k{k}"]) for k in ranks),
            checks=FullRankChecks(
                int(summary["draws"]),
                float(summary["min_gap"]),
                float(summary["max_imag"]),
                float(summary["max_cone"]),
            ),
        )


def complete_mask_measurements(
    n: int,
    w: float,
    *,
    starts: int,
    full_rank_starts: int,
    m_bound: float,
    draws: int,
    nearby: int,
    layers: int,
    seed: int,
) -> tuple[list[dict[str, Any]], CompleteMaskSummary]:
    """App. F.4 at N = d = ``n``: :func:`search_rank` for every k = 2..n-1 (``starts`` each) and k = n
    (``full_rank_starts``), the full-rank checks (``draws``), and for every end of the searched rank
    within :data:`ANALYSED_RESIDUAL` its :func:`stability` (``nearby`` starts, ``layers`` layers). Seeds:
    one numpy stream per rank (``[seed, k]``), one for the checks (``[seed, 0]``), one torch generator for
    the nearby starts (``seed``). Returns (rows: one per end, :meth:`SearchEnd.to_row` with the
    :class:`Stability` columns, NaN where not analysed; the :class:`CompleteMaskSummary`)."""
    w_v = bidiagonal_value(n, w)
    g = torch.Generator().manual_seed(seed)
    rows, searched = [], []
    for k in range(2, n + 1):
        budget = starts if k < n else full_rank_starts
        found = search_rank(n, k, w, starts=budget, m_bound=m_bound, rng=np.random.default_rng([seed, k]))
        searched.append(found)
        for end in found.ends:
            row = end.to_row()
            if end.rank == k and end.residual <= ANALYSED_RESIDUAL:
                st = stability(
                    torch.from_numpy(end.x),
                    torch.from_numpy(end.m),
                    w_v,
                    nearby=nearby,
                    layers=layers,
                    generator=g,
                )
                row.update(
                    top_modulus=st.top_modulus,
                    unstable=st.unstable,
                    neutral=st.neutral,
                    stable=st.stable,
                    share_back=st.share_back,
                )
            else:
                row.update(
                    top_modulus=np.nan, unstable=np.nan, neutral=np.nan, stable=np.nan, share_back=np.nan
                )
            rows.append(row)
    checks = full_rank_checks(n, w, draws=draws, m_bound=m_bound, rng=np.random.default_rng([seed, 0]))
    summary = CompleteMaskSummary(
        n=n,
        w=w,
        ranks=tuple(s.k for s in searched),
        starts=tuple(s.starts for s in searched),
        drawn=tuple(s.drawn for s in searched),
        checks=checks,
    )
    return rows, summary

"""How well a Dynamic Tanh reproduces a normalisation's input-to-output map: the fit and its R² (ours).

DyT (Zhu, Chen, He, LeCun, Liu, CVPR 2025, arXiv 2503.10622) replaces LayerNorm by
``gamma_k tanh(alpha x) + beta_k`` (``alpha`` one scalar per layer, ``gamma``, ``beta`` per feature ``k``),
because "layer normalization in Transformers often produces tanh-like, S-shaped input-output
mappings" [abstract]. Given one sample's input ``x`` [n, d] of a norm and its output ``y`` [n, d] (before the
norm's own affine, as the paper plots it [2nd-hand]), :func:`fit_dyt` fits that map by least squares:

    min over alpha > 0, gamma, beta of  sum_k sum_i (y_ik - gamma_k tanh(alpha x_ik) - beta_k)^2.

For a fixed ``alpha`` each feature's ``(gamma_k, beta_k)`` is an ordinary regression of ``y_k`` on
``tanh(alpha x_k)``, whose residual is ``SS_k (1 - r_k(alpha)^2)`` (``SS_k`` the total sum of squares of
``y_k``, ``r_k`` the correlation); so the fit is a one-dimensional search over ``alpha`` (a log grid of
``alpha * s``, ``s`` the input's standard deviation, then a bounded refinement). Reported:

- ``dyt_r2 = 1 - sum_k SS_k (1 - r_k^2) / sum_k SS_k`` at the best alpha (the tanh fit);
- ``linear_r2``: the same with ``x`` itself in place of ``tanh(alpha x)`` (a per-feature straight line, the
  ``alpha -> 0`` end of the family, so ``dyt_r2 >= linear_r2`` up to the search: the fit reports the larger
  of the two, the line being the tanh's limit);
- ``s_shape = 1 - (1 - dyt_r2) / (1 - linear_r2)``: the share of what a straight line leaves unexplained that
  the tanh explains (0: no bend; 1: the bend is all of it; NaN where the line is exact);
- ``dyt_alpha`` and ``alpha_scaled = dyt_alpha * s`` (how far into the tanh's bend the data reach: the bend
  is visible from ``alpha x`` of about 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError

#: The fit's columns, per sample.
FIT_NAMES: tuple[str, ...] = ("dyt_r2", "linear_r2", "s_shape", "dyt_alpha", "alpha_scaled")
#: The grid of ``alpha * s`` searched (log-spaced, in float32) before the refinement (float64, to ``XATOL`` in
#: ``log alpha``); below its low end the tanh is a straight line to within ``(1e-2)^2 / 3`` of its slope.
ALPHA_GRID = (1e-2, 1e2, 25)
XATOL = 1e-3


@dataclass(frozen=True)
class DytFit:
    """One fit (module docstring); ``gamma``, ``beta`` [d] per feature."""

    dyt_r2: float
    linear_r2: float
    s_shape: float
    dyt_alpha: float
    alpha_scaled: float
    gamma: Tensor
    beta: Tensor

    def columns(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in FIT_NAMES}


def _loss(x: Tensor, yc: Tensor, ss: Tensor, alphas: Tensor) -> Tensor:
    """``sum_k SS_k (1 - r_k^2)`` of the regression of ``y_k`` on ``tanh(alpha x_k)`` per alpha: [A] (in the
    dtype of ``x``)."""
    t = torch.tanh(alphas.to(x.dtype)[:, None, None] * x[None])  # [A, n, d]
    tc = t - t.mean(dim=1, keepdim=True)
    cov = (tc * yc[None]).sum(dim=1)  # [A, d]
    var = (tc * tc).sum(dim=1)
    r2 = torch.where(var > 0, cov * cov / torch.where(var > 0, var, 1) / torch.where(ss > 0, ss, 1), 0.0)
    return (ss[None] * (1 - r2.clamp(max=1.0))).sum(dim=1)


def fit_dyt(x: Tensor, y: Tensor) -> DytFit:
    """The least-squares DyT fit of ``y`` on ``x`` (module docstring). x, y: [n, d] (one sample, tokens as
    rows), computed in float64. RankCollapseError when the shapes differ, a value is not finite, or the
    output is constant in every feature (nothing to fit)."""
    from scipy.optimize import minimize_scalar

    if x.shape != y.shape or x.ndim != 2:
        raise RankCollapseError(f"fit_dyt needs x and y of one shape [n, d], got {tuple(x.shape)} and "
                                f"{tuple(y.shape)}")
    x, y = x.to(torch.float64), y.to(torch.float64)
    if not bool(torch.isfinite(x).all() and torch.isfinite(y).all()):
        raise RankCollapseError("fit_dyt needs finite inputs and outputs")
    yc = y - y.mean(dim=0, keepdim=True)
    ss = (yc * yc).sum(dim=0)  # [d]
    total = float(ss.sum())
    if total <= 0:
        raise RankCollapseError("fit_dyt: the output is constant in every feature; nothing to fit")
    s = float(x.std()) or 1.0
    lo, hi, count = ALPHA_GRID
    grid = torch.logspace(math.log10(lo), math.log10(hi), count, dtype=torch.float64) / s
    coarse = _loss(x.to(torch.float32), yc.to(torch.float32), ss.to(torch.float32), grid)
    best = int(torch.argmin(coarse))
    left, right = grid[max(best - 1, 0)], grid[min(best + 1, count - 1)]

    def f(log_a: float) -> float:
        return float(_loss(x, yc, ss, torch.tensor([math.exp(log_a)], dtype=torch.float64))[0])

    res = minimize_scalar(f, bounds=(math.log(float(left)), math.log(float(right))), method="bounded",
                          options={"xatol": XATOL})
    at_grid = f(math.log(float(grid[best])))
    alpha = math.exp(float(res.x)) if res.fun <= at_grid else float(grid[best])
    loss = min(float(res.fun), at_grid)
    xc = x - x.mean(dim=0, keepdim=True)
    vx = (xc * xc).sum(dim=0)
    r2_lin = torch.where((vx > 0) & (ss > 0), (xc * yc).sum(dim=0) ** 2 / (vx * ss).clamp_min(1e-300), 0.0)
    linear = 1 - float((ss * (1 - r2_lin.clamp(max=1.0))).sum()) / total
    tanh_r2 = max(1 - loss / total, linear)
    t = torch.tanh(alpha * x)
    tc = t - t.mean(dim=0, keepdim=True)
    vt = (tc * tc).sum(dim=0)
    gamma = torch.where(vt > 0, (tc * yc).sum(dim=0) / torch.where(vt > 0, vt, 1), 0.0)
    beta = y.mean(dim=0) - gamma * t.mean(dim=0)
    shape = 1 - (1 - tanh_r2) / (1 - linear) if linear < 1 else math.nan
    return DytFit(tanh_r2, linear, shape, alpha, alpha * s, gamma, beta)

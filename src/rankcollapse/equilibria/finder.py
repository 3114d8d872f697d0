"""Equilibria of ``X -> D A(X) X W_V`` on the product of unit spheres: finder and verifier.

An equilibrium is ``X*`` [n, d] (unit rows) with ``F(X*) = X*``. It is *stable* when the spectral
radius of ``dF(X*)`` restricted to the tangent space of the sphere product (``n (d - 1)`` dims) is
below 1; its *rank* is the number of singular values of ``X*`` above ``rank_tol * sigma_max``; its
*basin fraction* is the share of random initial inputs (tokens i.i.d. uniform on the sphere) whose
orbit converges to it, with a Wilson 95% interval. ``F`` is odd (``F(-X) = -F(X)``), so ``X*`` and
``-X*`` are reported as one equilibrium; with the complete mask ``F`` also commutes with token
permutations, and equilibria are then merged up to permutation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from rankcollapse.core.draws import sphere_tokens
from rankcollapse.core.norms import sphere_normalize
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.equilibria.lnmap import iterate, ln_attention_map, tangent_basis
from rankcollapse.metrics import num_rank, singular_values

#: Relative rank tolerance for states reached by iteration (``num_rank(x, rtol=RANK_TOL)``): orbits that
#: approach an equilibrium algebraically sit ~1e-8 from it, far above ``max(n, d) eps``.
RANK_TOL = 1e-6


def wilson_interval(successes: int, total: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default)."""
    if total <= 0:
        return (0.0, 1.0)
    p = successes / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def check_value_matrix(w_v: object, d: int | None = None) -> Tensor:
    """A finite, non-zero real [d, d] float64 value matrix, or RankCollapseError naming what is wrong."""
    if not isinstance(w_v, Tensor):
        raise RankCollapseError(f"W_V must be a torch tensor, got {type(w_v).__name__}")
    if w_v.ndim != 2 or w_v.shape[0] != w_v.shape[1] or (d is not None and w_v.shape[0] != d):
        raise RankCollapseError(f"W_V must be square [d, d], got shape {tuple(w_v.shape)}")
    if w_v.is_complex() or not w_v.is_floating_point():
        raise RankCollapseError(f"W_V must be a real floating-point matrix, got {w_v.dtype}")
    w = w_v.to(torch.float64)
    if not bool(torch.isfinite(w).all()):
        raise RankCollapseError("W_V has non-finite entries (NaN or inf)")
    if not bool((w != 0).any()):
        raise RankCollapseError("W_V = 0 maps every token to zero: the normalised map is undefined")
    return w


def tangent_jacobian(x: Tensor, w_v: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None,
                     d_qk: float = 1.0) -> Tensor:
    """``T^T dF(x) T``: the Jacobian of the map on the tangent space at x [n, d] (valid at a fixed point,
    where ``F(x) = x``): [n (d-1), n (d-1)]."""
    n, d = x.shape
    jac = torch.func.jacrev(lambda z: ln_attention_map(z, w_v, mask, w_qk, d_qk))(x).reshape(n * d, n * d)
    basis = tangent_basis(x)
    return basis.T @ jac @ basis


def spectral_radius(x: Tensor, w_v: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None,
                    d_qk: float = 1.0) -> float:
    """Largest |eigenvalue| of the tangent Jacobian at x [n, d]."""
    if x.shape[1] == 1:
        return 0.0
    return float(torch.linalg.eigvals(tangent_jacobian(x, w_v, mask, w_qk, d_qk)).abs().max())


def newton_polish(x: Tensor, w_v: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None,
                  d_qk: float = 1.0, iters: int = 20, tol: float = 1e-14) -> Tensor:
    """Newton on ``F(X) - X = 0`` in tangent coordinates (least-squares step), retracted to the spheres."""
    n, d = x.shape
    if d == 1:
        return x
    for _ in range(iters):
        fx = ln_attention_map(x, w_v, mask, w_qk, d_qk)
        basis = tangent_basis(x)
        r = basis.T @ (fx - x).reshape(-1)
        if float(torch.linalg.vector_norm(fx - x)) < tol:
            break
        jac = torch.func.jacrev(lambda z: ln_attention_map(z, w_v, mask, w_qk, d_qk))(x).reshape(n * d, n * d)
        lhs = basis.T @ jac @ basis - torch.eye(n * (d - 1), dtype=x.dtype)
        step = torch.linalg.lstsq(lhs, -r.unsqueeze(1)).solution.squeeze(1)
        y = x + (basis @ step).reshape(n, d)
        x = sphere_normalize(y)
    return x


def residual(x: Tensor, w_v: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None,
             d_qk: float = 1.0) -> float:
    """``max_i ||F(x)_i - x_i||``."""
    return float(torch.linalg.vector_norm(ln_attention_map(x, w_v, mask, w_qk, d_qk) - x, dim=-1).max())


def _distance(a: Tensor, b: Tensor, permutations: bool) -> Tensor:
    """Distance between configurations a [..., n, d] and b [n, d], up to global sign (and token order).

    Returns [...]: max over tokens of the token distance (with permutations: compares sorted rows)."""
    if permutations:
        a = _canonical_order(a)
        b = _canonical_order(b)
    plus = torch.linalg.vector_norm(a - b, dim=-1).amax(dim=-1)
    minus = torch.linalg.vector_norm(a + b, dim=-1).amax(dim=-1)
    if permutations:
        minus = torch.linalg.vector_norm(_canonical_order(-a) - b, dim=-1).amax(dim=-1)
    return torch.minimum(plus, minus)


def _canonical_order(x: Tensor) -> Tensor:
    """Rows sorted lexicographically (rounded), for comparison up to permutation; x [..., n, d]."""
    key = torch.zeros(x.shape[:-1], dtype=x.dtype)
    for e in range(x.shape[-1]):
        key = key * 1e3 + torch.round(x[..., e] * 1e2)
    idx = torch.argsort(key, dim=-1)
    return torch.gather(x, -2, idx.unsqueeze(-1).expand_as(x))


@dataclass
class Equilibrium:
    """A verified equilibrium: ``x`` [n, d], checks and basin estimate (``basin_ci``: Wilson 95%)."""

    x: Tensor
    residual: float
    rank: int
    singular_values: list[float]
    spectral_radius: float
    stable: bool
    basin_fraction: float
    basin_ci: tuple[float, float]
    basin_samples: int
    basin_hits: int
    extra: dict = field(default_factory=dict)

    def to_dict(self, with_x: bool = True) -> dict:
        out = {"rank": self.rank, "residual": self.residual, "spectral_radius": self.spectral_radius,
               "stable": self.stable, "basin_fraction": self.basin_fraction, "basin_ci": list(self.basin_ci),
               "basin_samples": self.basin_samples, "singular_values": self.singular_values}
        if with_x:
            out["x"] = self.x.tolist()
        out.update(self.extra)
        return out


def converged_to(final: Tensor, x: Tensor, w_v: Tensor, mask: Tensor | None, w_qk: Tensor | None, d_qk: float,
                 tol: float = 1e-5, permutations: bool = False) -> Tensor:
    """bool [b]: final states [b, n, d] that are within ``tol`` of x (up to sign) and still at rest."""
    step = ln_attention_map(final, w_v, mask, w_qk, d_qk) - final
    still = torch.linalg.vector_norm(step, dim=-1).amax(-1) < tol
    return still & (_distance(final, x, permutations) < tol)


def sample_final_states(n: int, d: int, w_v: Tensor, samples: int, generator: torch.Generator,
                        mask: Tensor | None = None, w_qk: Tensor | None = None, d_qk: float = 1.0,
                        steps: int = 2000, init: Tensor | None = None) -> Tensor:
    """X(steps) from ``samples`` inputs with tokens i.i.d. uniform on the sphere (or ``init`` [b, n, d])."""
    x0 = sphere_tokens(samples, n, d, generator) if init is None else init
    return iterate(x0, w_v, steps, mask, w_qk, d_qk)


def verify_equilibrium(x: Tensor, w_v: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None,
                       d_qk: float = 1.0, *, samples: int = 256, steps: int = 2000,
                       generator: torch.Generator | None = None, final_states: Tensor | None = None,
                       init: Tensor | None = None, rank_tol: float = RANK_TOL) -> Equilibrium:
    """Check a candidate x [n, d]: fixed-point residual, rank, tangent spectral radius (stable iff < 1),
    and basin fraction: the share of ``samples`` random inputs (``init`` [b, n, d] if given, else tokens
    i.i.d. uniform on the sphere drawn with ``generator``) that converge to x within ``steps`` layers."""
    x = x.to(torch.float64)
    perms = mask is None
    if final_states is None:
        gen = generator  # required wherever random starts are drawn (core.draws refuses None)
        final_states = sample_final_states(x.shape[0], x.shape[1], w_v, samples, gen, mask, w_qk, d_qk, steps,
                                           init)
    hits = int(converged_to(final_states, x, w_v, mask, w_qk, d_qk, permutations=perms).sum())
    total = int(final_states.shape[0])
    rank, sv = int(num_rank(x, rtol=rank_tol)), [float(v) for v in singular_values(x)]
    rho = spectral_radius(x, w_v, mask, w_qk, d_qk)
    return Equilibrium(x=x, residual=residual(x, w_v, mask, w_qk, d_qk), rank=rank, singular_values=sv,
                       spectral_radius=rho, stable=rho < 1.0, basin_fraction=hits / total if total else 0.0,
                       basin_ci=wilson_interval(hits, total), basin_samples=total, basin_hits=hits)


def find_equilibria(w_v: Tensor, n: int, mask: Tensor | None = None, w_qk: Tensor | None = None,
                    d_qk: float = 1.0, *, starts: int = 256, steps: int = 2000,
                    generator: torch.Generator | None = None, init: Tensor | None = None,
                    newton_starts: int = 0, settle_tol: float = 1e-6) -> list[Equilibrium]:
    """Equilibria of the LN map for this value matrix and mask.

    1. ``starts`` random inputs (or ``init`` [b, n, d]) are iterated ``steps`` layers (finds attractors);
       states that have settled (step < ``settle_tol``) are polished by Newton and merged up to sign
       (and permutation for the complete mask). Each basin fraction is the share of these same starts
       that reached it (Wilson 95% interval).
    2. Optionally ``newton_starts`` more random inputs go straight to Newton (finds unstable ones too;
       their basin fraction is 0 by construction of the estimate).
    Results are sorted by basin fraction, largest first.
    """
    gen = generator  # required wherever random starts are drawn (core.draws refuses None)
    w_v = check_value_matrix(w_v)
    d = int(w_v.shape[0])
    perms = mask is None
    final = sample_final_states(n, d, w_v, starts, gen, mask, w_qk, d_qk, steps, init)
    moved = torch.linalg.vector_norm(ln_attention_map(final, w_v, mask, w_qk, d_qk) - final, dim=-1).amax(-1)
    found: list[Tensor] = []
    for b in torch.nonzero(moved < settle_tol).flatten().tolist():
        cand = final[b]
        if any(float(_distance(cand, f, perms)) < 1e-5 for f in found):
            continue
        cand = newton_polish(cand, w_v, mask, w_qk, d_qk)
        if residual(cand, w_v, mask, w_qk, d_qk) < 1e-10 and not any(
                float(_distance(cand, f, perms)) < 1e-5 for f in found):
            found.append(cand)
    for _ in range(newton_starts):
        cand = newton_polish(sphere_tokens(1, n, d, gen)[0], w_v, mask, w_qk, d_qk, iters=50)
        if residual(cand, w_v, mask, w_qk, d_qk) < 1e-10 and not any(
                float(_distance(cand, f, perms)) < 1e-5 for f in found):
            found.append(cand)
    results = [verify_equilibrium(f, w_v, mask, w_qk, d_qk, final_states=final) for f in found]
    results.sort(key=lambda e: -e.basin_fraction)
    return results

"""Designed equilibria of every rank: choose the equilibrium first, then solve for ``W_V``.

Causal mask, ``W_QK = beta I`` (``d_qk = 1``), core dimension k, ``u = e_0``. The target configuration
``X`` [n, k] has its first ``r = n - k + 1`` tokens at ``u`` and core tokens ``x_1 .. x_{k-1}``, token
``x_m`` in ``span(e_0 .. e_m)`` (lower-triangular, unit rows). With ``A = softmax_causal(beta X X^T)``
and ``Y = A X``, the fixed-point condition of the LN map is ``Y_i W_V = lambda_i X_i`` for every token.
Taking the k distinct rows (``S = {0, r, .., n-1}``), ``W_V = Y_S^{-1} diag(lambda) X_S`` satisfies it
for any ``beta`` and norms ``lambda`` (``lambda_0 = 1``; the copies of ``u`` hold too because
``Y_i = u`` for them). ``W_V`` is lower-triangular because ``X_S`` and ``Y_S`` are. The free parameters
(``beta``, ``log lambda_1..k-1``, the unnormalised rows ``x_m``) are then tuned by Adam on a soft
maximum of the moduli of the tangent-Jacobian eigenvalues until the spectral radius is well below 1.
Parameters found this way are stored in ``designed_data.py`` and re-verified by the tests.
See docs/equilibria.md.
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor

from rankcollapse.equilibria.lnmap import causal_mask, ln_attention_map, tangent_basis


def n_params(k: int) -> int:
    """Number of design parameters for core dimension k: beta, k-1 log-norms, rows of sizes 2..k."""
    return k + sum(m + 1 for m in range(1, k))


def build_design(params: Tensor, n: int, k: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(X [n, k], W_V [k, k], W_QK [k, k], lambda [k]) from the parameter vector (differentiable)."""
    p = torch.as_tensor(params, dtype=torch.float64)
    beta = p[0]
    lam = torch.cat([torch.ones(1, dtype=torch.float64), torch.exp(p[1:k])])
    rows = [torch.eye(k, dtype=torch.float64)[0]]
    i = k
    for m in range(1, k):
        v = torch.cat([p[i:i + m + 1], torch.zeros(k - m - 1, dtype=torch.float64)])
        i += m + 1
        rows.append(v / torch.linalg.vector_norm(v))
    xs = torch.stack(rows)
    r = n - k + 1
    x = torch.cat([xs[:1].expand(r, k), xs[1:]], 0)
    w_qk = beta * torch.eye(k, dtype=torch.float64)
    s = (x @ w_qk @ x.T).masked_fill(~causal_mask(n), float("-inf"))
    y = torch.softmax(s, -1) @ x
    idx = [0, *range(r, n)]
    w_v = torch.linalg.solve(y[idx], lam.unsqueeze(1) * xs)
    return x, w_v, w_qk, lam


def _loss(p: Tensor, n: int, k: int, temp: float = 30.0) -> tuple[Tensor, float]:
    x, w_v, w_qk, _ = build_design(p, n, k)
    mask = causal_mask(n)
    jac = torch.autograd.functional.jacobian(lambda z: ln_attention_map(z, w_v, mask, w_qk), x,
                                             create_graph=True).reshape(n * k, n * k)
    basis = tangent_basis(x.detach())
    ev = torch.linalg.eigvals(basis.T @ jac @ basis).abs()
    sv = torch.linalg.svdvals(x)
    penalty = torch.relu(0.1 - sv[-1]) * 10 + torch.relu(torch.linalg.matrix_norm(w_v, 2) - 30) * 0.01
    return torch.logsumexp(temp * ev, 0) / temp + penalty, float(ev.max().detach())


def optimise_design(n: int, k: int, seed: int = 0, iters: int = 800, beta0: float = -1.0,
                    lr: float = 0.03, target: float = 0.9) -> tuple[float, list[float]] | None:
    """Adam from a seeded random start; returns (best spectral radius, parameters) or None if it failed."""
    gen = torch.Generator().manual_seed(seed)
    p0 = torch.randn(n_params(k), generator=gen, dtype=torch.float64)
    p0[0] = beta0
    p0[1:k] = -0.3 * torch.arange(1, k, dtype=torch.float64) / k
    p = p0.clone().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=lr)
    best: tuple[float, list[float]] | None = None
    for _ in range(iters):
        opt.zero_grad()
        try:
            loss, rho = _loss(p, n, k)
        except RuntimeError:  # singular Y: give up this start
            break
        if not torch.isfinite(loss):
            break
        if best is None or rho < best[0]:
            best = (rho, p.detach().tolist())
        if rho < target * 0.9:
            break
        loss.backward()
        opt.step()
    return best


@cache
def designed_cores() -> dict[tuple[int, int], dict]:
    """The stored designs, keyed by (n, k): ``{"params": [...], "seed": s, "spectral_radius": rho}``."""
    from rankcollapse.equilibria.designed_data import DESIGNS

    return {(int(e["n"]), int(e["k"])): e for e in DESIGNS}

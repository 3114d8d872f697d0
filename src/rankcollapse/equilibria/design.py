"""Designed equilibria of every rank (ours, not the paper's): choose the equilibrium first, then ``W_V``.

Causal mask, ``W_QK = beta I`` (``d_qk = 1``), core dimension k, ``u = e_0``. The target configuration
``X`` [n, k] has its first ``r = n - k + 1`` tokens at ``u`` and core tokens ``x_1 .. x_{k-1}``, token
``x_m`` in ``span(e_0 .. e_m)`` (lower-triangular, unit rows). With ``A = softmax_causal(beta X X^T)``
and ``Y = A X``, the fixed-point condition of the LN map is ``Y_i W_V = lambda_i X_i`` for every token.
Taking the k distinct rows (``S = {0, r, .., n-1}``), ``W_V = Y_S^{-1} diag(lambda) X_S`` satisfies it
for any ``beta`` and norms ``lambda`` (``lambda_0 = 1``; the copies of ``u`` hold too because
``Y_i = u`` for them). ``W_V`` is lower-triangular because ``X_S`` and ``Y_S`` are. The free parameters
(``beta``, ``log lambda_1..k-1``, the unnormalised rows ``x_m``) are then tuned by Adam on a soft
maximum of the moduli of the tangent-Jacobian eigenvalues until the spectral radius is well below 1
(pass 1), then on the transient growth ``log ||J^T||_F`` (pass 2). ``scripts/regenerate_designed.py`` runs
every pass and the basin-radius ladder and writes ``designed_data.py``; the tests recompute each stored
entry's spectral radius and basin fraction from its parameters.
See docs/equilibria.md.
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor

from rankcollapse.core.draws import gaussian
from rankcollapse.equilibria.lnmap import attention_matrix, causal_mask, ln_attention_map, tangent_basis


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
    y = attention_matrix(x, causal_mask(n), w_qk) @ x
    idx = [0, *range(r, n)]
    w_v = torch.linalg.solve(y[idx], lam.unsqueeze(1) * xs)
    return x, w_v, w_qk, lam


def _tangent(p: Tensor, n: int, k: int) -> tuple[Tensor, Tensor]:
    """(tangent Jacobian [n(k-1), n(k-1)], differentiable in p; penalty: sigma_k >= 0.1, ||W_V|| <= 30)."""
    x, w_v, w_qk, _ = build_design(p, n, k)
    mask = causal_mask(n)
    jac = torch.autograd.functional.jacobian(lambda z: ln_attention_map(z, w_v, mask, w_qk), x,
                                             create_graph=True).reshape(n * k, n * k)
    basis = tangent_basis(x.detach())
    sv = torch.linalg.svdvals(x)
    penalty = torch.relu(0.1 - sv[-1]) * 10 + torch.relu(torch.linalg.matrix_norm(w_v, 2) - 30) * 0.01
    return basis.T @ jac @ basis, penalty


def _loss(p: Tensor, n: int, k: int, temp: float = 30.0) -> tuple[Tensor, float]:
    jac, penalty = _tangent(p, n, k)
    ev = torch.linalg.eigvals(jac).abs()
    return torch.logsumexp(temp * ev, 0) / temp + penalty, float(ev.max().detach())


def transient_growth(jac: Tensor, horizon: int = 80) -> float:
    """``max_{t <= horizon} ||J^t||_2`` (at least 1)."""
    power, best = torch.eye(jac.shape[0], dtype=jac.dtype), 1.0
    for _ in range(horizon):
        power = power @ jac
        best = max(best, float(torch.linalg.matrix_norm(power, 2)))
    return best


def lower_growth(n: int, k: int, init: list[float], iters: int = 400, lr: float = 0.01,
                 max_radius: float = 0.95) -> tuple[float, float, list[float]]:
    """Pass 2: Adam on ``sum_{T in (5, 10, 20, 40)} log ||J^T||_F`` from ``init``; keeps the iterate with the
    smallest ``max_t ||J^t||_2`` among those with spectral radius below ``max_radius``.
    Returns (its spectral radius, its transient growth, its parameters)."""
    p = torch.tensor(init, dtype=torch.float64).requires_grad_(True)
    opt = torch.optim.Adam([p], lr=lr)
    best: tuple[float, float, list[float]] | None = None
    for _ in range(iters + 1):
        opt.zero_grad()
        try:
            jac, penalty = _tangent(p, n, k)
        except RuntimeError:
            break
        j = jac.detach()
        rho = float(torch.linalg.eigvals(j).abs().max())
        if rho < max_radius:
            growth = transient_growth(j)
            if best is None or growth < best[1]:
                best = (rho, growth, p.detach().tolist())
        loss, power = penalty, torch.eye(jac.shape[0], dtype=jac.dtype)
        for t in range(1, 41):
            power = power @ jac
            if t in (5, 10, 20, 40):
                loss = loss + torch.log(torch.linalg.matrix_norm(power))
        if not torch.isfinite(loss):
            break
        loss.backward()
        opt.step()
    if best is None:
        j = _tangent(torch.tensor(init, dtype=torch.float64), n, k)[0].detach()
        return float(torch.linalg.eigvals(j).abs().max()), transient_growth(j), list(init)
    return best


def optimise_design(n: int, k: int, seed: int = 0, iters: int = 800, beta0: float = -1.0,
                    lr: float = 0.03, target: float = 0.9,
                    init: list[float] | None = None) -> tuple[float, list[float]] | None:
    """Adam on the soft spectral radius; returns (best spectral radius, parameters) or None if it failed.

    Pass 1 (``init`` None): from a seeded random start (``beta0``, decreasing log-norms), stopping once the
    radius is below ``0.9 * target``. Pass 2 (``init`` given: pass 1's result): the same from those
    parameters, with a smaller step and a lower target (pushing the radius much lower makes the Jacobian
    more non-normal: larger transient growth, smaller basins). :data:`PASSES` lists the settings
    ``scripts/regenerate_designed.py`` uses.
    """
    if init is None:
        gen = torch.Generator().manual_seed(seed)
        p0 = gaussian((n_params(k),), gen)
        p0[0] = beta0
        p0[1:k] = -0.3 * torch.arange(1, k, dtype=torch.float64) / k
    else:
        p0 = torch.tensor(init, dtype=torch.float64)
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


#: The optimisation passes of the stored designs: pass 1 (``optimise_design``) from a seeded start until the
#: spectral radius is below 0.81; pass 2 (``lower_growth``) lowering the transient growth from its result
#: (more steps for the cells whose growth is largest).
PASSES: tuple[dict, ...] = ({"iters": 800, "lr": 0.03, "target": 0.9}, {"iters": 400, "lr": 0.01})
LONG_PASS2 = {(6, 4): 1600, (5, 5): 1600, (6, 5): 1600, (6, 6): 1600}
#: Radii of the basin ladder (largest first): the stored ``basin_radius`` is the first at which at least
#: half of ``LADDER_SAMPLES`` inputs around the equilibrium (seed ``LADDER_SEED``, d = k) converge to it
#: within ``LADDER_STEPS`` layers.
LADDER = tuple(float(f"{m}e{e}") for e in range(-1, -8, -1) for m in (3, 1))
LADDER_SAMPLES, LADDER_SEED, LADDER_STEPS = 64, 7, 2000


def design_entry(n: int, k: int, seed: int, beta0: float = -1.0) -> dict | None:
    """Run every pass for one (n, k) from ``seed``: the entry of ``designed_data.py`` (without basin data),
    or None if pass 1 did not reach a spectral radius below ``0.9 * PASSES[0]["target"]``."""
    first = optimise_design(n, k, seed=seed, beta0=beta0, **PASSES[0])
    if first is None or first[0] >= 0.9 * PASSES[0]["target"]:
        return None
    iters = LONG_PASS2.get((n, k), PASSES[1]["iters"])
    _, _, params = lower_growth(n, k, first[1], iters=iters, lr=PASSES[1]["lr"])
    return {"n": n, "k": k, "seed": seed, "beta0": beta0, "params": params, "pass1_spectral_radius": first[0],
            "pass2_steps": iters}


@cache
def designed_cores() -> dict[tuple[int, int], dict]:
    """The stored designs by (n, k) (``designed_data.py``, written by scripts/regenerate_designed.py)."""
    from rankcollapse.equilibria.designed_data import DESIGNS

    return {(int(e["n"]), int(e["k"])): e for e in DESIGNS}

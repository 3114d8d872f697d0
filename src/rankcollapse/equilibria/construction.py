"""Value matrices with stable equilibria of a prescribed rank (ours; the paper's Theorem 3: ``theorem3``).

See docs/equilibria.md for the construction and why it works. All matrices use the row convention
``x -> x W_V``; attention logits ``x W_QK y^T / sqrt(d_qk)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.draws import gaussian
from rankcollapse.core.norms import sphere_normalize
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.equilibria.finder import newton_polish, residual
from rankcollapse.equilibria.lnmap import iterate, resolve_mask

OFF_BLOCK_GAIN = 0.5
COUNTEREXAMPLE_BLOCK = ((0.95, 1.0), (0.0, 1.0))


@dataclass
class Construction:
    """A value matrix (and mask, W_QK, d_qk) with a target equilibrium ``x`` [n, d] of rank ``k``."""

    n: int
    d: int
    k: int
    w_v: Tensor
    mask: str
    x: Tensor
    w_qk: Tensor | None = None
    d_qk: float = 1.0
    notes: str = ""
    basin_radius: float = 0.02
    extra: dict = field(default_factory=dict)

    def mask_tensor(self) -> Tensor | None:
        return resolve_mask(self.mask, self.n).matrix

    def neighbourhood_inputs(self, samples: int, radius: float, generator: torch.Generator) -> Tensor:
        """Inputs [samples, n, d]: ``x`` plus Gaussian noise of scale ``radius`` per token, renormalised
        (an open set of inputs: positive measure)."""
        noise = gaussian((samples, self.n, self.d), generator) * radius
        y = self.x.unsqueeze(0) + noise
        return sphere_normalize(y)


def _check(n: int, d: int, k: int) -> None:
    if n < 1 or d < 1:
        raise RankCollapseError(f"n and d must be >= 1, got n={n}, d={d}")
    if not 1 <= k <= min(n, d):
        raise RankCollapseError(f"rank k must be in 1..min(n, d) = 1..{min(n, d)}, got {k}")


def _settle(
    x0: Tensor, w_v: Tensor, mask: Tensor | None, w_qk: Tensor | None, d_qk: float, steps: int = 3000
) -> Tensor:
    x = iterate(x0, w_v, steps, mask, w_qk, d_qk)
    x = newton_polish(x, w_v, mask, w_qk, d_qk)
    if residual(x, w_v, mask, w_qk, d_qk) > 1e-10:
        raise RuntimeError("construction did not settle; this is a bug")
    return x


def _embed_block(d: int, block: Tensor) -> Tensor:
    """``blockdiag(OFF_BLOCK_GAIN * I_{d-b}, block)``: the block acts on the last b coordinates."""
    b = block.shape[0]
    w = torch.zeros(d, d, dtype=torch.float64)
    w[: d - b, : d - b] = OFF_BLOCK_GAIN * torch.eye(d - b, dtype=torch.float64)
    w[d - b :, d - b :] = block
    return w


# Radius of the input ball (per-token Gaussian noise, renormalised) used to show a positive-measure basin.
BASIN_RADIUS = {1: 0.02, 2: 0.02}
DESIGNED_GAIN = 0.5  # gain on the d - k padding coordinates, relative to the smallest designed norm lambda


def constructed_ranks(n: int | None = None) -> list[int]:
    """The ranks ``construct_rank_k`` can build for ``n`` tokens (any d >= k): 1, 2 and every designed
    ``3 <= k <= n`` stored in ``designed_data.py``."""
    from rankcollapse.equilibria.design import designed_cores

    ks = {k for (nn, k) in designed_cores() if n is None or nn == n}
    return [1, 2, *sorted(ks)]


def _construct_designed(n: int, d: int, k: int) -> Construction:
    """Rank k >= 3 from a stored design (rankcollapse.equilibria.design), padded to d features."""
    from rankcollapse.equilibria.design import designed_cores

    entry = designed_cores().get((n, k))
    if entry is None:
        raise RankCollapseError(f"no stored design for rank k={k} with n={n} tokens (see docs/equilibria.md)")
    return construct_designed(entry, d)


def construct_designed(entry: dict, d: int) -> Construction:
    """The construction of one design entry (``params``, ``n``, ``k``), padded to d features."""
    from rankcollapse.equilibria.design import build_design

    n, k = int(entry["n"]), int(entry["k"])
    _check(n, d, k)
    xk, w_core, w_qk_core, lam = build_design(torch.tensor(entry["params"], dtype=torch.float64), n, k)
    beta = float(w_qk_core[0, 0])
    gain = DESIGNED_GAIN * float(lam.min())
    w_v = torch.zeros(d, d, dtype=torch.float64)
    w_v[:k, :k] = w_core
    w_v[k:, k:] = gain * torch.eye(d - k, dtype=torch.float64)
    x = torch.zeros(n, d, dtype=torch.float64)
    x[:, :k] = xk
    w_qk = beta * torch.eye(d, dtype=torch.float64)
    mask_spec = "causal"
    x = newton_polish(x, w_v, resolve_mask(mask_spec, n).matrix, w_qk, 1.0)
    return Construction(
        n,
        d,
        k,
        w_v,
        mask_spec,
        x,
        w_qk=w_qk,
        d_qk=1.0,
        basin_radius=float(entry.get("basin_radius", 0.0)),
        notes=f"designed equilibrium (tokens 0..{n - k} at u = e_0, {k - 1} more core "
        f"tokens), W_V = Y^-1 diag(lambda) X on the first {k} coordinates, gain "
        f"{gain:.3g} elsewhere, W_QK = {beta:.4g} I (repulsive)",
        extra={
            "design_spectral_radius": entry.get("spectral_radius"),
            "beta": beta,
            "source": "ours (designed stable equilibrium)",
        },
    )


def construct_rank_k(n: int, d: int, k: int) -> Construction:
    """Value matrix, mask (causal) and target stable equilibrium of rank ``k``.

    k = 1: ``W_V = diag(1/2, ..., 1/2, 1)``; every token at ``u = e_{d-1}``; ``W_QK = I``.
    k = 2: ``W_V = blockdiag(1/2 I_{d-2}, [[0.95, 1], [0, 1]])``: the counterexample in the last two
    coordinates; token 0 at ``u``, token 1 at ``B ≈ (-0.086, -0.996)``, later tokens where they settle
    from ``B``; ``W_QK = I``.
    k >= 3: a designed equilibrium (``rankcollapse.equilibria.design``, parameters stored per (n, k) in
    ``designed_data.py``): tokens ``0..n-k`` at ``u = e_0`` and k - 1 further tokens spanning the first k
    coordinates, ``W_V = Y^-1 diag(lambda) X`` there (lower-triangular), a small gain on the other
    coordinates, ``W_QK = beta I`` with ``beta < 0`` (mildly repulsive); see docs/equilibria.md.
    """
    _check(n, d, k)
    if k >= 3:
        return _construct_designed(n, d, k)
    mask_spec = "causal"
    mask = resolve_mask(mask_spec, n).matrix
    if k == 1:
        w_v = _embed_block(d, torch.ones(1, 1, dtype=torch.float64))
        x = torch.zeros(n, d, dtype=torch.float64)
        x[:, d - 1] = 1.0
        return Construction(n, d, 1, w_v, mask_spec, x, notes="every token at the dominant eigenvector u")
    w_v = _embed_block(d, torch.tensor(COUNTEREXAMPLE_BLOCK, dtype=torch.float64))
    x0 = torch.zeros(n, d, dtype=torch.float64)
    x0[0, d - 1] = 1.0
    x0[1:, d - 2] = -0.086
    x0[1:, d - 1] = -0.996
    x0 = sphere_normalize(x0)
    x = _settle(x0, w_v, mask, None, 1.0)
    return Construction(
        n,
        d,
        2,
        w_v,
        mask_spec,
        x,
        notes="token 0 at u, token 1 at the counterexample's B, later tokens settled from B",
    )


def designed_measurement(
    n: int, d: int, k: int, *, samples: int, radius: float | str, steps: int, seed: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Ours: the designed stable equilibrium of rank ``k`` (:func:`construct_rank_k`) checked by
    ``finder.verify_equilibrium``: residual, numerical rank, tangent spectral radius, and the share of
    ``samples`` inputs within ``radius`` (``"auto"``: the construction's basin radius) converging in
    ``steps`` layers. A rank with no construction gives a row with ``constructed = False``. Returns
    (one row, its summary)."""
    from rankcollapse.equilibria.finder import verify_equilibrium

    try:
        c = construct_rank_k(n, d, k)
    except RankCollapseError as err:
        return [{"k": k, "constructed": False, "reason": str(err)}], {"constructed": False}
    gen = torch.Generator().manual_seed(seed)
    radius = c.basin_radius if radius == "auto" else float(radius)
    eq = verify_equilibrium(
        c.x,
        c.w_v,
        c.mask_tensor(),
        c.w_qk,
        c.d_qk,
        steps=steps,
        init=c.neighbourhood_inputs(samples, radius, gen),
    )
    row = {
        "k": k,
        "constructed": True,
        "reason": "",
        "rank": eq.rank,
        "residual": eq.residual,
        "spectral_radius": eq.spectral_radius,
        "stable": eq.stable,
        "basin_fraction": eq.basin_fraction,
        "basin_ci_low": eq.basin_ci[0],
        "basin_ci_high": eq.basin_ci[1],
        "basin_radius": radius,
        "mask": c.mask,
    }
    return [row], {k2: v for k2, v in row.items() if k2 != "k"}

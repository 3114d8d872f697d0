"""Value matrices with stable equilibria of a prescribed rank (SPEC §5, "equilibria of every rank").

See docs/equilibria.md for the construction and why it works. All matrices use the row convention
``x -> x W_V``; attention logits ``x W_QK y^T / sqrt(d_qk)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from rankcollapse.equilibria.finder import newton_polish, residual
from rankcollapse.equilibria.lnmap import iterate, resolve_mask
from rankcollapse.errors import RankCollapseError

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
    extra: dict = field(default_factory=dict)

    def mask_tensor(self) -> Tensor | None:
        return resolve_mask(self.mask, self.n)

    def neighbourhood_inputs(self, samples: int, radius: float, generator: torch.Generator) -> Tensor:
        """Inputs [samples, n, d]: ``x`` plus Gaussian noise of scale ``radius`` per token, renormalised
        (an open set of inputs: positive measure)."""
        noise = torch.randn(samples, self.n, self.d, generator=generator, dtype=torch.float64) * radius
        y = self.x.unsqueeze(0) + noise
        return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def _check(n: int, d: int, k: int) -> None:
    if n < 1 or d < 1:
        raise RankCollapseError(f"n and d must be >= 1, got n={n}, d={d}")
    if not 1 <= k <= min(n, d):
        raise RankCollapseError(f"rank k must be in 1..min(n, d) = 1..{min(n, d)}, got {k}")


def _settle(x0: Tensor, w_v: Tensor, mask: Tensor | None, w_qk: Tensor | None, d_qk: float,
            steps: int = 3000) -> Tensor:
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
    w[d - b:, d - b:] = block
    return w


def construct_rank_k(n: int, d: int, k: int) -> Construction:
    """Value matrix, mask (causal) and target stable equilibrium of rank ``k``, for ``k`` in {1, 2}.

    k = 1: ``W_V = diag(1/2, ..., 1/2, 1)``; every token at ``u = e_{d-1}``.
    k = 2: ``W_V = blockdiag(1/2 I_{d-2}, [[0.95, 1], [0, 1]])``: the counterexample in the last two
    coordinates; token 0 at ``u``, token 1 at ``B ≈ (-0.086, -0.996)``, later tokens where they settle
    from ``B``. Ranks k >= 3 are not constructed (see docs/equilibria.md, "Ranks three and up").
    """
    _check(n, d, k)
    if k >= 3:
        raise RankCollapseError(
            f"no construction for rank k={k} >= 3 (implemented: k = 1, 2; see docs/equilibria.md)")
    mask_spec = "causal"
    mask = resolve_mask(mask_spec, n)
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
    x0 = x0 / torch.linalg.vector_norm(x0, dim=-1, keepdim=True)
    x = _settle(x0, w_v, mask, None, 1.0)
    return Construction(n, d, 2, w_v, mask_spec, x,
                        notes="token 0 at u, token 1 at the counterexample's B, later tokens settled from B")

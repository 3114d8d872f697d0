"""The contrasting result (SPEC §5): orthogonal ``W_V`` and all tokens in one open hemisphere -> the LN
dynamics collapse to one point (relative ``mu`` -> 0)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.equilibria.lnmap import iterate


def random_orthogonal(d: int, generator: torch.Generator) -> Tensor:
    """Haar-random orthogonal d x d (QR of a Gaussian with sign fix), float64."""
    q, r = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r)).unsqueeze(0)


def hemisphere_tokens(b: int, n: int, d: int, generator: torch.Generator, margin: float = 0.1) -> Tensor:
    """Tokens uniform on the sphere, reflected into the open hemisphere ``<x, v> > margin`` around a random
    direction ``v`` (one per sample): [b, n, d]."""
    x = torch.randn(b, n, d, generator=generator, dtype=torch.float64)
    x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    v = torch.randn(b, 1, d, generator=generator, dtype=torch.float64)
    v = v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    dot = (x * v).sum(-1, keepdim=True)
    x = torch.where(dot < 0, x - 2 * dot * v, x)  # reflect into the hemisphere
    dot = (x * v).sum(-1, keepdim=True)
    x = x + torch.clamp(margin - dot, min=0.0) * v
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def relative_mu(x: Tensor) -> Tensor:
    """``||X - 1 mean||_F / ||X||_F`` per sample: x [..., n, d] -> [...]."""
    centred = x - x.mean(dim=-2, keepdim=True)
    return torch.linalg.matrix_norm(centred) / torch.linalg.matrix_norm(x)


@dataclass
class OrthogonalCollapse:
    """``mu_rel`` at the input and after ``steps`` layers, per sample."""

    mu_rel_start: Tensor
    mu_rel_end: Tensor
    steps: int


def orthogonal_collapse(n: int, d: int, mask: Tensor | None, samples: int = 16, steps: int = 300,
                        generator: torch.Generator | None = None, d_qk: float = 1.0) -> OrthogonalCollapse:
    """Run the LN map with a random orthogonal ``W_V`` from hemisphere inputs; report ``mu_rel``."""
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    w_v = random_orthogonal(d, gen)
    x0 = hemisphere_tokens(samples, n, d, gen)
    x = iterate(x0, w_v, steps, mask, None, d_qk)
    return OrthogonalCollapse(relative_mu(x0), relative_mu(x), steps)

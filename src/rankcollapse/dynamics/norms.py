"""Token normalisations as pure functions of ``x: [..., n, d]`` (one token per row).

- ``sphere``    ``x_i / ||x_i||_2``: the paper's LayerNorm model (SPEC §2), tokens on the unit
  sphere. A zero token has no direction: :class:`RankCollapseError`, never NaN.
- ``layernorm`` ``gamma * (x_i - mean(x_i)) / sqrt(var(x_i) + eps) + beta`` over features
  (``torch.nn.LayerNorm``: biased variance, ``eps = 1e-5``).
- ``rmsnorm``   ``gamma * x_i / sqrt(mean(x_i^2) + eps)`` (Zhang & Sennrich 2019, ``eps = 1e-6``).
- ``none``      identity.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from rankcollapse.errors import RankCollapseError

NORMS = ("none", "sphere", "layernorm", "rmsnorm")


def sphere_normalize(x: Tensor) -> Tensor:
    """``D x`` with ``D = diag(1 / ||x_i||_2)``: every token scaled to unit length. [..., n, d].

    Raises RankCollapseError if some token is exactly zero (its direction is undefined).
    """
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    if bool((norm == 0).any()):
        raise RankCollapseError(
            "sphere normalisation met a zero token (its direction is undefined); "
            "use another value matrix, input or norm"
        )
    return x / norm


def layer_norm(
    x: Tensor, gamma: Tensor | None = None, beta: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """Full LayerNorm over features: centre, divide by ``sqrt(var + eps)``, then ``gamma, beta``.

    x: [..., n, d]; gamma, beta: [d] or None (1 and 0). Equals ``torch.nn.functional.layer_norm``.
    """
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def rms_norm(x: Tensor, gamma: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """RMSNorm: ``gamma * x / sqrt(mean_d(x^2) + eps)``. x: [..., n, d]; gamma: [d] or None."""
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return y if gamma is None else y * gamma


def identity(x: Tensor) -> Tensor:
    """No normalisation."""
    return x


def get_norm(name: str) -> Callable[[Tensor], Tensor]:
    """The normalisation called ``name`` (one of :data:`NORMS`) with default parameters."""
    table: dict[str, Callable[[Tensor], Tensor]] = {
        "none": identity,
        "sphere": sphere_normalize,
        "layernorm": layer_norm,
        "rmsnorm": rms_norm,
    }
    if name not in table:
        raise RankCollapseError(f"unknown norm {name!r}; allowed: {', '.join(NORMS)}")
    return table[name]

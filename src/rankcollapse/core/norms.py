"""Token normalisations as pure functions of ``x: [..., n, d]`` (one token per row), one signature each.

- ``sphere``    ``x_i / ||x_i||_2``: **the theory's scaling-only normalisation** (the paper's
  LayerNorm model, "each token divided by its norm": no centring, no gain, no bias). Tokens land on
  the unit sphere. A zero token of a finite input has no direction: :class:`RankCollapseError`, never
  NaN (an input that already overflowed stays non-finite, reported as the overflow it is).
- ``layernorm`` ``weight * (x_i - mean(x_i)) / sqrt(var(x_i) + eps) + bias`` over features
  (``torch.nn.LayerNorm``: biased variance, ``eps = 1e-5``): a model's own LayerNorm.
- ``rmsnorm``   ``weight * x_i / sqrt(mean(x_i^2) + eps)`` (Zhang & Sennrich 2019, ``eps = 1e-6``):
  a model's own RMSNorm (Llama, T5's scale-only LayerNorm).
- ``none``      identity.
- ``dyt``       ``weight * tanh(alpha x_i) + bias`` element-wise (Dynamic Tanh, Zhu, Chen, He, LeCun, Liu,
  CVPR 2025, arXiv 2503.10622: a drop-in replacement of LayerNorm; ``alpha`` a scalar, :data:`DYT_ALPHA`
  = 0.5 unless given, its code's initial value): no statistic of the token, no projection onto a sphere.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked, quote

NORMS = ("none", "sphere", "layernorm", "rmsnorm", "dyt")


@checked(ndim={"x": 1})
def sphere_normalize(x: Tensor) -> Tensor:
    """``D x`` with ``D = diag(1 / ||x_i||_2)``: every token scaled to unit length. [..., n, d].

    Raises RankCollapseError if some token is exactly zero (its direction is undefined) in a finite
    input; an input that already overflowed (NaN / inf: e.g. logits past the dtype's range) stays
    non-finite, for the caller's overflow report, rather than being blamed on a zero token.
    """
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    if bool((norm == 0).any()) and bool(torch.isfinite(x).all()):
        raise RankCollapseError(
            "sphere normalisation met a zero token (its direction is undefined); "
            "use another value matrix, input or norm"
        )
    return x / norm


@checked(ndim={"x": 1})
def layer_norm(
    x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """LayerNorm over features: ``(x - mean(x)) / sqrt(var(x) + eps) * weight + bias`` (biased var).

    x: [..., n, d]; weight, bias: [d] or None (1 and 0). Equals ``torch.nn.functional.layer_norm``.
    """
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@checked(ndim={"x": 1})
def rms_norm(
    x: Tensor, weight: Tensor | None = None, eps: float = 1e-6, compute_dtype: torch.dtype | None = None
) -> Tensor:
    """RMSNorm over features: ``weight * x / sqrt(mean(x^2) + eps)``. x: [..., n, d]; weight: [d] or None.

    ``compute_dtype`` reproduces Hugging Face's Llama, which normalises in float32 whatever the
    model's dtype (``None``: compute in ``x``'s own dtype, the exact choice).
    """
    dtype = x.dtype
    y = x if compute_dtype is None else x.to(compute_dtype)
    y = y * torch.rsqrt(y.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = y.to(dtype)
    return y if weight is None else weight * y


def identity(x: Tensor) -> Tensor:
    """No normalisation."""
    return x


@checked(ndim={"x": 1})
def get_norm(name: str) -> Callable[[Tensor], Tensor]:
    """The normalisation called ``name`` (one of :data:`NORMS`) with default parameters."""
    table: dict[str, Callable[[Tensor], Tensor]] = {
        "none": identity,
        "sphere": sphere_normalize,
        "layernorm": layer_norm,
        "rmsnorm": rms_norm,
        "dyt": dyt,
    }
    if name not in table:
        raise RankCollapseError(f"unknown norm {quote(str(name), 40)}; allowed: {', '.join(NORMS)}")
    return table[name]


# ---- Dynamic Tanh (a follow-up's replacement of LayerNorm) ------------------------------------------
#: DyT's scalar ``alpha`` unless given: the initial value of its code (``alpha_init_value = 0.5``,
#: jiachenzhu/DyT; the paper's default for non-LLM models).
DYT_ALPHA = 0.5


@checked(ndim={"x": 1})
def dyt(
    x: Tensor, alpha: float = DYT_ALPHA, weight: Tensor | None = None, bias: Tensor | None = None
) -> Tensor:
    """Dynamic Tanh: ``weight * tanh(alpha x) + bias``, element-wise (Zhu et al. 2025, arXiv 2503.10622).

    x: [..., n, d]; alpha: a finite scalar (DyT learns one per layer); weight, bias: [d] or None (1 and 0).
    Unlike :func:`layer_norm` it reads no statistic of the token (no mean, no variance, no norm): each entry
    is squashed on its own, so a token is never projected onto a sphere.
    """
    if not math.isfinite(float(alpha)):
        raise RankCollapseError(f"dyt alpha must be a finite number, got {quote(alpha)}")
    y = torch.tanh(alpha * x)
    if weight is not None:
        y = weight * y
    return y if bias is None else y + bias

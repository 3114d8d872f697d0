"""Rotary position embeddings (RoPE, Su et al. 2021): the one rotation the simulator and the models use.

Index letters: b batch, h heads, n/i/j tokens, e query/key features (even), k frequency index.

A vector ``x`` [e] at position ``p`` is rotated pair by pair: pair ``k`` (features ``k`` and ``k + e/2``,
the "rotate_half" convention of GPT-NeoX, Llama and Hugging Face's ``apply_rotary_pos_emb``; *not* the
interleaved pairs ``(2k, 2k + 1)`` of the original paper and torchtune) turns by the angle ``p θ_k``,

    ``θ_k = scale · base^(−2k/e)``,  k = 0 … e/2 − 1  (``θ_0 = scale`` the largest: Wu et al.'s ``θ_1``),

    ``rot(x, p) = x ⊙ cos(p θ) + rotate_half(x) ⊙ sin(p θ)``,  ``rotate_half([x1, x2]) = [−x2, x1]``.

So ``rot(q, i) · rot(k, j)`` depends on the positions through ``i − j`` only. ``scale`` multiplies every
frequency (1: plain RoPE; the ``scale_theta`` of Wu et al.'s public code; ``1/f`` is Hugging Face's
"linear" RoPE scaling by a factor ``f``). The models take their angles from the model's own rotary module
(whatever RoPE variant it has) and rotate with :func:`apply_rotary`; the simulator computes them here.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked


def check_rotary(width: int, base: float, scale: float = 1.0) -> None:
    """RankCollapseError (one line) unless ``width`` is even and ``base > 1``, ``scale > 0`` are finite."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 2 or width % 2:
        raise RankCollapseError(
            f"rotary embeddings rotate feature pairs: the query/key width must be even, got {width!r}")
    for name, value, low in (("rope_base", base, 1.0), ("rope_scale", scale, 0.0)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or value <= low:
            raise RankCollapseError(f"{name} must be a finite number above {low:g}, got {value!r}")


def rotary_frequencies(width: int, base: float, scale: float = 1.0) -> Tensor:
    """``θ_k = scale · base^(−2k/width)``, k = 0 … width/2 − 1: [width/2] float64, largest first."""
    check_rotary(width, base, scale)
    k = torch.arange(0, width, 2, dtype=torch.float64)
    return scale * torch.pow(torch.tensor(float(base), dtype=torch.float64), -k / width)


@checked(ndim={"positions": 1})
def rotary_angles(
    positions: Tensor, width: int, base: float, scale: float = 1.0, dtype: torch.dtype = torch.float64
) -> tuple[Tensor, Tensor]:
    """``(cos, sin)`` of the angles ``p θ_k``, each [..., n, width] in Hugging Face's layout (the
    ``width/2`` angles twice: ``cat(pθ, pθ)``), computed in float64 and cast to ``dtype``.
    positions: [..., n] (integers or reals)."""
    theta = rotary_frequencies(width, base, scale).to(positions.device)
    angles = positions.to(torch.float64)[..., None] * theta  # [..., n, width/2]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


@checked
def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [−x2, x1]`` on the last axis (split in halves), as in GPT-NeoX/Llama rotary."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@checked(ndim={"x": 2, "cos": 2, "sin": 2})
def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``x ⊙ cos + rotate_half(x) ⊙ sin`` on the first ``r`` features, the rest passed through (partial
    rotary, GPT-NeoX / Phi-3). x: [..., n, e]; cos, sin: [..., n, r] broadcasting against ``x[..., :r]``
    (a model's [b, n, r] angles are given as [b, 1, n, r] for x [b, h, n, e]), r <= e, r even."""
    for name, t in (("cos", cos), ("sin", sin)):
        if t.ndim < 2 or t.shape[-1] == 0 or t.shape[-1] % 2 or t.shape[-1] > x.shape[-1] \
                or t.shape[-2] != x.shape[-2]:
            raise RankCollapseError(f"{name} must be [..., n, r] with n = {x.shape[-2]} tokens and an even "
                                    f"r <= {x.shape[-1]}, got shape {tuple(t.shape)}")
    r = cos.shape[-1]
    if r == x.shape[-1]:
        return x * cos + rotate_half(x) * sin
    rot, rest = x[..., :r], x[..., r:]
    return torch.cat((rot * cos + rotate_half(rot) * sin, rest), dim=-1)


@checked(ndim={"x": 2, "positions": 1})
def rotary(x: Tensor, positions: Tensor, base: float, scale: float = 1.0) -> Tensor:
    """``rot(x_i, p_i)`` (module docstring) of every token: x [..., n, e] (e even), positions [n] or
    [..., n] -> [..., n, e] in x's dtype."""
    if positions.shape[-1] != x.shape[-2]:
        raise RankCollapseError(f"positions must give one position per token ({x.shape[-2]}), got shape "
                                f"{tuple(positions.shape)}")
    cos, sin = rotary_angles(positions, x.shape[-1], base, scale, x.dtype)
    return apply_rotary(x, cos.to(x.device), sin.to(x.device))

"""Masked attention weights as pure functions (the reference every fast path is tested against).

Index letters: b batch, h heads, i/j query/key tokens, d features, e query/key features.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked


@checked
def attention_logits(q: Tensor, k: Tensor, d_qk: float = 1.0) -> Tensor:
    """Scaled scores ``S = q k^T / sqrt(d_qk)``.

    q: [..., i, e], k: [..., j, e] -> [..., i, j]. ``sqrt(d_qk)`` is the temperature term
    (the paper's "temperature term"): smaller ``d_qk`` means sharper attention.
    """
    if d_qk <= 0 or not math.isfinite(d_qk):
        raise ValueError(f"d_qk must be a positive finite number, got {d_qk}")
    return (q @ k.transpose(-1, -2)) / math.sqrt(d_qk)


@checked
def masked_softmax(logits: Tensor, mask: Tensor | None, bias: Tensor | None = None) -> Tensor:
    """Row-wise softmax over allowed keys: ``A[i, j] = exp(S_ij + B_ij) / sum_{k: M_ik} exp(S_ik + B_ik)``.

    logits: [..., i, j]; mask: bool [i, j] (broadcast), True where query i may attend to key j,
    or None for the complete mask; bias: an additive bias ``B`` [i, j] (broadcast; None: 0), e.g. a
    relative-position decay ``B_ij = -m (i - j)`` (ALiBi; ``masks.position.decay_bias``), finite where
    allowed. Masked entries are exactly 0 (applied with ``where(M, S + B, -inf)`` before a
    max-subtracted softmax, never by multiplying logits). Every row must have at least one allowed key
    (self-loops guarantee it).
    """
    if bias is not None:
        if not bias.is_floating_point() or bias.ndim < 2:
            raise RankCollapseError(
                f"bias must be a floating-point tensor [i, j], got {bias.dtype} {tuple(bias.shape)}")
        try:
            fits = torch.broadcast_shapes(bias.shape, logits.shape) == logits.shape
        except RuntimeError:
            fits = False
        if not fits:
            raise RankCollapseError(
                f"bias of shape {tuple(bias.shape)} does not broadcast to the logits' {tuple(logits.shape)}")
        allowed = torch.isfinite(bias) if mask is None else torch.isfinite(bias) | ~mask
        if not bool(allowed.all()):
            raise RankCollapseError(
                "bias must be finite on every allowed key (a key is removed by the mask, not the bias)")
        logits = logits + bias.to(logits.dtype)
    if mask is None:
        return torch.softmax(logits, dim=-1)
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a boolean tensor, got {mask.dtype}")
    if not bool(mask.any(dim=-1).all()):
        raise ValueError("mask has a row with no allowed key; every token must attend to itself")
    scores = logits.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


@checked
def attention_weights(
    q: Tensor, k: Tensor, mask: Tensor | None = None, d_qk: float = 1.0, bias: Tensor | None = None
) -> Tensor:
    """Row-stochastic attention matrix ``A = softmax_M(q k^T / sqrt(d_qk) + B)``.

    q: [..., i, e], k: [..., j, e], mask: bool [i, j] or None, bias: float [i, j] or None -> A: [..., i, j].
    """
    return masked_softmax(attention_logits(q, k, d_qk), mask, bias)

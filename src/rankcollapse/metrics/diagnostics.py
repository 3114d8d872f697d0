"""Diagnostics next to collapse: attention entropy, attention sinks, first-token norm, massive activations.

Pure functions of one layer's attention weights ``attn: [b, h, i, j]`` (rows sum to 1 over the
allowed keys ``N_i``) or hidden states ``x: [b, n, d]``; each is named as its column. Index letters:
b batch, h heads, i queries, j keys, n tokens, d features.

- ``attention_entropy`` [b, h]: ``mean_i H_i``, ``H_i = -sum_j A_ij log A_ij`` (nats, ``0 log 0 = 0``).
- ``normalized_attention_entropy`` [b, h]: ``mean over queries with |N_i| > 1 of H_i / log |N_i|``
  (1 = uniform over the allowed keys).
- ``first_token_attention`` [b, h]: ``mean_i A_i0`` over all queries (query 0 included).
- ``sink_rate`` [b]: share of heads with ``first_token_attention > threshold`` (Gu et al., 2024).
- ``first_token_norm`` [b]: ``||x_0||_2``.
- ``top_activations`` [b, k]: the ``k`` largest ``|x_nd|`` over tokens and features, descending
  (Sun et al., 2024).
- ``massive_ratio`` [b]: ``max |x_nd| / median |x_nd|`` (Sun et al., 2024).

``SINK_THRESHOLD = 0.3`` is the threshold of Gu et al. (2024, "When attention sink emerges in
language models"); Sun et al. (2024, "Massive activations in large language models") call
activations massive when they are about 1000 times the median magnitude (and above ~100).
Undefined values are NaN, never 0: a head whose queries all have one key has no normalised entropy,
and ``massive_ratio`` of an all-zero ``x`` is 0/0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.errors import RankCollapseError

SINK_THRESHOLD = 0.3
"""Default ``sink_rate`` threshold on a head's mean attention to the first token (Gu et al., 2024)."""

DIAGNOSTIC_NAMES = (
    "attention_entropy",
    "normalized_attention_entropy",
    "first_token_attention",
    "sink_rate",
    "first_token_norm",
    "top_activations",
    "massive_ratio",
)


def _check_tensor(x: object, name: str, ndim: int, shape: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise RankCollapseError(f"{name} must be a torch tensor {shape}, got {type(x).__name__}")
    if x.ndim != ndim or x.numel() == 0:
        raise RankCollapseError(f"{name} has shape {tuple(x.shape)}; allowed: a non-empty tensor {shape}")
    if not x.is_floating_point():
        raise RankCollapseError(f"{name} has dtype {x.dtype}; allowed: a floating-point tensor")
    return x


def _attn(attn: object) -> Tensor:
    return _check_tensor(attn, "attn", 4, "[b, h, i, j]")


def _keys_per_query(attn: Tensor, mask: Tensor | None) -> Tensor:
    """``|N_i|`` broadcast to [b, h, i]: allowed keys per query (all keys when ``mask`` is None)."""
    if mask is None:
        return torch.full(attn.shape[:-1], attn.shape[-1], dtype=attn.dtype, device=attn.device)
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise RankCollapseError("mask must be a torch.bool tensor broadcastable to attn [b, h, i, j]")
    try:
        full = torch.broadcast_to(mask, attn.shape)
    except RuntimeError:
        raise RankCollapseError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to attn {tuple(attn.shape)}"
        ) from None
    return full.sum(-1).to(attn.dtype)


def _row_entropy(attn: Tensor) -> Tensor:
    """``H_i = -sum_j A_ij log A_ij`` with ``0 log 0 = 0``: [b, h, i]."""
    positive = attn > 0
    safe = torch.where(positive, attn, torch.ones_like(attn))
    return -(torch.where(positive, attn * torch.log(safe), torch.zeros_like(attn))).sum(-1)


def attention_entropy(attn: Tensor) -> Tensor:
    """Mean over queries of the entropy of each attention row, in nats: ``[b, h, i, j] -> [b, h]``.

    ``attention_entropy = (1/|i|) sum_i H_i``, ``H_i = -sum_j A_ij log A_ij``, ``0 log 0 = 0``.
    Uniform attention over ``m`` keys gives ``log m``; attention on one key gives 0.
    """
    return _row_entropy(_attn(attn)).mean(-1)


def normalized_attention_entropy(attn: Tensor, mask: Tensor | None = None) -> Tensor:
    """Entropy of each row divided by its maximum ``log |N_i|``, averaged over queries: ``[b, h]``.

    ``|N_i|`` = allowed keys of query ``i`` from ``mask`` (bool, broadcastable to ``attn``; None =
    every key). Queries with ``|N_i| = 1`` have no choice and are left out of the mean; a head
    with no other query is NaN. 1 means uniform over the allowed keys, 0 one key per query.
    """
    attn = _attn(attn)
    keys = _keys_per_query(attn, mask)
    choice = keys > 1
    ratio = torch.where(choice, _row_entropy(attn) / torch.log(torch.where(choice, keys, 2.0)), 0.0)
    count = choice.sum(-1)
    total = ratio.sum(-1)
    return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, float("nan")))


def first_token_attention(attn: Tensor) -> Tensor:
    """Mean attention on key 0 over all queries: ``mean_i A_i0``, ``[b, h, i, j] -> [b, h]``."""
    return _attn(attn)[..., 0].mean(-1)


def sink_rate(attn: Tensor, threshold: float = SINK_THRESHOLD) -> Tensor:
    """Share of heads whose mean attention on the first token exceeds ``threshold``: ``[b]``.

    ``sink_rate = (1/h) sum_h 1[first_token_attention_h > threshold]`` (strict), ``threshold`` in
    [0, 1], default ``SINK_THRESHOLD = 0.3`` (Gu et al., 2024). Average over layers for their
    model-level metric.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise RankCollapseError(f"threshold={threshold!r} is invalid; allowed: a number in [0, 1]")
    share = first_token_attention(attn)
    return (share > threshold).to(share.dtype).mean(-1)


def first_token_norm(x: Tensor) -> Tensor:
    """Euclidean norm of the first token: ``x [b, n, d] -> ||x_0||_2 [b]``."""
    return torch.linalg.vector_norm(_check_tensor(x, "x", 3, "[b, n, d]")[:, 0, :], dim=-1)


def top_activations(x: Tensor, k: int = 3) -> Tensor:
    """The ``k`` largest magnitudes ``|x_nd|`` per sample, over tokens and features: ``[b, n, d] -> [b, k]``.

    Sorted descending; ``k`` must be at most ``n * d``.
    """
    x = _check_tensor(x, "x", 3, "[b, n, d]")
    size = x.shape[1] * x.shape[2]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= size:
        raise RankCollapseError(f"k={k!r} is invalid; allowed: an integer 1..{size} (n * d)")
    return torch.topk(x.abs().reshape(x.shape[0], -1), k, dim=-1).values


def massive_ratio(x: Tensor) -> Tensor:
    """Largest magnitude over the median magnitude per sample: ``max |x_nd| / median |x_nd|``, ``[b]``.

    The median is ``torch.median`` (the lower middle value for an even count). 0/0 (all zero) is NaN;
    a positive maximum over a zero median is ``inf``. Sun et al. (2024) report ratios near 1000.
    """
    x = _check_tensor(x, "x", 3, "[b, n, d]")
    flat = x.abs().reshape(x.shape[0], -1)
    top = flat.max(-1).values
    median = flat.median(-1).values
    return torch.where(top == 0, torch.full_like(top, float("nan")), top / median)

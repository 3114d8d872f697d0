"""T5 / MPNet bucketed relative-position bias (shared by every layer of the model)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def relative_position_bucket(relative_position: Tensor, num_buckets: int = 32, max_distance: int = 128,
                             bidirectional: bool = True) -> Tensor:
    """T5 / MPNet bucket of ``r = j - i`` (key minus query position) -> int64, same shape.

    Bidirectional: half the buckets for ``r > 0``; in each half, ``|r| < m`` (``m`` = a quarter of
    ``num_buckets``) gets its own bucket and larger ``|r|`` a logarithmic one,
    ``m + floor(log(|r| / m) / log(max_distance / m) * (half - m))``, capped at ``half - 1``.
    The log is taken in float32, as both reference implementations do (bucket edges match).
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).to(torch.long) * num_buckets
        r = relative_position.abs()
    else:
        r = -torch.clamp(relative_position, max=0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(r.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(r < max_exact, r, large)


def relative_bias(table: nn.Embedding, n: int, num_buckets: int, max_distance: int) -> Tensor:
    """Bias ``B[0, h, i, j] = table[bucket(j - i), h]`` -> [1, h, n, n]."""
    pos = torch.arange(n, device=table.weight.device)
    bucket = relative_position_bucket(pos[None, :] - pos[:, None], num_buckets, max_distance)
    return table(bucket).permute(2, 0, 1).unsqueeze(0)

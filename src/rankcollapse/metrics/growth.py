"""How the residual stream grows with depth and how much a layer changes it: pure functions of token matrices.

- ``stream_var(X) = 1/n sum_i Var_k(x_ik)``: the mean over tokens of each token's variance over its features
  (biased, as LayerNorm's). The quantity of "the output variance grows with depth" (LayerNorm Scaling, Sun
  et al. 2025, arXiv 2502.05795; Peri-LN, Kim et al. 2025, arXiv 2502.02732): the variance of the hidden
  state a layer outputs, read per token so that one sample's tokens are averaged, not pooled with another
  token's mean.
- ``layer_cos(X(t-1), X(t)) = 1/n sum_i cos(x_i(t-1), x_i(t))``: the mean cosine between each token before
  and after a layer. Near 1: the layer is near the identity on the stream (the Curse of Depth's "deep blocks
  barely contribute"), in direction; the scale is ``stream_var``'s.

The largest activation against the median one is ``metrics.diagnostics.massive_ratio`` (Sun et al. 2024).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked

#: The per-sample columns of the growth measurements (``models.growth``, ``kit.tasks.growth``).
GROWTH_NAMES: tuple[str, ...] = ("stream_var", "layer_cos", "massive_ratio")


@checked
def stream_var(x: Tensor) -> Tensor:
    """``1/n sum_i (1/d sum_k (x_ik - m_i)^2)``, ``m_i`` token i's feature mean. x: [..., n, d] -> [...]."""
    return x.var(dim=-1, unbiased=False).mean(dim=-1)


@checked
def layer_cos(before: Tensor, after: Tensor) -> Tensor:
    """``1/n sum_i <b_i, a_i> / (||b_i|| ||a_i||)``. before, after: [..., n, d] -> [...].

    A token of length 0 (before or after) has no direction: the sample's value is NaN (never inf).
    RankCollapseError when the shapes differ."""
    if before.shape != after.shape:
        raise RankCollapseError(f"layer_cos needs two token sets of one shape, got {tuple(before.shape)} and "
                                f"{tuple(after.shape)}")
    num = (before * after).sum(dim=-1)
    den = torch.linalg.vector_norm(before, dim=-1) * torch.linalg.vector_norm(after, dim=-1)
    cos = torch.where(den > 0, num / torch.where(den > 0, den, 1), torch.nan)
    return cos.mean(dim=-1)

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
- :class:`AttentionRows`: the per-query values the attention diagnostics are means of (``H_i``,
  ``A_i0``, ``|N_i|``: ``O(b h n)``), so a layer can form its map a block of query rows at a time.
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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError

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


def _row_entropy(attn: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """``H_i = -sum_j A_ij log A_ij`` with ``0 log 0 = 0``: [b, h, i], computed in ``dtype`` (None:
    attn's; float64 of a float32 ``attn`` is exactly the entropy of ``attn.double()``). In place on one
    temporary: ``dtype``'s itemsize + 2 bytes per weight next to ``attn``."""
    positive = attn > 0
    terms = attn.to(dtype or attn.dtype, copy=True).masked_fill_(~positive, 1.0)
    terms.log_().mul_(attn)  # A log A; 1 log 1 = 0 off the support
    return -terms.masked_fill_(~positive, 0.0).sum(-1)


def _normalized(entropy: Tensor, keys: Tensor) -> Tensor:
    """``mean over queries with |N_i| > 1 of H_i / log |N_i|``: entropy [b, h, i], keys broadcast to it
    -> [b, h] (NaN for a head with no such query)."""
    choice = keys > 1
    ratio = torch.where(choice, entropy / torch.log(torch.where(choice, keys, 2.0)), 0.0)
    count = choice.expand_as(ratio).sum(-1)
    total = ratio.sum(-1)
    return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, float("nan")))


def _check_threshold(threshold: object) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise RankCollapseError(f"threshold={threshold!r} is invalid; allowed: a number in [0, 1]")
    return float(threshold)


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
    return _normalized(_row_entropy(attn), _keys_per_query(attn, mask))


def first_token_attention(attn: Tensor) -> Tensor:
    """Mean attention on key 0 over all queries: ``mean_i A_i0``, ``[b, h, i, j] -> [b, h]``."""
    return _attn(attn)[..., 0].mean(-1)


def sink_rate(attn: Tensor, threshold: float = SINK_THRESHOLD) -> Tensor:
    """Share of heads whose mean attention on the first token exceeds ``threshold``: ``[b]``.

    ``sink_rate = (1/h) sum_h 1[first_token_attention_h > threshold]`` (strict), ``threshold`` in
    [0, 1], default ``SINK_THRESHOLD = 0.3`` (Gu et al., 2024). Average over layers for their
    model-level metric.
    """
    threshold = _check_threshold(threshold)
    share = first_token_attention(attn)
    return (share > threshold).to(share.dtype).mean(-1)


@dataclass(frozen=True)
class AttentionRows:
    """Per-query reductions of one layer's attention weights ``A [b, h, i, j]``: all the attention
    diagnostics need, ``O(b h i)`` instead of the ``[b, h, i, j]`` map, so the map can be formed a block
    of query rows at a time and dropped (:func:`attention_rows` of each block, :meth:`cat` along ``i``).

    ``entropy`` [b, h, i]: ``H_i = -sum_j A_ij log A_ij``; ``first`` [b, h, i]: ``A_i0``; ``keys``
    [b, 1, i]: ``|N_i|``, the allowed keys of query ``i``. The methods are the functions of the same
    names on the whole map: ``attention_entropy() == attention_entropy(A)`` and so on.
    """

    entropy: Tensor
    first: Tensor
    keys: Tensor

    @staticmethod
    def cat(parts: Sequence[AttentionRows]) -> AttentionRows:
        """Blocks of consecutive query rows, in order, as one."""
        return AttentionRows(*(torch.cat([getattr(p, f) for p in parts], dim=-1)
                               for f in ("entropy", "first", "keys")))

    @staticmethod
    def empty(b: int, h: int, n: int, dtype: torch.dtype, device: torch.device | str = "cpu"
              ) -> AttentionRows:
        """Room for ``n`` queries, filled block by block with :meth:`put`."""
        return AttentionRows(torch.empty(b, h, n, dtype=dtype, device=device),
                             torch.empty(b, h, n, dtype=dtype, device=device),
                             torch.empty(b, 1, n, dtype=dtype, device=device))

    def put(self, queries: slice, block: AttentionRows) -> None:
        """Write the rows of a block of ``queries`` in place (no allocation that outlives the block)."""
        self.entropy[..., queries] = block.entropy
        self.first[..., queries] = block.first
        self.keys[..., queries] = block.keys

    def take(self, samples: Sequence[int] | slice, queries: int) -> AttentionRows:
        """The rows of some samples, their first ``queries`` queries (a right-padded sample's real tokens)."""
        return AttentionRows(self.entropy[samples, :, :queries], self.first[samples, :, :queries],
                             self.keys[samples, :, :queries])

    def to(self, **kw: Any) -> AttentionRows:
        return AttentionRows(self.entropy.to(**kw), self.first.to(**kw), self.keys.to(**kw))

    def attention_entropy(self) -> Tensor:
        """:func:`attention_entropy`: ``[b, h]``."""
        return self.entropy.mean(-1)

    def normalized_attention_entropy(self) -> Tensor:
        """:func:`normalized_attention_entropy` with the mask the rows were taken under: ``[b, h]``."""
        return _normalized(self.entropy, self.keys)

    def first_token_attention(self) -> Tensor:
        """:func:`first_token_attention`: ``[b, h]``."""
        return self.first.mean(-1)

    def sink_rate(self, threshold: float = SINK_THRESHOLD) -> Tensor:
        """:func:`sink_rate`: ``[b]``."""
        share = self.first_token_attention()
        return (share > _check_threshold(threshold)).to(share.dtype).mean(-1)


def attention_rows(
    attn: Tensor, mask: Tensor | None = None, dtype: torch.dtype | None = None
) -> AttentionRows:
    """:class:`AttentionRows` of ``attn [b, h, i, j]`` (a block of query rows, or all of them) under
    ``mask`` (bool, the same rows: [i, j] or [b, 1, i, j]; None: every key allowed), computed in
    ``dtype`` (None: attn's): those of ``attn.to(dtype)`` without a copy of the block in ``dtype``."""
    attn = _attn(attn)
    b, _, i, _ = attn.shape
    dtype = dtype or attn.dtype
    keys = _keys_per_query(attn[:, :1], mask).to(dtype).expand(b, 1, i)  # counts: exact in float32
    return AttentionRows(_row_entropy(attn, dtype), attn[..., 0].to(dtype, copy=True), keys.clone())


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

"""Diagnostics next to collapse: attention entropy, attention sinks, first-token norm, massive activations,
and the queries and keys of the key-bias reading of sinks.

Pure functions of one layer's attention weights ``attn: [b, h, i, j]`` (rows sum to 1 over the
allowed keys ``N_i``), hidden states ``x: [b, n, d]``, or queries and keys (below); each is named as its
column. Index letters:
b batch, h heads (g key heads), i queries, j keys, n tokens, d features, e per-head features.

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

The key-bias reading of sinks (Gu et al., ICLR 2025, arXiv 2410.10781: the first token acts as a key bias,
high ``cos(q_i, k_0)``, often small ``||k_0||``), on one layer's queries ``q: [b, h, i, e]`` and keys
``k: [b, g, j, e]`` as its attention function receives them (after any rotary embedding; grouped-query
heads: ``g`` divides ``h`` and query head ``h`` reads key head ``h // (h / g)``), under a bool mask
broadcastable to ``[b, h, i, j]`` (True: query i may attend to key j; None: every key), all ``[b, h]``:

- ``first_key_cos``: ``mean over queries i >= 1 that may see key 0 of cos(q_i, k_0)``;
- ``key_cos``: ``mean over allowed pairs (i, j), i >= 1, j >= 1, of cos(q_i, k_j)``, the baseline the
  first key is compared with;
- ``first_key_norm``: ``||k_0||``; ``key_norm``: ``mean over j >= 1 of ||k_j||`` (NaN for one key);
- ``query_norm``: ``mean over i of ||q_i||``;
- :class:`QueryKeyRows`: the per-query values they are means of (``O(b h n)``), from sums over each
  query's allowed keys however they are taken (:func:`key_units`, :func:`key_sums`).

``cos(u, v) = u . v / (||u|| ||v||)``: a vector with no direction (zero, or not finite) has no cosine, and
its pairs are left out of the means (NaN where no pair is left). A sample whose ``q`` or ``k`` holds a
non-finite value is NaN in all five, as ``massive_ratio`` of a non-finite ``x`` is in a run's rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError

SINK_THRESHOLD = 0.3
"""Default ``sink_rate`` threshold on a head's mean attention to the first token (Gu et al., 2024)."""

#: The key-bias diagnostics of one layer's queries and keys (module docstring), each named as its column.
QUERY_KEY_NAMES: tuple[str, ...] = ("first_key_cos", "key_cos", "first_key_norm", "key_norm", "query_norm")

DIAGNOSTIC_NAMES = (
    "attention_entropy",
    "normalized_attention_entropy",
    "first_token_attention",
    "sink_rate",
    "first_token_norm",
    "top_activations",
    "massive_ratio",
    *QUERY_KEY_NAMES,
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


def _finite_samples(*xs: Tensor) -> Tensor:
    """[b] bool: every value of each tensor ``[b, ...]`` finite in that sample."""
    ok = torch.ones(xs[0].shape[0], dtype=torch.bool, device=xs[0].device)
    for x in xs:
        ok &= torch.isfinite(x).flatten(1).all(dim=1)
    return ok


def _nan_where(v: Tensor, ok: Tensor) -> Tensor:
    """``v [b, ...]`` with NaN in the samples where ``ok [b]`` is False."""
    return torch.where(ok.reshape(-1, *([1] * (v.ndim - 1))), v, torch.full_like(v, math.nan))


def _directions(x: Tensor) -> tuple[Tensor, Tensor]:
    """``(x / ||x||, has)`` over the last axis, float64: the unit vector where ``x`` has a direction
    (finite and non-zero), 0 elsewhere; ``has`` bool ``x.shape[:-1]``."""
    x = x.to(torch.float64)
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    has = torch.isfinite(norm) & (norm > 0)
    return torch.where(has, x / torch.where(has, norm, 1.0), 0.0), has[..., 0]


def _query_key(q: object, k: object) -> tuple[Tensor, Tensor]:
    """q [b, h, i, e] and k [b, g, j, e] checked (``g`` divides ``h``), k's heads repeated for the query
    heads that read them: ``[b, h, j, e]``."""
    q = _check_tensor(q, "q", 4, "[b, h, i, e]")
    k = _check_tensor(k, "k", 4, "[b, g, j, e]")
    if k.shape[0] != q.shape[0] or k.shape[-1] != q.shape[-1] or q.shape[1] % k.shape[1]:
        raise RankCollapseError(f"k has shape {tuple(k.shape)} for q {tuple(q.shape)}; allowed: [b, g, j, e] "
                                f"with the same b and e and g dividing h = {q.shape[1]}")
    return q, k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)


def _allowed(mask: Tensor | None, shape: tuple[int, ...], device: torch.device) -> Tensor:
    """``mask`` (bool, broadcastable to ``shape`` [b, h, i, j]; None: every key) as a bool ``shape``."""
    if mask is None:
        return torch.ones(shape, dtype=torch.bool, device=device)
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise RankCollapseError("mask must be a torch.bool tensor broadcastable to [b, h, i, j]")
    try:
        return torch.broadcast_to(mask.to(device), shape)
    except RuntimeError:
        raise RankCollapseError(f"mask of shape {tuple(mask.shape)} does not broadcast to {shape}") from None


def _pair_mean(q: Tensor, k: Tensor, mask: Tensor | None, first: bool) -> Tensor:
    """Mean of ``cos(q_i, k_j)`` over the allowed pairs with ``i >= 1`` and ``j = 0`` (``first``) or
    ``j >= 1``, both vectors with a direction: ``[b, h]`` (NaN where none; a non-finite sample NaN)."""
    q, keys = _query_key(q, k)
    uq, hq = _directions(q)
    uk, hk = _directions(keys)
    cos = uq @ uk.transpose(-1, -2)  # [b, h, i, j]
    pairs = _allowed(mask, tuple(cos.shape), cos.device) & hq[..., :, None] & hk[..., None, :]
    pairs[..., 0, :] = False  # queries i >= 1
    if first:
        pairs[..., 1:] = False
    else:
        pairs[..., 0] = False
    count = pairs.sum((-2, -1))
    total = torch.where(pairs, cos, 0.0).sum((-2, -1))
    mean = torch.where(count > 0, total / count.clamp(min=1), math.nan)
    return _nan_where(mean, _finite_samples(q, keys))


def first_key_cos(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """How well the queries point at the first key: ``mean over i >= 1 with mask[i, 0] of cos(q_i, k_0)``.

    q: [b, h, i, e]; k: [b, g, j, e] (``g`` divides ``h``: query head ``h`` reads key head ``h // (h / g)``);
    mask: bool broadcastable to [b, h, i, j] or None (every key) -> [b, h] float64. Query 0 is left out
    (under a causal mask key 0 is its only key). Pairs whose query or key has no direction are left out;
    NaN where no pair is left, and in a sample whose q or k holds a non-finite value.
    """
    return _pair_mean(q, k, mask, first=True)


def key_cos(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """The baseline of :func:`first_key_cos`: ``mean over allowed pairs (i, j), i >= 1, j >= 1, of
    cos(q_i, k_j)`` (one mean over all such pairs, not a mean of per-query means). Shapes, mask and NaN as
    :func:`first_key_cos`: ``[b, h]`` float64."""
    return _pair_mean(q, k, mask, first=False)


def _norms(q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(||q_i|| [b, h, i], ||k_j|| [b, h, j] per query head, finite samples [b])``, float64."""
    q, keys = _query_key(q, k)
    ok = _finite_samples(q, keys)
    qn = torch.linalg.vector_norm(q.to(torch.float64), dim=-1)
    kn = torch.linalg.vector_norm(keys.to(torch.float64), dim=-1)
    return qn, kn, ok


def first_key_norm(q: Tensor, k: Tensor) -> Tensor:
    """``||k_0||`` of the key head each query head reads: q [b, h, i, e], k [b, g, j, e] -> [b, h] float64
    (NaN in a sample whose q or k holds a non-finite value)."""
    _, kn, ok = _norms(q, k)
    return _nan_where(kn[..., 0], ok)


def key_norm(q: Tensor, k: Tensor) -> Tensor:
    """``mean over j >= 1 of ||k_j||``, the baseline of :func:`first_key_norm`: ``[b, h]`` float64 (NaN
    with one key, and in a non-finite sample)."""
    _, kn, ok = _norms(q, k)
    mean = kn[..., 1:].mean(-1) if kn.shape[-1] > 1 else torch.full_like(kn[..., 0], math.nan)
    return _nan_where(mean, ok)


def query_norm(q: Tensor, k: Tensor) -> Tensor:
    """``mean over i of ||q_i||`` (every query): ``[b, h]`` float64 (NaN in a non-finite sample; ``k`` is read
    for that check only)."""
    qn, _, ok = _norms(q, k)
    return _nan_where(qn.mean(-1), ok)


@dataclass(frozen=True)
class QueryKeyRows:
    """Per-query (and per-key) reductions of one layer's queries ``q [b, h, i, e]`` and keys
    ``k [b, g, j, e]``: all the key-bias diagnostics need, ``O(b h n)``, so no ``[i, j]`` map of cosines
    is formed (:func:`query_key_rows`). The methods are the functions of the same names on q, k and the
    mask the rows were taken under: ``first_key_cos() == first_key_cos(q, k, mask)`` and so on.

    ``q_norm`` [b, h, i]: ``||q_i||``; ``k_norm`` [b, h, j]: ``||k_j||`` of the key head each query head
    reads; ``first_cos`` [b, h, i]: ``cos(q_i, k_0)`` where key 0 is allowed and both have a direction,
    else NaN; ``cos_sum`` [b, h, i]: ``sum of cos(q_i, k_j)`` over the allowed keys ``j >= 1`` with a
    direction (0 where ``q_i`` has none); ``cos_count`` [b, h, i]: how many terms that sum has. Queries and
    keys are the same tokens (self-attention), so a right-padded sample's first ``m`` of each are its own
    (:meth:`take`)."""

    q_norm: Tensor
    k_norm: Tensor
    first_cos: Tensor
    cos_sum: Tensor
    cos_count: Tensor

    @staticmethod
    def cat(parts: Sequence[QueryKeyRows]) -> QueryKeyRows:
        """Blocks of consecutive query rows of one layer, in order, as one (the keys are every block's)."""
        def along(f: str) -> Tensor:
            return torch.cat([getattr(p, f) for p in parts], dim=-1)

        return QueryKeyRows(along("q_norm"), parts[0].k_norm, along("first_cos"), along("cos_sum"),
                            along("cos_count"))

    def take(self, samples: Sequence[int] | slice, tokens: int) -> QueryKeyRows:
        """The rows of some samples, their first ``tokens`` queries and keys."""
        return QueryKeyRows(*(getattr(self, f)[samples, :, :tokens]
                              for f in ("q_norm", "k_norm", "first_cos", "cos_sum", "cos_count")))

    def to(self, **kw: Any) -> QueryKeyRows:
        return QueryKeyRows(*(getattr(self, f).to(**kw)
                              for f in ("q_norm", "k_norm", "first_cos", "cos_sum", "cos_count")))

    def _finite(self) -> Tensor:
        return _finite_samples(self.q_norm, self.k_norm)

    def first_key_cos(self) -> Tensor:
        """:func:`first_key_cos`: ``[b, h]``."""
        c = self.first_cos[..., 1:]
        seen = torch.isfinite(c)
        count = seen.sum(-1)
        mean = torch.where(count > 0, torch.where(seen, c, 0.0).sum(-1) / count.clamp(min=1), math.nan)
        return _nan_where(mean, self._finite())

    def key_cos(self) -> Tensor:
        """:func:`key_cos`: ``[b, h]``."""
        count = self.cos_count[..., 1:].sum(-1)
        mean = torch.where(count > 0, self.cos_sum[..., 1:].sum(-1) / count.clamp(min=1), math.nan)
        return _nan_where(mean, self._finite())

    def first_key_norm(self) -> Tensor:
        """:func:`first_key_norm`: ``[b, h]``."""
        return _nan_where(self.k_norm[..., 0], self._finite())

    def key_norm(self) -> Tensor:
        """:func:`key_norm`: ``[b, h]``."""
        kn = self.k_norm
        mean = kn[..., 1:].mean(-1) if kn.shape[-1] > 1 else torch.full_like(kn[..., 0], math.nan)
        return _nan_where(mean, self._finite())

    def query_norm(self) -> Tensor:
        """:func:`query_norm`: ``[b, h]``."""
        return _nan_where(self.q_norm.mean(-1), self._finite())

    def values(self) -> dict[str, Tensor]:
        """Every key-bias diagnostic, ``[b, h]`` each, by its name (:data:`QUERY_KEY_NAMES`)."""
        return {name: getattr(self, name)() for name in QUERY_KEY_NAMES}


def query_key_values(q: Tensor, k: Tensor, mask: Tensor | None = None) -> dict[str, Tensor]:
    """Every key-bias diagnostic of q [b, h, i, e] and k [b, g, j, e] under ``mask``, from the reference
    functions, ``[b, h]`` each, by name (:data:`QUERY_KEY_NAMES`)."""
    return {"first_key_cos": first_key_cos(q, k, mask), "key_cos": key_cos(q, k, mask),
            "first_key_norm": first_key_norm(q, k), "key_norm": key_norm(q, k),
            "query_norm": query_norm(q, k)}


def key_units(k: Tensor) -> Tensor:
    """``U_j = [k_j / ||k_j||, 1]`` for the keys ``j >= 1`` with a direction, 0 for key 0 and the others:
    k [b, g, j, e] -> [b, g, j, e + 1] float64. Summed over a query's allowed keys (:func:`key_sums`, or a
    kernel's uniform attention times ``|N_i|``) it gives what :func:`query_key_rows` needs of them."""
    units, has = _directions(k)
    out = torch.cat([units, has.to(torch.float64)[..., None]], dim=-1)
    out[..., 0, :] = 0.0
    return out


def key_sums(units: Tensor, allowed: Tensor | None, queries: int | None = None) -> Tensor:
    """``S_i = sum over the allowed keys j of U_j``: units [b, g, j, u] (:func:`key_units`), ``allowed``
    bool broadcastable to [b, 1, i, j] (a block of query rows, or all) -> [b, g, i, u] float64; None: every
    key, for ``queries`` rows."""
    if allowed is None:
        if queries is None:
            raise RankCollapseError("key_sums of every key needs the number of queries")
        total = units.sum(-2, keepdim=True)
        return total.expand(*units.shape[:2], queries, units.shape[-1])
    while allowed.ndim < 4:
        allowed = allowed.unsqueeze(0)
    return torch.matmul(allowed.to(device=units.device, dtype=torch.float64), units)


def query_key_rows(q: Tensor, k: Tensor, sums: Tensor | None = None, sees_first: Tensor | None = None,
                   allowed: Tensor | None = None) -> QueryKeyRows:
    """:class:`QueryKeyRows` of queries q [b, h, i, e] (every query of the layer, or a block of them, whose
    first row is query 0 of the layer) and the layer's keys k [b, g, j, e].

    ``sums`` [b, g, i, e + 1]: ``sum over each query's allowed keys of U_j`` (:func:`key_units`), however it
    was taken (:func:`key_sums`, a prefix sum, a kernel's uniform attention); ``sees_first`` bool
    [b or 1, 1, i]: key 0 allowed. Without them both come from ``allowed`` (bool broadcastable to
    [b, 1, i, j]; None: every key)."""
    q = _check_tensor(q, "q", 4, "[b, h, i, e]")
    k = _check_tensor(k, "k", 4, "[b, g, j, e]")
    b, h, n_q, e = q.shape
    g = k.shape[1]
    if h % g or k.shape[-1] != e:
        raise RankCollapseError(f"k has shape {tuple(k.shape)} for q {tuple(q.shape)}; allowed: g dividing h")
    if sums is None:
        sums = key_sums(key_units(k), allowed, n_q)
    if sees_first is None:
        sees_first = (torch.ones(1, 1, n_q, dtype=torch.bool, device=q.device) if allowed is None
                      else allowed[..., 0])
    while sees_first.ndim < 3:
        sees_first = sees_first.unsqueeze(0)
    r = h // g
    q64 = q.to(torch.float64)
    q_norm = torch.linalg.vector_norm(q64, dim=-1)  # [b, h, i]
    hq = torch.isfinite(q_norm) & (q_norm > 0)  # q_i has a direction
    inv = torch.where(hq, 1.0 / torch.where(hq, q_norm, 1.0), 0.0)
    grouped = q64.view(b, g, r, n_q, e)
    s = sums.to(device=q.device, dtype=torch.float64)  # [b, g, i, e + 1]
    # q_i . S_i / ||q_i|| (S_i shared by the r query heads of a key head): one batched GEMV, no [b, h, i, e]
    # product formed (2-3x faster than the elementwise form on SmolLM2's shapes at 4,096 tokens)
    dots = torch.matmul(grouped.transpose(2, 3), s[..., :e, None]).squeeze(-1)  # [b, g, i, r]
    cos_sum = dots.permute(0, 1, 3, 2).reshape(b, h, n_q) * inv
    count = torch.where(hq, s[..., e][:, :, None].expand(b, g, r, n_q).reshape(b, h, n_q).round(), 0.0)
    u0, h0 = _directions(k[:, :, 0])  # [b, g, e], [b, g]
    first = torch.matmul(grouped, u0[:, :, None, :, None]).squeeze(-1).reshape(b, h, n_q) * inv
    seen = sees_first.to(q.device) & hq & h0.repeat_interleave(r, dim=1)[..., None]
    first = torch.where(seen, first, math.nan)
    k_norm = torch.linalg.vector_norm(k.to(torch.float64), dim=-1).repeat_interleave(r, dim=1)
    return QueryKeyRows(q_norm, k_norm, first, torch.where(hq, cos_sum, 0.0), count)


@dataclass(frozen=True)
class AttentionRows:
    """Per-query reductions of one layer's attention weights ``A [b, h, i, j]``: all the attention
    diagnostics need, ``O(b h i)`` instead of the ``[b, h, i, j]`` map, so the map can be formed a block
    of query rows at a time and dropped (:func:`attention_rows` of each block, :meth:`cat` along ``i``).

    ``entropy`` [b, h, i]: ``H_i = -sum_j A_ij log A_ij``; ``first`` [b, h, i]: ``A_i0``; ``keys``
    [b, 1, i]: ``|N_i|``, the allowed keys of query ``i``. The methods are the functions of the same
    names on the whole map: ``attention_entropy() == attention_entropy(A)`` and so on. ``qk``: the same
    layer's :class:`QueryKeyRows` where the path that took the rows saw its queries and keys (None: it
    did not).
    """

    entropy: Tensor
    first: Tensor
    keys: Tensor
    qk: QueryKeyRows | None = None

    @staticmethod
    def cat(parts: Sequence[AttentionRows]) -> AttentionRows:
        """Blocks of consecutive query rows, in order, as one (``qk`` where every block has it)."""
        qk = None if any(p.qk is None for p in parts) else QueryKeyRows.cat([p.qk for p in parts])  # type: ignore[misc]
        return AttentionRows(*(torch.cat([getattr(p, f) for p in parts], dim=-1)
                               for f in ("entropy", "first", "keys")), qk=qk)

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
        """The rows of some samples, their first ``queries`` queries (a right-padded sample's real tokens;
        ``qk``: its first ``queries`` queries and keys)."""
        return AttentionRows(self.entropy[samples, :, :queries], self.first[samples, :, :queries],
                             self.keys[samples, :, :queries],
                             None if self.qk is None else self.qk.take(samples, queries))

    def to(self, **kw: Any) -> AttentionRows:
        return AttentionRows(self.entropy.to(**kw), self.first.to(**kw), self.keys.to(**kw),
                             None if self.qk is None else self.qk.to(**kw))

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

"""One attention call through a fused kernel that keeps each row's log-normaliser, and the exact
per-query statistics of that call (ours; formulas: :mod:`rankcollapse.metrics.attention_stats`).

Index letters: b batch, h query heads, g key/value heads (GQA: g divides h), i queries, j keys, e per-head
features. A call is ``out = softmax_M(scale q k^T) V`` per head, with the mask ``M`` a
:class:`KernelMask` (an additive ``[b or 1, 1, i, j]`` tensor, or the kernel's own causal mask, or none).

- :func:`kernel_mask`: a mask as a model hands it to its attention function (None, a bool tensor, an
  additive float tensor) as the kernel takes it, with each row's allowed-key count ``|N_i|`` and whether
  key 0 is allowed (both ``O(b i)``, read once per mask).
- :func:`attention_lse`: ``(out, lse)`` of one call: torch's CPU flash kernel
  (``aten._scaled_dot_product_flash_attention_for_cpu``, the kernel ``scaled_dot_product_attention``
  runs on the CPU), on CUDA the memory-efficient kernel (``compute_log_sumexp``), else blocks of query
  rows through the plain softmax (float64 on CUDA). The CPU kernel needs q, k and v of one width: a
  narrower q and k are padded with zeros (their logits unchanged).
- :func:`attention_with_stats`: the call on extended values ``V' = [V, K]`` (one kernel call per key/value
  head, its query heads together), giving the output and
  :class:`~rankcollapse.metrics.diagnostics.AttentionRows` (``H_i``, ``A_i0``, ``|N_i|``), exactly.
  Learned sink logits (GPT-OSS's ``s_aux``) are folded in after the call.
- :func:`rows_in_blocks`: the same rows from the weights formed a block of query rows at a time, for the
  logits the lse has no exact form of (a soft cap, ``c tanh(S / c)``; an additive position bias inside
  the logits); ``O(b h c j)`` memory.
- :func:`allowed_key_sums`: ``sum over each query's allowed keys of U_j`` for the key-bias rows
  (:class:`~rankcollapse.metrics.diagnostics.QueryKeyRows`, which both give with the others): a prefix
  sum under the kernel's own causal mask, the total without a mask, else one call with zero queries
  (uniform weights over the allowed keys) times ``|N_i|``.

On the CPU the first ``e`` columns of the extended call are bit for bit the output of
``scaled_dot_product_attention`` on ``V`` (``tests/models/test_lse_attention.py``): the extra columns
change no sum of the output's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.core.attention import masked_softmax
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.attention_stats import first_token_rows, row_entropy, sink_normaliser
from rankcollapse.metrics.diagnostics import (
    AttentionRows,
    attention_rows,
    key_sums,
    key_units,
    query_key_rows,
)

__all__ = ["KERNELS", "KernelMask", "allowed_key_sums", "attention_lse", "attention_with_stats",
           "kernel_mask", "linear_statistics", "masked_below", "rows_in_blocks"]

#: The kernels :func:`attention_lse` runs: ``cpu-flash`` (torch's CPU flash kernel), ``cuda-efficient``
#: (the memory-efficient CUDA kernel, float16 / bfloat16 / float32), ``blocks`` (blocks of query rows
#: through the plain masked softmax: any device and dtype).
KERNELS: tuple[str, ...] = ("cpu-flash", "cuda-efficient", "blocks")

#: Query rows per block of the ``blocks`` kernel and of :func:`rows_in_blocks`, per 2^20 keys x heads:
#: a block holds ``rows x j x h`` logits.
BLOCK_WEIGHTS: int = 2**22


@dataclass(frozen=True)
class KernelMask:
    """A call's mask as a kernel takes it. ``additive``: ``[b or 1, 1, i, j]`` in the call's dtype (0 where
    allowed, ``-inf`` or ``finfo.min`` elsewhere) or None; ``causal``: with no tensor, the kernel's own
    causal mask (``j <= i``, queries and keys aligned at position 0); ``counts``: ``|N_i|`` float64
    ``[b or 1, 1, i]``; ``first``: bool ``[b or 1, 1, i]``, key 0 allowed; ``biased``: the additive tensor
    holds finite non-zero values (a position bias), which the entropy's lse form cannot take."""

    additive: Tensor | None
    causal: bool
    counts: Tensor
    first: Tensor
    biased: bool = False


def masked_below(dtype: torch.dtype) -> float:
    """The value below which an additive mask entry removes its key: half the most negative finite value
    of ``dtype``, or of float32 where ``dtype`` reaches further (a float32 ``finfo.min`` mask cast to
    float64 still removes its keys)."""
    return max(torch.finfo(dtype).min, torch.finfo(torch.float32).min) / 2


def kernel_mask(mask: Tensor | None, causal: bool, n_q: int, n_k: int, dtype: torch.dtype,
                device: torch.device | str = "cpu") -> KernelMask:
    """A mask as a model gives it to its attention function, as a kernel takes it.

    ``mask``: None (``causal`` says whether the kernel masks causally), a bool tensor (True: allowed) or
    an additive float tensor (0 allowed, ``finfo.min`` or ``-inf`` not), broadcastable to
    ``[b, 1, i, j]`` (2-d, 3-d or 4-d; a per-head mask is refused in one line). The counts and the first
    column are read once here (``O(b i j)`` comparisons, no copy of the mask in another dtype but for a
    bool tensor, made additive in ``dtype``)."""
    if mask is None:
        if causal and n_q != n_k:
            raise RankCollapseError(f"a causal call with {n_q} queries and {n_k} keys: give the mask")
        rows = torch.arange(1, n_q + 1, dtype=torch.float64, device=device) if causal else \
            torch.full((n_q,), float(n_k), dtype=torch.float64, device=device)
        return KernelMask(None, causal, rows.reshape(1, 1, n_q), torch.ones(1, 1, n_q, dtype=torch.bool,
                                                                           device=device))
    while mask.ndim < 4:
        mask = mask.unsqueeze(0)
    if mask.ndim != 4 or mask.shape[1] != 1 or tuple(mask.shape[-2:]) != (n_q, n_k):
        raise RankCollapseError(f"attention mask of shape {tuple(mask.shape)}; allowed: [b or 1, 1, {n_q}, "
                                f"{n_k}] (one mask for every head)")
    if mask.dtype == torch.bool:
        allowed = mask
        additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, -math.inf)
        biased = False
    else:
        allowed = mask > masked_below(mask.dtype)
        additive = mask if mask.dtype == dtype else mask.to(dtype)
        biased = bool(((mask != 0) & allowed).any())
    return KernelMask(additive, False, allowed.sum(-1, dtype=torch.float64), allowed[..., 0], biased)


def _kernel(q: Tensor, kind: str | None) -> str:
    if kind is not None:
        if kind not in KERNELS:
            raise RankCollapseError(f"unknown kernel {kind!r}; allowed: {', '.join(KERNELS)}")
        return kind
    if q.device.type == "cpu" and q.dtype in (torch.float32, torch.float64, torch.bfloat16):
        return "cpu-flash"
    if q.device.type == "cuda" and q.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return "cuda-efficient"
    return "blocks"


def _pad(x: Tensor, width: int) -> Tensor:
    """x [..., e] with zeros up to ``width`` features (x itself when it has them)."""
    if x.shape[-1] == width:
        return x
    out = x.new_zeros(*x.shape[:-1], width)
    out[..., : x.shape[-1]] = x
    return out


def attention_lse(q: Tensor, k: Tensor, v: Tensor, mask: KernelMask, scale: float,
                  kernel: str | None = None) -> tuple[Tensor, Tensor]:
    """``(out, lse)`` of one attention call: ``out = softmax_M(scale q k^T) V`` [b, h, i, e_v] and
    ``lse_i = log sum_{j in N_i} exp(scale q_i . k_j)`` [b, h, i] (float32 for a float32 call, as the
    kernel keeps it). q, k: [b, h, i or j, e]; v: [b, h, j, e_v] (expanded key/value heads are views,
    not copies). ``kernel``: one of :data:`KERNELS` (None: the device's, :func:`_kernel`)."""
    kind = _kernel(q, kernel)
    if kind == "cpu-flash":
        width = max(q.shape[-1], v.shape[-1])
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            _pad(q, width), _pad(k, width), _pad(v, width), 0.0, mask.causal, attn_mask=mask.additive,
            scale=scale)
        return out[..., : v.shape[-1]], lse
    if kind == "cuda-efficient":
        width = max(q.shape[-1], v.shape[-1])
        bias = None if mask.additive is None else mask.additive.expand(q.shape[0], q.shape[1], -1, -1)
        out, lse, _, _ = torch.ops.aten._scaled_dot_product_efficient_attention(
            _pad(q, width), _pad(k, width), _pad(v, width), bias, True, 0.0, mask.causal, scale=scale)
        return out[..., : v.shape[-1]], lse[..., : q.shape[-2]]
    return _blocks_lse(q, k, v, mask, scale)


def _block_rows(n_q: int, n_k: int, heads: int) -> int:
    return max(1, min(n_q, BLOCK_WEIGHTS // max(1, n_k * heads)))


def _mask_rows(mask: KernelMask, rows: slice, n_k: int, device: torch.device) -> Tensor | None:
    """The additive mask of a block of query rows ([.., c, j]), None for none."""
    if mask.additive is not None:
        return mask.additive[..., rows, :]
    if not mask.causal:
        return None
    i = torch.arange(rows.start, rows.stop, device=device)[:, None]
    j = torch.arange(n_k, device=device)[None]
    return torch.zeros(i.shape[0], n_k, device=device).masked_fill_(j > i, -math.inf)


def _blocks_lse(q: Tensor, k: Tensor, v: Tensor, mask: KernelMask, scale: float) -> tuple[Tensor, Tensor]:
    """The ``blocks`` kernel: per block of query rows the logits, their logsumexp and ``exp(S - lse) V``."""
    b, h, n_q, _ = q.shape
    n_k = k.shape[-2]
    out = q.new_empty(b, h, n_q, v.shape[-1])
    lse = q.new_empty(b, h, n_q)
    c = _block_rows(n_q, n_k, h)
    for start in range(0, n_q, c):
        rows = slice(start, min(n_q, start + c))
        logits = torch.matmul(q[:, :, rows], k.transpose(-1, -2)) * scale
        add = _mask_rows(mask, rows, n_k, q.device)
        if add is not None:
            logits = logits + add.to(logits.dtype)
        block_lse = torch.logsumexp(logits, -1)
        lse[:, :, rows] = block_lse
        out[:, :, rows] = torch.matmul(torch.exp(logits - block_lse[..., None]), v)
    return out, lse


def _expand(x: Tensor, heads: int) -> Tensor:
    """One key/value head x [b, 1, j, e] seen by ``heads`` query heads: a stride-0 view."""
    return x.expand(x.shape[0], heads, x.shape[2], x.shape[3])


def attention_with_stats(q: Tensor, k: Tensor, v: Tensor, mask: KernelMask, scale: float, *,
                         s_aux: Tensor | None = None, output: bool = True,
                         kernel: str | None = None) -> tuple[Tensor | None, AttentionRows]:
    """One attention call and its exact per-query statistics, from the kernel's lse (no ``[i, j]`` map).

    q: [b, h, i, e]; k, v: [b, g, j, e] and [b, g, j, e_v] (GQA: query head ``h`` reads key/value head
    ``h // (h / g)``); ``mask``: :func:`kernel_mask`; ``scale``: the logits' factor (``1 / sqrt(d_qk)``).
    Per key/value head, one kernel call on ``V' = [V, K]`` gives ``out = A V``, ``A K`` and ``lse``; then
    ``H_i = lse_i - scale q_i . (A K)_i`` (:func:`~rankcollapse.metrics.attention_stats.row_entropy`),
    ``A_i0 = exp(scale q_i . k_0 - lse_i)`` where key 0 is allowed
    (:func:`~rankcollapse.metrics.attention_stats.first_token_rows`) and ``|N_i|`` from the mask.
    ``s_aux`` [h]: learned sink logits (GPT-OSS): the normaliser is ``L_i = logaddexp(lse_i, s_aux)``, the
    output ``exp(lse_i - L_i) A V``, and the statistics are those of the softmax over keys and sink.
    Returns ``(out [b, h, i, e_v] in q's dtype, or None without output, rows)``, the rows float64
    ``[b, h, i]`` (keys ``[b or 1, 1, i]`` broadcast to ``[b, 1, i]``) with the key-bias rows of q and k
    (``rows.qk``, :func:`allowed_key_sums`). A mask with a position bias inside
    (``mask.biased``) is refused in one line: :func:`rows_in_blocks` takes it.
    """
    if mask.biased:
        raise RankCollapseError("an additive mask with a position bias has no lse form of the entropy; "
                                "use rows_in_blocks")
    b, h, n_q, e = q.shape
    g = k.shape[1]
    if h % g or v.shape[1] != g:
        raise RankCollapseError(f"{g} key/value heads for {h} query heads; allowed: a divisor of {h}")
    r = h // g
    e_v = v.shape[-1]
    out = q.new_empty(b, h, n_q, e_v) if output else None
    entropy = torch.empty(b, h, n_q, dtype=torch.float64, device=q.device)
    first = torch.empty(b, h, n_q, dtype=torch.float64, device=q.device)
    width = e_v + e
    for c in range(g):
        heads = slice(c * r, (c + 1) * r)
        kc = k[:, c: c + 1]
        values = torch.cat([v[:, c: c + 1], kc], dim=-1)  # V' = [V, K]: [b, 1, j, e_v + e]
        got, lse = attention_lse(_pad(q[:, heads], width), _expand(_pad(kc, width), r), _expand(values, r),
                                 mask, scale, kernel)
        qc = q[:, heads]
        aux = None if s_aux is None else s_aux[heads]
        entropy[:, heads] = row_entropy(qc, got[..., e_v:], lse, scale, s_aux=aux)
        total = lse if aux is None else sink_normaliser(lse, aux)
        first[:, heads] = first_token_rows(qc, kc[:, :, 0].expand(b, r, e), total, scale, allowed=mask.first)
        if out is not None:
            part = got[..., :e_v]
            if aux is not None:
                part = part * torch.exp(lse.to(torch.float64) - total).to(part.dtype)[..., None]
            out[:, heads] = part
        del got, values
    keys = mask.counts.expand(b, 1, n_q)
    qk = query_key_rows(q, k, allowed_key_sums(k, mask, n_q, kernel), mask.first)
    return out, AttentionRows(entropy, first, keys.clone(), qk)


def allowed_key_sums(k: Tensor, mask: KernelMask, n_q: int, kernel: str | None = None) -> Tensor:
    """``S_i = sum over the allowed keys j of U_j`` (``U``:
    :func:`~rankcollapse.metrics.diagnostics.key_units` of k [b, g, j, e]) -> [b, g, i, e + 1] float64, for
    the key-bias rows. Without a mask tensor: the total (no mask) or a prefix sum (the kernel's own causal
    mask), exact. With one: a kernel call with zero queries and keys gives each row uniform weights
    ``1 / |N_i|`` over its allowed keys, so its output times ``|N_i|`` is ``S_i``, in the call's dtype
    (float32 for half-precision calls); the count column is rounded to the integer it is. Not for a mask
    with a position bias inside (the weights would not be uniform): :func:`rows_in_blocks` sums those from
    the allowed keys themselves."""
    units = key_units(k)
    if mask.additive is None:
        return units.cumsum(-2) if mask.causal else key_sums(units, None, n_q)
    if mask.biased:
        raise RankCollapseError("an additive mask with a position bias gives no uniform weights; use "
                                "rows_in_blocks")
    dtype = torch.float32 if k.dtype in (torch.float16, torch.bfloat16) else k.dtype
    if mask.additive.dtype != dtype:
        mask = KernelMask(mask.additive.to(dtype), mask.causal, mask.counts, mask.first, mask.biased)
    b, g, n_k, u = units.shape
    width = -(-u // 8) * 8  # the CUDA kernels take widths in multiples of 8
    values = _pad(units.to(dtype), width)
    zeros = values.new_zeros(b, g, max(n_q, n_k), 1)
    mean, _ = attention_lse(zeros[:, :, :n_q], zeros[:, :, :n_k], values, mask, 1.0, kernel)
    sums = mean[..., :u].to(torch.float64) * mask.counts[..., None].to(mean.device)
    sums[..., -1] = sums[..., -1].round()
    return sums


def linear_statistics(q: Tensor, k: Tensor, values: Tensor, mask: KernelMask, scale: float,
                      kernel: str | None = None) -> Tensor:
    """Any linear statistic of each attention row, ``(A U)_i = sum_j A_ij U_j``, from one kernel call with
    ``U`` as the values: the mean attended position (``U_j = j``), the attention on a chosen set of keys
    (``U_j = 1[j in S]``), the first-token attention (``U_j = 1[j = 0]``). q: [b, h, i, e]; k: [b, g, j, e];
    values: ``U`` [j, u] (the same for every head) or [b, g, j, u] -> [b, h, i, u] in q's dtype."""
    b, h, n_q, _ = q.shape
    g, n_k = k.shape[1], k.shape[2]
    if h % g:
        raise RankCollapseError(f"{g} key/value heads for {h} query heads; allowed: a divisor of {h}")
    if values.ndim == 2:
        values = values.to(q.dtype)[None, None].expand(b, g, n_k, values.shape[-1])
    if values.shape[:3] != (b, g, n_k):
        raise RankCollapseError(f"values of shape {tuple(values.shape)}; allowed: [{n_k}, u] or "
                                f"[{b}, {g}, {n_k}, u]")
    r = h // g
    out = q.new_empty(b, h, n_q, values.shape[-1])
    for c in range(g):
        heads = slice(c * r, (c + 1) * r)
        got, _ = attention_lse(q[:, heads], _expand(k[:, c: c + 1], r), _expand(values[:, c: c + 1], r), mask,
                               scale, kernel)
        out[:, heads] = got
    return out


def rows_in_blocks(q: Tensor, k: Tensor, mask: KernelMask, scale: float, *, bias: Tensor | None = None,
                   softcap: float | None = None, s_aux: Tensor | None = None) -> AttentionRows:
    """:class:`~rankcollapse.metrics.diagnostics.AttentionRows` of one call from its weights, formed a block
    of query rows at a time (memory ``b h c j`` for blocks of ``c`` rows), for logits the lse route cannot
    take: ``S = scale q k^T + B`` (``bias`` B [b or 1, h or 1, i, j]; an additive mask with a position
    bias inside counts as one), then ``c tanh(S / c)`` with ``softcap`` c, the mask, the softmax (over
    keys and the sink ``s_aux`` [h] when given). q: [b, h, i, e]; k: [b, g, j, e] (GQA as
    :func:`attention_with_stats`). The plain masked softmax of each block
    (:func:`rankcollapse.core.attention.masked_softmax`), so the rows are the reference's."""
    b, h, n_q, _ = q.shape
    g, n_k = k.shape[1], k.shape[2]
    keys_h = k.repeat_interleave(h // g, dim=1) if g != h else k
    entropy = torch.empty(b, h, n_q, dtype=torch.float64, device=q.device)
    first = torch.empty(b, h, n_q, dtype=torch.float64, device=q.device)
    units = key_units(k)
    sums = units.new_empty(b, g, n_q, units.shape[-1])
    c = _block_rows(n_q, n_k, h)
    for start in range(0, n_q, c):
        rows = slice(start, min(n_q, start + c))
        logits = torch.matmul(q[:, :, rows], keys_h.transpose(-1, -2)) * scale
        if bias is not None:
            logits = logits + bias[..., rows, :].to(logits.dtype)
        allowed = None
        if mask.additive is not None:
            add = mask.additive[..., rows, :]
            allowed = add > masked_below(add.dtype)
            if mask.biased:
                logits = logits + torch.where(allowed, add, 0).to(logits.dtype)
        elif mask.causal:
            allowed = torch.arange(n_k, device=q.device)[None] <= torch.arange(
                rows.start, rows.stop, device=q.device)[:, None]
        sums[:, :, rows] = key_sums(units, allowed, rows.stop - rows.start)
        if softcap is not None:
            logits = torch.tanh(logits / softcap) * softcap
        if s_aux is not None:
            sink = s_aux.reshape(1, h, 1, 1).to(logits.dtype).expand(b, h, logits.shape[2], 1)
            logits = torch.cat([logits, sink], -1)
            if allowed is not None:
                allowed = torch.cat([allowed.expand(b, 1, *allowed.shape[-2:]),
                                     torch.ones(b, 1, allowed.shape[-2], 1, dtype=torch.bool,
                                                device=q.device)], -1)
        weights = masked_softmax(logits, allowed)
        block = attention_rows(weights, None, torch.float64)
        entropy[:, :, rows] = block.entropy
        first[:, :, rows] = block.first
    qk = query_key_rows(q, k, sums, mask.first)
    return AttentionRows(entropy, first, mask.counts.expand(b, 1, n_q).clone(), qk)

"""Architecture-neutral parts of one transformer layer, and the blocks built from them.

Index letters: b batch, h heads, n/i/j tokens, d features, e per-head features.

A :class:`LayerParts` holds what one layer of a pretrained model is made of: the attention
projections (``nn.Linear`` convention ``y = x W^T + b``), head counts (GQA: ``n_kv_heads`` divides
``n_heads``), the layer's own ``d_qk`` (the number under the square root of its logits), its two
normalisations as pure functions, where they sit (``pre`` or ``post``) and its MLP. Position
information that is not in the token rows comes in a :class:`Positions` (rotary angles for Llama,
the shared relative-position bias of T5 and MPNet). :func:`run_block` runs any of the modes
``full``, ``attn``, ``attn+ln``, ``attn+skip``, ``attn+skip+ln`` from those parts, with the
reference masked softmax (:func:`rankcollapse.core.attention.masked_softmax`), so masks and
``d_qk`` can be overridden. The formulas of each mode are in ``docs/models.md`` and in
:func:`run_block`; :data:`PAPER_VARIANTS` names them as the paper does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch
from torch import Tensor
from torch.nn import functional as F  # noqa: N812

from rankcollapse.core.attention import attention_logits, masked_softmax
from rankcollapse.core.positions import apply_rotary
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.runtime import trim_heap
from rankcollapse.metrics.diagnostics import (
    AttentionRows,
    attention_rows,
    key_sums,
    key_units,
    query_key_rows,
)
from rankcollapse.models.lse_attention import KernelMask, attention_with_stats

MODES: tuple[str, ...] = ("full", "attn", "attn+ln", "attn+skip", "attn+skip+ln")
Mode = Literal["full", "attn", "attn+ln", "attn+skip", "attn+skip+ln"]
Norm = Callable[[Tensor], Tensor]

#: The paper's five variants (its Section 5, Figure 2) and the mode that computes each.
PAPER_VARIANTS: dict[str, str] = {
    "SAN": "attn",
    "SAN + skip": "attn+skip",
    "SAN + LayerNorm": "attn+ln",
    "SAN + skip + LayerNorm": "attn+skip+ln",
    "transformer": "full",
}


@dataclass(frozen=True)
class Positions:
    """Position information a layer adds inside attention (not in the token rows).

    ``rotary``: ``(cos, sin)`` [b or 1, n, r] applied to the first ``r <= e`` features of q and k
    (Llama: r = e; GPT-NeoX, Phi-3: partial rotary, r < e), or None.
    ``rotary_by_type``: one ``(cos, sin)`` per layer type (Gemma 3: ``sliding_attention`` layers use
    a different base frequency than ``full_attention`` ones); a layer picks ``LayerParts.rotary_type``.
    ``bias``: additive logit bias [1 or b, h, n, n] shared by all layers (T5, MPNet), or None.
    """

    rotary: tuple[Tensor, Tensor] | None = None
    bias: Tensor | None = None
    rotary_by_type: dict[str, tuple[Tensor, Tensor]] | None = None

    def rotary_for(self, layer_type: str | None) -> tuple[Tensor, Tensor] | None:
        """The rotary angles of a layer of type ``layer_type`` (None: the shared ones)."""
        if layer_type is not None and self.rotary_by_type is not None:
            return self.rotary_by_type[layer_type]
        return self.rotary


NO_POSITIONS = Positions()

#: Where a layer's norms sit: ``post`` (BERT), ``pre`` (GPT-2, Llama), ``parallel`` (GPT-NeoX:
#: attention and MLP on the same normed input), ``sandwich`` (Gemma 2/3: pre and post norms).
PLACEMENTS: tuple[str, ...] = ("post", "pre", "parallel", "sandwich")


def own_d_qk(scaling: float) -> float:
    """The ``d_qk`` with ``1 / sqrt(d_qk) == scaling`` (an integer when it is one to 1e-9)."""
    d = 1.0 / (scaling * scaling)
    return float(round(d)) if abs(d - round(d)) <= 1e-9 * d else d


@dataclass(eq=False)
class LayerParts:
    """One layer's parts, architecture-neutral. Shapes: d model width, e head width.

    ``w_q: [h*e, d]``, ``w_k, w_v: [h_kv*e, d]``, ``w_o: [d, h*e]`` (``nn.Linear`` convention),
    biases ``[out]`` or None. Logits of head ``h``: ``S = q_h k_h^T / sqrt(d_qk) + B_h`` with
    ``d_qk`` the layer's own (``head_dim`` for BERT, GPT-2, Llama, MPNet; 1 for T5, which does not
    scale) unless overridden, and ``B`` the relative-position bias where the model has one.
    ``norm_attn`` is the normalisation around attention (the layer's own: after the attention
    residual for ``post``, before attention for ``pre``, ``parallel`` and ``sandwich``),
    ``norm_mlp`` the one around the MLP. ``parallel`` (GPT-NeoX): attention and MLP read the same
    input. ``sandwich`` (Gemma 2/3): also ``post_attn_norm`` on the attention output and
    ``post_mlp_norm`` on the MLP output, before each residual add. ``q_norm``, ``k_norm``: per-head
    norms of q and k over e (Gemma 3), before the rotary. ``logit_softcap`` c: logits become
    ``c tanh(S / c)`` before the mask (Gemma 2). ``rotary_type``: which of
    ``Positions.rotary_by_type`` the layer uses (Gemma 3), None: ``Positions.rotary``.
    ``mlp`` maps [..., d] -> [..., d] without residual or norm. ``softmax_dtype`` reproduces
    Hugging Face's Llama, whose eager softmax runs in float32 (None: the input's dtype).
    ``hf_forward(x, additive_mask, positions)`` is the model's own layer module (the fast path
    of ``full`` mode with the model's own mask and ``d_qk``); ``hf_causal``: its attention module
    applies the causal mask itself when given none (Hugging Face's ``is_causal``: the fused kernel then
    skips the masked half).
    """

    w_q: Tensor
    b_q: Tensor | None
    w_k: Tensor
    b_k: Tensor | None
    w_v: Tensor
    b_v: Tensor | None
    w_o: Tensor
    b_o: Tensor | None
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_qk: float
    norm_attn: Norm
    norm_mlp: Norm
    norm_placement: Literal["pre", "post", "parallel", "sandwich"]
    mlp: Callable[[Tensor], Tensor]
    softmax_dtype: torch.dtype | None = None
    post_attn_norm: Norm | None = None
    post_mlp_norm: Norm | None = None
    q_norm: Norm | None = None
    k_norm: Norm | None = None
    logit_softcap: float | None = None
    rotary_type: str | None = None
    hf_forward: Callable[[Tensor, Tensor | None, Positions], Tensor] | None = field(default=None, repr=False)
    hf_causal: bool = False

    def __post_init__(self) -> None:
        if self.norm_placement not in PLACEMENTS:
            got = self.norm_placement
            raise RankCollapseError(f"norm_placement must be one of {PLACEMENTS}, got {got!r}")
        if self.norm_placement == "sandwich" and (self.post_attn_norm is None or self.post_mlp_norm is None):
            raise RankCollapseError("norm_placement 'sandwich' needs post_attn_norm and post_mlp_norm")
        if self.n_heads % self.n_kv_heads != 0:
            raise RankCollapseError(f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads}")
        if self.w_q.shape[0] != self.n_heads * self.head_dim:
            raise RankCollapseError(f"w_q has {self.w_q.shape[0]} rows, expected n_heads*head_dim")
        if self.w_k.shape[0] != self.n_kv_heads * self.head_dim:
            raise RankCollapseError(f"w_k has {self.w_k.shape[0]} rows, expected n_kv_heads*head_dim")
        if not (self.d_qk > 0 and math.isfinite(self.d_qk)):
            raise RankCollapseError(f"d_qk must be a positive finite number, got {self.d_qk}")


#: The workspace of one block of query rows, per sample, that a layer's attention may hold when it is
#: computed in blocks (:func:`chunk_rows`): 128 MiB. The diagnostics' default (``--diagnostics-chunk``).
CHUNK_BYTES: int = 128 * 2**20

#: Bytes of resident memory per attention weight of a block, a bound: measured 31 in float32 (SmolLM2,
#: 2,048 tokens, inside a run: the logits, the masked logits and the weights, the entropy's float64 terms
#: and the float64 copy torch makes to multiply them by the float32 weights, two bool masks, the heap's
#: slack); float64 doubles the first three, a position bias or a soft cap adds one.
CHUNK_BYTES_PER_WEIGHT: int = 64


def chunk_rows(n_heads: int, n: int, budget: int = CHUNK_BYTES) -> int:
    """Query rows per block so that one sample's block, ``n_heads x rows x n`` weights at
    :data:`CHUNK_BYTES_PER_WEIGHT` bytes each, fits ``budget`` bytes (at least 1 row, at most n).
    SmolLM2-135M (9 heads) at n = 8,192: 28 rows, 293 blocks per layer."""
    return max(1, min(n, budget // (CHUNK_BYTES_PER_WEIGHT * n_heads * n)))


def attention(
    parts: LayerParts,
    x: Tensor,
    mask: Tensor | None,
    d_qk: float | None = None,
    positions: Positions = NO_POSITIONS,
    sink_damping: float | None = None,
    record: dict[str, Any] | None = None,
    chunk: int | None = None,
    kernel: KernelMask | None = None,
) -> Tensor:
    """Multi-head attention from parts: ``Σ_h A_h (x W_V,h + b_V,h) W_O,h + b_O``.

    ``A_h = softmax_M(cap(q_h k_h^T / sqrt(d_qk) + B_h))``, with ``q_h = rot(N_q(x W_Q,h + b_Q,h))``
    and ``k_h = rot(N_k(x W_K,g(h) + b_K,g(h)))`` (``N_q``, ``N_k``: per-head norms, identity unless
    the model has them; ``cap(S) = c tanh(S / c)`` with soft-capping, else ``S``;
    ``g(h) = h // (n_heads / n_kv_heads)`` under GQA; ``rot`` the rotary embedding on the first
    ``r`` features when the layer has rotary angles; ``B`` = ``positions.bias`` or 0).
    ``d_qk`` None: the layer's own. x: [b, n, d]; mask: bool [n, n] or [b, 1, n, n] (True: query i
    may attend to key j) or None (complete) -> [b, n, d].

    ``sink_damping`` λ (the ``sinks`` ablation, ours): every query ``i >= 1`` keeps ``λ A_i0`` of its
    weight on the first token, and the row is renormalised, ``A'_ij = A_ij / (1 - (1 - λ) A_i0)``
    (``j >= 1``); λ = 0 removes the sink, λ = 1 changes nothing; query 0 is left alone (under a
    causal mask token 0 is its only key).

    ``chunk`` None: the weights ``[b, h, n, n]`` are formed at once (the reference), and ``record``, if
    given, gets them under ``"attn"`` and the queries and keys ``(q [b, h, n, e], k [b, g, n, e])`` the
    weights came from (after the rotary embedding) under ``"qk"``. ``chunk`` c: they are formed ``c`` query
    rows at a time, each block ``[b, h, c, n]`` through the same softmax, multiplied into the output and
    dropped (a row's softmax needs only its own logits, so the function is the same; rounding may differ in
    the last bits); ``record`` then gets the per-query reductions of every block under ``"rows"``
    (:class:`~rankcollapse.metrics.diagnostics.AttentionRows`, float64, ``O(b h n)``, with its key-bias
    rows ``qk``: the sums over each query's allowed keys block by block).

    ``kernel`` (``mask`` as a kernel takes it, :func:`~rankcollapse.models.lse_attention.kernel_mask`; the
    ``mask`` argument is then not read): one fused kernel call per key/value head on ``V' = [V, K]``
    (:func:`~rankcollapse.models.lse_attention.attention_with_stats`), no weights formed; ``record`` gets
    the same per-query reductions under ``"rows"``, exactly, from the kernel's row log-normaliser. Not
    with a position bias, soft-capping, the sinks ablation or a float32 softmax of float64 parts (one line).
    """
    b, n, _ = x.shape
    h, g, e = parts.n_heads, parts.n_kv_heads, parts.head_dim
    q = F.linear(x, parts.w_q, parts.b_q).view(b, n, h, e).transpose(1, 2)
    k = F.linear(x, parts.w_k, parts.b_k).view(b, n, g, e).transpose(1, 2)
    v = F.linear(x, parts.w_v, parts.b_v).view(b, n, g, e).transpose(1, 2)
    if parts.q_norm is not None:
        q = parts.q_norm(q)
    if parts.k_norm is not None:
        k = parts.k_norm(k)
    rotary = positions.rotary_for(parts.rotary_type)
    if rotary is not None:
        cos, sin = rotary
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [b or 1, n, r] -> over the heads
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    scale = parts.d_qk if d_qk is None else d_qk
    if kernel is not None:
        if positions.bias is not None or parts.logit_softcap is not None or sink_damping is not None or (
                parts.softmax_dtype not in (None, x.dtype)):
            raise RankCollapseError("the kernel path takes no position bias, soft cap, sinks ablation or "
                                    "float32 softmax of float64 parts; form the weights in blocks (chunk)")
        out, rows = attention_with_stats(q, k, v, kernel, 1.0 / math.sqrt(scale))
        if record is not None:
            record["rows"] = rows
        out = out.transpose(1, 2).reshape(b, n, h * e)
        return F.linear(out, parts.w_o, parts.b_o)
    keys = k  # [b, g, n, e]: the key-bias rows read each key head once
    if g != h:
        k = k.repeat_interleave(h // g, dim=1)
        v = v.repeat_interleave(h // g, dim=1)
    if chunk is None:
        weights = _weights(parts, q, k, mask, positions.bias, scale, sink_damping, 0)
        if record is not None:
            record["attn"] = weights
            record["qk"] = (q, keys)
        out = torch.matmul(weights, v)
    else:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise RankCollapseError(f"chunk must be a positive number of query rows, got {chunk!r}")
        out = torch.empty(b, h, n, e, dtype=v.dtype, device=v.device)
        rows = None if record is None else AttentionRows.empty(b, h, n, torch.float64, v.device)
        units = None if record is None else key_units(keys)
        sums = None if units is None else units.new_empty(b, g, n, units.shape[-1])
        for start in range(0, n, chunk):  # nothing outlives a block but what is written into out and rows
            i = slice(start, min(n, start + chunk))
            m = None if mask is None else mask[..., i, :]
            bias = None if positions.bias is None else positions.bias[..., i, :]
            block = _weights(parts, q[:, :, i], k, m, bias, scale, sink_damping, start)
            out[:, :, i] = torch.matmul(block, v)
            if rows is not None and sums is not None and units is not None:
                rows.put(i, attention_rows(block, m, torch.float64))
                sums[:, :, i] = key_sums(units, m, i.stop - i.start)
            del block
        if record is not None and rows is not None:
            sees = None if mask is None else mask[..., 0]
            record["rows"] = replace(rows, qk=query_key_rows(q, keys, sums, sees))
        trim_heap()  # the blocks' freed pages back to the OS: the heap does not fragment layer after layer
    out = out.transpose(1, 2).reshape(b, n, h * e)
    return F.linear(out, parts.w_o, parts.b_o)


def _weights(parts: LayerParts, q: Tensor, k: Tensor, mask: Tensor | None, bias: Tensor | None,
             d_qk: float, sink_damping: float | None, first_row: int) -> Tensor:
    """The weights ``[b, h, i, j]`` of queries ``q [b, h, i, e]`` (rows ``first_row..``) on keys
    ``k [b, h, j, e]`` (:func:`attention`), in q's dtype; mask and bias: those rows."""
    logits = attention_logits(q, k, d_qk)
    if bias is not None:
        logits = logits + bias
    if parts.logit_softcap is not None:
        logits = torch.tanh(logits / parts.logit_softcap) * parts.logit_softcap
    if parts.softmax_dtype is not None:
        weights = masked_softmax(logits.to(parts.softmax_dtype), mask).to(q.dtype)
    else:
        weights = masked_softmax(logits, mask)
    del logits
    if sink_damping is not None and k.shape[-2] > 1:
        weights = damp_first_token(weights, sink_damping, first_row)
    return weights


def damp_first_token(weights: Tensor, damping: float, first_row: int = 0) -> Tensor:
    """Rows ``i >= 1`` of ``weights [..., i, j]`` with ``A_i0 -> λ A_i0``, renormalised to sum 1.
    ``first_row``: the query index of the block's first row (a block of rows of a larger map)."""
    scale = torch.ones_like(weights[..., :1, :])
    scale[..., 0] = damping
    skip = max(0, 1 - first_row)  # query 0 is left alone
    damped = weights.clone()
    damped[..., skip:, :] = weights[..., skip:, :] * scale
    return damped / damped.sum(-1, keepdim=True)


def run_block(
    parts: LayerParts,
    x: Tensor,
    mode: str,
    mask: Tensor | None,
    d_qk: float | None = None,
    positions: Positions = NO_POSITIONS,
    sink_damping: float | None = None,
    record: dict[str, Any] | None = None,
    chunk: int | None = None,
    kernel: KernelMask | None = None,
) -> Tensor:
    """One layer in ``mode`` from its parts. x: [b, n, d] -> [b, n, d]. ``Attn`` is :func:`attention`
    (``record``, ``chunk``, ``kernel``: there).

    ================  ======================  ==============================  ==============================
    mode              the paper's variant     post-LN (BERT, ALBERT, MPNet)   pre-LN (GPT-2, Llama, T5)
    ================  ======================  ==============================  ==============================
    ``attn``          SAN                     ``Attn(x)``                     ``Attn(x)``
    ``attn+ln``       SAN + LayerNorm         ``N1(Attn(x))``                 ``Attn(N1(x))``
    ``attn+skip``     SAN + skip              ``x + Attn(x)``                 ``x + Attn(x)``
    ``attn+skip+ln``  SAN + skip + LayerNorm  ``N1(x + Attn(x))``             ``x + Attn(N1(x))``
    ``full``          transformer             ``y = N1(x + Attn(x));``        ``y = x + Attn(N1(x));``
                                              ``N2(y + MLP(y))``              ``y + MLP(N2(y))``
    ================  ======================  ==============================  ==============================

    ``N1 = parts.norm_attn`` is the layer's own normalisation around attention, in its own place
    (the paper's "SAN + skip + LayerNorm" puts LN after the skip: that is the post-LN column).
    ``parallel`` (GPT-NeoX) is pre-LN in the surgery modes; ``full`` is ``x + Attn(N1(x)) + MLP(N2(x))``.
    ``sandwich`` (Gemma 2/3, post norms P1, P2) reads ``Attn`` as ``P1(Attn(N1(x)))`` in
    ``attn+ln`` / ``attn+skip+ln``; ``full`` is ``y = x + P1(Attn(N1(x))); y + P2(MLP(N2(y)))``.
    """
    def attn(z: Tensor) -> Tensor:
        return attention(parts, z, mask, d_qk, positions, sink_damping, record, chunk, kernel)

    place = parts.norm_placement
    post = place == "post"
    p1 = parts.post_attn_norm if place == "sandwich" else None

    def normed_attn(z: Tensor) -> Tensor:  # attention with the layer's own norms around it (pre-LN kinds)
        out = attn(parts.norm_attn(z))
        return out if p1 is None else p1(out)

    if mode == "attn":
        return attn(x)
    if mode == "attn+ln":
        return parts.norm_attn(attn(x)) if post else normed_attn(x)
    if mode == "attn+skip":
        return x + attn(x)
    if mode == "attn+skip+ln":
        return parts.norm_attn(x + attn(x)) if post else x + normed_attn(x)
    if mode == "full":
        if post:
            y = parts.norm_attn(x + attn(x))
            return parts.norm_mlp(y + parts.mlp(y))
        if place == "parallel":
            return x + normed_attn(x) + parts.mlp(parts.norm_mlp(x))
        y = x + normed_attn(x)
        out = parts.mlp(parts.norm_mlp(y))
        return y + (out if parts.post_mlp_norm is None or place != "sandwich" else parts.post_mlp_norm(out))
    raise RankCollapseError(f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")

"""Architecture-neutral parts of one transformer layer, and the blocks built from them.

Index letters: b batch, h heads, n/i/j tokens, d features, e per-head features.

A :class:`LayerParts` holds what one layer of a pretrained model is made of: the attention
projections (``nn.Linear`` convention ``y = x W^T + b``), head counts (GQA: ``n_kv_heads`` divides
``n_heads``), the logit scale, rotary position embeddings, its two normalisations as pure functions,
where they sit (``pre`` or ``post``) and its MLP. :func:`run_block` runs any of the modes
``full``, ``attn``, ``attn+ln``, ``attn+skip``, ``attn+skip+ln`` from those parts, with the
reference masked softmax (:func:`rankcollapse.core.attention.masked_softmax`), so masks and
temperature can be overridden. The formulas of each mode are in ``docs/models.md`` and in
:func:`run_block`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor
from torch.nn import functional as F  # noqa: N812

from rankcollapse.core.attention import masked_softmax

MODES: tuple[str, ...] = ("full", "attn", "attn+ln", "attn+skip", "attn+skip+ln")
Mode = Literal["full", "attn", "attn+ln", "attn+skip", "attn+skip+ln"]
Norm = Callable[[Tensor], Tensor]
RotaryFn = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the last axis (split in halves), as in GPT-NeoX/Llama rotary."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary embedding ``x cos + rotate_half(x) sin``. x: [b, h, n, e]; cos, sin: [b or 1, n, e]."""
    return x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1)


@dataclass(eq=False)
class LayerParts:
    """One layer's parts, architecture-neutral. Shapes: d model width, e head width.

    ``w_q: [h*e, d]``, ``w_k, w_v: [h_kv*e, d]``, ``w_o: [d, h*e]`` (``nn.Linear`` convention),
    biases ``[out]`` or None. Logits of head ``h``: ``S = scaling * q_h k_h^T`` (before a
    temperature override). ``norm_attn`` is the normalisation around attention (the layer's own:
    after the attention residual for ``post``, before attention for ``pre``), ``norm_mlp`` the one
    around the MLP. ``mlp`` maps [..., d] -> [..., d] without residual or norm. ``rotary`` maps
    ``(x, position_ids)`` to ``(cos, sin)`` [b, n, e] or is None. ``softmax_dtype`` reproduces
    Hugging Face's Llama, whose eager softmax runs in float32 (None: the input's dtype).
    ``hf_forward(x, additive_mask, position_embeddings)`` is the model's own layer module (the
    fast path of ``full`` mode with the model's own mask).
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
    scaling: float
    norm_attn: Norm
    norm_mlp: Norm
    norm_placement: Literal["pre", "post"]
    mlp: Callable[[Tensor], Tensor]
    rotary: RotaryFn | None = None
    softmax_dtype: torch.dtype | None = None
    hf_forward: Callable[[Tensor, Tensor | None, tuple[Tensor, Tensor] | None], Tensor] | None = field(
        default=None, repr=False
    )

    def __post_init__(self) -> None:
        if self.norm_placement not in ("pre", "post"):
            raise ValueError(f"norm_placement must be 'pre' or 'post', got {self.norm_placement!r}")
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads}")
        if self.w_q.shape[0] != self.n_heads * self.head_dim:
            raise ValueError(f"w_q has {self.w_q.shape[0]} rows, expected n_heads*head_dim")
        if self.w_k.shape[0] != self.n_kv_heads * self.head_dim:
            raise ValueError(f"w_k has {self.w_k.shape[0]} rows, expected n_kv_heads*head_dim")


def attention(
    parts: LayerParts,
    x: Tensor,
    mask: Tensor | None,
    temperature: float = 1.0,
    position_embeddings: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """Multi-head attention from parts: ``Σ_h A_h (x W_V,h + b_V,h) W_O,h + b_O``.

    ``A_h = softmax_M(scaling / temperature * q_h k_h^T)``, with ``q_h = rot(x W_Q,h + b_Q,h)``
    and ``k_h = rot(x W_K,g(h) + b_K,g(h))`` (``g(h) = h // (n_heads / n_kv_heads)`` under GQA;
    ``rot`` the rotary embedding when the layer has one). x: [b, n, d]; mask: bool [n, n] (True:
    query i may attend to key j) or None (complete) -> [b, n, d].
    """
    b, n, _ = x.shape
    h, g, e = parts.n_heads, parts.n_kv_heads, parts.head_dim
    q = F.linear(x, parts.w_q, parts.b_q).view(b, n, h, e).transpose(1, 2)
    k = F.linear(x, parts.w_k, parts.b_k).view(b, n, g, e).transpose(1, 2)
    v = F.linear(x, parts.w_v, parts.b_v).view(b, n, g, e).transpose(1, 2)
    if position_embeddings is not None:
        cos, sin = position_embeddings
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    if g != h:
        k = k.repeat_interleave(h // g, dim=1)
        v = v.repeat_interleave(h // g, dim=1)
    logits = torch.matmul(q, k.transpose(-1, -2)) * (parts.scaling / temperature)
    if parts.softmax_dtype is not None:
        weights = masked_softmax(logits.to(parts.softmax_dtype), mask).to(x.dtype)
    else:
        weights = masked_softmax(logits, mask)
    out = torch.matmul(weights, v).transpose(1, 2).reshape(b, n, h * e)
    return F.linear(out, parts.w_o, parts.b_o)


def run_block(
    parts: LayerParts,
    x: Tensor,
    mode: str,
    mask: Tensor | None,
    temperature: float = 1.0,
    position_embeddings: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """One layer in ``mode`` from its parts. x: [b, n, d] -> [b, n, d]. ``Attn`` is :func:`attention`.

    ======================  ==============================  ==============================
    mode                    post-LN (BERT, ALBERT)          pre-LN (GPT-2, Llama)
    ======================  ==============================  ==============================
    ``attn``                ``Attn(x)``                     ``Attn(x)``
    ``attn+ln``             ``N1(Attn(x))``                 ``Attn(N1(x))``
    ``attn+skip``           ``x + Attn(x)``                 ``x + Attn(x)``
    ``attn+skip+ln``        ``N1(x + Attn(x))``             ``x + Attn(N1(x))``
    ``full``                ``y = N1(x + Attn(x));``        ``y = x + Attn(N1(x));``
                            ``N2(y + MLP(y))``              ``y + MLP(N2(y))``
    ======================  ==============================  ==============================

    ``N1 = parts.norm_attn`` is the layer's own normalisation around attention, in its own place.
    """
    def attn(z: Tensor) -> Tensor:
        return attention(parts, z, mask, temperature, position_embeddings)

    post = parts.norm_placement == "post"
    if mode == "attn":
        return attn(x)
    if mode == "attn+ln":
        return parts.norm_attn(attn(x)) if post else attn(parts.norm_attn(x))
    if mode == "attn+skip":
        return x + attn(x)
    if mode == "attn+skip+ln":
        return parts.norm_attn(x + attn(x)) if post else x + attn(parts.norm_attn(x))
    if mode == "full":
        if post:
            y = parts.norm_attn(x + attn(x))
            return parts.norm_mlp(y + parts.mlp(y))
        y = x + attn(parts.norm_attn(x))
        return y + parts.mlp(parts.norm_mlp(y))
    raise ValueError(f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")

"""Attention kernels: three ways to compute ``A v`` with ``A = softmax_M(q k^T / sqrt(d_qk))``.

Index letters: b batch, h heads, i/j query/key tokens, e query/key features, f value features.
Every kernel takes ``q, k: [b, h, n, e]``, ``v: [b, h, n, f]`` and returns ``(A v: [b, h, n, f],
min_weight: [b] or None)``, ``min_weight`` being the smallest attention weight on an allowed
edge (over heads and queries) when asked for (the ``epsilon`` of Theorem 1).

- ``dense``  the reference: :func:`rankcollapse.core.attention.attention_weights` with the
  boolean mask, then ``A @ v``. Cost O(n^2) whatever the mask. Used for every mask that is
  neither complete nor a narrow band.
- ``sdpa``   complete mask (and the plain causal mask, ``is_causal=True``) through
  ``torch.nn.functional.scaled_dot_product_attention`` (fused, never materialises A). When the
  smallest weight is asked for it falls back to the reference (A must be formed anyway).
- ``band``   masks with ``M[i, j] iff lo <= j - i <= hi``: queries in blocks of ``B`` attend to
  the ``B + hi - lo`` keys ``[s B + lo, s B + B - 1 + hi]`` covering the block, masked within
  the window. Cost O(n (B + hi - lo)) instead of O(n^2).

:func:`plan_kernel` picks one (``auto``) and precomputes what it needs (mask, window mask).
All three agree with the reference to rounding (tests/dynamics/test_kernels.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.nn import functional as F  # noqa: N812

from rankcollapse.core.attention import attention_weights
from rankcollapse.core.positions import apply_rotary
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked

KERNELS = ("auto", "dense", "sdpa", "band")

#: ``auto`` uses the band kernel when the band is at most this fraction of n wide.
BAND_MAX_FRACTION = 0.5

AttendFn = Callable[[Tensor, Tensor, Tensor, float, bool], tuple[Tensor, Tensor | None]]


def _min_on_edges(a: Tensor, allowed: Tensor | None) -> Tensor:
    """Smallest entry of A [b, h, i, j] where allowed (bool, broadcast) -> [b]."""
    if allowed is not None:
        a = a.masked_fill(~allowed, math.inf)
    return a.flatten(1).amin(dim=1)


@checked
def attend_dense(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    d_qk: float,
    need_min: bool = False,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Reference: ``A = softmax_M(q k^T / sqrt(d_qk) + B)`` formed explicitly, returns ``(A v, min A)``.

    q, k: [b, h, n, e]; v: [b, h, n, f]; mask: bool [n, n] or None (complete); bias: float [n, n] or None.
    """
    a = attention_weights(q, k, mask, d_qk, bias)
    out = a @ v
    return out, (_min_on_edges(a, mask) if need_min else None)


@checked
def attend_sdpa(
    q: Tensor, k: Tensor, v: Tensor, d_qk: float, causal: bool = False, need_min: bool = False
) -> tuple[Tensor, Tensor | None]:
    """Complete (or plain causal) mask via torch's fused scaled_dot_product_attention.

    q, k: [b, h, n, e]; v: [b, h, n, f]. ``causal`` means ``M[i, j] iff j <= i``.
    """
    if need_min:
        n = q.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).tril() if causal else None
        return attend_dense(q, k, v, mask, d_qk, need_min=True)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1.0 / math.sqrt(d_qk))
    return out, None


def default_band_block(lo: int, hi: int) -> int:
    """Query block size ``B`` for a band of width ``hi - lo + 1``: the largest power of two not above
    the width, clipped to [16, 128].

    The window per block is ``B + hi - lo`` keys, so about half of each block's scores are wasted
    when B is near the width, while the matmuls stay large enough to run near peak (measured:
    B = 32 beats 16, 64 and 128 for window:w=16 at n = 512 and 4096).
    """
    width = hi - lo + 1
    return int(min(128, max(16, 1 << (width.bit_length() - 1))))


@dataclass(frozen=True)
class BandPlan:
    """Precomputed geometry of the blocked-band kernel for one (n, lo, hi, B)."""

    n: int
    lo: int
    hi: int
    block: int
    allowed: Tensor = field(repr=False)  # bool [nb, B, W]: query p of block s may see key c
    valid_rows: Tensor = field(repr=False)  # bool [nb, B, 1]: real (unpadded) queries
    blocked: Tensor = field(repr=False)  # ~allowed

    @property
    def n_blocks(self) -> int:
        return -(-self.n // self.block)

    @property
    def window(self) -> int:
        return self.block + self.hi - self.lo


def plan_band(
    n: int, lo: int, hi: int, block: int | None = None, device: str | torch.device = "cpu"
) -> BandPlan:
    """Window masks for :func:`attend_band`. Needs ``lo <= 0 <= hi`` (self-loops)."""
    if not lo <= 0 <= hi:
        raise RankCollapseError(f"band ({lo}, {hi}) has no self-loop; need lo <= 0 <= hi")
    bs = block or default_band_block(lo, hi)
    nb = -(-n // bs)
    w = bs + hi - lo
    s = torch.arange(nb, device=device).view(nb, 1, 1)
    p = torch.arange(bs, device=device).view(1, bs, 1)
    c = torch.arange(w, device=device).view(1, 1, w)
    i = s * bs + p
    j = s * bs + lo + c
    in_band = (c >= p) & (c <= p + hi - lo)  # lo <= j - i <= hi
    real_row = i < n
    allowed = in_band & (((j >= 0) & (j < n)) | ~real_row)  # padded rows see zero keys: no NaN
    return BandPlan(n, lo, hi, bs, allowed, real_row, ~allowed)


@checked
def attend_band(
    q: Tensor, k: Tensor, v: Tensor, plan: BandPlan, d_qk: float, need_min: bool = False
) -> tuple[Tensor, Tensor | None]:
    """Blocked-band attention for ``M[i, j] iff lo <= j - i <= hi``. Cost O(n (B + hi - lo)).

    q, k: [b, h, n, e]; v: [b, h, n, f] -> ([b, h, n, f], min weight [b] or None). Query block
    ``s`` (queries ``sB .. sB+B-1``) reads the key window ``sB + lo .. sB + B - 1 + hi`` of the
    zero-padded keys (an ``unfold`` view); entries outside the band or outside ``0..n-1`` are
    set to ``-inf`` before the softmax, so the result equals the dense masked reference.
    """
    b, h, n, e = q.shape
    f = v.shape[-1]
    bs, nb, w = plan.block, plan.n_blocks, plan.window
    n_pad = nb * bs
    qb = (q if n_pad == n else F.pad(q, (0, 0, 0, n_pad - n))).reshape(b, h, nb, bs, e)
    pad = (0, 0, -plan.lo, n_pad - n + plan.hi)
    # overlapping windows copied once into contiguous blocks: matmul on the strided views is slower
    # (one shared copy of k and v, with a transposed v, measured slower still)
    kw = F.pad(k, pad).unfold(2, w, bs).contiguous()  # [b, h, nb, e, w]
    vw = F.pad(v, pad).unfold(2, w, bs).transpose(-1, -2).contiguous()  # [b, h, nb, w, f]
    logits = qb @ kw  # [b, h, nb, B, w]
    if d_qk != 1.0:
        logits.mul_(1.0 / math.sqrt(d_qk))
    logits.masked_fill_(plan.blocked, -math.inf)
    a = torch.softmax(logits, dim=-1)
    out = (a @ vw).reshape(b, h, n_pad, f)
    if n_pad != n:
        out = out[:, :, :n]
    if not need_min:
        return out, None
    return out, _min_on_edges(a, plan.allowed & plan.valid_rows)


@dataclass(frozen=True)
class KernelPlan:
    """The attention path chosen for one mask and length, ready to call.

    ``name`` is one of ``dense``, ``sdpa``, ``sdpa-causal``, ``band``; ``mask`` the dense
    boolean mask (None when complete); ``band`` the (lo, hi) band or None; ``bias`` an additive bias
    [n, n] on the logits (the dense kernel only; ``plan_kernel(bias=)``); ``rotary`` the ``(cos, sin)``
    [n, e] of rotary position embeddings (``core.positions``), applied to q and k before any kernel.
    """

    name: str
    n: int
    mask: Tensor | None = field(repr=False)
    band: tuple[int, int] | None
    band_plan: BandPlan | None = field(default=None, repr=False)
    bias: Tensor | None = field(default=None, repr=False)
    rotary: tuple[Tensor, Tensor] | None = field(default=None, repr=False)

    def __call__(
        self, q: Tensor, k: Tensor, v: Tensor, d_qk: float, need_min: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        if self.rotary is not None:
            q, k = apply_rotary(q, *self.rotary), apply_rotary(k, *self.rotary)
        if self.name == "sdpa":
            return attend_sdpa(q, k, v, d_qk, causal=False, need_min=need_min)
        if self.name == "sdpa-causal":
            return attend_sdpa(q, k, v, d_qk, causal=True, need_min=need_min)
        if self.name == "band":
            assert self.band_plan is not None
            return attend_band(q, k, v, self.band_plan, d_qk, need_min=need_min)
        return attend_dense(q, k, v, self.mask, d_qk, need_min=need_min, bias=self.bias)


def band_of_dense(mask: Tensor) -> tuple[int, int] | None:
    """(lo, hi) if ``mask[i, j] iff lo <= j - i <= hi`` (clipped to the matrix), else None."""
    n = mask.shape[-1]
    idx = torch.arange(n, device=mask.device)
    diff = idx.view(1, n) - idx.view(n, 1)
    lo, hi = int(diff[mask].min()), int(diff[mask].max())
    return (lo, hi) if torch.equal(mask, (diff >= lo) & (diff <= hi)) else None


@checked
def plan_kernel(
    mask: Tensor,
    *,
    kernel: str = "auto",
    band: tuple[int, int] | None = None,
    complete: bool | None = None,
    block: int | None = None,
    bias: Tensor | None = None,
) -> KernelPlan:
    """Choose the attention path for a dense boolean mask [n, n] (M[i, j]: i attends to j).

    ``bias``: an additive bias [n, n] on the logits; only the dense kernel takes one (``auto`` picks it;
    another kernel named with a bias is refused).

    ``auto``: complete mask -> ``sdpa``; plain causal -> ``sdpa-causal``; a band no wider than
    ``BAND_MAX_FRACTION * n`` -> ``band``; anything else -> ``dense``. ``band``/``complete``
    may be passed when known (from the mask spec) to skip detecting them.
    """
    if kernel not in KERNELS:
        raise RankCollapseError(f"unknown kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    if mask.dtype != torch.bool or mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
        raise RankCollapseError(f"mask must be a square boolean matrix, got {mask.dtype} {tuple(mask.shape)}")
    n = mask.shape[0]
    if not bool(mask.diagonal().all()):
        raise RankCollapseError("mask lacks self-loops: every token must attend to itself")
    if complete is None:
        complete = bool(mask.all())
    if band is None:
        band = (-(n - 1), n - 1) if complete else band_of_dense(mask)
    causal = band == (-(n - 1), 0)
    if bias is not None:
        if kernel not in ("auto", "dense"):
            raise RankCollapseError(
                f"kernel {kernel!r} takes no logit bias; allowed with a bias: auto, dense")
        if tuple(bias.shape) != (n, n):
            raise RankCollapseError(f"bias has shape {tuple(bias.shape)}; allowed: [{n}, {n}] (the mask's)")
        return KernelPlan("dense", n, None if complete else mask, band, bias=bias)
    if kernel == "auto":
        if complete:
            kernel = "sdpa"
        elif causal:
            kernel = "sdpa-causal"
        elif band is not None and band[1] - band[0] + 1 <= BAND_MAX_FRACTION * n:
            kernel = "band"
        else:
            kernel = "dense"
    elif kernel == "sdpa":
        if not (complete or causal):
            raise RankCollapseError("kernel 'sdpa' needs the complete or the causal mask; use 'auto'")
        kernel = "sdpa" if complete else "sdpa-causal"
    elif kernel == "band" and band is None:
        raise RankCollapseError("kernel 'band' needs a band mask (lo <= j - i <= hi); use 'auto'")
    if kernel == "band":
        assert band is not None
        bp = plan_band(n, band[0], band[1], block, device=mask.device)
        return KernelPlan("band", n, mask, band, bp)
    return KernelPlan(kernel, n, None if complete else mask, band)

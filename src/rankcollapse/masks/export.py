"""Exporters to other libraries' mask forms, and explicit window-convention converters.

All are tested against ``Mask.dense(n)`` (``M[i, j]`` True iff query ``i`` may attend to key ``j``).

- Hugging Face 4D additive mask ``[b, 1, n, n]``: 0 where allowed, ``torch.finfo(dtype).min``
  where not (added to the logits before softmax).
- PyTorch SDPA boolean mask ``[n, n]`` (broadcasts over batch and heads): True = attend, the
  ``torch.nn.functional.scaled_dot_product_attention`` convention (same as ours).
- FlexAttention ``mask_mod(b, h, q_idx, kv_idx) -> bool tensor`` for
  ``torch.nn.attention.flex_attention`` (``create_mask`` / ``create_block_mask``).

Window conventions (ours: ``w`` neighbours on EACH side, self included):

- HF causal sliding window (Mistral, Qwen2, Gemma ``sliding_window = sw``, rule ``q - kv < sw``,
  ``sw`` keys including self): ours ``causal-window:w=sw-1`` (ours ``w`` <=> theirs ``w + 1``).
- HF bidirectional sliding window (rule ``abs(q - kv) <= sw``): ours ``window:w=sw``.
- HF Longformer ``attention_window = aw`` (even, total width): ours ``window:w=aw//2``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks.base import Mask, check_n
from rankcollapse.masks.spec import parse_mask

if TYPE_CHECKING:
    import torch

MaskMod = Callable[[Any, Any, Any, Any], Any]


def to_hf_additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Hugging Face's additive form of a bool mask: ``A[..., i, j] = 0`` where ``M[..., i, j]``,
    ``finfo(dtype).min`` elsewhere; bool ``[..., i, j]`` -> ``dtype`` ``[..., i, j]``, on M's device.

    Added to the logits before the softmax: ``exp(finfo.min - max) = 0`` exactly, so a masked weight
    is exactly 0, as with the reference ``where(M, S, -inf)``
    (:func:`rankcollapse.core.attention.masked_softmax`) wherever a row keeps a key. The one
    conversion: :func:`to_hf_4d` and the models' layers (:func:`rankcollapse.models.stream.additive_mask`)
    go through it.
    """
    import torch

    if not isinstance(allowed, torch.Tensor) or allowed.dtype != torch.bool:
        got = allowed.dtype if isinstance(allowed, torch.Tensor) else type(allowed).__name__
        raise RankCollapseError(f"an additive mask is made from a torch.bool tensor, got {got}")
    if not dtype.is_floating_point:
        raise RankCollapseError(f"dtype {dtype} is invalid for an additive mask; allowed: a float dtype")
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
        ~allowed, torch.finfo(dtype).min)


def to_hf_4d(
    mask: Mask | str, n: int, batch: int = 1, dtype: torch.dtype | None = None, device: Any = None
) -> torch.Tensor:
    """Hugging Face additive mask [batch, 1, n, n]: 0 where ``M[i, j]``, ``finfo(dtype).min`` elsewhere
    (:func:`to_hf_additive` of ``mask.dense(n)``).

    ``dtype`` defaults to ``torch.float32``.
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    if batch < 1:
        raise RankCollapseError(f"batch={batch} is invalid; allowed: an integer >= 1")
    dense = parse_mask(mask).dense(n).to(device)
    return to_hf_additive(dense, dtype).expand(batch, 1, n, n).contiguous()


def to_sdpa(mask: Mask | str, n: int, device: Any = None) -> torch.Tensor:
    """``torch.bool`` [n, n] for ``scaled_dot_product_attention(attn_mask=...)``: True = attend."""
    return parse_mask(mask).dense(n).to(device)


def to_flex_mask_mod(mask: Mask | str, n: int | None = None) -> MaskMod:
    """FlexAttention ``mask_mod(b, h, q_idx, kv_idx)``: True iff query ``q_idx`` may attend ``kv_idx``.

    Closed-form families use their rule directly (valid for any length; ``n`` may be None).
    Random and ``file:`` masks look pairs up in their table, so they need ``n``.
    """
    m = parse_mask(mask)
    if not m.cheap_rule and n is None:
        raise RankCollapseError(f"to_flex_mask_mod({m.spec!r}) needs n: this mask is a table per length")
    rule = m.predicate(check_n(n) if n is not None else 1)

    def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return rule(q_idx, kv_idx)

    mask_mod.__name__ = f"mask_mod_{m.spec}"
    return mask_mod


def _check_nonneg(value: int, what: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RankCollapseError(f"{what}={value!r} is invalid; allowed: an integer >= {minimum}")
    return value


def to_hf_sliding_window(w: int, causal: bool = True) -> int:
    """Our ``w`` -> HF ``sliding_window``: ``w + 1`` for causal (keys incl. self), ``w`` bidirectional."""
    _check_nonneg(w, "w")
    return w + 1 if causal else w


def from_hf_sliding_window(sliding_window: int, causal: bool = True) -> int:
    """HF ``sliding_window`` -> our ``w``: ``sliding_window - 1`` for causal, unchanged bidirectional."""
    _check_nonneg(sliding_window, "sliding_window", 1 if causal else 0)
    return sliding_window - 1 if causal else sliding_window


def hf_sliding_window_mask(sliding_window: int, causal: bool = True) -> Mask:
    """Our mask equal to HF's sliding-window mask with that ``sliding_window``."""
    w = from_hf_sliding_window(sliding_window, causal)
    return parse_mask(f"causal-window:w={w}" if causal else f"window:w={w}")


def from_longformer_attention_window(attention_window: int) -> int:
    """HF Longformer ``attention_window`` (even total width) -> our ``w = attention_window // 2``."""
    _check_nonneg(attention_window, "attention_window")
    if attention_window % 2:
        raise RankCollapseError(f"attention_window={attention_window} is odd; allowed: an even integer")
    return attention_window // 2

"""Exact attention statistics from a fused kernel's row log-normaliser (ours), never an ``[i, j]`` map.

Index letters: b batch, h heads, i queries, j keys, e per-head features. A fused attention kernel
(FlashAttention, torch's CPU flash kernel, FlexAttention) computes, per query row ``i``, the logits
``s_ij = scale q_i . k_j + B_ij`` on the allowed keys ``j in N_i`` (``B``: an additive position bias,
0 for most models) and keeps their log-normaliser

    ``lse_i = log sum_{j in N_i} exp(s_ij)``,

so every weight is ``A_ij = exp(s_ij - lse_i)`` (0 off ``N_i``). From ``lse`` and the kernel's output
on extended values ``V' = [V, K]`` (``(A K)_i``, the same call), each statistic below is exact (to
rounding), ``O(i e)`` per head:

- :func:`key_attention`: ``A_ij = exp(s_ij - lse_i)`` for a chosen key (the first token: ``A_i0``).
- :func:`first_token_rows`: ``A_i0`` from ``q_i``, ``k_0`` and ``lse_i``.
- :func:`row_entropy`: ``H_i = -sum_j A_ij log A_ij = lse_i - sum_j A_ij s_ij
  = lse_i - scale q_i . (A K)_i - (A B)_i``.
- :func:`allowed_keys`: with ``q = 0`` every allowed logit is 0, so ``lse_i = log |N_i|``.
- any linear statistic of a row, ``(A U)_i`` for values ``U`` of the keys (a column of ``V'``); at
  ``q = 0`` the mean of ``U`` over the allowed keys. The mask probe (:func:`key_ends`) reads each row's
  first and last allowed key from logits tilted by ``+-TILT j`` on values ``j - c``: with ``|N_i|``, the
  rows whose allowed keys are one interval (causal, sliding window, chunked) are recovered exactly.
- learned sink logits (GPT-OSS: one logit ``s_aux`` per head, a key with no value): the row's
  normaliser becomes ``L_i = logaddexp(lse_i, s_aux)`` (:func:`sink_normaliser`), the sink's mass
  ``exp(s_aux - L_i)`` (:func:`sink_attention`), every key's ``exp(s_ij - L_i)``.

What has no such form: a soft-capped logit ``c tanh(s / c)`` (Gemma 2) is not linear in ``k_j``, so
its entropy needs the weights themselves (``models`` forms them in blocks of query rows there).

Every function computes in float64 (inputs of any float dtype; float64 of a float32 kernel output
is exact) and returns float64. The plain reference is the whole map of
:func:`rankcollapse.core.attention.masked_softmax` (``tests/metrics/test_attention_stats.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError

__all__ = [
    "TILT",
    "KeyIntervals",
    "allowed_keys",
    "first_token_rows",
    "key_attention",
    "key_ends",
    "row_entropy",
    "sink_attention",
    "sink_normaliser",
]


def _f64(x: Tensor) -> Tensor:
    return x.to(torch.float64)


def _check(x: object, name: str, ndim: int, shape: str) -> Tensor:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = type(x).__name__ if not isinstance(x, Tensor) else str(x.dtype)
        raise RankCollapseError(f"{name} must be a floating-point torch tensor {shape}, got {got}")
    if x.ndim != ndim:
        raise RankCollapseError(f"{name} has shape {tuple(x.shape)}; allowed: {shape}")
    return x


def key_attention(logit: Tensor, lse: Tensor) -> Tensor:
    """The weight of one key per query row: ``A_ij = exp(s_ij - lse_i)``.

    logit: ``s_ij`` [..., i] (``-inf`` where the key is not allowed: weight 0); lse: [..., i], the
    row's log-normaliser over its allowed keys -> [..., i] float64.
    """
    return torch.exp(_f64(logit) - _f64(lse))


def first_token_rows(q: Tensor, k0: Tensor, lse: Tensor, scale: float, *, allowed: Tensor | None = None,
                     bias: Tensor | None = None) -> Tensor:
    """The attention on the first key: ``A_i0 = exp(scale q_i . k_0 + B_i0 - lse_i)``, 0 where key 0 is
    not in ``N_i``.

    q: [b, h, i, e]; k0: [b, h, e] (key 0 of each head, after the position rotation the kernel saw);
    lse: [b, h, i]; ``allowed``: bool broadcastable to [b, h, i], whether key 0 is allowed for query i
    (None: always); ``bias``: ``B_i0`` broadcastable to [b, h, i] (None: 0) -> [b, h, i] float64.
    """
    q = _check(q, "q", 4, "[b, h, i, e]")
    k0 = _check(k0, "k0", 3, "[b, h, e]")
    logit = float(scale) * torch.einsum("bhie,bhe->bhi", _f64(q), _f64(k0))
    if bias is not None:
        logit = logit + _f64(bias)
    if allowed is not None:
        logit = logit.masked_fill(~allowed, -math.inf)
    return key_attention(logit, lse)


def row_entropy(q: Tensor, ak: Tensor, lse: Tensor, scale: float, *, ab: Tensor | None = None,
                s_aux: Tensor | None = None) -> Tensor:
    """Each attention row's entropy, in nats: ``H_i = lse_i - scale q_i . (A K)_i - (A B)_i``.

    From ``log A_ij = s_ij - lse_i`` on the allowed keys: ``H_i = -sum_j A_ij (s_ij - lse_i) = lse_i -
    sum_j A_ij s_ij``, and ``sum_j A_ij s_ij = scale q_i . (A K)_i + (A B)_i`` because the logits are
    linear in the keys. q: [b, h, i, e]; ak: ``(A K)_i`` [b, h, i, e], the kernel's output on values
    ``K`` (the same keys the logits used); lse: [b, h, i]; ``ab``: ``(A B)_i = sum_j A_ij B_ij``
    broadcastable to [b, h, i] (None: no position bias) -> [b, h, i] float64.

    ``s_aux`` [h] (learned sink logits, GPT-OSS): the row is the softmax over the keys and the sink,
    ``L_i = logaddexp(lse_i, s_aux)``, keys weighted ``exp(lse_i - L_i) A_ij``, the sink
    ``a_i = exp(s_aux - L_i)``; its entropy ``H_i = L_i - exp(lse_i - L_i) sum_j A_ij s_ij - a_i s_aux``
    (``lse`` and ``A K`` are still those over the keys alone).
    """
    q = _check(q, "q", 4, "[b, h, i, e]")
    ak = _check(ak, "ak", 4, "[b, h, i, e]")
    if ak.shape != q.shape:
        raise RankCollapseError(f"ak has shape {tuple(ak.shape)}; allowed: q's {tuple(q.shape)}")
    mean_logit = float(scale) * (_f64(q) * _f64(ak)).sum(-1)
    if ab is not None:
        mean_logit = mean_logit + _f64(ab)
    lse = _f64(lse)
    if s_aux is None:
        return lse - mean_logit
    aux = _f64(s_aux).reshape(1, -1, 1)
    total = sink_normaliser(lse, s_aux)
    return total - torch.exp(lse - total) * mean_logit - torch.exp(aux - total) * aux


def allowed_keys(lse_at_zero: Tensor) -> Tensor:
    """``|N_i|``, the allowed keys of each query, from a kernel call with ``q = 0``: every allowed logit
    is 0, so ``lse_i = log |N_i|``. lse_at_zero: [..., i] -> [..., i] float64, whole numbers (rounded;
    a row with no allowed key, ``lse = -inf``, has 0)."""
    return torch.round(torch.exp(_f64(lse_at_zero)))


def sink_normaliser(lse: Tensor, s_aux: Tensor) -> Tensor:
    """A row's log-normaliser with a learned sink logit: ``L_i = logaddexp(lse_i, s_aux)``.
    lse: [b, h, i] over the keys; s_aux: [h] -> [b, h, i] float64."""
    return torch.logaddexp(_f64(lse), _f64(s_aux).reshape(1, -1, 1))


def sink_attention(lse: Tensor, s_aux: Tensor) -> Tensor:
    """The mass a learned sink logit takes from each row: ``exp(s_aux - L_i)``, ``L_i`` of
    :func:`sink_normaliser`. lse: [b, h, i] over the keys; s_aux: [h] -> [b, h, i] float64."""
    return torch.exp(_f64(s_aux).reshape(1, -1, 1) - sink_normaliser(lse, s_aux))


#: The tilt of the end probes: logits ``+-TILT j`` put ``1 - O(e^-TILT)`` of a row's weight on its last
#: (first) allowed key; the output on values ``j - c`` is then within ``sum_k k e^(-TILT k) < 4e-4`` of it.
TILT: float = 8.0


@dataclass(frozen=True)
class KeyIntervals:
    """Each query row's allowed keys read back from a probe: ``count`` ``|N_i|``, ``lo``/``hi`` the first
    and last allowed key, ``interval`` True where the allowed keys are exactly ``lo, lo + 1, ..., hi``.
    All [..., i] float64 (whole numbers where ``read``); ``read`` False where a probe's output was not
    within 0.05 of a whole number (not read: a row with no allowed key, or positions beyond the dtype)."""

    count: Tensor
    lo: Tensor
    hi: Tensor
    interval: Tensor
    read: Tensor


def key_ends(count: Tensor, top: Tensor, bottom: Tensor, center: int) -> KeyIntervals:
    """Which rows allow exactly one interval of keys, and which, from ``|N_i|`` and two tilted probes.

    The probes (ours): ``q = +-1``, ``k_j = TILT j / scale`` (logits ``+-TILT j`` on the allowed keys) and
    values ``j - c``: the softmax puts ``1 - O(e^-TILT)`` of row i's weight on its last allowed key
    (``+``) or its first (``-``), so ``top_i = max N_i - c`` and ``bottom_i = min N_i - c`` to ``4e-4``,
    read by rounding (float32 holds whole positions exactly far beyond 2^20). A row's keys are the
    interval ``[lo, hi]`` iff ``|N_i| = hi - lo + 1``: they lie in it and hold both ends.
    count: [..., i] (:func:`allowed_keys`); top, bottom: [..., i]; ``c``: the whole number the values
    were shifted by (keeps them small) -> :class:`KeyIntervals`.
    """
    if isinstance(center, bool) or not isinstance(center, int):
        raise RankCollapseError(f"center must be a whole number of positions, got {center!r}")
    top, bottom, m = _f64(top), _f64(bottom), _f64(count)
    hi, lo = top.round(), bottom.round()
    read = ((top - hi).abs() <= 0.05) & ((bottom - lo).abs() <= 0.05) & (m >= 1)
    hi, lo = hi + center, lo + center
    return KeyIntervals(count=m, lo=lo, hi=hi, interval=read & (m == hi - lo + 1), read=read)

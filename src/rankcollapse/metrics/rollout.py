"""Cumulative context (attention rollout) under masks: products of row-stochastic attention matrices.

Index letters: b batch, h heads, i/j query/key tokens, t layers. Every function takes attention
weights ``attn: [..., i, j]`` whose rows sum to 1 over the allowed keys (``core.attention``'s one
masked softmax) and works on any leading dims (``[b, h, n, n]`` per head, ``[b, n, n]`` head-averaged).

Definitions (Wu, Wang, Jegelka, Jadbabaie, ICML 2025, "On the Emergence of Position Bias in
Transformers"; the residual-aware mixing of Herasimchyk et al., arXiv 2602.16837):

==================== =========================================================================
``mixing``           ``M(t) = lam I + (1 - lam) A(t)``, ``lam`` in [0, 1] (``lam = 0``: ``A(t)``)
``cumulative``       ``P(t) = M(t) M(t-1) ... M(1)``, ``P(0) = I``; ``P(t)[i, j]`` is how much input
                     position ``j`` contributes to token ``i`` after ``t`` layers (rows sum to 1)
``influence``        ``P(t)[i, :]``: the influence profile of token ``i`` over the input positions
``first_token_share`` ``P(t)[:, 0]``: each token's share of its cumulative context on the first token
``first_token_gap``  ``sum_{j >= 1} P(t)[:, j]`` = ``1 - P(t)[:, 0]``, summed over the other positions
                     (no cancellation: it keeps its relative precision down to the dtype's underflow,
                     where ``1 - share`` stops at ``eps``)
==================== =========================================================================

Head averaging: ``head_mean`` is ``(1/h) sum_h A_h`` (row-stochastic again); the product of the
head-averaged matrices is the simulator's rollout. A per-head rollout multiplies ``A_h(t)`` of the
same head index at every layer: pass ``[..., h, n, n]`` without averaging.

The simulator's per-sample columns (``ROLLOUT_NAMES``): ``first_token_share_mean`` (mean over tokens
``i`` of ``P(t)[i, 0]``) and ``first_token_gap_max`` (the largest ``first_token_gap`` over tokens: the
token farthest from the first one, the one a convergence rate is about).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError

#: Per-sample rollout columns of the simulator (opt-in: not part of ``metrics=None``).
ROLLOUT_NAMES: tuple[str, ...] = ("first_token_share_mean", "first_token_gap_max")
#: The influence profiles the simulator can keep per layer (batch means): the last token's row
#: ``P(t)[n-1, :]`` ([T+1, n]) or every row ``P(t)`` ([T+1, n, n]).
INFLUENCE_KEPT: tuple[str, ...] = ("last", "all")


def _square(attn: object, name: str = "attn") -> Tensor:
    if not isinstance(attn, Tensor):
        raise RankCollapseError(f"{name} must be a torch tensor [..., n, n], got {type(attn).__name__}")
    if attn.ndim < 2 or attn.shape[-1] != attn.shape[-2] or attn.shape[-1] == 0:
        raise RankCollapseError(f"{name} has shape {tuple(attn.shape)}; allowed: [..., n, n] with n >= 1")
    if not attn.is_floating_point():
        raise RankCollapseError(f"{name} has dtype {attn.dtype}; allowed: a floating-point tensor")
    return attn


def _lam(lam: float) -> float:
    if isinstance(lam, bool) or not isinstance(lam, int | float) or not 0.0 <= float(lam) <= 1.0:
        raise RankCollapseError(f"lam={lam!r} is invalid; allowed: a number in [0, 1] (residual weight)")
    return float(lam)


def mixing(attn: Tensor, lam: float = 0.0) -> Tensor:
    """``M = lam I + (1 - lam) A``: one layer's token mixing with a residual share ``lam``.

    attn: [..., n, n] row-stochastic -> [..., n, n] row-stochastic. ``lam = 0``: ``A`` itself;
    ``lam = 1``: the identity (the residual stream alone).
    """
    attn = _square(attn)
    lam = _lam(lam)
    if lam == 0.0:
        return attn
    eye = torch.eye(attn.shape[-1], dtype=attn.dtype, device=attn.device)
    return lam * eye + (1.0 - lam) * attn


def head_mean(attn: Tensor) -> Tensor:
    """``(1/h) sum_h A_h``: [b, h, n, n] -> [b, n, n] (row-stochastic when every head is)."""
    attn = _square(attn)
    if attn.ndim != 4:
        raise RankCollapseError(f"attn has shape {tuple(attn.shape)}; allowed: [b, h, n, n]")
    return attn.mean(dim=1)


def identity_context(
    shape: Sequence[int], n: int, dtype: torch.dtype = torch.float64, device: str | torch.device = "cpu"
) -> Tensor:
    """``P(0) = I`` broadcast to ``[*shape, n, n]`` (a contiguous copy, ready for :func:`rollout_step`)."""
    from rankcollapse.edge.validate import check_int

    n = check_int("n", n, low=1)
    if isinstance(shape, str | bytes) or not isinstance(shape, Sequence):
        raise RankCollapseError(
            f"shape must be a sequence of sizes (the leading dims), got {type(shape).__name__}"
        )
    shape = tuple(check_int("shape", s, low=1) for s in shape)
    eye = torch.eye(n, dtype=dtype, device=device)
    return eye.expand(*shape, n, n).clone()


def rollout_step(p: Tensor, attn: Tensor, lam: float = 0.0) -> Tensor:
    """``P(t) = M(t) P(t-1)`` with ``M(t) = lam I + (1 - lam) A(t)``.

    p: [..., n, n] (``P(t-1)``); attn: [..., n, n] (``A(t)``, same leading dims or broadcastable)
    -> [..., n, n]. The last layer's mixing multiplies from the left: ``P(t) = M(t) ... M(1)``.
    """
    p = _square(p, "p")
    m = mixing(attn, lam)
    if m.shape[-1] != p.shape[-1]:
        raise RankCollapseError(f"attn has n = {m.shape[-1]} but p has n = {p.shape[-1]}; allowed: equal n")
    return m @ p


def cumulative_context(attns: Sequence[Tensor] | Tensor, lam: float = 0.0) -> Tensor:
    """Every ``P(t) = M(t) ... M(1)`` for ``t = 0..T`` (``P(0) = I``).

    attns: ``T`` tensors ``A(1) .. A(T)`` of shape [..., n, n] (or one tensor [T, ..., n, n])
    -> [T+1, ..., n, n]. Memory ``(T+1) x ... x n^2``; for depth-wise use without keeping every
    ``P(t)``, call :func:`rollout_step` per layer.
    """
    if not isinstance(attns, Tensor | Sequence) or isinstance(attns, str):
        raise RankCollapseError(
            f"attns must be a sequence of tensors [..., n, n], got {type(attns).__name__}"
        )
    if isinstance(attns, Tensor):
        attns = list(_square(attns, "attns").unbind(0)) if attns.ndim >= 3 else [_square(attns)]
    attns = [_square(a) for a in attns]
    if not attns:
        raise RankCollapseError("attns is empty; allowed: at least one attention matrix [..., n, n]")
    first = attns[0]
    p = identity_context(first.shape[:-2], first.shape[-1], first.dtype, first.device)
    out = [p]
    for a in attns:
        p = rollout_step(p, a, lam)
        out.append(p)
    return torch.stack(out)


def influence_profile(p: Tensor, i: int = -1) -> Tensor:
    """``P(t)[i, :]``: how much each input position contributes to token ``i``. [..., n, n] -> [..., n]."""
    p = _square(p, "p")
    n = p.shape[-1]
    if isinstance(i, bool) or not isinstance(i, int) or not -n <= i < n:
        raise RankCollapseError(f"i={i!r} is invalid; allowed: a token index in {-n}..{n - 1}")
    return p[..., i, :]


def first_token_share(p: Tensor) -> Tensor:
    """``P(t)[:, 0]``: each token's share of its cumulative context on the first token.

    p: [..., n, n] -> [..., n]."""
    return _square(p, "p")[..., :, 0]


def first_token_gap(p: Tensor) -> Tensor:
    """``sum_{j >= 1} P(t)[:, j]`` (= ``1 - P(t)[:, 0]``, summed without cancellation).

    p: [..., n, n] -> [..., n]."""
    return _square(p, "p")[..., :, 1:].sum(dim=-1)


def rollout_columns(p: Tensor) -> dict[str, Tensor]:
    """The simulator's per-sample columns of ``P(t)`` [b, n, n] -> {name: [b]} (see :data:`ROLLOUT_NAMES`)."""
    return {
        "first_token_share_mean": first_token_share(p).mean(dim=-1),
        "first_token_gap_max": first_token_gap(p).amax(dim=-1),
    }


def uniform_causal_gap(i: int, t: int) -> float:
    """Closed form of ``first_token_gap`` of token ``i`` (0-based) after ``t`` layers of *uniform* causal
    attention (``A[i, j] = 1 / (i + 1)`` for ``j <= i``; every layer the same):

    ``1 - P(t)[i, 0] = sum_{k=1}^{i} (-1)^(k+1) C(i, k) (k + 1)^(-t)``.

    (``A`` is the chain that jumps from ``i`` to a uniform position in ``0..i``; ``A^t[i, 0]`` is the
    chance of having reached 0. Check: ``t = 0`` gives 1, ``t = 1`` gives ``i / (i + 1)``.) The slowest
    term is ``i 2^(-t)``: uniform causal attention concentrates on the first token at rate 1/2 per layer
    for every ``i``. An alternating sum: exact in float64 for ``i`` up to about 30.
    """
    if i < 0 or t < 0:
        raise RankCollapseError(f"i={i}, t={t}: allowed non-negative integers")
    return float(sum((-1) ** (k + 1) * math.comb(i, k) * (k + 1.0) ** (-t) for k in range(1, i + 1)))


def uniform_causal_gap_mixed(i: int, t: int, lam: float) -> float:
    """:func:`uniform_causal_gap` with the residual-aware mixing ``M = lam I + (1 - lam) A`` every layer
    (Herasimchyk et al.'s rollout): ``M`` has ``A``'s eigenvectors and the eigenvalues ``lam + (1 - lam) /
    (k + 1)``, so ``1 - P(t)[i, 0] = sum_{k=1}^{i} (-1)^(k+1) C(i, k) (lam + (1 - lam) / (k + 1))^t``
    (``lam = 0``: :func:`uniform_causal_gap`; the slowest factor ``(1 + lam) / 2``). Increasing in ``lam``."""
    if not 0.0 <= lam <= 1.0:
        raise RankCollapseError(f"lam={lam}: allowed 0 <= lam <= 1")
    if lam == 0.0:
        return uniform_causal_gap(i, t)
    if i < 0 or t < 0:
        raise RankCollapseError(f"i={i}, t={t}: allowed non-negative integers")
    return float(sum((-1) ** (k + 1) * math.comb(i, k) * (lam + (1.0 - lam) / (k + 1.0)) ** t
                     for k in range(1, i + 1)))


def uniform_causal_boundary(i: int, t: int, level: float) -> float:
    """The ``lam`` at which :func:`uniform_causal_gap_mixed` of token ``i`` after ``t`` layers equals
    ``level`` (bisection to 1e-12; the gap rises with ``lam`` to 1): ``-inf`` where the gap is at or above
    ``level`` already at ``lam = 0``, ``inf`` where ``level >= 1``."""
    if level >= 1.0:
        return math.inf
    if uniform_causal_gap_mixed(i, t, 0.0) >= level:
        return -math.inf
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if uniform_causal_gap_mixed(i, t, mid) < level else (lo, mid)
    return (lo + hi) / 2

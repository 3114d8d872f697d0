"""The self-attention + LayerNorm map ``X -> D A(X) X W_V`` on a product of unit spheres (SPEC §2).

Index letters: b batch, n/i/j tokens, d features. Row-vector convention: a token is a row, the
value matrix acts as ``x -> x W_V``. Attention: ``A = softmax_M(X W_QK X^T / sqrt(d_qk))`` with
``W_QK = W_Q W_K^T`` (default identity) and the mask ``M`` (bool [n, n], True where query i may
attend to key j; None = complete). LayerNorm here is the ``sphere`` normalisation
``D = diag(1 / ||(A X W_V)_i||)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.core.attention import attention_weights
from rankcollapse.errors import RankCollapseError


def causal_mask(n: int) -> Tensor:
    """Causal mask, bool [n, n]: query i attends to keys j <= i."""
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def resolve_mask(mask: str | Tensor | None, n: int) -> Tensor | None:
    """A mask spec (``"causal"``, ``"complete"``, any ``parse_mask`` spec) or a dense bool tensor.

    Returns bool [n, n], or None for the complete mask.
    """
    if mask is None:
        return None
    if isinstance(mask, Tensor):
        if mask.shape != (n, n) or mask.dtype != torch.bool:
            raise RankCollapseError(f"mask must be a bool tensor of shape ({n}, {n}), got "
                                    f"{tuple(mask.shape)} {mask.dtype}")
        return mask
    spec = mask.strip()
    try:
        from rankcollapse.masks import parse_mask
    except ImportError:  # masks package not landed yet: the two families this module needs
        parse_mask = None
    if parse_mask is not None:
        dense = parse_mask(spec).dense(n)
        return None if bool(dense.all()) else dense.to(torch.bool)
    if spec == "causal":
        return causal_mask(n)
    if spec == "complete":
        return None
    raise RankCollapseError(f"unknown mask {spec!r}; allowed here: causal, complete")


def attention_matrix(x: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None,
                     d_qk: float = 1.0) -> Tensor:
    """``A = softmax_M(x W_QK x^T / sqrt(d_qk))``: x [..., n, d] -> A [..., n, n]."""
    q = x if w_qk is None else x @ w_qk
    return attention_weights(q, x, mask, d_qk)


def ln_attention_map(x: Tensor, w_v: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None,
                     d_qk: float = 1.0) -> Tensor:
    """One layer with sphere LayerNorm: ``X' = D A(X) X W_V``, ``D = diag(1/||(A X W_V)_i||)``.

    x [..., n, d] -> [..., n, d], every row of the output has unit norm.
    """
    y = attention_matrix(x, mask, w_qk, d_qk) @ x @ w_v
    return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def attention_map(x: Tensor, w_v: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None,
                  d_qk: float = 1.0) -> Tensor:
    """One layer without LayerNorm: ``X' = A(X) X W_V`` (pure self-attention), x [..., n, d]."""
    return attention_matrix(x, mask, w_qk, d_qk) @ x @ w_v


def iterate(x: Tensor, w_v: Tensor, steps: int, mask: Tensor | None = None, w_qk: Tensor | None = None,
            d_qk: float = 1.0, layer_norm: bool = True, keep_trajectory: bool = False) -> Tensor:
    """Apply the map ``steps`` times. Returns X(steps) [..., n, d], or the trajectory
    [steps + 1, ..., n, d] (X(0) first) when ``keep_trajectory``."""
    step = ln_attention_map if layer_norm else attention_map
    traj = [x] if keep_trajectory else None
    for _ in range(steps):
        x = step(x, w_v, mask, w_qk, d_qk)
        if traj is not None:
            traj.append(x)
    return torch.stack(traj) if traj is not None else x


def random_sphere_tokens(b: int, n: int, d: int, generator: torch.Generator) -> Tensor:
    """i.i.d. tokens uniform on the unit sphere S^{d-1}: [b, n, d] float64."""
    x = torch.randn(b, n, d, generator=generator, dtype=torch.float64)
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def tangent_basis(x: Tensor) -> Tensor:
    """Orthonormal basis of the tangent space of the sphere product at x [n, d]: [n*d, n*(d-1)]."""
    n, d = x.shape
    basis = torch.zeros(n * d, n * (d - 1), dtype=x.dtype)
    eye = torch.eye(d, dtype=x.dtype)
    for i in range(n):
        q, _ = torch.linalg.qr(torch.cat([x[i].unsqueeze(1), eye], dim=1))
        basis[i * d:(i + 1) * d, i * (d - 1):(i + 1) * (d - 1)] = q[:, 1:d]
    return basis

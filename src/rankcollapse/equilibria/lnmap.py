"""The self-attention + sphere-normalisation map on a product of unit spheres (the paper's eq. (3)).

Index letters: b batch, n/i/j tokens, d features. Row-vector convention: a token is a row, the
value matrix acts as ``x -> x W_V``. Attention: ``A = softmax_M(X W_QK X^T / sqrt(d_qk))`` with
``W_QK = W_Q W_K^T`` (default identity; a zero matrix gives uniform attention over each token's
context) and the mask ``M`` (bool [n, n], True where query i may attend to key j; None = complete).
The normalisation is the theory's scaling-only LayerNorm, :func:`rankcollapse.core.norms.sphere_normalize`
(``D = diag(1 / ||row_i||)``), the same function as the simulator's ``sphere`` norm:

- post-LN (eq. (3)): ``X' = D A(X) X W_V``, ``D`` from ``A X W_V``;
- pre-LN (§4.2):     ``X' = A(D X) D X W_V``, ``D`` from ``X``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.core.attention import attention_weights
from rankcollapse.core.norms import sphere_normalize
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.masks.resolved import resolve_mask  # noqa: F401  (re-exported: the one mask resolver)

PLACEMENTS = ("post", "pre")


def causal_mask(n: int) -> Tensor:
    """The causal mask at length n, bool [n, n] (i attends to j <= i), from ``rankcollapse.masks``."""
    from rankcollapse.masks import parse_mask

    return parse_mask("causal").dense(n).to(torch.bool)


def attention_matrix(
    x: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None, d_qk: float = 1.0
) -> Tensor:
    """``A = softmax_M(x W_QK x^T / sqrt(d_qk))``: x [..., n, d] -> A [..., n, n]."""
    q = x if w_qk is None else x @ w_qk
    return attention_weights(q, x, mask, d_qk)


def ln_attention_map(
    x: Tensor,
    w_v: Tensor,
    mask: Tensor | None = None,
    w_qk: Tensor | None = None,
    d_qk: float = 1.0,
    placement: str = "post",
) -> Tensor:
    """One layer with the sphere normalisation, post-LN ``D A X W_V`` or pre-LN ``A(DX) D X W_V``.

    x [..., n, d] -> [..., n, d] (post-LN: every row of the output has unit norm). A zero or overflowing
    token raises :class:`RankCollapseError` naming it.
    """
    if placement == "post":
        y = attention_matrix(x, mask, w_qk, d_qk) @ x @ w_v
        _check_finite(y)
        return sphere_normalize(y)
    if placement == "pre":
        z = sphere_normalize(x)
        y = attention_matrix(z, mask, w_qk, d_qk) @ z @ w_v
        _check_finite(y)
        return y
    allowed = ", ".join(PLACEMENTS)
    raise RankCollapseError(f"placement must be one of {allowed}, got {quote(str(placement), 40)}")


def _check_finite(y: Tensor) -> None:
    """Refuse tokens whose norm overflows (e.g. ``W_V = 1e300 I``): their direction is not computable."""
    if y.requires_grad:
        return
    norm = torch.linalg.vector_norm(y, dim=-1)
    if not bool(torch.isfinite(norm).all()):
        bad = torch.nonzero(~torch.isfinite(norm))[0].tolist()
        raise RankCollapseError(
            f"token {bad[-1]} overflows (norm {float(norm[tuple(bad)]):g}) after one layer; scale W_V down"
        )


def attention_map(
    x: Tensor, w_v: Tensor, mask: Tensor | None = None, w_qk: Tensor | None = None, d_qk: float = 1.0
) -> Tensor:
    """One layer without LayerNorm: ``X' = A(X) X W_V`` (pure self-attention, eq. (2)), x [..., n, d]."""
    return attention_matrix(x, mask, w_qk, d_qk) @ x @ w_v


def iterate(
    x: Tensor,
    w_v: Tensor,
    steps: int,
    mask: Tensor | None = None,
    w_qk: Tensor | None = None,
    d_qk: float = 1.0,
    layer_norm: bool = True,
    keep_trajectory: bool = False,
    placement: str = "post",
) -> Tensor:
    """Apply the map ``steps`` times. Returns X(steps) [..., n, d], or the trajectory
    [steps + 1, ..., n, d] (X(0) first) when ``keep_trajectory``."""
    traj = [x] if keep_trajectory else None
    for _ in range(steps):
        x = (
            ln_attention_map(x, w_v, mask, w_qk, d_qk, placement)
            if layer_norm
            else attention_map(x, w_v, mask, w_qk, d_qk)
        )
        if traj is not None:
            traj.append(x)
    return torch.stack(traj) if traj is not None else x


def tangent_basis(x: Tensor) -> Tensor:
    """Orthonormal basis of the tangent space of the sphere product at x [n, d]: [n*d, n*(d-1)]."""
    n, d = x.shape
    basis = torch.zeros(n * d, n * (d - 1), dtype=x.dtype)
    eye = torch.eye(d, dtype=x.dtype)
    for i in range(n):
        q, _ = torch.linalg.qr(torch.cat([x[i].unsqueeze(1), eye], dim=1))
        basis[i * d : (i + 1) * d, i * (d - 1) : (i + 1) * (d - 1)] = q[:, 1:d]
    return basis

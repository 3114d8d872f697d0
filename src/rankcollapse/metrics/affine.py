"""Affine and linear rank of a token set at the precision floor, and what a normalisation does to them.

Index letters: b batch, n tokens, d features. ``x: [..., n, d]``, one token per row; ``1_n``, ``1_d`` the
all-ones columns; ``C = I - 1_d 1_d^T / d`` the feature centring; ``floor(x) = FLOOR_FACTOR eps(dtype)
||x||_F`` (``core.precision.precision_floor``: the one floor below which ``mu`` is rounding noise).

================== ========================================================================
``linear_rank``    ``#{k : s_k(x) > floor(x)}``: the matrix rank, ``dim span{x_i}``
``affine_rank``    ``#{k : s_k(x - 1_n gamma_x) > floor(x)}``: ``dim aff{x_i}`` (the rank of x minus its
                   token mean ``gamma_x``); 0 when every token is the same, to the floor (``mu`` at
                   the floor gives 0)
``span_residual``  ``||x - x Q Q^T||_F / ||x||_F`` with ``Q`` an orthonormal basis of ``span{y_j}``:
                   how far the tokens ``x_i`` lie outside the span of other tokens ``y_j``
================== ========================================================================

These use the precision floor, not ``measures.num_rank``'s ``max(n, d) eps s_1`` (relative to the largest
singular value of the matrix itself): a token set that collapsed to rounding noise has affine rank 0
here, while its centred matrix alone would look full rank.

**What a normalisation does to the ranks (closed form).** Write ``N(x)_i = (x_i P) / s_i``, ``s_i > 0``:
the sphere normalisation (``P = I``, ``s_i = ||x_i||``) and LayerNorm with ``beta = 0``, ``gamma = 1``
(``P = C``, ``s_i = sqrt(||x_i C||^2 / d + eps)``). Then ``N(x) = D x P``, ``D = diag(1/s)``, and

- ``rank(N x) = rank(x P)`` (``D`` is invertible), ``= rank(x) - [1_d in rowspace(x)]`` for LayerNorm;
- ``aff(y) = rank(y) - [1_n in colspace(y)]`` for any ``y`` (the tokens lie on an affine hyperplane off
  the origin exactly when ``y w = 1_n`` has a solution); ``colspace(D x P) = D colspace(x P)``, so
  ``aff(N x) = rank(x P) - [s in colspace(x P)]``.

Hence a normalisation that scales every token by the same factor (``s`` parallel to ``1_n``) keeps the
affine rank of a set that it does not centre; tokens whose scales differ can lose one (``s`` in the
column space while ``1_n`` is not: tokens on one ray become one point) or gain one (``1_n`` in the
column space while ``s`` is not: three tokens on a line off the origin, scaled apart, span a triangle);
LayerNorm's centring ``C`` loses one more where ``1_d`` lies in the tokens' span (always when the
tokens span all of ``R^d``, e.g. ``n > d`` generic tokens). ``beta != 0`` shifts every token by the same
vector: the affine rank is unchanged by it, the linear rank may change (so the linear-rank statement
is for ``beta = 0``). :func:`normalised_rank_terms` evaluates each term numerically.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.core.precision import FLOOR_FACTOR
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked
from rankcollapse.metrics.measures import singular_values

#: The normalisations whose rank terms :func:`normalised_rank_terms` knows (``core.norms`` names).
RANK_NORMS: tuple[str, ...] = ("sphere", "layernorm")


def _tokens(x: object) -> Tensor:
    if not isinstance(x, Tensor):
        raise RankCollapseError(f"x must be a torch tensor of tokens [..., n, d], got {type(x).__name__}")
    if x.ndim < 2 or not x.is_floating_point() or x.shape[-1] == 0 or x.shape[-2] == 0:
        raise RankCollapseError(
            f"x has shape {tuple(x.shape)} and dtype {x.dtype}; allowed: floating-point [..., n, d], "
            "n, d >= 1"
        )
    return x


def _count_above(m: Tensor, floor: Tensor) -> Tensor:
    """Singular values above ``floor`` per matrix; NaN for a matrix with a non-finite entry."""
    s = singular_values(m)
    count = (s > floor.unsqueeze(-1)).sum(dim=-1).to(m.dtype)
    return torch.where(torch.isnan(s).any(dim=-1), torch.nan, count)


@checked
def rank_margin(x: Tensor) -> Tensor:
    """``min_k |log10(s_k / floor(x))|`` over the singular values of ``x`` and of ``x - 1 gamma_x``: how many
    decades the nearest one sits from the floor. A rank is resolved only with a margin: a singular value
    near the floor is counted or not by rounding, and a normalisation that rescales tokens by different
    factors moves it. [..., n, d] -> [...] (inf when every singular value is exactly 0)."""
    x = _tokens(x)
    floor = rank_floor(x).unsqueeze(-1)
    s = torch.cat([singular_values(x), singular_values(x - x.mean(dim=-2, keepdim=True))], dim=-1)
    with torch.no_grad():
        dist = torch.log10(s / floor).abs()
    return dist.amin(dim=-1)


@checked
def rank_floor(x: Tensor) -> Tensor:
    """``FLOOR_FACTOR eps(dtype) ||x||_F``: the singular values counted by both ranks lie above it.
    [..., n, d] -> [...]."""
    x = _tokens(x)
    return FLOOR_FACTOR * torch.finfo(x.dtype).eps * torch.linalg.vector_norm(x, dim=(-2, -1))


@checked
def linear_rank(x: Tensor) -> Tensor:
    """``#{k : s_k(x) > floor(x)}``: ``dim span{x_i}`` at the precision floor. [..., n, d] -> [...]."""
    x = _tokens(x)
    return _count_above(x, rank_floor(x))


@checked
def affine_rank(x: Tensor) -> Tensor:
    """``#{k : s_k(x - 1 gamma_x) > floor(x)}``: ``dim aff{x_i}`` at the precision floor (the floor of ``x``
    itself, so a set collapsed to rounding noise has rank 0). [..., n, d] -> [...]."""
    x = _tokens(x)
    return _count_above(x - x.mean(dim=-2, keepdim=True), rank_floor(x))


@checked
def span_residual(x: Tensor, y: Tensor) -> Tensor:
    """``||x - x Q Q^T||_F / ||x||_F``, ``Q`` an orthonormal basis of ``span{y_j}`` (its singular vectors
    above ``floor(y)``): 0 when every token of ``x`` lies in the span of ``y``'s tokens.

    x: [..., n, d]; y: [..., m, d] (same leading dims) -> [...]."""
    x, y = _tokens(x), _tokens(y)
    if x.shape[-1] != y.shape[-1] or x.shape[:-2] != y.shape[:-2]:
        raise RankCollapseError(
            f"x {tuple(x.shape)} and y {tuple(y.shape)}: allowed the same leading dims and d"
        )
    finite = torch.isfinite(y).flatten(-2).all(dim=-1) & torch.isfinite(x).flatten(-2).all(dim=-1)
    if not bool(finite.all()):  # no LinAlgError: NaN for a sample with a non-finite entry
        out = torch.full(x.shape[:-2], torch.nan, dtype=x.dtype, device=x.device)
        if bool(finite.any()):
            out[finite] = span_residual(x[finite], y[finite])
        return out
    _, s, vh = torch.linalg.svd(y, full_matrices=False)
    keep = (s > rank_floor(y).unsqueeze(-1)).to(y.dtype)  # [..., k]
    q = vh.transpose(-2, -1) * keep.unsqueeze(-2)  # [..., d, k], the kept directions only
    inside = (x @ q) @ q.transpose(-2, -1)
    return torch.linalg.vector_norm(x - inside, dim=(-2, -1)) / torch.linalg.vector_norm(x, dim=(-2, -1))


def _in_colspace(m: Tensor, v: Tensor) -> bool:
    """``v in colspace(m)`` at the floor: appending ``v / ||v|| * ||m||_F`` does not raise the rank."""
    scaled = v / torch.linalg.vector_norm(v) * torch.linalg.vector_norm(m)
    return bool(linear_rank(torch.cat([m, scaled.unsqueeze(-1)], dim=-1)) == linear_rank(m))


@dataclass(frozen=True)
class RankTerms:
    """The closed form of the ranks before and after a normalisation ``N(x) = D x P`` (module docstring)
    for one token set ``x: [n, d]``: each indicator, the ranks it predicts and the change of the affine
    rank (``-2 .. +1``: ``-1`` tokens on a ray, ``+1`` tokens on an affine hyperplane off the origin with
    scales that differ, ``-1`` more from LayerNorm's centring where ``1_d`` is in their span)."""

    norm: str
    rank: int  # rank(x)
    ones_n_in_col: bool  # 1_n in colspace(x): the tokens lie on an affine hyperplane off the origin
    ones_d_in_row: bool  # 1_d in rowspace(x) (LayerNorm's centring removes that direction)
    scales_in_col: bool  # s in colspace(x P): the normalised tokens lie on such a hyperplane
    affine_before: int  # rank(x) - [1_n in col(x)]
    linear_after: int  # rank(x P)
    affine_after: int  # rank(x P) - [s in col(x P)]

    @property
    def affine_change(self) -> int:
        return self.affine_after - self.affine_before

    @property
    def linear_change(self) -> int:
        return self.linear_after - self.rank


@checked
def norm_scales(x: Tensor, norm: str, eps: float = 1e-5) -> Tensor:
    """The per-token divisors ``s`` of ``N(x) = D x P``: ``||x_i||`` (sphere) or ``sqrt(||x_i C||^2 / d +
    eps)`` (LayerNorm, ``torch.nn.LayerNorm``'s biased variance). [..., n, d] -> [..., n]."""
    x = _tokens(x)
    if norm == "sphere":
        return torch.linalg.vector_norm(x, dim=-1)
    if norm == "layernorm":
        return torch.sqrt(x.var(dim=-1, unbiased=False) + eps)
    raise RankCollapseError(f"unknown norm {norm!r}; allowed: {', '.join(RANK_NORMS)}")


@checked
def normalised_rank_terms(x: Tensor, norm: str, eps: float = 1e-5) -> RankTerms:
    """:class:`RankTerms` of one token set ``x: [n, d]`` under ``norm`` (``sphere`` or ``layernorm`` with
    ``beta = 0``, ``gamma = 1``, ``eps`` as given), every rank and membership at the precision floor."""
    x = _tokens(x)
    if x.ndim != 2:
        raise RankCollapseError(f"x has shape {tuple(x.shape)}; allowed: one token set [n, d]")
    if not bool(torch.isfinite(x).all()):
        raise RankCollapseError("x has a non-finite entry; allowed: a finite token set [n, d]")
    s = norm_scales(x, norm, eps)
    n, d = x.shape
    ones_n = torch.ones(n, dtype=x.dtype)
    xp = x - x.mean(dim=-1, keepdim=True) if norm == "layernorm" else x
    rank = int(linear_rank(x))
    ones_d_in_row = norm == "layernorm" and _in_colspace(x.T, torch.ones(d, dtype=x.dtype))
    ones_in, s_in = _in_colspace(x, ones_n), _in_colspace(xp, s)
    linear_after = int(linear_rank(xp))
    return RankTerms(
        norm, rank, ones_in, ones_d_in_row, s_in, rank - int(ones_in), linear_after, linear_after - int(s_in)
    )


#: The simulator's opt-in per-sample rank columns (never part of ``metrics=None``): the ranks of X(t), and
#: of what layer t's first normalisation received (``norm_in_*``) and returned (``norm_out_*``;
#: ``dynamics.layers.norm_step``), with ``norm_rank_margin`` the smaller :func:`rank_margin` of the two
#: (in decades: where it is small the one-step ranks are not resolved), NaN at row 0.
RANK_NAMES: tuple[str, ...] = (
    "affine_rank",
    "linear_rank",
    "norm_in_affine_rank",
    "norm_out_affine_rank",
    "norm_in_linear_rank",
    "norm_out_linear_rank",
    "norm_rank_margin",
)


@checked
def rank_columns(x: Tensor, names: tuple[str, ...], step: tuple[Tensor, Tensor] | None) -> dict[str, Tensor]:
    """The :data:`RANK_NAMES` columns in ``names`` for X(t) ``x: [b, n, d]`` and the norm step
    ``(Z, Norm(Z))`` of the layer that produced it (None at row 0: NaN) -> {name: [b]}."""
    out: dict[str, Tensor] = {}
    nan = torch.full(x.shape[:-2], float("nan"), dtype=x.dtype, device=x.device)
    for name in names:
        fn = affine_rank if name.endswith("affine_rank") else linear_rank
        if name == "norm_rank_margin":
            out[name] = nan if step is None else torch.minimum(rank_margin(step[0]), rank_margin(step[1]))
        elif name.startswith("norm_"):
            out[name] = nan if step is None else fn(step[0] if name.startswith("norm_in") else step[1])
        else:
            out[name] = fn(x)
    return out

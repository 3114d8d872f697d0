"""Every random draw of the project, each defined once, each with a required ``torch.Generator``.

Everything is drawn on the CPU in float64 and only then cast and moved by the caller, so a seed
gives the same numbers whatever the dtype, device or kernel of the run.

================================ ==========================================================
``gaussian(shape, g, std)``      i.i.d. ``N(0, std^2)`` entries
``uniform(shape, g)``            i.i.d. ``U[0, 1)`` entries (white-noise images' intensities)
``distinct_indices(n, m, g)``    ``m`` of ``0 .. n - 1`` without replacement (the query rows of a
                                 sampled mean |cos|)
``haar_orthogonal(d, g)``        Haar-distributed ``Q in O(d)`` (QR of a Gaussian, R's diagonal
                                 made positive; Mezzadri 2007)
``sphere_tokens(b, n, d, g)``    tokens i.i.d. uniform on ``S^{d-1}``; with ``n <= d`` they are
                                 linearly independent almost surely (condition (*) of Theorem 2)
``hemisphere_tokens(...)``       uniform on the open hemisphere ``{x : <x, v> > 0}`` (sphere
                                 tokens reflected across ``v^perp``); ``v = e_0`` by default
``nonnegative_cosine_tokens``    uniform on the positive orthant of ``S^{d-1}`` (``|x|``
                                 coordinate-wise), so every ``<x_i, x_j> >= 0``: ``phi(0) >= 0``
                                 of Corollary 1
================================ ==========================================================
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from rankcollapse.edge.validate import checked

_F64 = torch.float64


def _need_generator(generator: object) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    return generator


@checked
def gaussian(shape: Sequence[int], generator: torch.Generator, std: float = 1.0) -> Tensor:
    """i.i.d. ``N(0, std^2)`` entries of the given shape (float64, CPU)."""
    g = _need_generator(generator)
    x = torch.randn(*shape, generator=g, dtype=_F64)
    return x if std == 1.0 else x * std


@checked
def uniform(shape: Sequence[int], generator: torch.Generator) -> Tensor:
    """i.i.d. ``U[0, 1)`` entries of the given shape (float64, CPU)."""
    return torch.rand(*shape, generator=_need_generator(generator), dtype=_F64)


@checked
def distinct_indices(n: int, m: int, generator: torch.Generator) -> Tensor:
    """``min(m, n)`` distinct indices of ``0 .. n - 1`` drawn uniformly without replacement, ascending:
    long [min(m, n)] (CPU). Every subset of that size is equally likely."""
    if n < 1 or m < 1:
        raise ValueError(f"need n >= 1 and m >= 1, got n={n}, m={m}")
    return torch.randperm(n, generator=_need_generator(generator))[: min(m, n)].sort().values


@checked
def haar_orthogonal(d: int, generator: torch.Generator) -> Tensor:
    """A Haar-distributed orthogonal matrix [d, d] (QR of a Gaussian with R's diagonal made positive)."""
    q, r = torch.linalg.qr(gaussian((d, d), generator))
    return q * torch.sign(torch.diagonal(r)).unsqueeze(0)


def _unit(x: Tensor) -> Tensor:
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


@checked
def sphere_tokens(b: int, n: int, d: int, generator: torch.Generator) -> Tensor:
    """Tokens i.i.d. uniform on the unit sphere ``S^{d-1}``: [b, n, d] float64."""
    return _unit(gaussian((b, n, d), generator))


@checked
def hemisphere_tokens(
    b: int,
    n: int,
    d: int,
    generator: torch.Generator,
    direction: Tensor | str | None = None,
    margin: float = 0.0,
) -> Tensor:
    """Tokens uniform on the open hemisphere ``{x in S^{d-1} : <x, v> > 0}``: [b, n, d] float64.

    Sphere tokens are reflected across the hyperplane ``v^perp`` when ``<x, v> < 0`` (reflection
    keeps the distribution uniform). ``direction``: None for ``v = e_0`` (then the reflection is
    ``x_0 -> |x_0|``), ``"random"`` for one uniform ``v`` per sample (drawn after the tokens), or
    a unit tensor [d] / [b, 1, d]. ``margin > 0`` then pushes tokens with ``<x, v> < margin`` along
    ``v`` up to ``margin`` and renormalises (no longer uniform: a strict-hemisphere variant).
    """
    x = sphere_tokens(b, n, d, generator)
    if direction is None:
        v = torch.zeros(1, 1, d, dtype=_F64)
        v[..., 0] = 1.0
    elif isinstance(direction, str):
        if direction != "random":
            raise ValueError(f"direction must be None, 'random' or a tensor, got {direction!r}")
        v = _unit(gaussian((b, 1, d), generator))
    else:
        v = _unit(torch.as_tensor(direction, dtype=_F64).reshape(-1, 1, d))
    dot = (x * v).sum(-1, keepdim=True)
    x = torch.where(dot < 0, x - 2 * dot * v, x)
    if margin > 0:
        dot = (x * v).sum(-1, keepdim=True)
        x = _unit(x + torch.clamp(margin - dot, min=0.0) * v)
    return x


@checked
def nonnegative_cosine_tokens(b: int, n: int, d: int, generator: torch.Generator) -> Tensor:
    """Tokens uniform on the positive orthant of ``S^{d-1}``: [b, n, d], every pairwise cosine ``>= 0``."""
    return sphere_tokens(b, n, d, generator).abs()

"""The paper's constructions with DyT in LayerNorm's place (``equilibria.dyt``): the enumeration finds every
fixed point (against Newton's method from a dense grid of starts), its spectrum is the Jacobian's (against
autograd), and the closed forms of the module docstring hold (alpha <= 1: only X = 0; alpha <= 2: rank at
most 1)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from rankcollapse.core.draws import sphere_tokens
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.equilibria.dyt import basins, dyt_map, enumerate_equilibria, rescaled_residual, scalar_roots
from rankcollapse.equilibria.theorem3 import bidiagonal_value, paper_chain


@pytest.mark.parametrize(
    ("beta", "c"), [(0.5, 0.3), (1.0, 0.0), (3.0, 0.0), (3.0, 0.5), (3.0, 2.5), (8.0, -1.0)]
)
def test_scalar_roots_are_every_sign_change_of_h_on_a_fine_grid(beta: float, c: float) -> None:
    roots = scalar_roots(beta, c)
    for u in roots:
        assert abs(math.tanh(beta * u + c) - u) <= 1e-14
    grid = np.linspace(-1, 1, 200_001)
    h = np.tanh(beta * grid + c) - grid
    changes = int((np.sign(h[:-1]) * np.sign(h[1:]) < 0).sum() + (h == 0).sum())
    assert len(roots) == changes
    assert len(roots) == 1 or beta > 1


def _newton_fixed_points(w_v: torch.Tensor, n: int, alpha: float) -> list[torch.Tensor]:
    """Fixed points of F by Newton's method on G(X) = F(X) - X from a grid of starts in [-1, 1]^(n d), all
    at once (the oracle): ``dF = sech^2 * (alpha A dX W_V)``, i.e. ``J = diag(1 - F^2) alpha (A kron W_V^T)``
    in row-major order."""
    from rankcollapse.equilibria.dyt import uniform_causal

    d = w_v.shape[0]
    levels = np.linspace(-0.99, 0.99, 7)
    x = torch.tensor(list(itertools.product(levels, repeat=n * d)), dtype=torch.float64)  # [s, n d]
    lin = alpha * torch.kron(uniform_causal(n), w_v.T.contiguous().to(torch.float64))  # [n d, n d]
    eye = torch.eye(n * d, dtype=torch.float64)
    for _ in range(80):
        f = torch.tanh(x @ lin.T)
        jac = (1 - f * f)[:, :, None] * lin[None] - eye
        step = torch.linalg.lstsq(jac, (f - x)[:, :, None]).solution[..., 0]
        x = (x - step).clamp(-1.5, 1.5)
    res = (torch.tanh(x @ lin.T) - x).abs().amax(dim=1)
    found: list[torch.Tensor] = []
    for y in x[res < 1e-12]:
        if not any(float((y - z).abs().max()) < 1e-8 for z in found):
            found.append(y)
    return found


@pytest.mark.parametrize("alpha", [0.8, 1.5, 4.0])
def test_the_enumeration_finds_every_fixed_point_newton_finds_and_nothing_else(alpha: float) -> None:
    w_v = bidiagonal_value(2, 2.0)
    got = enumerate_equilibria(w_v, 2, alpha)
    assert got.complete and all(e.residual <= 1e-14 for e in got.equilibria)
    flat = [e.x.flatten() for e in got.equilibria]
    newton = _newton_fixed_points(w_v, 2, alpha)
    assert len(newton) == len(flat)  # 1, 5 and 13 fixed points
    for x in newton:
        assert any(float((x - y).abs().max()) < 1e-8 for y in flat)
    assert len({tuple(np.round(f.numpy(), 9)) for f in flat}) == len(flat)  # no duplicates


def test_the_spectrum_is_the_diagonal_of_a_triangular_jacobian() -> None:
    w_v = bidiagonal_value(3, 3.0)
    eqs = enumerate_equilibria(w_v, 3, 5.0)
    assert len(eqs.equilibria) > 10
    for e in eqs.equilibria[::7]:
        jac = torch.autograd.functional.jacobian(
            lambda z: dyt_map(z.view(3, 3), w_v, 5.0).flatten(), e.x.flatten()
        )
        assert float(torch.triu(jac, 1).abs().max()) == 0.0  # lower triangular in (token, coordinate) order
        assert torch.allclose(torch.diagonal(jac), e.diagonal.flatten(), atol=1e-13, rtol=0)


def test_closed_forms_alpha_at_most_1_only_zero_at_most_2_only_rank_one() -> None:
    for n, w in ((2, 2.0), (4, 4.0)):
        w_v = bidiagonal_value(n, w)
        for alpha in (0.3, 1.0):
            eqs = enumerate_equilibria(w_v, n, alpha)
            assert len(eqs.equilibria) == 1 and float(eqs.equilibria[0].x.abs().max()) == 0.0
        for alpha in (1.2, 2.0):
            for e in enumerate_equilibria(w_v, n, alpha).equilibria:
                assert float((e.x - e.x[:1]).abs().max()) <= 1e-14 and e.rank <= 1
        big = enumerate_equilibria(w_v, n, 4.0)
        assert big.ranks() == list(range(n + 1)) and big.ranks(stable=True) == [1]


def test_the_paper_equilibria_are_no_dyt_fixed_points_even_rescaled() -> None:
    w_v = bidiagonal_value(4, 4.0)
    gap, _ = rescaled_residual(paper_chain(4, 4.0), w_v, 4.0)
    assert gap > 1e-2
    own = next(e for e in enumerate_equilibria(w_v, 4, 4.0).equilibria if e.rank == 4)
    gap, scale = rescaled_residual(own.x, w_v, 4.0)
    assert gap < 1e-8 and scale == pytest.approx(1.0, abs=1e-6)


def test_basins_small_alpha_goes_to_zero_and_the_sphere_keeps_a_rank_two_share() -> None:
    w_v = bidiagonal_value(2, 2.0)
    starts = sphere_tokens(256, 2, 2, torch.Generator().manual_seed(0))
    low = basins(starts, w_v, 0.5, steps=500)
    assert bool(low.zero.all()) and low.share(1) == 0.0
    sphere = basins(starts, w_v, 1.0, norm="sphere", steps=500)
    assert 0.02 < sphere.share(2) < 0.3  # the red segment of Fig. 1: starts that converge to B
    dyt = basins(starts, w_v, 4.0, steps=500)
    assert dyt.share(2) == 0.0 and bool(dyt.converged.all()) and float(dyt.spread.max()) < 1e-12


def test_bad_inputs_are_one_line() -> None:
    with pytest.raises(RankCollapseError, match="upper-triangular"):
        enumerate_equilibria(torch.tensor([[1.0, 0.0], [1.0, 1.0]]), 2, 1.0)
    with pytest.raises(RankCollapseError, match="alpha"):
        enumerate_equilibria(bidiagonal_value(2, 2.0), 2, -1.0)
    with pytest.raises(RankCollapseError, match="norm"):
        dyt_map(torch.zeros(2, 2, dtype=torch.float64), bidiagonal_value(2, 2.0), 1.0, norm="layer")

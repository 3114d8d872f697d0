"""Affine and linear rank at the precision floor, and the closed form of a normalisation's effect on them."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.norms import layer_norm, sphere_normalize
from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics import (
    affine_rank,
    linear_rank,
    normalised_rank_terms,
    rank_margin,
    span_residual,
)

NORMS = {"sphere": sphere_normalize, "layernorm": layer_norm}


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _centred_features(x: torch.Tensor) -> torch.Tensor:
    return x - x.mean(dim=-1, keepdim=True)


def test_ranks_of_points_on_a_line_off_the_origin_are_one_affine_two_linear() -> None:
    a, b = torch.randn(2, 6, generator=_gen(), dtype=torch.float64)
    x = torch.stack([a + t * b for t in (0.0, 1.0, 2.5, -1.0)])
    assert int(affine_rank(x)) == 1 and int(linear_rank(x)) == 2


def test_a_set_collapsed_to_rounding_noise_has_affine_rank_zero() -> None:
    a = torch.randn(1, 8, generator=_gen(), dtype=torch.float64)
    x = a.expand(5, 8) + 1e-17 * torch.randn(5, 8, generator=_gen(1), dtype=torch.float64)
    assert int(affine_rank(x)) == 0 and int(linear_rank(x)) == 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_equal_scales_keep_the_affine_rank_of_feature_centred_tokens(dtype: torch.dtype) -> None:
    """Tokens of one norm (one scale) off a hyperplane: LayerNorm and the sphere are one common factor."""
    x = _centred_features(torch.randn(5, 12, generator=_gen(), dtype=torch.float64))
    x = (x / x.norm(dim=-1, keepdim=True)).to(dtype)
    for name, fn in NORMS.items():
        terms = normalised_rank_terms(x.double(), name)
        assert terms.affine_change == 0, name
        assert int(affine_rank(fn(x))) == int(affine_rank(x)) == 4, name


@pytest.mark.parametrize(
    ("name", "eps", "after"), [("sphere", 0.0, 0), ("layernorm", 0.0, 0), ("layernorm", 1e-5, 1)]
)
def test_tokens_on_one_ray_lose_one_affine_dimension_unless_eps_breaks_the_scale_invariance(
    name: str, eps: float, after: int
) -> None:
    """x_2 = 2 x_1: affine rank 1; scaled apart they land on one point: 0 (closed form -1). LayerNorm's
    eps makes s_i = sqrt(var_i + eps) no longer proportional along the ray: the points stay apart."""
    u = _centred_features(torch.randn(1, 8, generator=_gen(), dtype=torch.float64))
    x = torch.cat([u, 2.0 * u, 3.5 * u])
    terms = normalised_rank_terms(x, name, eps=eps)
    assert (terms.affine_before, terms.affine_after, terms.scales_in_col) == (1, after, after == 0)
    out = sphere_normalize(x) if name == "sphere" else layer_norm(x, eps=eps)
    assert int(affine_rank(x)) == 1 and int(affine_rank(out)) == after


@pytest.mark.parametrize("name", ["sphere", "layernorm"])
def test_tokens_on_a_line_off_the_origin_with_different_scales_gain_one(name: str) -> None:
    """Three points on a line off the origin (affine rank 1, 1_n in the column space); their own scales
    differ, so normalised they span a triangle: affine rank 2 (closed form +1)."""
    a, b = _centred_features(torch.randn(2, 8, generator=_gen(3), dtype=torch.float64))
    x = torch.stack([a + t * b for t in (0.0, 1.0, 3.0)])
    terms = normalised_rank_terms(x, name)
    assert (terms.ones_n_in_col, terms.scales_in_col, terms.affine_change) == (True, False, 1)
    assert int(affine_rank(x)) == 1 and int(affine_rank(NORMS[name](x))) == 2


def test_layernorm_drops_one_where_the_tokens_span_every_feature() -> None:
    """n > d generic tokens: affine rank d; LayerNorm's outputs lie in 1_d^perp: d - 1 (the centring term)."""
    x = torch.randn(12, 5, generator=_gen(), dtype=torch.float64)
    terms = normalised_rank_terms(x, "layernorm")
    assert terms.ones_d_in_row and not terms.ones_n_in_col
    assert (terms.affine_before, terms.affine_after) == (5, 4)
    assert int(affine_rank(layer_norm(x))) == 4 and int(linear_rank(layer_norm(x))) == 4
    sphere = normalised_rank_terms(x, "sphere")  # no centring: rank d kept
    assert sphere.affine_change == 0 and int(affine_rank(sphere_normalize(x))) == 5


@pytest.mark.parametrize("seed", range(6))
def test_closed_form_matches_the_measured_ranks_on_random_low_rank_sets(seed: int) -> None:
    g = _gen(seed)
    n, d, k = 7, 9, 1 + seed % 4
    x = torch.randn(n, k, generator=g, dtype=torch.float64) @ torch.randn(
        k, d, generator=g, dtype=torch.float64
    )
    x = x + (seed % 2) * torch.randn(1, d, generator=g, dtype=torch.float64)  # a shift: 1_n in the span
    for name, fn in NORMS.items():
        terms = normalised_rank_terms(x, name)
        assert terms.affine_before == int(affine_rank(x)), name
        assert terms.affine_after == int(affine_rank(fn(x))), name
        assert terms.linear_after == int(linear_rank(fn(x))), name


def test_span_residual_is_zero_inside_the_span_and_one_orthogonal_to_it() -> None:
    y = torch.zeros(2, 4, dtype=torch.float64)
    y[0, 0], y[1, 1] = 1.0, 1.0
    inside = torch.tensor([[2.0, -1.0, 0.0, 0.0]], dtype=torch.float64)
    outside = torch.tensor([[0.0, 0.0, 3.0, 0.0]], dtype=torch.float64)
    assert float(span_residual(inside, y)) == pytest.approx(0.0, abs=1e-15)
    assert float(span_residual(outside, y)) == pytest.approx(1.0)


def test_rank_margin_counts_decades_to_the_floor() -> None:
    x = torch.diag(torch.tensor([1.0, 1e-3], dtype=torch.float64))  # centred: s = (~0.71, ~7e-4)
    floor = 32 * torch.finfo(torch.float64).eps * float(x.norm())
    s = torch.cat([torch.linalg.svdvals(x), torch.linalg.svdvals(x - x.mean(0))])
    assert float(rank_margin(x)) == pytest.approx(float(torch.log10(s / floor).abs().min()))


def test_simulator_norm_step_ranks_are_the_ranks_of_the_norm_input_and_output() -> None:
    names = ("affine_rank", "norm_in_affine_rank", "norm_out_affine_rank", "norm_in_linear_rank")
    cfg = SimulationConfig(tokens=6, d=8, layers=3, samples=2, mode="attn+sphere", metrics=("mu", *names))
    r = simulate(cfg, keep_trajectory=True)
    assert torch.isnan(r.ranks["norm_in_affine_rank"][0]).all()
    # post-norm without an MLP: the norm's output is X(t)
    assert torch.equal(r.ranks["norm_out_affine_rank"][1:], r.ranks["affine_rank"][1:])
    assert torch.equal(r.ranks["affine_rank"][2], affine_rank(r.trajectory[2]))


def test_norm_step_ranks_are_refused_without_a_normalisation() -> None:
    with pytest.raises(RankCollapseError, match="mode 'attn' has none"):
        SimulationConfig(mode="attn", metrics=("mu", "norm_in_affine_rank"))

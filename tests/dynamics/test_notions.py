"""Both notions on one simulator run (dynamics.notions): the span of attention-only stacks, the affine rank
across LayerNorm against its closed form, and the refusals."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.precision import floor_rel
from rankcollapse.dynamics.config import SimulationConfig
from rankcollapse.dynamics.notions import measure_notions, value_products, value_stack
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.affine import normalised_rank_terms


def run(preset: str, n: int = 5, d: int = 10, dtype: str = "float64", layers: int = 6):
    cfg = SimulationConfig(
        mask="causal", tokens=n, d=d, layers=layers, samples=3, mode=preset, seed=3, dtype=dtype,
        d_qk=float(d),
    )
    return measure_notions(cfg)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_attention_only_stays_in_the_row_space_of_the_value_products_to_the_floor(dtype):
    m = run("attn", dtype=dtype)
    assert m.span_residual.shape == (7, 3)
    assert float(m.span_residual.max()) <= 16 * floor_rel(dtype)


@pytest.mark.parametrize("preset", ["attn+skip", "attn+layernorm"])
def test_a_residual_or_the_centring_leaves_that_row_space(preset):
    m = run(preset)
    assert float(m.span_residual[1:].min()) > 1e-3  # from the first layer on, far above the floor


def test_the_value_products_are_those_the_simulator_applied():
    """Oracle: with uniform attention (W_Q = W_K = 0 via qk_scale 0) on the complete mask, X(1) is the token
    mean of X(0) W_V(1) in every row, computed here by hand."""
    cfg = SimulationConfig(
        mask="complete", tokens=4, d=6, layers=2, samples=2, mode="attn", seed=1, qk_scale=0.0
    )
    m = measure_notions(cfg)
    stack = value_stack(6, 2, "gaussian", 1.0, 1)
    x0 = m.result.trajectory[0]
    products = value_products(x0, stack)
    expected = products[1].mean(dim=-2, keepdim=True).expand_as(products[1])
    torch.testing.assert_close(m.result.trajectory[1], expected)


def test_layernorm_keeps_the_affine_rank_below_d_and_drops_one_where_the_tokens_span_r_d():
    for n, d in ((4, 8), (12, 8)):
        m = run("attn+layernorm", n=n, d=d, layers=1)
        r = m.result.ranks
        assert float(r["norm_rank_margin"][1].min()) >= 1.0  # resolved at layer 1
        before, after = r["norm_in_affine_rank"][1], r["norm_out_affine_rank"][1]
        change = -1 if n > d else 0
        torch.testing.assert_close(after - before, torch.full_like(before, float(change)))
        # the closed form (metrics.affine) gives the same change for generic tokens of that shape, X(0)
        x0 = m.result.trajectory[0][0]
        terms = normalised_rank_terms(x0, "layernorm")
        assert terms.affine_change == (change if n > d else 0)


def test_refuses_what_it_cannot_measure():
    with pytest.raises(RankCollapseError, match="heads = 1"):
        measure_notions(SimulationConfig(tokens=4, d=8, layers=2, heads=2))
    with pytest.raises(RankCollapseError, match="SimulationConfig"):
        measure_notions({"n": 4})  # type: ignore[arg-type]

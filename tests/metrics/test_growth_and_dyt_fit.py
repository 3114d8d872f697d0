"""``metrics.growth`` (stream variance, consecutive-layer cosine) and ``metrics.dyt_fit`` (the DyT fit of a
norm's map) against closed forms and planted maps."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.norms import layer_norm
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.dyt_fit import fit_dyt
from rankcollapse.metrics.growth import layer_cos, stream_var


def test_stream_var_is_the_mean_of_each_tokens_biased_feature_variance() -> None:
    rows = [[1.0, -1.0, 1.0, -1.0], [3.0, 3.0, 3.0, 3.0], [0.0, 4.0, 0.0, 4.0]]
    x = torch.tensor([rows], dtype=torch.float64)
    assert float(stream_var(x)[0]) == pytest.approx((1.0 + 0.0 + 4.0) / 3)  # per-token variances 1, 0, 4
    scaled = stream_var(3 * x)
    assert float(scaled[0]) == pytest.approx(9 * float(stream_var(x)[0]))  # a variance: scale squared


def test_layer_cos_closed_forms() -> None:
    a = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]], dtype=torch.float64)
    assert float(layer_cos(a, 5 * a)[0]) == pytest.approx(1.0)
    assert float(layer_cos(a, -a)[0]) == pytest.approx(-1.0)
    b = torch.tensor([[[0.0, 1.0], [3.0, 0.0]]], dtype=torch.float64)
    assert float(layer_cos(a, b)[0]) == pytest.approx(0.0)
    c = torch.tensor([[[1.0, 1.0], [0.0, 2.0]]], dtype=torch.float64)
    assert float(layer_cos(a, c)[0]) == pytest.approx((1 / math.sqrt(2) + 1) / 2)
    zero = torch.zeros_like(a)
    assert math.isnan(float(layer_cos(a, zero)[0]))
    with pytest.raises(RankCollapseError, match="one shape"):
        layer_cos(a, torch.zeros(1, 3, 2, dtype=torch.float64))


def test_a_planted_tanh_is_recovered_with_its_alpha_and_a_perfect_r2() -> None:
    g = torch.Generator().manual_seed(0)
    x = 2.0 * torch.randn(128, 16, generator=g, dtype=torch.float64)
    gamma = torch.rand(16, generator=g, dtype=torch.float64) + 0.5
    beta = torch.randn(16, generator=g, dtype=torch.float64)
    fit = fit_dyt(x, gamma * torch.tanh(0.7 * x) + beta)
    assert fit.dyt_alpha == pytest.approx(0.7, rel=1e-4)
    assert fit.dyt_r2 == pytest.approx(1.0, abs=1e-9) and fit.linear_r2 < 0.95
    assert fit.s_shape == pytest.approx(1.0, abs=1e-6)  # all that the line misses is the bend
    assert torch.allclose(fit.gamma, gamma, rtol=1e-4) and torch.allclose(fit.beta, beta, atol=1e-4)


def test_a_straight_map_has_no_s_shape_and_a_planted_noise_sets_the_r2() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g, dtype=torch.float64)
    line = fit_dyt(x, 3.0 * x - 1.0)
    assert line.linear_r2 == pytest.approx(1.0, abs=1e-12) and line.dyt_r2 == pytest.approx(1.0, abs=1e-5)
    assert math.isnan(line.s_shape) and line.alpha_scaled < 0.05  # the tanh's straight centre
    noise = 0.3 * torch.randn(256, 8, generator=g, dtype=torch.float64)
    y = torch.tanh(1.5 * x) + noise
    fit = fit_dyt(x, y)
    yc = y - y.mean(0)
    expected = 1 - float((noise - noise.mean(0)).pow(2).sum()) / float(yc.pow(2).sum())
    assert fit.dyt_r2 == pytest.approx(expected, abs=0.01)


def test_layernorm_bends_when_extreme_tokens_have_a_larger_spread() -> None:
    """LayerNorm of tokens of one spread is a straight line per feature; tokens whose extreme entries come
    with a larger spread (a massive activation) are squashed: the S the DyT paper plots."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(128, 32, generator=g, dtype=torch.float64)
    x = x - x.mean(dim=1, keepdim=True)
    x = x / x.std(dim=1, keepdim=True)  # every token of mean 0 and spread 1: LN is the identity
    flat = fit_dyt(x, layer_norm(x))
    assert flat.linear_r2 > 0.99
    spread = torch.exp(torch.linspace(0, 2.5, 128, dtype=torch.float64))[:, None]
    bent = fit_dyt(x * spread, layer_norm(x * spread))
    assert bent.s_shape > 0.3 and bent.dyt_r2 > bent.linear_r2


def test_bad_inputs_are_one_line() -> None:
    with pytest.raises(RankCollapseError, match="one shape"):
        fit_dyt(torch.zeros(4, 3), torch.zeros(4, 2))
    with pytest.raises(RankCollapseError, match="constant"):
        fit_dyt(torch.randn(4, 3, dtype=torch.float64), torch.ones(4, 3, dtype=torch.float64))
    with pytest.raises(RankCollapseError, match="finite"):
        fit_dyt(torch.full((4, 3), math.nan), torch.ones(4, 3))

"""token_speed: the closed form of a rotation, scale invariance, and the simulator's column against it."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.dynamics.simulate import SimulationConfig, simulate
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics import token_speed


def test_a_rotation_by_theta_moves_every_token_by_the_chord_2_sin_theta_over_2() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 2, generator=g, dtype=torch.float64) * 3.0
    for theta in (0.0, 0.1, 1.0, math.pi):
        r = torch.tensor([[math.cos(theta), math.sin(theta)], [-math.sin(theta), math.cos(theta)]],
                         dtype=torch.float64)
        got = token_speed(x, x @ r)
        assert torch.allclose(got, torch.full((3,), 2 * math.sin(theta / 2), dtype=torch.float64), atol=1e-12)


def test_rescaling_each_token_is_no_move_and_a_mean_over_tokens() -> None:
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    scale = torch.tensor([[5.0], [0.5]], dtype=torch.float64)
    assert float(token_speed(x, x * scale)) == 0.0
    turned = torch.tensor([[0.0, 1.0], [0.0, 3.0]], dtype=torch.float64)  # token 0 by 90 deg, token 1 kept
    assert float(token_speed(x, turned)) == pytest.approx(math.sqrt(2) / 2, abs=1e-15)


def test_a_zero_token_gives_nan_and_shapes_must_agree() -> None:
    x = torch.tensor([[[0.0, 0.0], [1.0, 1.0]]], dtype=torch.float64)
    assert bool(torch.isnan(token_speed(x, x + 1)).all())
    with pytest.raises(RankCollapseError, match="one shape"):
        token_speed(x, x[:, :1])


@pytest.mark.parametrize("mode", ["transformer-peri", "transformer-ngpt", "transformer-mix", "attn+skip"])
def test_simulator_token_speed_is_the_metric_of_consecutive_states(mode: str) -> None:
    cfg = SimulationConfig(mode=mode, tokens=6, d=4, layers=8, samples=3, seed=2,
                           metrics=("mu", "mu_rel", "token_speed"))
    r = simulate(cfg, keep_trajectory=True)
    assert r.trajectory is not None
    speed = r.speeds["token_speed"]
    assert speed.shape == (9, 3) and bool(torch.isnan(speed[0]).all())
    for t in range(1, 9):
        assert torch.allclose(speed[t], token_speed(r.trajectory[t - 1], r.trajectory[t]), atol=1e-12, rtol=0)
    assert r.rows[3]["token_speed"] == pytest.approx(float(speed[3].mean()), abs=1e-12)


def test_simulator_refuses_a_new_field_that_does_not_apply_in_one_line() -> None:
    with pytest.raises(RankCollapseError, match="ngpt_step applies to placement 'ngpt'"):
        SimulationConfig(mode="transformer-pre", ngpt_step=0.1)
    with pytest.raises(RankCollapseError, match="allowed: post, pre, peri, mix, ngpt"):
        SimulationConfig(mode="attn+skip+layernorm", placement="sandwich")
    cfg = SimulationConfig(mode="attn+skip+layernorm", placement="mix", mix_post_share=0.5, layers=8)
    assert cfg.layer_spec().post_layers(cfg.layers) == 4

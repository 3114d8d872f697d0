"""dynamics.phases and the MLP-only presets: the measures are the simulator's own run, the layer weights its
own draws, and a layer without attention never mixes tokens."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.dynamics.layers import LayerSpec, get_preset, layer_logits
from rankcollapse.dynamics.phases import PHASE_NAMES, measure_layers
from rankcollapse.dynamics.simulate import SimulationConfig, layer_weights, simulate
from rankcollapse.edge.errors import RankCollapseError


def config(**kw) -> SimulationConfig:
    base = dict(tokens=8, d=8, layers=6, samples=2, metrics=("mu", "mu_rel"))
    return SimulationConfig(**{**base, **kw})


@pytest.mark.parametrize("mode", ["mlp", "mlp-pre"])
def test_an_mlp_only_layer_never_mixes_tokens(mode: str) -> None:
    spec = get_preset(mode)
    assert not spec.attention and spec.mlp and not spec.is_pure_attention
    base = simulate(config(mode=mode, layers=3), keep_trajectory=True)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(0))
    x0 = base.trajectory[0]
    moved = simulate(config(mode=mode, layers=3, input_tokens=x0[:, perm]), keep_trajectory=True)
    assert torch.allclose(moved.trajectory[-1], base.trajectory[-1][:, perm], atol=1e-12)


def test_post_norm_mlp_collapses_and_pre_norm_keeps_its_spread() -> None:
    post = simulate(config(mode="mlp", tokens=16, d=16, layers=48)).mu_rel[-1].mean()
    pre = simulate(config(mode="mlp-pre", tokens=16, d=16, layers=48)).mu_rel[-1].mean()
    assert post < pre


def test_a_layer_without_attention_needs_its_mlp_and_has_no_scores() -> None:
    with pytest.raises(RankCollapseError, match="attention=False needs mlp=True"):
        LayerSpec(norm="layernorm", skip=1.0, attention=False)
    spec = get_preset("mlp")
    assert spec.at(0, 4).attention is False
    w = layer_weights(config(mode="mlp"))(0)
    with pytest.raises(RankCollapseError, match="no attention"):
        layer_logits(torch.zeros(1, 8, 8, dtype=torch.float64), w, spec, 1.0)


def test_layer_weights_are_the_simulators_own_draws() -> None:
    cfg = config(mode="attn", layers=2, d_qk=8)
    run = simulate(cfg, keep_trajectory=True)
    weights = layer_weights(cfg)
    x = run.trajectory[0]
    for t in range(2):
        w = weights(t)
        a = torch.softmax((x @ w.w_q[0]) @ (x @ w.w_k[0]).transpose(-1, -2) / math.sqrt(8), dim=-1)
        x = a @ x @ w.w_v[0]
        assert torch.allclose(x, run.trajectory[t + 1], atol=1e-12)


def test_measures_match_the_simulator_and_entropy_reads_the_logit_scale() -> None:
    small = measure_layers(config(mode="transformer", qk_scale=0.05, d_qk=8))
    ref = simulate(config(mode="transformer", qk_scale=0.05, d_qk=8)).mu_rel
    assert set(small.values) == set(PHASE_NAMES) and small.layers_run == 6
    assert torch.allclose(small.values["mu_rel"], ref.double())
    assert torch.isnan(small.values["attention_entropy"][0]).all()
    assert (small.values["attention_entropy"][1:] > 0.99).all()  # near-uniform attention
    large = measure_layers(config(mode="transformer", qk_scale=8.0, d_qk=8))
    assert large.values["attention_entropy"][1].mean() < 0.3  # one key per query, nearly
    mlp = measure_layers(config(mode="mlp"))
    assert torch.isnan(mlp.values["attention_entropy"]).all()
    assert (mlp.values["effective_rank"] >= 1 - 1e-9).all()


def test_measure_layers_refuses_position_terms_and_other_configs() -> None:
    with pytest.raises(RankCollapseError, match="alibi_slope"):
        measure_layers(config(mode="attn", alibi_slope=0.5))
    with pytest.raises(TypeError):
        measure_layers({"mode": "attn"})

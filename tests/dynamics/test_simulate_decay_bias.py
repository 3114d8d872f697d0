"""The simulator's decay (ALiBi-type) bias: the same softmax as core.attention's, checked on closed forms."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.attention import attention_weights
from rankcollapse.dynamics.simulate import SimulationConfig, _seeds, _WeightStream, simulate
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import decay_bias, decay_uniform_context


def test_with_zero_logits_the_rollout_is_the_uniform_decay_closed_form() -> None:
    """qk_scale = 0: every logit 0 but the bias, so P(t) = A^t with A the decay softmax (masks' oracle)."""
    cfg = SimulationConfig(mask="causal", tokens=12, d=8, layers=6, samples=2, mode="attn", qk_scale=0.0,
                           alibi_slope=0.6, influence="last", metrics=("mu", "mu_rel", "first_token_gap_max"))
    r = simulate(cfg)
    assert r.influence is not None
    for t in range(7):
        want = decay_uniform_context(12, 0.6, t)[-1]
        assert torch.allclose(r.influence[t], want, atol=1e-13, rtol=0)


def test_a_decay_bias_run_matches_a_hand_written_san_loop() -> None:
    """X <- A X W_V with A = softmax_causal(X W_Q (X W_K)^T / sqrt(d_qk) - m |i - j|), weights re-drawn."""
    cfg = SimulationConfig(mask="causal", tokens=10, d=6, layers=3, samples=2, mode="attn", alibi_slope=0.4,
                           d_qk=6.0, seed=5, metrics=("mu", "mu_rel"))
    r = simulate(cfg, keep_trajectory=True)
    assert r.trajectory is not None
    stream = _WeightStream(cfg, cfg.layer_spec(), _seeds(cfg.seed)[1], torch.float64)
    causal = torch.ones(10, 10, dtype=torch.bool).tril()
    x = r.trajectory[0]
    for t in range(3):
        w = stream.layer(t)
        a = attention_weights(x @ w.w_q[0], x @ w.w_k[0], causal, 6.0, decay_bias(10, 0.4))
        x = a @ x @ w.w_v[0]
        assert torch.allclose(x, r.trajectory[t + 1], atol=1e-12, rtol=1e-10)


def test_a_decay_bias_with_a_kernel_that_takes_none_is_one_line() -> None:
    with pytest.raises(RankCollapseError, match="alibi_slope runs the dense kernel"):
        SimulationConfig(mask="causal", tokens=8, alibi_slope=0.5, kernel="sdpa")
    with pytest.raises(RankCollapseError, match="alibi_slope"):
        SimulationConfig(mask="causal", tokens=8, alibi_slope=-0.5)

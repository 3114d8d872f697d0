"""Cumulative context P(t) = M(t)...M(1): closed forms, a loop of matmuls, the simulator's rollout."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.attention import masked_softmax
from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.dynamics.kernels import plan_kernel
from rankcollapse.dynamics.layers import apply_layer, get_preset, layer_attention
from rankcollapse.dynamics.weights import draw_layer_weights
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.metrics import (
    cumulative_context,
    first_token_gap,
    first_token_share,
    head_mean,
    influence_profile,
    metric_names,
    mixing,
    rollout_step,
    uniform_causal_gap,
)

F64 = torch.float64


def uniform(mask: str, n: int) -> torch.Tensor:
    """Uniform attention over the allowed keys of ``mask`` at length n: [n, n]."""
    m = parse_mask(mask).dense(n).to(F64)
    return m / m.sum(-1, keepdim=True)


def random_attention(shape: tuple[int, ...], n: int, mask: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, n, n, generator=g, dtype=F64) * 3
    return masked_softmax(logits, parse_mask(mask).dense(n))


def loop_reference(attns: list[torch.Tensor], lam: float) -> list[torch.Tensor]:
    """P(t) by a plain loop of matmuls, entry by entry of the mixing."""
    n = attns[0].shape[-1]
    p = torch.eye(n, dtype=F64).expand_as(attns[0]).clone()
    out = [p]
    for a in attns:
        m = a.clone()
        for i in range(n):
            m[..., i, :] *= 1 - lam
            m[..., i, i] += lam
        p = torch.matmul(m, p)
        out.append(p)
    return out


def test_product_of_known_stochastic_matrices_in_layer_order() -> None:
    # P(t) = A(t) ... A(1): a permutation, then a rank-one 1 pi^T, gives 1 (pi^T perm); the other order 1 pi^T
    perm = torch.eye(4, dtype=F64)[[2, 0, 3, 1]]
    pi = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=F64)
    rank_one = torch.ones(4, 1, dtype=F64) * pi
    p = cumulative_context([perm, rank_one])
    assert torch.equal(p[0], torch.eye(4, dtype=F64)) and torch.equal(p[1], perm)
    assert torch.allclose(p[2], torch.ones(4, 1, dtype=F64) * (pi @ perm))
    assert torch.allclose(cumulative_context([rank_one, perm])[2], rank_one)
    # every token on the first one in layer 1: any later row-stochastic layers keep it there
    sink = torch.zeros(4, 4, dtype=F64)
    sink[:, 0] = 1
    p = cumulative_context([sink, perm, rank_one])
    assert torch.allclose(p[3], sink)
    assert torch.allclose(first_token_share(p[3]), torch.ones(4, dtype=F64))
    assert torch.equal(first_token_gap(p[3]), torch.zeros(4, dtype=F64))


@pytest.mark.parametrize("t", [0, 1, 2, 7, 40])
def test_uniform_causal_first_token_gap_has_the_closed_form(t: int) -> None:
    n = 12
    p = cumulative_context([uniform("causal", n)] * max(t, 1))[t]
    want = torch.tensor([uniform_causal_gap(i, t) for i in range(n)], dtype=F64)
    assert torch.allclose(first_token_gap(p), want, rtol=1e-9, atol=1e-300)
    assert torch.allclose(first_token_share(p), 1 - want, atol=1e-12)


def test_closed_form_checks_and_slowest_term() -> None:
    assert uniform_causal_gap(5, 0) == 1.0
    assert uniform_causal_gap(5, 1) == pytest.approx(5 / 6)
    assert uniform_causal_gap(9, 60) == pytest.approx(9 * 2.0**-60, rel=1e-6)  # i 2^-t dominates


@pytest.mark.parametrize("mask", ["causal", "window:w=2", "causal-window:w=3"])
@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_rows_sum_to_one_and_match_a_loop_of_matmuls(mask: str, lam: float) -> None:
    attns = [random_attention((2, 3), 9, mask, s) for s in range(6)]
    p = cumulative_context(attns, lam)
    ref = loop_reference(attns, lam)
    for t in range(7):
        assert torch.allclose(p[t], ref[t], rtol=1e-12, atol=1e-15)
        assert torch.allclose(p[t].sum(-1), torch.ones(2, 3, 9, dtype=F64))
    # the per-layer step gives the same as the whole product
    q = torch.eye(9, dtype=F64).expand(2, 3, 9, 9)
    for a in attns:
        q = rollout_step(q, a, lam)
    assert torch.allclose(q, p[-1], rtol=1e-12)


def test_residual_one_is_the_identity_and_lam_is_the_matrix_power() -> None:
    a = uniform("causal", 6)
    assert torch.equal(cumulative_context([a] * 5, lam=1.0)[-1], torch.eye(6, dtype=F64))
    lam = 0.25
    want = torch.linalg.matrix_power(lam * torch.eye(6, dtype=F64) + (1 - lam) * a, 5)
    assert torch.allclose(cumulative_context([a] * 5, lam=lam)[-1], want, rtol=1e-12)
    assert torch.allclose(mixing(a, lam).sum(-1), torch.ones(6, dtype=F64))


def test_head_mean_and_influence_profile() -> None:
    a = random_attention((2, 4), 7, "causal", 3)
    m = head_mean(a)
    assert m.shape == (2, 7, 7) and torch.allclose(m, a.sum(1) / 4)
    p = cumulative_context([m, m])[-1]
    assert torch.equal(influence_profile(p, -1), p[:, 6, :])
    assert torch.equal(influence_profile(p, 2), p[:, 2, :])


@pytest.mark.parametrize("bad", [-0.1, 1.5, True])
def test_bad_lambda_and_shapes_are_one_clear_error(bad: float) -> None:
    with pytest.raises(RankCollapseError, match="lam"):
        mixing(uniform("causal", 3), bad)
    with pytest.raises(RankCollapseError, match=r"\[\.\.\., n, n\]"):
        first_token_gap(torch.ones(3, 4, dtype=F64))
    with pytest.raises(RankCollapseError, match="token index"):
        influence_profile(torch.eye(3, dtype=F64), 3)


# --- the simulator's opt-in rollout -------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["dense", "band", "sdpa"])
def test_layer_attention_is_the_attention_the_layer_applies(kernel: str) -> None:
    mask = "causal" if kernel == "sdpa" else "causal-window:w=2"
    n, d = 10, 6
    g = torch.Generator().manual_seed(1)
    w = draw_layer_weights(
        d=d,
        heads=1,
        qk_dim=d,
        value="gaussian",
        value_scale=1.0,
        qk_scale=1.0,
        output="mean",
        mlp=False,
        generator=g,
    )
    x = torch.randn(3, n, d, generator=g, dtype=F64)
    dense = parse_mask(mask).dense(n)
    plan = plan_kernel(dense, kernel=kernel, band=parse_mask(mask).band(n))
    y, _ = apply_layer(x, w, get_preset("attn"), plan, 2.0)
    a = layer_attention(x, w, get_preset("attn"), dense, 2.0)
    assert a.shape == (3, 1, n, n)
    assert torch.allclose(y, a[:, 0] @ x @ w.w_v[0], rtol=1e-10, atol=1e-12)


ROLL = "mu,mu_rel,first_token_share_mean,first_token_gap_max"


@pytest.mark.parametrize("mask", ["causal", "causal-window:w=2"])
@pytest.mark.parametrize("lam", [0.0, 0.4])
def test_simulator_rollout_with_uniform_attention_is_the_matrix_power(mask: str, lam: float) -> None:
    # qk_scale = 0: W_Q = W_K = 0, so every layer's attention is uniform over the mask, whatever X(t)
    n, t = 9, 12
    r = simulate(
        SimulationConfig(
            mask=mask,
            tokens=n,
            d=4,
            layers=t,
            samples=3,
            heads=2,
            qk_scale=0.0,
            metrics=ROLL,
            influence="all",
            rollout_residual=lam,
        )
    )
    m = lam * torch.eye(n, dtype=F64) + (1 - lam) * uniform(mask, n)
    for s in range(t + 1):
        want = torch.linalg.matrix_power(m, s)
        assert torch.allclose(r.influence[s], want, rtol=1e-10, atol=1e-14)
        gap = float(first_token_gap(want).max())
        assert r.rows[s]["first_token_gap_max"] == pytest.approx(gap, rel=1e-9)
        assert r.rows[s]["first_token_share_mean"] == pytest.approx(float(want[:, 0].mean()), rel=1e-9)
        assert torch.allclose(
            r.rollout["first_token_gap_max"][s], torch.full((3,), gap, dtype=F64), rtol=1e-9
        )
    if mask == "causal" and lam == 0.0:
        assert r.rows[t]["first_token_gap_max"] == pytest.approx(uniform_causal_gap(n - 1, t), rel=1e-9)


def test_simulator_rollout_is_opt_in_and_last_profile_is_the_last_row() -> None:
    base = dict(mask="causal", tokens=8, d=8, layers=6, samples=4, seed=3)
    plain = simulate(SimulationConfig(**base))
    assert plain.rollout == {} and plain.influence is None
    assert "first_token_gap_max" not in plain.rows[0]
    both = simulate(SimulationConfig(**base, metrics=ROLL, influence="all"))
    last = simulate(SimulationConfig(**base, metrics=ROLL, influence="last"))
    assert torch.allclose(last.influence, both.influence[:, -1, :])
    assert torch.equal(both.mu, last.mu)  # measuring the rollout does not change the run
    assert torch.allclose(both.influence.sum(-1), torch.ones(7, 8, dtype=F64))


def test_rollout_names_are_refused_outside_the_simulator_and_bad_settings_are_one_line() -> None:
    assert metric_names("mu,first_token_gap_max", extra=("first_token_gap_max",)) == (
        "mu",
        "first_token_gap_max",
    )
    with pytest.raises(RankCollapseError, match="first_token_gap_max"):
        metric_names("first_token_gap_max")
    with pytest.raises(RankCollapseError, match="influence"):
        SimulationConfig(influence="middle")
    with pytest.raises(RankCollapseError, match="rollout_residual"):
        SimulationConfig(rollout_residual=2.0)

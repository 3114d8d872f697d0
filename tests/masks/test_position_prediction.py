"""The mask graph's predictions about first-token concentration, against closed forms and simulated SANs."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import first_token_prediction, parse_mask, window_hops

N = 16


@pytest.mark.parametrize("width", [1, 2, 3, 4, 7, 15])
def test_hops_of_a_causal_window_are_ceil_n_minus_1_over_w_minus_1(width: int) -> None:
    p = first_token_prediction(f"causal-window:w={width}", N)
    assert p.applies and p.hops == math.ceil((N - 1) / width) == window_hops(N, width + 1)
    assert p.reach.tolist() == [math.ceil(i / width) for i in range(N)]
    assert p.hops == parse_mask(f"causal-window:w={width}").radius(N)


def test_causal_reaches_every_token_in_one_layer_and_a_matrix_gives_the_same() -> None:
    p = first_token_prediction("causal", N)
    assert p.applies and p.hops == 1 and p.reach.tolist() == [0] + [1] * (N - 1)
    q = first_token_prediction(torch.ones(N, N, dtype=torch.bool).tril(), N)
    assert q.hops == 1 and q.reach.tolist() == p.reach.tolist()


@pytest.mark.parametrize("mask", ["complete", "window:w=2", "block:size=4"])
def test_masks_whose_first_token_is_not_a_sink_center_predict_nothing(mask: str) -> None:
    p = first_token_prediction(mask, N)
    assert not p.applies and p.hops is None and p.why
    with pytest.raises(RankCollapseError, match="token"):
        p.gap_bound(0.1, 4)


def test_rate_bound_grows_with_the_hops() -> None:
    rates = [first_token_prediction(f"causal-window:w={w}", N).rate_bound(0.3) for w in (15, 4, 2, 1)]
    assert rates == sorted(rates) and rates[0] < rates[-1] < 1.0
    assert first_token_prediction("causal", N).gap_bound(0.5, 3) == pytest.approx(0.125)
    with pytest.raises(RankCollapseError, match="eps"):
        first_token_prediction("causal", N).rate_bound(0.0)


@pytest.mark.parametrize("mask", ["causal", "causal-window:w=1", "causal-window:w=3", "causal-window:w=6"])
def test_prediction_holds_in_simulated_single_head_sans(mask: str) -> None:
    layers = 24
    r = simulate(
        SimulationConfig(
            mask=mask,
            tokens=N,
            d=N,
            layers=layers,
            samples=4,
            seed=5,
            mode="attn",
            metrics="mu,mu_rel,first_token_gap_max",
            influence="all",
        )
    )
    pred = first_token_prediction(mask, N)
    assert r.influence is not None and r.min_weight is not None
    for t in range(layers + 1):  # P(t)[i, 0] > 0 exactly from layer dist(0, i) on
        reached = (r.influence[t][:, 0] > 0).tolist()
        assert reached == [t >= int(d) for d in pred.reach], t
    eps = r.min_weight.min(dim=0).values  # per sample, the smallest edge weight over the layers
    gap = r.rollout["first_token_gap_max"]
    for b in range(4):
        bound = torch.tensor(
            [pred.gap_bound(float(eps[b]), t) for t in range(layers + 1)], dtype=torch.float64
        )
        assert bool((gap[:, b] <= bound * (1 + 1e-9)).all())
    # the last token has no share before it is reached: its gap is 1 (to the rounding of a row sum)
    assert torch.allclose(gap[: pred.hops, :], torch.ones(pred.hops, 4, dtype=torch.float64), atol=1e-12)


def test_the_bound_is_attained_by_a_chain_that_moves_one_token_back_with_weight_eps() -> None:
    # causal-window:w=1 with A[i, i-1] = eps, A[i, i] = 1 - eps: the last token gets exactly eps^r on
    # token 0 after r = n - 1 layers, so its gap is exactly 1 - eps^r, the bound at t = r
    from rankcollapse.metrics import cumulative_context, first_token_gap

    n, eps = 6, 0.3
    a = torch.diag(torch.full((n,), 1 - eps, dtype=torch.float64)) + torch.diag(
        torch.full((n - 1,), eps, dtype=torch.float64), -1
    )
    a[0, 0] = 1.0
    pred = first_token_prediction("causal-window:w=1", n)
    p = cumulative_context([a] * (2 * pred.hops))
    for t in range(2 * pred.hops + 1):
        assert float(first_token_gap(p[t]).max()) <= pred.gap_bound(eps, t) + 1e-15
    assert float(first_token_gap(p[pred.hops]).max()) == pytest.approx(
        pred.gap_bound(eps, pred.hops), rel=1e-12
    )

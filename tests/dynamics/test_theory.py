"""Theorem 1 / Theorem 2 / Corollary 1 bound checks: closed-form rates, smallest C, verdicts, conditions.

Collapse claims use fixed seeds (float64, n = 32, d = 16, fresh Gaussian W_V, sigma = 1); relative mu is
the measure there, since raw mu also follows the norm of the value-matrix product.
"""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.dynamics import SimulationConfig, check_theorem1, simulate
from rankcollapse.dynamics.theory import check_ln_results, fit_bound, ln_conditions, log_rate
from rankcollapse.masks import analyze_mask, parse_mask

N, D = 32, 16


def run(mask: str, layers: int, **kw) -> float:  # type: ignore[no-untyped-def]
    """Largest (over 4 samples) relative mu after ``layers`` layers (early stop at 1e-10)."""
    base = {"mask": mask, "tokens": N, "d": D, "layers": layers, "samples": 4, "seed": 0,
            "metrics": ("mu_rel",),
            "track_min_weight": False}
    base.update(kw)
    return simulate(SimulationConfig(**base)).rows[-1]["mu_rel_max"]


@pytest.mark.parametrize("mask", ["complete", "causal"])
def test_pure_attention_collapses_within_128_layers(mask: str) -> None:
    assert run(mask, 128, stop_below=1e-10) < 1e-10


def test_mask_without_center_node_keeps_rank() -> None:
    r = simulate(SimulationConfig(mask="block:size=8", tokens=N, d=D, layers=512, samples=4, seed=0,
                                  metrics=("mu_rel",), track_min_weight=False))
    assert min(row["mu_rel_min"] for row in r.rows) > 1e-3


def test_rate_closed_forms_exponent_t_over_r() -> None:
    assert math.exp(log_rate(0.5, 1)) == pytest.approx(0.5)  # (1 - eps)^{1/1}
    assert math.exp(log_rate(0.5, 2)) == pytest.approx((1 - 0.25) ** 0.5)  # (1 - eps^2)^{1/2}
    assert math.exp(log_rate(0.3, 3, power=2, eps_multiplier=4)) == pytest.approx((1 - 4 * 0.3**6) ** (1 / 6))
    assert log_rate(1e-20, 40) == 0.0  # eps^r underflows: rho = 1, the bound says nothing
    assert log_rate(0.5, 1, eps_multiplier=2) == -math.inf  # n eps^r = 1: one layer collapses


def test_smallest_c_covers_every_layer_and_is_attained() -> None:
    mu = torch.tensor([[1.0, 2.0], [0.9, 1.0], [0.3, 0.4], [0.1, 0.05]], dtype=torch.float64)
    th = check_theorem1(mu, 0.5, 1)  # rho = 0.5
    c_b = (mu / 0.5 ** torch.arange(4.0, dtype=torch.float64).unsqueeze(1)).amax(0)
    assert th.c_per_sample == pytest.approx(c_b.tolist())
    assert th.c == pytest.approx(float(c_b.max()))
    assert th.c_over_mu0 == pytest.approx(max(1.8 / 1.0, 3.2 / 2.0))
    for b in range(2):
        assert bool((mu[:, b] <= th.bound(torch.arange(4), b) * (1 + 1e-12)).all())
    assert th.rate == pytest.approx(0.5) and th.bound_drop == pytest.approx(0.125) and not th.vacuous


def test_verdicts_vacuous_consistent_and_rate_exceeded() -> None:
    t = torch.arange(11, dtype=torch.float64).unsqueeze(1)
    fast = 0.4**t
    assert check_theorem1(fast, 0.5, 1).verdict == "consistent"  # falls at 0.4 < rho = 0.5
    slow = 0.8**t
    th = check_theorem1(slow, 0.5, 1)
    assert th.verdict == "rate_exceeded" and th.holds is False and th.tail_rate == pytest.approx(0.8)
    th = check_theorem1(slow, 0.01, 1)  # rho^10 = 0.99^10 = 0.90 > 1/2
    assert th.verdict == "vacuous" and th.vacuous and th.holds is None
    assert not check_theorem1(slow, 0.5, None).applicable


def test_floor_layers_are_left_out_of_the_tail_rate() -> None:
    mu = torch.tensor([[1.0], [0.1], [0.01], [1e-16], [1e-16], [1e-16]], dtype=torch.float64)
    th = check_theorem1(mu, 0.5, 1, mu_rel=mu, floor_rel=1e-14)
    assert th.tail_rate == pytest.approx(0.1) and th.verdict == "consistent"


def test_simulate_reports_the_theory_block_under_json_keys() -> None:
    r = simulate(SimulationConfig(mask="causal", tokens=8, d=8, layers=64, samples=2, seed=0,
                                  metrics=("mu_rel",),
                                  value="orthogonal", qk_scale=0.1))
    th = r.theory
    assert th is not None and th.applicable and th.radius == 1 and th.exponent == "t/r"
    assert r.min_weight is not None and th.epsilon == float(r.min_weight.min())
    assert th.rate == pytest.approx(1 - th.epsilon)  # r = 1: rho = 1 - eps
    block = r.summary()["theory"]
    assert {"epsilon", "radius", "rate", "c", "vacuous", "verdict", "tail_rate"} <= set(block)
    # orthogonal W_V keeps A3; near-uniform attention makes the bound non-vacuous and it is respected
    assert block["vacuous"] is False and block["verdict"] == "consistent"


def test_ln_conditions_name_the_failing_condition() -> None:
    g = torch.Generator().manual_seed(0)
    from rankcollapse.core.draws import nonnegative_cosine_tokens, sphere_tokens

    x = sphere_tokens(2, 4, 8, g)
    causal = analyze_mask(parse_mask("causal"), 4)
    fails = ln_conditions(causal, x, True)
    assert fails["Theorem 2"] == "causal is not strongly connected"
    assert fails["Corollary 1"].startswith("phi(0) = ")  # sphere tokens have negative cosines
    ok = ln_conditions(causal, nonnegative_cosine_tokens(2, 4, 8, g), True)
    assert ok["Corollary 1"] == ""
    complete = analyze_mask(parse_mask("complete"), 4)
    assert ln_conditions(complete, x, True)["Theorem 2"] == ""
    assert "N <= d" in ln_conditions(complete, sphere_tokens(1, 9, 8, g), True)["Theorem 2"]
    assert ln_conditions(complete, x, False)["Theorem 2"] == "W_V is not orthogonal"
    mu = torch.tensor([[1.0], [0.5]], dtype=torch.float64)
    checks = check_ln_results(mu, 0.1, causal, nonnegative_cosine_tokens(1, 4, 8, g), True)
    assert [c.applicable for c in checks] == [False, True, True]
    assert checks[0].reason == "causal is not strongly connected: Theorem 2 does not apply, Corollary 1 does"


def test_theorem2_rate_closed_form() -> None:
    mu = torch.tensor([[1.0], [0.5], [0.2]], dtype=torch.float64)
    th = fit_bound(mu, 0.2, 1, result="Theorem 2", power=2, eps_multiplier=4)
    assert th.rate == pytest.approx((1 - 4 * 0.2**2) ** 0.5) and th.exponent == "t/(2r)"


def test_the_bounds_multiplier_is_named_for_what_it_is_not_the_number_of_centers() -> None:
    """``k`` in ``rho = (1 - k eps^{p r})^{1/(p r)}`` is the bound's parameter: 1 for Theorem 1 and
    Corollary 1, N for Theorem 2, the number of centers for Corollary 1 (n centers). A window mask with
    8 centers gives Theorem 1's 1, under that name; the old name ``centers`` (retired in 0.2.0) is
    refused: no attribute, no keyword."""
    res = simulate(SimulationConfig(mask="window:w=4", tokens=8, d=8, layers=4, samples=2, seed=0))
    assert len(analyze_mask("window:w=4", 8).center_nodes) == 8
    assert res.theory is not None and res.theory.eps_multiplier == 1
    assert "eps_multiplier" in res.theory.to_dict() and "centers" not in res.theory.to_dict()
    with pytest.raises(AttributeError, match="has no attribute 'centers'"):
        res.theory.centers  # noqa: B018
    mu = torch.tensor([[1.0], [0.5], [0.2]], dtype=torch.float64)
    for call in (lambda: fit_bound(mu, 0.2, 1, result="Theorem 2", power=2, centers=4),
                 lambda: log_rate(0.2, 1, 2, centers=4)):
        with pytest.raises(TypeError, match="unexpected keyword argument 'centers'") as info:
            call()
        assert "\n" not in str(info.value)
    assert fit_bound(mu, 0.2, 1, result="Theorem 2", power=2, eps_multiplier=4).eps_multiplier == 4
    gen = torch.Generator().manual_seed(0)
    x0 = torch.nn.functional.normalize(torch.randn(2, 8, 8, dtype=torch.float64, generator=gen).abs(), dim=-1)
    checks = check_ln_results(mu.repeat(1, 2), 0.2, analyze_mask("window:w=4", 8), x0, True)
    assert [c.eps_multiplier for c in checks] == [8, 1, 8]  # N tokens; 1; the 8 centers

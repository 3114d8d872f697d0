"""The growth rules (kit.rules.growth: fit_growth, best_growth, flat_growth, at_least) on closed forms and
planted curves: every verdict each can give, and its cause."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit.curves import NETWORK, SAMPLE
from rankcollapse.experiments.kit.rules.growth import (
    LAWS,
    GrowthFit,
    GrowthFits,
    at_least,
    at_most,
    best_growth,
    estimate,
    fit_growth,
    flat_growth,
    growth_fits,
    unit_curves,
)
from rankcollapse.experiments.kit.thresholds import Thresholds

TH = Thresholds.of("test", {"min_samples": 4, "rate_tol": 0.02})
T = np.arange(0, 33, dtype=float)  # layers 0..32 (layer 0 left out of every fit)


def planted(law: str, units: int = 6, noise: float = 0.02, seed: int = 0) -> np.ndarray:
    """``[units, 33]`` curves of one growth law with multiplicative noise ``e^(noise N(0, 1))``."""
    g = np.random.default_rng(seed)
    base = {"exponential": 2.0 * 1.1**T, "polynomial": 3.0 * np.maximum(T, 1) ** 0.5,
            "linear": 2.0 * (T + 4.0), "flat": np.full_like(T, 5.0)}[law]
    return base[None, :] * np.exp(noise * g.standard_normal((units, T.size)))


@pytest.mark.parametrize(("law", "v", "param"), [
    ("exponential", 2.0 * 1.1**T, math.log(1.1)),
    ("polynomial", 3.0 * np.maximum(T, 1) ** 0.5, 0.5),
    ("linear", 2.0 * (T + 4.0), 1.0 / 5.0),
])
def test_each_law_fits_its_own_closed_form_exactly_and_best(law, v, param) -> None:
    f = fit_growth(v)
    assert f is not None and f.best == law
    assert f.sse[law] == pytest.approx(0.0, abs=1e-6)
    assert f.param[law] == pytest.approx(param, rel=1e-4)
    assert all(f.sse[other] > 1e-3 for other in LAWS if other != law)


def test_a_curve_with_fewer_than_three_layers_or_a_non_positive_value_has_no_fit() -> None:
    assert fit_growth(np.array([1.0, 2.0, 3.0])) is None  # layers 1, 2 only
    assert fit_growth(np.array([1.0, 2.0, 0.0, 3.0])) is None
    assert fit_growth(np.array([1.0, 2.0, math.nan, 3.0])) is None


def test_the_law_planted_is_the_best_for_sure_over_units() -> None:
    for law in LAWS:
        fits = growth_fits(planted(law), NETWORK)
        j = best_growth({"planted": fits}, law, TH)
        assert j.verdict == REPRODUCED, (law, j.evidence)
        assert f"best: {law} in 6 of 6 networks" in j.evidence


def test_another_law_better_for_sure_is_not_reproduced_and_named() -> None:
    fits = growth_fits(planted("linear"), NETWORK)
    j = best_growth({"pre-LN at init": fits}, "exponential", TH)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "measured otherwise"
    assert "fits better than exponential" in j.cause and "pre-LN at init" in j.cause


def test_one_failing_condition_decides_the_row() -> None:
    good, bad = growth_fits(planted("exponential"), NETWORK), growth_fits(planted("linear"), NETWORK)
    j = best_growth({"a": good, "b": bad}, "exponential", TH)
    assert j.verdict == NOT_REPRODUCED and "b: " in j.cause


def test_two_laws_the_sample_cannot_tell_apart_leave_the_row_undecided_with_its_n() -> None:
    # a mixture: half the units exponential, half polynomial, so neither law wins for sure
    curves = np.concatenate([planted("exponential", 3, seed=1), planted("polynomial", 3, seed=2)])
    j = best_growth({"mixed": growth_fits(curves, NETWORK)}, "exponential", TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert j.undecided and any(m.needed_n() is not None for m in j.undecided)


def test_too_few_units_is_inconclusive_whatever_the_fit_networks_and_samples_alike() -> None:
    for unit in (NETWORK, SAMPLE):
        j = best_growth({"x": growth_fits(planted("linear", units=3), unit)}, "linear", TH)
        assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small" and "3" in j.cause


def test_an_unknown_law_is_refused() -> None:
    with pytest.raises(ValueError, match="law must be one of"):
        best_growth({}, "logarithmic", TH)


def test_a_flat_variance_is_kept_and_a_growing_one_is_not() -> None:
    assert flat_growth({"post-LN": growth_fits(planted("flat"), NETWORK)}, TH).verdict == REPRODUCED
    j = flat_growth({"pre-LN": growth_fits(planted("exponential"), NETWORK)}, TH)
    assert j.verdict == NOT_REPRODUCED and "the variance grows" in j.cause
    falling = growth_fits(1.0 / planted("exponential"), NETWORK)
    assert "the variance falls" in flat_growth({"x": falling}, TH).cause


def test_a_rate_on_the_tolerance_is_open() -> None:
    # a per-layer log rate of 0.02 (= rate_tol) with noise: the interval straddles it
    g = np.random.default_rng(3)
    curves = np.exp(0.02 * T[None, :] + 0.3 * g.standard_normal((5, T.size)))
    j = flat_growth({"x": growth_fits(curves, NETWORK)}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"


def test_the_tolerance_is_read_from_the_yaml_and_moves_the_verdict() -> None:
    fits = {"x": growth_fits(planted("exponential", noise=0.001), NETWORK)}  # log rate 0.0953 per layer
    assert flat_growth(fits, TH).verdict == NOT_REPRODUCED
    assert flat_growth(fits, TH.with_value("rate_tol", 0.2)).verdict == REPRODUCED


def test_at_least_and_at_most_give_each_verdict_and_need_enough_units() -> None:
    high = estimate(np.array([0.97, 0.98, 0.99, 0.98, 0.975]), SAMPLE)
    low = estimate(np.array([0.5, 0.6, 0.55, 0.52, 0.58]), SAMPLE)
    wide = estimate(np.array([0.5, 1.4, 0.9, 1.2, 0.7]), SAMPLE)
    assert at_least({"deep half": high}, 0.9, TH, "cos").verdict == REPRODUCED
    j = at_least({"deep half": low}, 0.9, TH, "cos")
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "measured otherwise"
    assert at_least({"x": wide}, 0.9, TH, "cos").verdict == INCONCLUSIVE
    assert at_most({"x": low}, 0.9, TH, "cos").verdict == REPRODUCED
    assert at_most({"x": high}, 0.9, TH, "cos").verdict == NOT_REPRODUCED
    assert at_most({"x": wide}, 0.9, TH, "cos").verdict == INCONCLUSIVE
    few = estimate(np.array([0.99, 0.98]), SAMPLE)
    assert at_least({"x": few}, 0.9, TH, "cos").cause_kind == "sample too small"


def test_estimate_is_the_mean_and_its_standard_error_over_finite_units() -> None:
    e = estimate(np.array([1.0, 2.0, 3.0, math.nan]), NETWORK, "k")
    assert (e.n, e.unit, float(e.mean[0])) == (3, NETWORK, 2.0)
    assert float(e.se[0]) == pytest.approx(1.0 / math.sqrt(3))


def test_unit_curves_average_a_networks_samples_and_keep_each_excerpt_of_pretrained_weights() -> None:
    rows = [{"run_id": r, "sample": s, "layer": t, "stream_var": 10 * r + s + t, "pretrained": pre}
            for pre, runs in ((False, (0, 1)),) for r in runs for s in (0, 1) for t in (0, 1, 2)]
    curves, unit = unit_curves(pd.DataFrame(rows), "stream_var")
    assert unit == NETWORK and curves.shape == (2, 3)
    assert curves[1].tolist() == [10.5, 11.5, 12.5]
    pre = pd.DataFrame([dict(r, pretrained=True) for r in rows])
    curves, unit = unit_curves(pre, "stream_var")
    assert unit == SAMPLE and curves.shape == (4, 3)


def _planted_fits(diffs: np.ndarray, law: str = "linear", other: float = 1.0) -> GrowthFits:
    """Units whose residual sums are ``law``'s ``other - d`` against every other law's ``other``."""
    fits = [GrowthFit({x: other - d if x == law else other for x in LAWS}, {x: 0.0 for x in LAWS})
            for d in diffs]
    return GrowthFits(tuple(fits), NETWORK)


def test_the_conditions_of_best_growth_are_bonferroni_conditions() -> None:
    """A residual gap 3.5 standard errors above 0 over 6 networks is decided for one condition's two
    comparisons (z = 3.2) but not for three conditions' six (z = 4.3)."""
    g = np.random.default_rng(0).standard_normal(6)
    g = (g - g.mean()) / g.std(ddof=1)  # mean 0, sample std 1 exactly
    diffs = 3.5 / math.sqrt(6) + g  # mean 3.5 se
    fits = _planted_fits(diffs)
    assert best_growth({"a": fits}, "linear", TH).verdict == REPRODUCED
    assert best_growth({k: fits for k in "abc"}, "linear", TH).verdict == INCONCLUSIVE


def test_the_conditions_of_flat_growth_are_bonferroni_conditions() -> None:
    g = np.random.default_rng(1).standard_normal(6)
    g = 0.01 * (g - g.mean()) / g.std(ddof=1)
    rates = 0.02 - 3.5 * 0.01 / math.sqrt(6) + g  # 3.5 se below rate_tol
    fits = GrowthFits(tuple(GrowthFit({x: 0.0 for x in LAWS}, {"exponential": r, "polynomial": 0.0,
                                                                 "linear": 0.0}) for r in rates), NETWORK)
    assert flat_growth({"a": fits}, TH).verdict == REPRODUCED
    assert flat_growth({k: fits for k in "abc"}, TH).verdict == INCONCLUSIVE

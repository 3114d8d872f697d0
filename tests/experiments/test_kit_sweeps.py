"""kit.rules.sweeps on planted curves whose crossing is known: the located interval covers it, and every
verdict the rule can give, with its cause."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit.rules.sweeps import crossing, locate
from rankcollapse.experiments.kit.thresholds import Thresholds

TH = Thresholds.of("test", {"min_samples": 4}, {})
XS = np.array([0.0, 0.5, 1.0, 2.0, 4.0, 8.0])


def planted(x0: float, slope: float, sd: float, n: int, seed: int, xs: np.ndarray = XS) -> list[np.ndarray]:
    """Per x, ``n`` units of a mean linear in x through 0 at ``x0`` (``slope (x - x0)``) plus N(0, sd)."""
    rng = np.random.default_rng(seed)
    return [slope * (x - x0) + rng.normal(0.0, sd, n) for x in xs]


def test_the_interval_covers_a_planted_crossing_in_at_least_95_percent_of_200_seeds() -> None:
    x0 = 2.7  # between grid points: the mean is linear in x, as the coverage argument assumes
    covered, widths = 0, []
    for seed in range(200):
        c = locate(XS, planted(x0, 0.1, 0.08, 6, seed), 0.0)
        covered += c.low <= x0 <= c.high
        widths.append(c.high - c.low)
    assert covered >= 190, covered
    assert np.median(widths) < 4.0  # and it says something: narrower than the grid's cell around x0


def test_the_estimate_is_the_interpolated_crossing_of_the_mean_and_exact_without_noise() -> None:
    values = [np.full(5, 0.1 * (x - 2.7)) + np.array([-1e-9, 0, 1e-9, 0, 0]) for x in XS]
    c = locate(XS, values, 0.0)
    assert c.estimate == pytest.approx(2.7, abs=1e-6)
    assert c.low == pytest.approx(2.7, abs=1e-3) and c.high == pytest.approx(2.7, abs=1e-3)


def test_a_falling_mean_is_located_the_same_way() -> None:
    values = [-v for v in planted(3.0, 0.1, 0.02, 6, 0)]
    c = locate(XS, values, 0.0, rising=False)
    assert c.low <= 3.0 <= c.high and c.estimate == pytest.approx(3.0, abs=0.5)


def test_a_crossing_inside_the_sweep_is_reproduced_and_names_its_interval() -> None:
    j = crossing(XS, planted(2.7, 0.1, 0.02, 6, 1), 0.0, TH, "mu_rel's rate", "residual")
    assert j.verdict == REPRODUCED and j.n == 6
    assert "crosses it at residual" in j.evidence and "interval [" in j.evidence


def test_no_crossing_in_the_sweep_is_not_reproduced() -> None:
    for x0 in (-5.0, 20.0):  # every point past the level, or every point before it
        j = crossing(XS, planted(x0, 0.1, 0.02, 6, 2), 0.0, TH, "rate", "residual")
        assert j.verdict == NOT_REPRODUCED and "no crossing in the sweep" in j.cause


def test_a_mean_that_crosses_back_is_not_a_single_crossing() -> None:
    values = [np.full(6, v) + np.linspace(-0.01, 0.01, 6) for v in (-1, -1, 1, 1, -1, -1)]
    j = crossing(XS, values, 0.0, TH, "rate", "residual")
    assert j.verdict == NOT_REPRODUCED and "no single crossing" in j.cause


def test_open_points_leave_it_inconclusive_with_the_units_that_would_decide() -> None:
    j = crossing(XS, planted(2.7, 0.1, 1.0, 5, 3), 0.0, TH, "rate", "residual")
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"


def test_too_few_units_at_some_point_is_inconclusive() -> None:
    values = planted(2.7, 0.1, 0.02, 6, 4)
    values[2] = values[2][:3]
    j = crossing(XS, values, 0.0, TH, "rate", "residual")
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"


def test_locate_refuses_a_grid_that_is_not_increasing() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        locate([1.0, 1.0], [np.ones(3), np.ones(3)], 0.0)
    with pytest.raises(ValueError, match="one array of values per x"):
        locate([1.0, 2.0], [np.ones(3)], 0.0)


def test_a_band_that_never_rises_past_the_level_leaves_the_interval_open_at_the_end() -> None:
    values = planted(7.9, 0.1, 0.05, 6, 5)
    c = locate(XS, values, 0.0)
    assert c.open_high and c.high == XS[-1] and math.isfinite(c.low)


def test_the_bands_hold_together_bonferroni_over_the_sweeps_points() -> None:
    c = locate(XS, planted(2.7, 0.1, 0.02, 6, 6), 0.0)
    assert all(m.tests == len(XS) for m in c.margins)

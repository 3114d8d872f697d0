"""The DyT rules (kit.rules.layers.tanh_like; kit.rules.equilibria: basin_and_equilibria, ranks_present,
fixed_points_kept) on planted estimates and on exact enumerations: every verdict each can give, and its
cause."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit.curves import SAMPLE
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.rules.equilibria import (
    Basin,
    Ranks,
    basin_and_equilibria,
    fixed_points_kept,
    ranks_present,
)
from rankcollapse.experiments.kit.rules.layers import NormFit, tanh_like
from rankcollapse.experiments.kit.thresholds import Thresholds

TH = Thresholds.of("test", {"min_samples": 4, "r2_min": 0.8, "s_min": 0.2, "often_min": 0.5,
                            "basin_max": 0.05, "residual_max": 1e-9})


def est(mean: float, sd: float = 0.01, n: int = 8, name: str = "dyt_r2") -> Layered:
    """One estimate at index 0 over ``n`` excerpts: mean, se = sd / sqrt(n)."""
    return Layered(name, np.array([mean]), np.array([sd / math.sqrt(n)]), np.array([sd]), n, SAMPLE)


def fit(r2: float, shape: float, sd: float = 0.01, n: int = 8) -> NormFit:
    return NormFit(est(r2, sd, n), est(shape, sd, n, "s_shape"))


S_SHAPED, LINEAR = fit(0.87, 0.7), fit(0.997, 0.0)


def test_often_tanh_like_when_enough_norms_are_s_shaped_for_sure() -> None:
    j = tanh_like({"block 13, attention": S_SHAPED, "block 13, mlp": S_SHAPED, "block 1, attention": LINEAR},
                  TH)
    assert j.verdict == REPRODUCED and "2 of 3 norms tanh-like and S-shaped, 1 not" in j.evidence


def test_a_straight_line_is_not_s_shaped_and_mostly_lines_refute_often() -> None:
    j = tanh_like({"a": LINEAR, "b": LINEAR, "c": S_SHAPED}, TH)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "measured otherwise"
    assert "0 of 3" not in j.evidence and "1 of 3 norms tanh-like" in j.evidence
    assert "linear or not tanh-like: a, b" in j.cause


def test_a_bend_the_tanh_does_not_fit_is_not_tanh_like() -> None:
    j = tanh_like({"a": fit(0.5, 0.6), "b": fit(0.4, 0.5)}, TH)  # S-shaped share high, R² low: another bend
    assert j.verdict == NOT_REPRODUCED


def test_open_norms_leave_the_row_undecided_with_the_n_that_would_decide_it() -> None:
    j = tanh_like({"a": fit(0.87, 0.21, sd=0.05), "b": fit(0.87, 0.22, sd=0.05), "c": LINEAR}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert j.undecided and j.undecided[0].needed_n() is not None
    assert "2 open" in j.evidence


def test_too_few_excerpts_is_inconclusive_and_no_norm_is_not_testable() -> None:
    j = tanh_like({"a": fit(0.87, 0.7, n=3), "b": fit(0.87, 0.7, n=3)}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small" and "3" in j.cause
    assert tanh_like({}, TH).cause_kind == "not testable"


def test_often_is_read_from_the_yaml_and_moves_the_verdict() -> None:
    norms = {"a": S_SHAPED, "b": LINEAR, "c": LINEAR, "d": LINEAR}
    assert tanh_like(norms, TH).verdict == NOT_REPRODUCED  # 1 of 4 below half
    assert tanh_like(norms, TH.with_value("often_min", 0.25)).verdict == REPRODUCED


def test_a_start_at_the_rank_shows_a_basin_and_none_in_many_refutes_it() -> None:
    plotted, mech = basin_and_equilibria({"alpha = 4": Basin(20, 256, 3, True)}, TH)
    assert (plotted.verdict, mech.verdict) == (REPRODUCED, REPRODUCED)
    plotted, mech = basin_and_equilibria({"alpha = 4": Basin(0, 256, 0, True),
                                          "alpha = 8": Basin(0, 256, 0, True)}, TH)
    assert (plotted.verdict, mech.verdict) == (NOT_REPRODUCED, NOT_REPRODUCED)
    assert "below 5.0% for sure" in plotted.evidence or "below" in plotted.cause
    assert "unstable (exact spectra)" in mech.cause


def test_some_alpha_is_enough_for_a_basin() -> None:
    plotted, mech = basin_and_equilibria({"alpha = 2": Basin(0, 256, 0, True),
                                          "alpha = 8": Basin(5, 256, 1, True)}, TH)
    assert (plotted.verdict, mech.verdict) == (REPRODUCED, REPRODUCED)
    assert "alpha = 8" in plotted.decided_by


def test_no_start_at_the_rank_among_few_is_undecided_with_its_n() -> None:
    plotted, _ = basin_and_equilibria({"alpha = 4": Basin(0, 20, 0, True)}, TH)  # Wilson upper ~ 17 %
    assert plotted.verdict == INCONCLUSIVE and plotted.cause_kind == "sample too small"
    assert plotted.undecided and plotted.undecided[0].needed_n() is not None


def test_a_cut_or_missing_enumeration_cannot_refute_the_mechanism() -> None:
    _, cut = basin_and_equilibria({"alpha = 4": Basin(0, 256, 0, False)}, TH)
    assert cut.verdict == INCONCLUSIVE and cut.cause_kind == "not testable"
    _, none = basin_and_equilibria({"alpha = 4": Basin(0, 256, None, False)}, TH)
    assert none.verdict == INCONCLUSIVE and "no enumeration" in none.cause


def test_every_rank_present_for_some_alpha() -> None:
    per = {"alpha = 2": Ranks([0, 1], [1], 3, True, 7), "alpha = 4": Ranks([0, 1, 2, 3], [1], 3, True, 75)}
    assert ranks_present(per).verdict == REPRODUCED
    j = ranks_present({"alpha = 2": Ranks([0, 1], [1], 3, True, 7)})
    assert j.verdict == NOT_REPRODUCED and "no equilibrium of rank [2, 3]" in j.cause
    j = ranks_present({"alpha = 2": Ranks([0, 1], [1], 3, False, 7)})
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable"


def test_the_exact_enumeration_decides_ranks_present_as_its_closed_form_says() -> None:
    """At alpha <= 2 every equilibrium has all tokens equal (rank <= 1, equilibria.dyt's docstring); at
    alpha = 3 the counterexample's W_V has equilibria of rank 2."""
    from rankcollapse.equilibria.dyt import enumerate_equilibria
    from rankcollapse.equilibria.theorem3 import bidiagonal_value

    def ranks(alpha: float) -> Ranks:
        e = enumerate_equilibria(bidiagonal_value(2, 2.0), 2, alpha)
        return Ranks(e.ranks(), e.ranks(stable=True), 2, e.complete, len(e.equilibria))

    assert ranks_present({"alpha = 2": ranks(2.0)}).verdict == NOT_REPRODUCED
    assert ranks_present({"alpha = 2": ranks(2.0), "alpha = 3": ranks(3.0)}).verdict == REPRODUCED


def test_fixed_points_kept_reads_the_residual_against_its_threshold() -> None:
    assert fixed_points_kept({"alpha = 4": 1e-12}, TH).verdict == REPRODUCED
    j = fixed_points_kept({"alpha = 4": 0.46, "alpha = 8": 0.3}, TH)
    assert j.verdict == NOT_REPRODUCED and "0.3" in j.cause
    assert fixed_points_kept({"alpha = 4": 0.46}, TH.with_value("residual_max", 0.5)).verdict == REPRODUCED


@pytest.mark.parametrize("hits", [1, 2])
def test_one_start_at_the_rank_is_a_basin_of_positive_measure(hits: int) -> None:
    plotted, _ = basin_and_equilibria({"alpha = 4": Basin(hits, 4096, 1, True)}, TH)
    assert plotted.verdict == REPRODUCED


def test_the_norms_and_their_two_statistics_are_bonferroni_conditions() -> None:
    """An S-shape share 3 standard errors above s_min over 8 excerpts is decided for one norm's two
    comparisons (z = 2.84) but not for three norms' six (z = 3.71)."""
    sd = 0.05
    shape = 0.2 + 3.0 * sd / math.sqrt(8)
    one = tanh_like({"a": fit(0.95, shape, sd=sd)}, TH.with_value("often_min", 1.0))
    three = tanh_like({k: fit(0.95, shape, sd=sd) for k in "abc"}, TH.with_value("often_min", 1.0))
    assert one.verdict == REPRODUCED
    assert three.verdict == INCONCLUSIVE and three.cause_kind == "sample too small"

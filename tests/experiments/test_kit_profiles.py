"""The profile-shape rules (kit.rules.profiles.u_shaped, peaked) on synthetic data:
every verdict each can give, and its cause."""

from __future__ import annotations

import math

import numpy as np

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit.curves import NETWORK, SAMPLE
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.rules.profiles import peaked, scales_as, u_shaped, u_somewhere
from rankcollapse.experiments.kit.thresholds import Thresholds

TH = Thresholds.of("test", {"min_samples": 4, "u_log_min": 0.0})


def arm(mean: float, sd: float = 0.1, n: int = 16, name: str = "start_over_middle_log") -> Layered:
    """One arm at its last layer (two layers: t = 0 uniform, t = 1 the value): mean, se = sd / sqrt(n)."""
    return Layered(name, np.array([0.0, mean]), np.array([0.0, sd / math.sqrt(n)]), np.array([0.0, sd]), n,
                   SAMPLE)


def test_a_u_when_both_arms_are_above_the_middle_for_sure() -> None:
    j = u_shaped({"minilm, lam = 0.5": (arm(2.0), arm(0.5))}, TH)
    assert j.verdict == REPRODUCED and "a U" in j.evidence and "x1.65 the middle" in j.evidence


def test_not_a_u_when_the_end_arm_is_below_the_middle_and_the_cause_names_it() -> None:
    j = u_shaped({"smollm2, lam = 0.5": (arm(11.0), arm(-2.8))}, TH)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "measured otherwise"
    assert "the end arm below the middle" in j.cause and "smollm2" in j.cause


def test_not_a_u_when_the_start_arm_is_below_even_if_the_end_is_above() -> None:
    j = u_shaped({"recency only": (arm(-1.0), arm(3.0))}, TH)
    assert j.verdict == NOT_REPRODUCED and "the start arm below the middle" in j.cause


def test_one_failing_condition_decides_the_row() -> None:
    j = u_shaped({"a": (arm(2.0), arm(0.5)), "b": (arm(2.0), arm(-0.5))}, TH)
    assert j.verdict == NOT_REPRODUCED and "b: not a U" in j.cause and "a: " not in j.cause


def test_open_when_an_arm_straddles_the_threshold() -> None:
    j = u_shaped({"minilm": (arm(2.0), arm(0.03, sd=0.2))}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert j.undecided and j.undecided[0].needed_n() is not None


def test_too_few_excerpts_is_inconclusive_whatever_the_arms() -> None:
    j = u_shaped({"minilm": (arm(5.0, n=3), arm(5.0, n=3))}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small" and "3" in j.cause


def test_the_threshold_is_read_from_the_yaml_and_moves_the_verdict() -> None:
    pair = {"minilm": (arm(2.0), arm(0.2, sd=0.05))}
    assert u_shaped(pair, TH).verdict == REPRODUCED
    strict = Thresholds.of("test", {"min_samples": 4, "u_log_min": 0.4})
    assert u_shaped(pair, strict).verdict == NOT_REPRODUCED


def test_bonferroni_over_arms_widens_the_interval() -> None:
    # decided alone at one comparison, open once two conditions x two arms share the level
    a = arm(2.7 * 0.1 / 4, sd=0.1)  # 2.7 standard errors above 0: t critical 2.54 (2 tests), 2.88 (4)
    alone = u_shaped({"x": (arm(3.0), a)}, TH)
    shared = u_shaped({"x": (arm(3.0), a), "y": (arm(3.0), arm(3.0))}, TH)
    assert alone.verdict == REPRODUCED and shared.verdict == INCONCLUSIVE


# ---- kit.rules.profiles.peaked: Wu et al. 2025's decay mask, a non-monotone profile peaking at x* --------

PEAK_TH = Thresholds.of("test", {"min_samples": 4, "hump_log_min": 0.1, "peak_log_tol": 0.5})


def one(mean: float, sd: float = 0.1, n: int = 8) -> Layered:
    """One estimate at layer index 0 over ``n`` networks (se = sd / sqrt(n))."""
    return Layered("x", np.array([mean]), np.array([sd / math.sqrt(n)]), np.array([sd]), n, NETWORK)


def test_a_hump_at_the_predicted_distance_is_reproduced() -> None:
    j = peaked({"t = 8": (one(5.0), one(14.8), one(-0.15))}, PEAK_TH)
    assert j.verdict == REPRODUCED and "non-monotone" in j.evidence


def test_a_profile_falling_from_the_token_itself_is_monotone_not_reproduced() -> None:
    j = peaked({"t = 2": (one(0.0, sd=0.0), one(20.0), one(-1.6))}, PEAK_TH)
    assert j.verdict == NOT_REPRODUCED and "falls from the token" in j.cause


def test_a_profile_rising_to_the_start_is_monotone_not_reproduced() -> None:
    j = peaked({"t = 32": (one(30.0), one(0.0, sd=0.0), one(0.2))}, PEAK_TH)
    assert j.verdict == NOT_REPRODUCED and "rises to the start" in j.cause


def test_a_hump_far_from_the_predicted_distance_is_not_reproduced() -> None:
    j = peaked({"t = 8": (one(5.0), one(10.0), one(1.2))}, PEAK_TH)
    assert j.verdict == NOT_REPRODUCED and "not at x*" in j.cause
    j = peaked({"t = 8": (one(5.0), one(10.0), one(-1.2))}, PEAK_TH)
    assert j.verdict == NOT_REPRODUCED and "not at x*" in j.cause


def test_a_place_straddling_the_tolerance_is_open_and_asks_for_networks() -> None:
    j = peaked({"t = 8": (one(5.0), one(10.0), one(0.45, sd=0.3))}, PEAK_TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"


def test_too_few_networks_is_inconclusive_for_the_hump() -> None:
    j = peaked({"t = 8": (one(5.0, n=3), one(10.0, n=3), one(0.0, n=3))}, PEAK_TH)
    assert j.verdict == INCONCLUSIVE and "3" in j.cause


def test_the_hump_s_four_comparisons_share_one_bonferroni_correction() -> None:
    """The place 0 +- 0.5: decided within +-0.5 at one comparison's interval, open at four's (t, 7 df)."""
    j = peaked({"t = 8": (one(5.0), one(10.0), one(0.0, sd=0.485))}, PEAK_TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"


# ---- kit.rules.profiles.scales_as: Wu et al. 2025's RoPE decay term, D ∝ Δ² θ_1² --------------------------

LAW_TH = Thresholds.of("test", {"min_samples": 4, "slope_tol": 0.1, "coef_log_tol": 0.1})


def test_a_square_law_with_the_frequency_s_coefficient_is_reproduced() -> None:
    j = scales_as({"theta_1 = 0.01": (one(1.999, sd=0.001), None),
                   "theta_1 = 0.1": (one(1.99, sd=0.005), one(-0.004, sd=0.002))}, 2.0, LAW_TH)
    assert j.verdict == REPRODUCED and "the law holds" in j.evidence


def test_a_linear_decay_is_not_the_square_law_and_the_cause_names_the_slope() -> None:
    j = scales_as({"theta_1 = 0.01": (one(1.0, sd=0.05), None)}, 2.0, LAW_TH)
    assert j.verdict == NOT_REPRODUCED and "the slope" in j.cause
    j = scales_as({"theta_1 = 0.01": (one(2.3, sd=0.05), None)}, 2.0, LAW_TH)  # too steep is off too
    assert j.verdict == NOT_REPRODUCED


def test_a_coefficient_that_does_not_scale_as_theta_squared_is_not_reproduced() -> None:
    """D ∝ Δ² θ_1 (not θ_1²): the coefficient D / (Δ θ_1)² grows 10x from θ_1 = 0.1 to 0.01, log -2.3."""
    j = scales_as({"theta_1 = 0.1": (one(2.0, sd=0.01), one(-2.3, sd=0.01))}, 2.0, LAW_TH)
    assert j.verdict == NOT_REPRODUCED and "the coefficient" in j.cause
    j = scales_as({"theta_1 = 0.1": (one(2.0, sd=0.01), one(0.5, sd=0.01))}, 2.0, LAW_TH)
    assert j.verdict == NOT_REPRODUCED


def test_an_open_slope_or_coefficient_is_inconclusive_and_too_few_networks_too() -> None:
    j = scales_as({"a": (one(2.08, sd=0.1), None)}, 2.0, LAW_TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    j = scales_as({"a": (one(2.0, sd=0.01), one(0.09, sd=0.1))}, 2.0, LAW_TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    j = scales_as({"a": (one(2.0, sd=0.001, n=3), None)}, 2.0, LAW_TH)
    assert j.verdict == INCONCLUSIVE and "3" in j.cause


def test_the_law_s_tolerances_are_read_from_the_yaml() -> None:
    j = scales_as({"a": (one(1.85, sd=0.001), one(0.15, sd=0.001))}, 2.0, LAW_TH)
    assert j.verdict == NOT_REPRODUCED
    loose = Thresholds.of("test", {"min_samples": 4, "slope_tol": 0.2, "coef_log_tol": 0.2})
    assert scales_as({"a": (one(1.85, sd=0.001), one(0.15, sd=0.001))}, 2.0, loose).verdict == REPRODUCED


def test_the_law_s_comparisons_share_one_bonferroni_correction() -> None:
    """Slope 2.0 against 2 ± 0.1: decided inside at two comparisons (one condition without a ratio), open
    once a second condition with a ratio makes them six (t, 7 df)."""
    s = one(2.0, sd=0.1 * math.sqrt(8) / 3.2)  # 3.2 standard errors inside: t 2.91 (2 tests), 3.71 (6)
    alone = scales_as({"a": (s, None)}, 2.0, LAW_TH)
    shared = scales_as({"a": (s, None), "b": (one(2.0, sd=0.001), one(0.0, sd=0.001))}, 2.0, LAW_TH)
    assert alone.verdict == REPRODUCED and shared.verdict == INCONCLUSIVE


def test_a_u_that_exists_at_some_lam_is_a_u_somewhere_where_every_condition_would_refute_it() -> None:
    """Issue 40 (2): Herasimchyk et al. claim that a U *exists* at finite depth; the old rule demanded it at
    every lam and refuted the claim while one appears at lam = 0.9."""
    arms = {"lam = 0.3": (arm(2.0), arm(-0.8)), "lam = 0.6": (arm(2.0), arm(-0.3)),
            "lam = 0.9": (arm(1.5), arm(0.6))}
    assert u_shaped(arms, TH).verdict == NOT_REPRODUCED  # "in every condition": the old reading
    some = u_somewhere(arms, TH)
    assert some.verdict == REPRODUCED and some.decided_by.startswith("lam = 0.9: a U")
    assert some.key is not None and "lam = 0.9" in some.key.what
    none = u_somewhere({k: v for k, v in arms.items() if k != "lam = 0.9"}, TH)
    assert none.verdict == NOT_REPRODUCED and "no condition shows it" in none.cause
    assert none.decided_by.startswith("lam = 0.6")  # the nearest to a U decides the refutation
    open_ = u_somewhere({"lam = 0.3": (arm(2.0), arm(-0.8)), "lam = 0.9": (arm(2.0), arm(0.03, sd=0.2))}, TH)
    assert open_.verdict == INCONCLUSIVE and open_.cause_kind == "sample too small"
    assert open_.decided_by.startswith("lam = 0.9")

"""The shape of an influence profile (metrics.influence): each arm against closed forms."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import decay_uniform_context
from rankcollapse.metrics.influence import end_over_middle_logs, profile_peak


def test_a_uniform_profile_has_both_arms_at_zero() -> None:
    got = end_over_middle_logs(torch.full((3, 10), 0.1), 2)
    assert torch.equal(got["start_over_middle_log"], torch.zeros(3, dtype=torch.float64))
    assert torch.equal(got["end_over_middle_log"], torch.zeros(3, dtype=torch.float64))


def test_each_arm_is_the_log_of_its_mean_per_position_over_the_middle() -> None:
    # n = 8, k = 2: start {0.4, 0.2} (mean 0.3), middle {0.05, 0.05, 0.05, 0.05}, end {0.0, 0.2} (mean 0.1)
    p = torch.tensor([0.4, 0.2, 0.05, 0.05, 0.05, 0.05, 0.0, 0.2], dtype=torch.float64)
    got = end_over_middle_logs(p, 2)
    assert math.isclose(float(got["start_over_middle_log"]), math.log(0.3 / 0.05), rel_tol=1e-12)
    assert math.isclose(float(got["end_over_middle_log"]), math.log(0.1 / 0.05), rel_tol=1e-12)


def test_a_profile_falling_from_the_first_token_has_its_end_arm_below() -> None:
    # geometric decay 2^-j: the end's mean is below the middle's, the start's above
    p = torch.tensor([2.0**-j for j in range(12)])
    got = end_over_middle_logs(p, 3)
    assert float(got["start_over_middle_log"]) > 0 > float(got["end_over_middle_log"])
    # closed form: start mean (1 + 1/2 + 1/4)/3, middle mean sum_{j=3..8} 2^-j / 6, end sum_{9..11} / 3
    mid = sum(2.0**-j for j in range(3, 9)) / 6
    end = sum(2.0**-j for j in range(9, 12)) / 3
    assert math.isclose(float(got["end_over_middle_log"]), math.log(end / mid), rel_tol=1e-6)


def test_a_part_that_is_exactly_zero_gives_a_finite_log() -> None:
    p = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0])
    got = end_over_middle_logs(p, 1)
    assert math.isfinite(float(got["start_over_middle_log"])) and float(got["start_over_middle_log"]) > 700
    assert float(got["end_over_middle_log"]) == 0.0


@pytest.mark.parametrize("ends", [0, 5, 2.0, True])
def test_ends_that_leave_no_middle_are_one_line(ends: object) -> None:
    with pytest.raises(RankCollapseError, match=r"ends=.* allowed: an integer k with 1 <= k and 2 k < n"):
        end_over_middle_logs(torch.ones(10) / 10, ends)  # type: ignore[arg-type]


def test_profile_peak_reads_the_hump_of_the_uniform_decay_closed_form() -> None:
    """Far from the start the decay mask's profile peaks at floor((tq - 1)/(1 - q)) + 1 (masks' oracle)."""
    t, m = 8, 0.5
    p = decay_uniform_context(128, m, t)[-1]
    got = profile_peak(p)
    q = math.exp(-m)
    assert int(got["peak_distance"]) == math.floor((t * q - 1) / (1 - q)) + 1
    assert float(got["peak_over_self_log"]) > 1.0 and float(got["peak_over_far_log"]) > 1.0


def test_profile_peak_of_monotone_profiles_has_one_log_exactly_zero() -> None:
    falling_from_token = torch.tensor([0.5, 0.05, 0.1, 0.15, 0.2], dtype=torch.float64)  # j = 0 the sink
    got = profile_peak(falling_from_token)
    assert int(got["peak_distance"]) == 0 and float(got["peak_over_self_log"]) == 0.0
    rising_to_start = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05], dtype=torch.float64)
    got = profile_peak(rising_to_start)
    assert int(got["peak_distance"]) == 3 and float(got["peak_over_far_log"]) == 0.0

"""kit.rules.bounds.inside on synthetic estimates: every verdict it can give, its cause, Bonferroni and the
bound read from the YAML."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit.claims import judged
from rankcollapse.experiments.kit.curves import NETWORK
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.rules.bounds import inside
from rankcollapse.experiments.kit.thresholds import Thresholds

TH = Thresholds.of("test", {"min_samples": 4, "rho_min": 0.98, "tol": 0.1}, {"rho_min": [0.95, 0.99]})


def est(mean: float, sd: float = 0.01, n: int = 8) -> tuple[Layered, int]:
    """One estimate over ``n`` networks with sample std ``sd`` (se = sd / sqrt(n)), read at index 0."""
    return Layered("x", np.array([mean]), np.array([sd / math.sqrt(n)]), np.array([sd]), n, NETWORK), 0


def test_inside_for_sure_is_reproduced_and_names_the_weakest_condition() -> None:
    parts = {"gpt2": est(0.999, sd=0.001), "qwen2": est(0.984, sd=0.003)}
    j = inside(parts, TH, "Spearman", low=TH["rho_min"])
    assert j.verdict == REPRODUCED and j.n == 8 and j.unit == NETWORK
    assert "qwen2" in j.decided_by  # the one closest to its bound, in half-intervals


def test_below_a_lower_bound_for_sure_is_not_reproduced_and_names_the_condition() -> None:
    j = inside({"gpt2": est(0.995), "qwen2": est(0.90)}, TH, "Spearman", low=0.98)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "measured otherwise"
    assert "qwen2" in j.cause and "gpt2" not in j.cause


def test_above_an_upper_bound_for_sure_is_not_reproduced() -> None:
    assert inside({"a": est(0.3)}, TH, "log error", high=0.1).verdict == NOT_REPRODUCED
    assert inside({"a": est(0.02)}, TH, "log error", high=0.1).verdict == REPRODUCED


def test_a_two_sided_bound_fails_on_either_side() -> None:
    for value in (-0.5, 0.5):
        assert inside({"a": est(value)}, TH, "log ratio", low=-0.1, high=0.1).verdict == NOT_REPRODUCED
    assert inside({"a": est(0.0)}, TH, "log ratio", low=-0.1, high=0.1).verdict == REPRODUCED


def test_open_when_the_interval_straddles_and_it_says_how_many_would_decide() -> None:
    j = inside({"a": est(0.97, sd=0.05, n=5)}, TH, "Spearman", low=0.98)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert j.undecided and j.undecided[0].needed_n() is not None


def test_too_few_networks_or_no_estimate_is_inconclusive() -> None:
    assert inside({"a": est(0.999, n=3)}, TH, "Spearman", low=0.98).cause_kind == "sample too small"
    assert inside({"a": est(math.nan)}, TH, "Spearman", low=0.98).cause_kind == "not testable"
    assert inside({}, TH, "Spearman", low=0.98).cause_kind == "no data"


def test_bonferroni_widens_with_more_conditions() -> None:
    one = inside({"a": est(0.985, sd=0.004, n=6)}, TH, "Spearman", low=0.98)
    many = inside({f"c{k}": est(0.985, sd=0.004, n=6) for k in range(12)}, TH, "Spearman", low=0.98)
    assert one.verdict == REPRODUCED and many.verdict == INCONCLUSIVE


def test_the_bound_comes_from_the_yaml_and_its_range_is_probed() -> None:
    got = judged(lambda t: inside({"a": est(0.97)}, t, "Spearman", low=t["rho_min"]), TH)
    assert got.verdict == NOT_REPRODUCED and "rho_min" in got.used
    assert ("rho_min", 0.95, REPRODUCED) in got.flips


def test_no_bound_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        inside({"a": est(1.0)}, TH, "x")

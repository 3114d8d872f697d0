"""The two-notion rules (kit.rules.ranks) on synthetic data: every verdict each can give, and its cause."""

from __future__ import annotations

import numpy as np

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.rules import ranks as notions
from rankcollapse.experiments.kit.thresholds import Thresholds

TH = Thresholds.of(
    "test",
    {"rate_tol": 0.02, "min_samples": 4, "change_max": 0.05, "span_floor_max": 16.0, "keep_min": 0.05},
)


def curve(rate: float, *, noise: float = 0.01, seed: int = 0, layers: int = 12, n: int = 8) -> Curve:
    """mu_rel samples 0.5 exp(rate t + a noise random walk), float64."""
    gen = np.random.default_rng(seed)
    steps = np.concatenate([[0.0], np.full(layers, rate)])
    walk = np.cumsum(steps) + noise * np.cumsum(gen.standard_normal((n, layers + 1)), axis=1)
    walk -= walk[:, :1]
    return Curve.from_samples(0.5 * np.exp(walk), "mu_rel", "float64")


def test_rank_kept_reproduced_when_no_resolved_pair_changes_over_many_pairs() -> None:
    j = notions.rank_kept({"ln, n <= d": [(200, 0)] * 8}, TH)
    assert j.verdict == REPRODUCED and "0 of 1600" in j.evidence


def test_rank_kept_not_reproduced_when_the_centring_drops_the_rank_in_most_pairs() -> None:
    spans = [(50, 48), (40, 40), (60, 57), (30, 30)]  # n > d: the centring removes 1_d from the span
    j = notions.rank_kept({"ln, n <= d": [(200, 0)] * 8, "ln, n > d": spans}, TH)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "measured otherwise" and "n > d" in j.cause


def test_rank_kept_undecided_with_too_few_resolved_pairs_for_the_interval() -> None:
    j = notions.rank_kept({"ln": [(5, 0)] * 4}, TH)  # 0 of 20: Wilson's upper end is above 5 %
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert notions.rank_kept({"ln": [(200, 0)] * 3}, TH).cause_kind == "sample too small"  # 3 networks
    # a share right at the threshold stays open however it is measured
    assert notions.rank_kept({"ln": [(100, 5), (100, 4), (100, 6), (100, 5)]}, TH).verdict == INCONCLUSIVE


def test_rank_kept_counts_only_resolved_pairs_and_says_when_none_is() -> None:
    j = notions.rank_kept({"ln": [(0, 0)] * 8}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable"


def test_same_limit_reproduced_when_both_collapse_or_both_keep() -> None:
    both_fall = {"causal": (curve(-0.5, seed=1), curve(-0.6, seed=2))}
    assert notions.same_limit(both_fall, TH).verdict == REPRODUCED
    both_keep = {"causal": (curve(0.0, seed=1), curve(0.0, seed=2))}
    assert notions.same_limit(both_keep, TH).verdict == REPRODUCED


def test_same_limit_names_a_part_that_mitigates_or_contributes() -> None:
    mitigates = notions.same_limit({"causal": (curve(0.0), curve(-0.5))}, TH)
    assert mitigates.verdict == NOT_REPRODUCED and "LayerNorm mitigates collapse" in mitigates.cause
    contributes = notions.same_limit({"causal": (curve(-0.5), curve(0.0))}, TH, part="the skip")
    assert contributes.verdict == NOT_REPRODUCED and "the skip contributes to collapse" in contributes.cause


def test_same_limit_undecided_when_a_status_is_open() -> None:
    j = notions.same_limit({"causal": (curve(-0.03, noise=0.3), curve(-0.5))}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"


def test_span_kept_each_verdict() -> None:
    assert notions.span_kept({"attn": [0.3, 1.2, 2.0, 0.8]}, TH).verdict == REPRODUCED
    j = notions.span_kept({"attn": [0.3, 1.2, 2.0, 0.8], "attn+skip": [0.5, 3e13, 1.0, 2.0]}, TH)
    assert j.verdict == NOT_REPRODUCED and "attn+skip" in j.cause and "1 of 4" in j.evidence
    assert notions.span_kept({"attn": [0.3, float("nan"), 1.0, 1.0]}, TH).verdict == NOT_REPRODUCED
    few = notions.span_kept({"attn": [0.3, 1.2, 2.0]}, TH)
    assert few.verdict == INCONCLUSIVE and few.cause_kind == "sample too small"

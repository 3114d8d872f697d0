"""The paper's claim rules on synthetic curves: every verdict each rule can give is pinned."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankcollapse.core.precision import floor_rel
from rankcollapse.experiments.engine.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.paper_curves import Curve, curve_rows
from rankcollapse.experiments.paper_rules import (
    Thresholds,
    collapse_status,
    level_status,
    rule_cos_grows,
    rule_dominant_sv,
    rule_dqk_global,
    rule_dqk_shallow,
    rule_dqk_slows,
    rule_full_rank,
    rule_full_stable,
    rule_initial_cos,
    rule_kept_stable,
    rule_ln_stops,
    rule_local_slower,
    rule_san_collapse,
    rule_sigma_min,
    rule_skip_unstable,
    stability_status,
)

TH = Thresholds()


def samples(rate: float, *, layers: int = 12, n: int = 8, start: float = 0.5, noise: float = 0.01,
            seed: int = 0, late_rate: float | None = None) -> np.ndarray:
    """[n, layers+1] values start * exp(rate t + noise random walk); ``late_rate`` from the middle on."""
    gen = np.random.default_rng(seed)
    slope = np.full(layers + 1, rate)
    if late_rate is not None:
        slope[layers // 2 + 1:] = late_rate
    steps = np.concatenate([[0.0], slope[1:]])
    walk = np.cumsum(steps) + noise * np.cumsum(gen.standard_normal((n, layers + 1)), axis=1)
    walk -= walk[:, :1]
    return start * np.exp(walk)


def curve(rate: float, q: str = "mu_rel", dtype: str = "float64", **kw: object) -> Curve:
    return Curve.from_samples(samples(rate, **kw), q, dtype)


# ----------------------------------------------------------------------------- curves


def test_curve_drop_is_mean_log_change_and_rate_recovers_slope() -> None:
    c = curve(-0.5, noise=0.0)
    assert c.drop[-1] == pytest.approx(-0.5 * 12)
    r = c.rate(0, 12)
    assert r.mean == pytest.approx(-0.5) and r.se == pytest.approx(0.0, abs=1e-12)
    assert r.factor == pytest.approx(math.exp(-0.5))


def test_curve_clamps_mu_rel_at_the_floor_and_marks_it() -> None:
    v = samples(-5.0, layers=12)  # falls far below the float32 floor
    c = Curve.from_samples(v, "mu_rel", "float32")
    assert c.floor_share[-1] == 1.0
    assert c.drop[-1] == pytest.approx(math.log(floor_rel("float32") / 0.5), rel=1e-6)


def test_curve_marks_nonfinite_samples_from_then_on() -> None:
    v = samples(0.0, n=4)
    v[1, 5] = np.inf
    v[1, 6:] = 1.0  # finite again later: still counted as non-finite (an overflow is never cut)
    c = Curve.from_samples(v, "mu", "float32")
    assert c.first_nonfinite() == 5
    assert c.finite[-1] == pytest.approx(0.75)
    assert c.n_at(12) == 3


def test_curve_rows_round_trip() -> None:
    import pandas as pd

    v = samples(-0.3)
    rows = pd.DataFrame(curve_rows({"mu": v * 10, "mu_rel": v}, "float32"))
    back = Curve.from_rows(rows, "mu_rel", "float32", n=8)
    ref = Curve.from_samples(v, "mu_rel", "float32")
    np.testing.assert_allclose(back.drop_std, ref.drop_std)
    assert back.rate(0, 12) == ref.rate(0, 12)


# ----------------------------------------------------------------------------- statuses


def test_collapse_status_each_class() -> None:
    assert collapse_status(curve(-0.5), TH)[0] == "collapsing"
    assert collapse_status(curve(0.0), TH)[0] == "not collapsing"
    assert collapse_status(curve(-5.0, dtype="float32"), TH)[0] == "at floor"
    assert collapse_status(curve(-0.02, noise=0.3), TH)[0] == "unclear"
    assert collapse_status(curve(-0.5, n=3), TH)[0] == "too few samples"
    # an early drop that levels off is not an exponential collapse
    status, words = collapse_status(curve(-0.5, late_rate=0.0), TH)
    assert status == "not collapsing" and "levels off" in words


def test_level_status_each_class() -> None:
    assert level_status(curve(0.0), TH, 0.05)[0] == "kept"
    assert level_status(curve(0.0, start=0.01), TH, 0.05)[0] == "low"
    assert level_status(curve(0.0, start=0.01), TH, None)[0] == "kept"
    assert level_status(curve(-0.5), TH, None)[0] == "falling"
    assert level_status(curve(0.3, q="mu"), TH, None)[0] == "growing"
    assert level_status(curve(-0.5, late_rate=0.0), TH, None)[0] == "kept"


def test_stability_status_each_class() -> None:
    assert stability_status(curve(0.0, q="mu"), TH)[0] == "stable"
    assert stability_status(curve(0.5, q="mu"), TH)[0] == "unstable"
    assert stability_status(curve(0.15, q="mu"), TH)[0] == "unclear"


# ----------------------------------------------------------------------------- Fig. 2 / Fig. 6 rules


def test_san_collapse_verdicts() -> None:
    fall = {"complete": [curve(-1.0)], "window:w=1": [curve(-0.3)]}
    assert rule_san_collapse(fall, TH).verdict == REPRODUCED
    one_kept = {"complete": [curve(-1.0)], "window:w=1": [curve(0.0)]}
    assert rule_san_collapse(one_kept, TH).verdict == NOT_REPRODUCED
    few = {"complete": [curve(-1.0, n=2)]}
    assert rule_san_collapse(few, TH).verdict == INCONCLUSIVE


def test_local_slower_verdicts() -> None:
    radius = {"complete": 1, "causal-window:w=1": 127}
    right = {"complete": [curve(-1.0)], "causal-window:w=1": [curve(-0.1)]}
    assert rule_local_slower(right, radius, TH).verdict == REPRODUCED
    wrong = {"complete": [curve(-0.1)], "causal-window:w=1": [curve(-1.0)]}
    assert rule_local_slower(wrong, radius, TH).verdict == NOT_REPRODUCED
    same = {"complete": [curve(-0.5, seed=1)], "causal-window:w=1": [curve(-0.5, seed=2)]}
    assert rule_local_slower(same, radius, TH).verdict == INCONCLUSIVE


def test_ln_stops_verdicts() -> None:
    san = {"causal": [curve(-0.5)]}
    assert rule_ln_stops(san, {"causal": [curve(0.0)]}, TH, 0.05).verdict == REPRODUCED
    # kept with and without LN: LN makes no difference (the norm effect of raw mu)
    j = rule_ln_stops({"causal": [curve(0.0)]}, {"causal": [curve(0.0)]}, TH, 0.05)
    assert j.verdict == NOT_REPRODUCED and "does not collapse either" in j.evidence
    # LN curve at the float32 floor: collapsed, not stabilised
    floor = {"causal": [curve(-5.0, dtype="float32")]}
    assert rule_ln_stops(san, floor, TH, 0.05).verdict == NOT_REPRODUCED
    assert rule_ln_stops(san, {"causal": [curve(0.0, noise=0.4)]}, TH, 0.05).verdict == INCONCLUSIVE


def test_kept_stable_verdicts() -> None:
    assert rule_kept_stable({"causal": [curve(0.0)]}, TH, 0.05).verdict == REPRODUCED
    assert rule_kept_stable({"causal": [curve(-0.4)]}, TH, 0.05).verdict == NOT_REPRODUCED
    assert rule_kept_stable({"causal": [curve(-0.03, noise=0.2)]}, TH, 0.05).verdict == INCONCLUSIVE


def test_skip_unstable_verdicts() -> None:
    assert rule_skip_unstable({"causal": [curve(0.5, q="mu")]}, TH).verdict == REPRODUCED
    assert rule_skip_unstable({"causal": [curve(0.0, q="mu")]}, TH).verdict == NOT_REPRODUCED
    # unstable early, flat later: not "more so deeper"
    early = curve(1.0, q="mu", late_rate=0.0, noise=0.0)
    assert rule_skip_unstable({"causal": [early]}, TH).verdict == INCONCLUSIVE
    v = samples(0.0)
    v[0, 7:] = np.inf
    over = Curve.from_samples(v, "mu", "float32")
    j = rule_skip_unstable({"causal": [over]}, TH)
    assert j.verdict == REPRODUCED and "non-finite from t=7" in j.evidence


def test_full_stable_verdicts() -> None:
    assert rule_full_stable({"complete": [curve(0.0)]}, TH).verdict == REPRODUCED
    assert rule_full_stable({"complete": [curve(0.5, q="mu")]}, TH).verdict == NOT_REPRODUCED
    assert rule_full_stable({"complete": [curve(-5.0, dtype="float32")]}, TH).verdict == NOT_REPRODUCED
    assert rule_full_stable({"complete": [curve(0.15, q="mu")]}, TH).verdict == INCONCLUSIVE


# ----------------------------------------------------------------------------- Fig. 3 / Fig. 7 rules


def dqk(rates: dict[float, float], **kw: object) -> dict[float, Curve]:
    return {d: curve(r, seed=i, **kw) for i, (d, r) in enumerate(rates.items())}


def test_dqk_slows_verdicts() -> None:
    good = {"complete": dqk({1 / 64: -0.1, 1.0: -0.5, 64.0: -1.0})}
    assert rule_dqk_slows(good, TH).verdict == REPRODUCED
    bad = {"complete": dqk({1 / 64: -1.0, 1.0: -0.5, 64.0: -0.1})}
    assert rule_dqk_slows(bad, TH).verdict == NOT_REPRODUCED
    flat = {"complete": dqk({1 / 64: -0.5, 64.0: -0.5}, noise=0.1)}
    assert rule_dqk_slows(flat, TH).verdict == INCONCLUSIVE


def test_dqk_global_verdicts() -> None:
    big = dqk({1 / 64: -0.1, 64.0: -1.0})
    small = dqk({1 / 64: -0.4, 64.0: -0.5})
    assert rule_dqk_global({"complete": big, "window:w=1": small}, ["complete"], ["window:w=1"],
                           TH).verdict == REPRODUCED
    assert rule_dqk_global({"complete": small, "window:w=1": big}, ["complete"], ["window:w=1"],
                           TH).verdict == NOT_REPRODUCED
    assert rule_dqk_global({"complete": big}, ["complete"], ["window:w=1"], TH).verdict == INCONCLUSIVE


def test_dqk_shallow_verdicts() -> None:
    shallow = {"complete": {1 / 64: curve(-0.1, late_rate=-0.5, seed=1), 64.0: curve(-1.0, late_rate=-0.5)}}
    assert rule_dqk_shallow(shallow, TH).verdict == REPRODUCED
    deep = {"complete": {1 / 64: curve(-0.5, late_rate=-0.1, seed=1), 64.0: curve(-0.5, late_rate=-1.0)}}
    assert rule_dqk_shallow(deep, TH).verdict == NOT_REPRODUCED
    none = {"complete": {1 / 64: curve(-0.5, seed=1, noise=0.1), 64.0: curve(-0.5, noise=0.1)}}
    assert rule_dqk_shallow(none, TH).verdict == INCONCLUSIVE


# ----------------------------------------------------------------------------- Figs. 4, 8, 9 rules


def test_full_rank_verdicts() -> None:
    assert rule_full_rank([1.0] * 13, 8, TH).verdict == REPRODUCED
    assert rule_full_rank([1.0] * 12 + [0.5], 8, TH).verdict == NOT_REPRODUCED
    assert rule_full_rank([1.0] * 13, 2, TH).verdict == INCONCLUSIVE


def test_sigma_min_verdicts() -> None:
    a, r = rule_sigma_min([5.0, 3.0, 1.0], [0.1, 0.05, 0.01], 8, TH)
    assert a.verdict == REPRODUCED and r.verdict == REPRODUCED
    # absolute sigma_min large, but tiny against sigma_max: the two readings differ
    a, r = rule_sigma_min([5.0, 3.0, 1.0], [0.1, 0.05, 1e-5], 8, TH)
    assert a.verdict == REPRODUCED and r.verdict == NOT_REPRODUCED
    a, r = rule_sigma_min([5.0, 1e-4], [0.1, 0.1], 8, TH)
    assert a.verdict == NOT_REPRODUCED
    a, r = rule_sigma_min([5.0, 1.0], [0.1, 0.1], 2, TH)
    assert a.verdict == INCONCLUSIVE and r.verdict == INCONCLUSIVE


def test_cos_grows_verdicts() -> None:
    d = 768  # isotropic level sqrt(2/(pi d)) = 0.029
    assert rule_cos_grows([0.05, 0.3, 0.6], [0.01, 0.02, 0.02], 8, d, TH).verdict == REPRODUCED
    assert rule_cos_grows([0.6, 0.3, 0.05], [0.01, 0.02, 0.02], 8, d, TH).verdict == NOT_REPRODUCED
    # grows, but stays near the isotropic level: not a narrow region
    assert rule_cos_grows([0.03, 0.05], [0.001, 0.001], 8, d, TH).verdict == INCONCLUSIVE


def test_dominant_sv_verdicts() -> None:
    assert rule_dominant_sv([5.0, 8.0], [0.01, 0.02], 8, TH).verdict == REPRODUCED
    assert rule_dominant_sv([1.1, 8.0], [0.01, 0.02], 8, TH).verdict == NOT_REPRODUCED
    assert rule_dominant_sv([5.0, 8.0], [1e-6, 0.02], 8, TH).verdict == NOT_REPRODUCED
    assert rule_dominant_sv([5.0, 8.0], [0.01, 0.02], 3, TH).verdict == INCONCLUSIVE


def test_initial_cos_verdicts() -> None:
    assert rule_initial_cos([0.1] * 8, TH).verdict == REPRODUCED
    assert rule_initial_cos([0.1] * 7 + [-0.2], TH).verdict == NOT_REPRODUCED
    assert rule_initial_cos([0.1] * 3, TH).verdict == INCONCLUSIVE


def test_thresholds_from_verdict_ignores_unknown_keys() -> None:
    th = Thresholds.from_verdict({"rate_tol": 0.05, "min_samples": 6, "other_rule": 1})
    assert th.rate_tol == 0.05 and th.min_samples == 6 and isinstance(th.min_samples, int)


def test_pool_equals_the_curve_of_all_samples() -> None:
    a, b = samples(-0.3, n=4, seed=1), samples(-0.6, n=6, seed=2)
    pooled = Curve.pool([Curve.from_samples(a, "mu", "float64"), Curve.from_samples(b, "mu", "float64")])
    ref = Curve.from_samples(np.concatenate([a, b]), "mu", "float64")
    assert pooled.n == 10
    for field in ("mean", "std", "lo", "hi", "drop", "drop_std", "finite", "floor_share"):
        np.testing.assert_allclose(getattr(pooled, field), getattr(ref, field), rtol=1e-10, err_msg=field)


def test_raw_mu_underflow_to_zero_is_named_in_the_evidence() -> None:
    v = samples(-3.0, n=4)
    v[:, 8:] = 0.0  # float32 raw mu rounded to 0
    c = Curve.from_samples(v, "mu", "float32")
    status, words = collapse_status(c, TH)
    assert status == "at floor" and "underflows to 0 in float32 from t=8" in words


def test_explain_names_the_norm_effect_and_the_floor() -> None:
    from rankcollapse.experiments.paper_data import explain
    from rankcollapse.experiments.paper_rules import Judgement

    raw = Judgement(REPRODUCED, "complete: float32 with LN kept (level 5.1e-05)")
    rel = Judgement(NOT_REPRODUCED, "complete: float32 with LN at floor")
    why = explain(raw, rel, "causal (float32) x0.307")
    assert "x0.307" in why and "rounding noise" in why
    assert explain(Judgement(REPRODUCED, "a"), Judgement(REPRODUCED, "b"), "x0.3") == ""


def test_mu_rel_of_an_underflowed_x_is_undefined_not_overflow() -> None:
    v = samples(-0.5, n=4)
    v[:, 9:] = np.nan  # mu_rel = 0/0 where X underflowed to exactly 0
    zero = np.zeros_like(v, dtype=bool)
    zero[:, 9:] = True
    c = Curve.from_samples(v, "mu_rel", "float32", zero=zero)
    status, words = collapse_status(c, TH)
    assert status == "non-finite" and "underflowed to 0" in words and "overflow" not in words
    assert "overflow" in Curve.from_samples(v, "mu_rel", "float32").nonfinite_cause()


def test_raw_mu_that_underflows_to_zero_has_collapsed_not_levelled_off() -> None:
    v = samples(-3.0, n=4)
    v[:, 6:] = 0.0  # float32 raw mu rounded to 0 for the last half: not a level
    c = Curve.from_samples(v, "mu", "float32")
    assert collapse_status(c, TH)[0] == "at floor"
    assert level_status(c, TH, None)[0] == "at floor"
    assert rule_san_collapse({"complete": [c]}, TH).verdict == REPRODUCED

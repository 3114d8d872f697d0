"""The judging kit's rules on synthetic curves and checks: every verdict each rule can give is pinned."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from rankcollapse.core.precision import floor_rel
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes, combine, rules
from rankcollapse.experiments.kit.claims import Judged, sampling_state
from rankcollapse.experiments.kit.curves import (
    NETWORK,
    Curve,
    conditions,
    current_tests,
    curve_rows,
    sample_std,
    z,
)
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.statuses import (
    Status,
    StatusName,
    collapse_status,
    level_status,
    stability_status,
    trend_status,
)
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The values the stories' YAMLs use (no defaults in code: a rule reads what it is given).
TH = Thresholds.of(
    "test",
    {
        "rate_tol": 0.02,
        "keep_min": 0.05,
        "min_samples": 4,
        "unstable_min": math.log(10.0),
        "initial_layers": 3,
        "full_rank_min": 0.95,
        "ratio_margin": 10.0,
        "ratio_min": 1e-3,
        "aniso_factor": 3.0,
        "dominance_min": 2.0,
        "share_min": 0.95,
        "min_log_rate": 1e-3,
        "min_rho": 0.8,
        "global_masks": ["complete"],
        "sparse_masks": ["window:w=1"],
        "trend_from": 1,
        "negative_pairs_max": 1e-3,
    },
)


def samples(
    rate: float,
    *,
    layers: int = 12,
    n: int = 8,
    start: float = 0.5,
    noise: float = 0.01,
    seed: int = 0,
    late_rate: float | None = None,
) -> np.ndarray:
    """[n, layers+1] values start * exp(rate t + noise random walk); ``late_rate`` from the middle on."""
    gen = np.random.default_rng(seed)
    slope = np.full(layers + 1, rate)
    if late_rate is not None:
        slope[layers // 2 + 1 :] = late_rate
    steps = np.concatenate([[0.0], slope[1:]])
    walk = np.cumsum(steps) + noise * np.cumsum(gen.standard_normal((n, layers + 1)), axis=1)
    walk -= walk[:, :1]
    return start * np.exp(walk)


def curve(rate: float, q: str = "mu_rel", dtype: str = "float64", **kw: object) -> Curve:
    return Curve.from_samples(samples(rate, **kw), q, dtype)


# ----------------------------------------------------------------------------- curves: one std, one rate


def test_sample_std_is_the_n_minus_1_std_and_nan_for_one_sample() -> None:
    v = np.array([[1.0, 2.0], [3.0, 2.0], [5.0, np.nan]])
    np.testing.assert_allclose(sample_std(v), [2.0, 0.0])
    assert np.isnan(sample_std(np.array([[1.0]]))).all()


def test_curve_drop_is_mean_log_change_and_rate_recovers_slope() -> None:
    c = curve(-0.5, noise=0.0)
    assert c.drop[-1] == pytest.approx(-0.5 * 12)
    r = c.rate(0, 12)
    assert r.mean == pytest.approx(-0.5) and r.se == pytest.approx(0.0, abs=1e-12)
    assert r.factor == pytest.approx(math.exp(-0.5))
    assert r.text().startswith("x0.607/layer (log rate -0.5")


def test_rate_standard_error_is_the_sample_std_over_root_n() -> None:
    v = samples(-0.3, noise=0.2, n=10)
    c = Curve.from_samples(v, "mu", "float64")
    drops = np.log(v[:, -1]) - np.log(v[:, 0])
    assert c.rate(0, 12).se == pytest.approx(np.std(drops, ddof=1) / math.sqrt(10) / 12, rel=1e-12)


def test_curve_clamps_mu_rel_at_the_floor_and_marks_it() -> None:
    c = Curve.from_samples(samples(-5.0, layers=12), "mu_rel", "float32")
    assert c.floor_share[-1] == 1.0
    assert c.drop[-1] == pytest.approx(math.log(floor_rel("float32") / 0.5), rel=1e-6)


def test_curve_marks_nonfinite_samples_from_then_on() -> None:
    v = samples(0.0, n=4)
    v[1, 5] = np.inf
    v[1, 6:] = 1.0  # finite again later: still counted as non-finite (an overflow is never cut)
    c = Curve.from_samples(v, "mu", "float32")
    assert c.first_nonfinite() == 5 and c.finite[-1] == pytest.approx(0.75) and c.n_at(12) == 3


def test_curve_rows_round_trip() -> None:
    v = samples(-0.3)
    rows = pd.DataFrame(curve_rows({"mu": v * 10, "mu_rel": v}, "float32"))
    back = Curve.from_rows(rows, "mu_rel", "float32", n=8)
    ref = Curve.from_samples(v, "mu_rel", "float32")
    np.testing.assert_allclose(back.drop_std, ref.drop_std)
    assert back.rate(0, 12) == ref.rate(0, 12)


def test_pool_equals_the_curve_of_all_samples() -> None:
    a, b = samples(-0.3, n=4, seed=1), samples(-0.6, n=6, seed=2)
    pooled = Curve.pool([Curve.from_samples(a, "mu", "float64"), Curve.from_samples(b, "mu", "float64")])
    ref = Curve.from_samples(np.concatenate([a, b]), "mu", "float64")
    assert pooled.n == 10
    for name in ("mean", "std", "lo", "hi", "drop", "drop_std", "finite", "floor_share"):
        np.testing.assert_allclose(getattr(pooled, name), getattr(ref, name), rtol=1e-10, err_msg=name)


# ----------------------------------------------------------------------------- thresholds


def test_a_threshold_the_yaml_lacks_is_an_error_not_a_default() -> None:
    th = Thresholds.of("fig2", {"rate_tol": 0.02})
    with pytest.raises(RankCollapseError, match=r"fig2.yaml: threshold 'min_samples' is missing"):
        rules.san_collapse({"complete": curve(-1.0)}, th)


def test_ranges_must_contain_their_value_and_name_a_set_threshold() -> None:
    with pytest.raises(RankCollapseError, match="outside its range"):
        Thresholds.of("s", {"rate_tol": 0.02}, {"rate_tol": [0.03, 0.05]})
    with pytest.raises(RankCollapseError, match="which verdict: does not set"):
        Thresholds.of("s", {"rate_tol": 0.02}, {"keep_min": [0.01, 0.1]})
    with pytest.raises(RankCollapseError, match="whole number"):
        Thresholds.of("s", {"min_samples": 2.5}).count("min_samples")


def test_judged_records_the_thresholds_a_rule_read_and_flips_inside_their_ranges() -> None:
    from rankcollapse.experiments.kit.claims import judged

    th = Thresholds.of("s", dict(TH.values), {"rate_tol": [0.01, 0.05]})
    # LN curve falling at -0.03/layer: 'falling' at rate_tol 0.02, 'kept' at 0.05 -> a threshold-sensitive row
    san, ln = {"causal": curve(-0.5)}, {"causal": curve(-0.03, noise=0.0)}
    j = judged(lambda t: rules.ln_stops(san, ln, t, t["keep_min"]), th)
    assert j.verdict is NOT_REPRODUCED
    assert {"rate_tol", "keep_min", "min_samples"} <= j.used
    assert ("rate_tol", 0.05, REPRODUCED) in j.flips
    steady = judged(lambda t: rules.ln_stops(san, {"causal": curve(0.0, noise=0.0)}, t, t["keep_min"]), th)
    assert steady.flips == ()


# ----------------------------------------------------------------------------- statuses


def test_a_status_is_one_of_the_named_words_and_a_misspelt_one_is_refused() -> None:
    """Status words are the enum, never bare strings: a typo cannot make a new word that no rule knows."""
    assert collapse_status(curve(-0.5), TH).name is StatusName.COLLAPSING
    assert Status("at floor", "").name is StatusName.AT_FLOOR  # the word coerces to its member
    with pytest.raises(ValueError):
        Status("colapsing", "")
    assert f"{StatusName.TOO_FEW}: x" == "too few samples: x"  # evidence prints the plain word


def test_a_conditions_judgement_is_a_part_as_it_is() -> None:
    """One class for a statement's judgement and a condition's: ``per_group`` combines the groups' own
    judgements (the failing group's cause and words decide; n is the smallest group's)."""
    floor = Judgement(NOT_REPRODUCED, "at the floor", "float32 at the floor from t=3", "precision floor", 7)
    fine = Judgement(REPRODUCED, "falls", n=5)
    j = combine.per_group({"float64": lambda th: fine, "float32": lambda th: floor}, TH)
    assert j.verdict is NOT_REPRODUCED and j.cause_kind == "precision floor" and j.cause == floor.cause
    assert j.n == 5 and j.decided_by == "float32: at the floor"
    assert j.evidence == "float64: falls | float32: at the floor"


def test_collapse_status_each_class() -> None:
    assert collapse_status(curve(-0.5), TH).name is StatusName.COLLAPSING
    assert collapse_status(curve(0.0), TH).name is StatusName.NOT_COLLAPSING
    assert collapse_status(curve(-5.0, dtype="float32"), TH).name is StatusName.AT_FLOOR
    assert collapse_status(curve(-0.02, noise=0.3), TH).name is StatusName.UNCLEAR
    assert collapse_status(curve(-0.5, n=3), TH).name is StatusName.TOO_FEW
    st = collapse_status(curve(-0.5, late_rate=0.0), TH)  # an early drop that levels off
    assert st.name is StatusName.NOT_COLLAPSING and "levels off" in st.words


def test_level_status_each_class() -> None:
    assert level_status(curve(0.0), TH, 0.05).name is StatusName.KEPT
    assert level_status(curve(0.0, start=0.01), TH, 0.05).name is StatusName.LOW
    assert level_status(curve(0.0, start=0.01), TH, None).name is StatusName.KEPT
    assert level_status(curve(-0.5), TH, None).name is StatusName.FALLING
    assert level_status(curve(0.3, q="mu"), TH, None).name is StatusName.GROWING
    assert level_status(curve(-0.5, late_rate=0.0), TH, None).name is StatusName.KEPT
    assert "over it" in level_status(curve(-0.5), TH, None).words  # the effect over the last half, in words
    # growing, but not surely past +rate_tol: not flat for sure either -> unclear, never kept
    assert level_status(curve(0.02, q="mu", noise=0.05, seed=3), TH, None).name is StatusName.UNCLEAR


def test_stability_status_each_class() -> None:
    assert stability_status(curve(0.0, q="mu"), TH).name is StatusName.STABLE
    assert stability_status(curve(0.5, q="mu"), TH).name is StatusName.UNSTABLE
    assert stability_status(curve(0.15, q="mu"), TH).name is StatusName.UNCLEAR
    # I(12) = 3 >= ln 10
    assert stability_status(curve(0.25, q="mu", noise=0.0), TH).name is StatusName.UNSTABLE


# ----------------------------------------------------------------------------- Figs. 2 / 6


def test_san_collapse_verdicts_and_causes() -> None:
    assert rules.san_collapse({"complete": curve(-1.0), "window": curve(-0.3)}, TH).verdict == REPRODUCED
    j = rules.san_collapse({"complete": curve(-1.0), "window": curve(0.0)}, TH)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "measured otherwise" and "window" in j.cause
    j = rules.san_collapse({"complete": curve(-1.0, n=2)}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small" and "min_samples = 4" in j.cause


def test_an_undecided_comparison_names_the_samples_that_would_decide_it() -> None:
    j = rules.san_collapse({"causal": curve(-0.02, noise=0.3)}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert j.undecided
    # in samples, never "n" (n counts tokens): "undecided at 16 samples: ...; about 40 samples would ..."
    assert re.search(r"undecided at \d+ samples: .*; about \d+ samples would decide it", j.cause), j.cause
    assert "n =" not in j.cause and "n ≈" not in j.cause


def test_margin_needed_n_is_the_documented_formula() -> None:
    """The least m at which the same gap, with se shrunk by sqrt(n / m), is decided by z(m)."""
    m = Margin("x", value=-0.016, se=0.0073 / 2, threshold=-0.02, n=64)
    assert not m.decided
    need = m.needed_n()
    assert need is not None and need > 64

    def at(k: int) -> Margin:
        return Margin("x", m.value, m.se * math.sqrt(64 / k), m.threshold, k)

    assert at(need).decided and not at(need - 1).decided
    # close to the normal approximation n (2 se / gap)^2 at this n, a little above it (t > z)
    assert math.ceil(64 * (2 * 0.0073 / 2 / 0.004) ** 2) <= need <= 1.05 * 64 * (2 * 0.0073 / 2 / 0.004) ** 2
    assert Margin("x", -0.02, 0.01, -0.02, 8).needed_n() is None  # on the threshold: never decided
    # a rounding-size gap (the full run's Fig. 2 log-rate difference of two coinciding curves) doubled m
    # past int64 and crashed scipy's t quantile: beyond MAX_NEEDED_N no sample decides it
    assert Margin("x", 1e-19, 0.01, 0.0, 8).needed_n() is None
    assert Margin("x", 1e-3, 1.0, 0.0, 8).needed_n() == pytest.approx(8 * (2 / 1e-3) ** 2, rel=1e-3)
    assert Margin("x", 1e-5, 1.0, 0.0, 8).needed_n() is None  # about 3.2e11 samples: more than 1e9
    assert Margin("x", -0.1, 0.01, -0.02, 8).decided


def test_critical_value_is_student_t_at_the_looks_level() -> None:
    """z(n) = t(1 - ALPHA / (2 K), n - 1): 2 for large n and one look; wider for few samples and for
    more looks; infinite below 2 samples."""
    from scipy import stats

    from rankcollapse.experiments.kit.curves import ALPHA, looks, z

    assert z() == pytest.approx(2.0, rel=1e-12) and ALPHA == pytest.approx(0.0455, abs=1e-4)
    assert z(4) == pytest.approx(stats.t.ppf(1 - ALPHA / 2, 3), rel=1e-12) and z(4) > z(64) > z()
    assert z(1) == math.inf
    with looks(7):
        assert z(64) == pytest.approx(stats.t.ppf(1 - ALPHA / 14, 63), rel=1e-12)
        with looks(1):
            assert z(64) < 2.1
    assert z(64) < 2.1  # restored
    with pytest.raises(ValueError):
        with looks(0):
            pass


def test_local_slower_verdicts() -> None:
    radius = {"complete": 1, "causal-window:w=1": 127}
    right = {"complete, float64": curve(-1.0), "causal-window:w=1, float64": curve(-0.1)}
    assert rules.local_slower(right, radius, TH).verdict == REPRODUCED
    wrong = {"complete, float64": curve(-0.1), "causal-window:w=1, float64": curve(-1.0)}
    assert rules.local_slower(wrong, radius, TH).verdict == NOT_REPRODUCED
    same = {"complete, float64": curve(-0.5, seed=1), "causal-window:w=1, float64": curve(-0.5, seed=2)}
    assert rules.local_slower(same, radius, TH).verdict == INCONCLUSIVE
    # pairs are compared within a dtype only
    mixed = {"complete, float32": curve(-1.0, dtype="float32"), "causal-window:w=1, float64": curve(-0.1)}
    assert rules.local_slower(mixed, radius, TH).cause_kind == "not testable"


def test_ln_stops_verdicts() -> None:
    san = {"causal": curve(-0.5)}
    assert rules.ln_stops(san, {"causal": curve(0.0)}, TH, 0.05).verdict == REPRODUCED
    san_floor = {"causal": curve(-5.0, dtype="float32")}  # a SAN at the floor has collapsed too
    assert rules.ln_stops(san_floor, {"causal": curve(0.0, dtype="float32")}, TH, 0.05).verdict == REPRODUCED
    j = rules.ln_stops({"causal": curve(0.0)}, {"causal": curve(0.0)}, TH, 0.05)  # LN makes no difference
    assert j.verdict == NOT_REPRODUCED and "does not collapse either" in j.evidence
    j = rules.ln_stops(san, {"causal": curve(-5.0, dtype="float32")}, TH, 0.05)  # collapsed, not stabilised
    assert (
        j.verdict == NOT_REPRODUCED
        and j.cause_kind == "precision floor"
        and "float32 precision floor" in j.cause
    )
    assert rules.ln_stops(san, {"causal": curve(-0.5)}, TH, 0.05).verdict == NOT_REPRODUCED
    assert rules.ln_stops(san, {"causal": curve(0.0, noise=0.4)}, TH, 0.05).verdict == INCONCLUSIVE


def test_kept_stable_verdicts() -> None:
    assert rules.kept_stable({"causal": curve(0.0)}, TH, 0.05).verdict == REPRODUCED
    assert rules.kept_stable({"causal": curve(-0.4)}, TH, 0.05).verdict == NOT_REPRODUCED
    assert rules.kept_stable({"causal": curve(0.3, q="mu")}, TH, None).verdict == NOT_REPRODUCED  # growing
    assert (
        rules.kept_stable({"causal": curve(-5.0, dtype="float32")}, TH, 0.05).cause_kind == "precision floor"
    )
    assert rules.kept_stable({"causal": curve(-0.03, noise=0.2)}, TH, 0.05).verdict == INCONCLUSIVE


def test_skip_unstable_verdicts() -> None:
    assert rules.skip_unstable({"causal": curve(0.5, q="mu")}, TH).verdict == REPRODUCED
    assert rules.skip_unstable({"causal": curve(0.0, q="mu")}, TH).verdict == NOT_REPRODUCED
    early = curve(1.0, q="mu", late_rate=0.0, noise=0.0)  # unstable early, flat later: not "more so deeper"
    assert rules.skip_unstable({"causal": early}, TH).verdict == INCONCLUSIVE
    v = samples(0.0)
    v[0, 7:] = np.inf
    j = rules.skip_unstable({"causal": Curve.from_samples(v, "mu", "float32")}, TH)
    assert j.verdict == REPRODUCED and "non-finite from t=7" in j.evidence
    deep = curve(0.05, q="mu", layers=128, noise=0.0)
    assert "I(t=12)" in rules.skip_unstable({"causal": deep}, TH).evidence  # the 12-layer answer beside


def test_full_stable_verdicts() -> None:
    assert rules.full_stable({"complete": curve(0.0)}, TH).verdict == REPRODUCED
    assert rules.full_stable({"complete": curve(0.5, q="mu")}, TH).verdict == NOT_REPRODUCED
    j = rules.full_stable({"complete": curve(-5.0, dtype="float32")}, TH)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "precision floor"
    assert rules.full_stable({"complete": curve(0.15, q="mu")}, TH).verdict == INCONCLUSIVE


def test_raw_mu_that_underflows_to_zero_has_collapsed_not_levelled_off() -> None:
    v = samples(-3.0, n=4)
    v[:, 6:] = 0.0  # float32 raw mu rounded to 0 for the last half: not a level
    c = Curve.from_samples(v, "mu", "float32")
    st = collapse_status(c, TH)
    assert st.name is StatusName.AT_FLOOR and "underflows to 0 in float32 from t=6" in st.words
    assert level_status(c, TH, None).name is StatusName.AT_FLOOR
    assert rules.san_collapse({"complete": c}, TH).verdict == REPRODUCED


def underflowed_x(n: int = 4, t: int = 9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(raw mu, mu_rel, zero) of a SAN whose whole X rounds to 0 from layer ``t`` (SmolLM2's in float32):
    raw mu = 0 there, mu_rel = 0/0 stored as NaN."""
    rel = samples(-0.5, n=n)
    raw = rel * np.exp(-1.0 * np.arange(rel.shape[1]))
    zero = np.zeros_like(rel, dtype=bool)
    zero[:, t:] = True
    raw[zero], rel[zero] = 0.0, np.nan
    return raw, rel, zero


def test_an_x_that_underflows_to_zero_is_at_the_floor_as_a_raw_mu_that_does() -> None:
    """One treatment of an underflow (Theorem 1's raw mu rounding to 0, SmolLM2's whole X rounding to 0):
    an exact 0 is below the floor, in raw mu and in mu_rel (raw mu = 0 <= 32 eps ||X||_F = 0), whether the
    curve is built from the samples or read back from its stored rows. The old reading called mu_rel of
    such an X non-finite (0/0) and its row inconclusive."""
    raw, rel, zero = underflowed_x()
    from_samples = Curve.from_samples(rel, "mu_rel", "float32", zero=zero)
    frame = pd.DataFrame(curve_rows({"mu": raw, "mu_rel": rel}, "float32", zero))
    stored = Curve.from_rows(frame, "mu_rel", "float32", 4)
    raw_stored = Curve.from_rows(frame, "mu", "float32", 4)
    for c in (from_samples, stored, raw_stored):
        assert c.first_nonfinite() is None and c.first_at_floor() == 9
        st = collapse_status(c, TH)
        assert st.name is StatusName.AT_FLOOR and "overflow" not in st.words
        assert rules.san_collapse({"own, float32": c}, TH).verdict == REPRODUCED
    assert "||X||_F underflows to 0 in float32 from t=9" in collapse_status(stored, TH).words
    assert "raw mu underflows to 0 in float32 from t=9" in collapse_status(raw_stored, TH).words


def test_an_overflow_flagged_as_a_zero_x_stays_an_overflow() -> None:
    """SmolLM2's SAN in float32: its token norm grows x19 per layer and raw mu overflows at t = 18, where
    mu_rel = inf / inf is NaN and the measurement flags a 'zero' X (finite tokens, NaN mu_rel). A 0/0
    needs raw mu = 0: this is an overflow, non-finite, never an underflow at the floor (the stored rows of
    the published run read "||X||_F underflowed to 0")."""
    rel = samples(-0.01, n=4, layers=24)
    raw = rel * 19.0 ** np.arange(25)
    zero = np.zeros_like(rel, dtype=bool)
    zero[:, 18] = True
    raw[:, 18:], rel[:, 18:] = np.nan, np.nan
    frame = pd.DataFrame(curve_rows({"mu": raw, "mu_rel": rel}, "float32", zero))
    assert (frame["zero_share"] == 0).all()
    old = frame.assign(zero_share=np.where(frame["layer"] == 18, 1.0, 0.0))  # rows an earlier release wrote
    for rows in (frame, old):
        c = Curve.from_rows(rows, "mu_rel", "float32", 4)
        st = collapse_status(c, TH)
        assert c.first_nonfinite() == 18 and st.name is StatusName.NON_FINITE
        assert "overflow" in st.words and "underflows" not in st.words


def test_a_curve_that_turns_non_finite_is_inconclusive_for_that_cause_not_for_want_of_samples() -> None:
    """A curve that overflows: more samples cannot decide it, so the row must not read 'sample too small'
    (nor be extended by --until-decided). (An X that rounds to 0 is not one: it sits at the floor.)"""
    v = samples(-0.5, n=64)
    v[:, 9:] = np.nan
    c = Curve.from_samples(v, "mu_rel", "float32")
    j = rules.san_collapse({"causal": c, "complete": curve(-0.5, n=64)}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "non-finite"
    assert "overflow" in j.cause and j.cause.startswith("causal: ")
    few = samples(-0.5, n=2)
    few[:, 9:] = np.nan
    k = rules.san_collapse({"causal": Curve.from_samples(few, "mu_rel", "float32")}, TH)
    assert k.verdict == INCONCLUSIVE and k.cause_kind == "non-finite"  # the curve's own state comes first


# ----------------------------------------------------------------------------- Figs. 3 / 7


def dqk(rates: dict[float, float], **kw: object) -> dict[float, Curve]:
    return {d: curve(r, seed=i, **kw) for i, (d, r) in enumerate(rates.items())}


def test_dqk_slows_verdicts() -> None:
    assert rules.dqk_slows({"complete": dqk({1 / 64: -0.1, 1.0: -0.5, 64.0: -1.0})}, TH).verdict == REPRODUCED
    assert (
        rules.dqk_slows({"complete": dqk({1 / 64: -1.0, 1.0: -0.5, 64.0: -0.1})}, TH).verdict
        == NOT_REPRODUCED
    )
    flat = {"complete": dqk({1 / 64: -0.5, 64.0: -0.5}, noise=0.1)}
    assert rules.dqk_slows(flat, TH).verdict == INCONCLUSIVE


def test_dqk_global_verdicts() -> None:
    big, small = dqk({1 / 64: -0.1, 64.0: -1.0}), dqk({1 / 64: -0.4, 64.0: -0.5})
    assert rules.dqk_global({"complete": big, "window:w=1": small}, TH).verdict == REPRODUCED
    assert rules.dqk_global({"complete": small, "window:w=1": big}, TH).verdict == NOT_REPRODUCED
    j = rules.dqk_global({"complete": big}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable"


def test_dqk_shallow_verdicts() -> None:
    shallow = {"complete": {1 / 64: curve(-0.1, late_rate=-0.5, seed=1), 64.0: curve(-1.0, late_rate=-0.5)}}
    assert rules.dqk_shallow(shallow, TH).verdict == REPRODUCED
    deep = {"complete": {1 / 64: curve(-0.5, late_rate=-0.1, seed=1), 64.0: curve(-0.5, late_rate=-1.0)}}
    assert rules.dqk_shallow(deep, TH).verdict == NOT_REPRODUCED
    none = {"complete": {1 / 64: curve(-0.5, seed=1, noise=0.1), 64.0: curve(-0.5, noise=0.1)}}
    assert rules.dqk_shallow(none, TH).verdict == INCONCLUSIVE


def test_a_sans_that_grows_is_left_out_of_the_dqk_rules_as_not_testable() -> None:
    growing = {"causal": dqk({1 / 64: 0.6, 64.0: 0.3}, q="mu")}
    j = rules.dqk("slows", growing, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable" and "does not collapse" in j.cause
    mixed = {"complete": dqk({1 / 64: -0.1, 64.0: -1.0}, q="mu"), **growing}
    j = rules.dqk("slows", mixed, TH)
    assert j.verdict == REPRODUCED and "left out (not a collapse): causal" in j.evidence


# ----------------------------------------------------------------------------- Figs. 4, 8, 9


def lay(
    values: list[float],
    n: int = 256,
    se: float | list[float] | None = None,
    unit: str = "samples",
    share: bool = False,
) -> Layered:
    """A per-layer estimate: ``values`` with standard error ``se`` (default: a share's own, else 1 %)."""
    m = np.asarray(values, dtype=float)
    if se is None:
        s = np.sqrt(np.clip(m * (1 - m), 0, None) / n) if share else 0.01 * np.abs(m)
    else:
        s = np.broadcast_to(np.asarray(se, dtype=float), m.shape).copy()
    return Layered("x", m, s, s * math.sqrt(n), n, unit, share)


def test_full_rank_is_judged_on_an_interval_at_every_layer() -> None:
    assert rules.full_rank(lay([1.0] * 13, share=True), TH).verdict == REPRODUCED
    assert rules.full_rank(lay([1.0] * 12 + [0.5], share=True), TH).verdict == NOT_REPRODUCED
    assert rules.full_rank(lay([1.0, 0.5, 1.0], share=True), TH).verdict == NOT_REPRODUCED  # every layer
    # 8 of 8 full rank: the Wilson interval reaches below 0.99, so 8 samples cannot decide it (the old rule
    # read "reproduced" from the share alone)
    j = rules.full_rank(lay([1.0] * 13, n=8, share=True), TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert j.key is not None and j.key.share and j.key.needed_n() > 8
    assert rules.full_rank(lay([1.0] * 13, n=2, share=True), TH).verdict == INCONCLUSIVE
    assert "E - 1" in rules.full_rank(lay([1.0] * 3, share=True), TH, "rank <= E - 1 = 127").evidence


def test_a_share_open_at_the_yaml_value_asks_for_samples_though_its_range_would_flip_it() -> None:
    """100 % of 128 excerpts at full rank against 95 %: the interval reaches below 95 % (open), 90 % would
    decide it, 99 % not. The full run printed "inconclusive for a reason more samples do not change
    (threshold)" and the sequential run never extended it; more samples decide it at the YAML's value."""
    from rankcollapse.experiments.kit.claims import judged

    th = Thresholds.of("test", dict(TH.values), {"full_rank_min": [0.9, 0.99]})
    j = judged(lambda t: rules.full_rank(lay([1.0] * 13, n=128, share=True), t), th)
    assert j.verdict == INCONCLUSIVE and j.flips and j.judgement.cause_kind == "sample too small"
    undecided, needed, interval = sampling_state(j, None, th, "threshold")
    assert undecided and needed is not None and needed > 128 and interval
    failed, _, _ = sampling_state(j, None, th, "failed runs")  # a cause samples cannot remove
    assert not failed
    decided = judged(lambda t: rules.full_rank(lay([1.0] * 12 + [0.5], n=32, share=True), t), th)
    assert not sampling_state(decided, None, th, "threshold")[0]


def test_sigma_ratio_verdicts_are_relative_to_the_rank_tolerance() -> None:
    tol32, tol64 = 768 * 1.19e-7, 768 * 2.2e-16
    assert rules.sigma_ratio(lay([0.1, 0.05]), [tol32, tol32], TH).verdict == REPRODUCED
    # the same ratio is measurable in float64 and not in float32: the dtype decides, not an absolute number
    assert rules.sigma_ratio(lay([1e-4, 1e-4]), [tol32, tol32], TH).verdict == NOT_REPRODUCED
    assert rules.sigma_ratio(lay([1e-4, 1e-4]), [tol64, tol64], TH).verdict == REPRODUCED
    assert rules.sigma_ratio(lay([0.1, 0.1], n=2), [tol32, tol32], TH).verdict == INCONCLUSIVE
    # a mean on the margin with a wide interval is open, not "reproduced"
    j = rules.sigma_ratio(lay([10.5 * tol32] * 2, se=5 * tol32), [tol32, tol32], TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"


def test_cos_grows_verdicts() -> None:
    d = 768  # isotropic level sqrt(2/(pi d)) = 0.029
    assert rules.cos_grows(lay([0.05, 0.3, 0.6], n=8, se=0.005), d, TH).verdict == REPRODUCED
    assert rules.cos_grows(lay([0.6, 0.3, 0.05], n=8, se=0.005), d, TH).verdict == NOT_REPRODUCED
    assert rules.cos_grows(lay([0.03, 0.05], n=8, se=0.0003), d, TH).verdict == INCONCLUSIVE  # not narrow
    assert rules.cos_grows(lay([0.3, 0.3], n=8, se=0.03), d, TH).cause_kind == "sample too small"
    # two random networks that agree within each excerpt but not with each other: the network is the unit
    j = rules.cos_grows(lay([0.2, 0.4], n=2, se=0.08, unit="networks"), d, TH)
    assert j.verdict == INCONCLUSIVE and "2 networks" in j.evidence


def test_dominant_sv_is_judged_per_layer_from_the_first_layer_with_the_embeddings_reported() -> None:
    assert rules.dominant_sv(lay([5.0, 8.0]), lay([0.01, 0.02]), TH).verdict == REPRODUCED
    # X(0) (the embedding lookup, sigma_1/sigma_2 near 1 at initialisation) is reported, not judged: the old
    # rule read "not reproduced" from it alone
    j = rules.dominant_sv(lay([1.1, 8.0, 6.0]), lay([0.01, 0.02, 0.02]), TH)
    assert j.verdict == REPRODUCED and "t=0: 1.1" in j.evidence
    assert rules.dominant_sv(lay([1.1, 8.0]), lay([0.01, 0.02]), TH, first=0).verdict == NOT_REPRODUCED
    assert rules.dominant_sv(lay([5.0, 1.2]), lay([0.01, 0.02]), TH).verdict == NOT_REPRODUCED
    assert rules.dominant_sv(lay([5.0, 8.0]), lay([0.01, 1e-6]), TH).verdict == NOT_REPRODUCED
    assert rules.dominant_sv(lay([5.0, 8.0], n=3), lay([0.01, 0.02], n=3), TH).verdict == INCONCLUSIVE
    j = rules.dominant_sv(lay([5.0, 2.05], se=0.1), lay([0.01, 0.02]), TH)
    assert j.verdict == INCONCLUSIVE and j.key is not None and "t=1" in j.key.what


def test_fig9_is_judged_on_the_negative_pairs_as_plotted_and_on_phi0_as_the_mechanism() -> None:
    # 0.01 % of the pairs negative (invisible in the histogram), yet every sample has phi(0) < 0
    plotted = rules.nonnegative_pairs(lay([1e-4], n=128, se=2e-5), TH, "'the / ##ule' (-0.02)")
    assert plotted.verdict == REPRODUCED and "'the / ##ule'" in plotted.evidence
    assert rules.nonnegative_pairs(lay([0.05], n=128, se=0.005), TH).verdict == NOT_REPRODUCED
    mech = rules.initial_cos(lay([0.0], n=128, share=True), TH, -0.02)
    assert mech.verdict == NOT_REPRODUCED and mech.cause_kind == "measured otherwise"
    assert rules.initial_cos(lay([1.0], n=512, share=True), TH, 0.1).verdict == REPRODUCED
    assert rules.initial_cos(lay([1.0], n=3, share=True), TH, 0.1).verdict == INCONCLUSIVE
    # 80 % of 512 samples: a majority, well below share_min for sure
    assert rules.initial_cos(lay([0.8], n=512, share=True), TH, -0.1).verdict == NOT_REPRODUCED


# ----------------------------------------------------------------------------- theorem checks


def test_every_run_verdicts() -> None:
    assert rules.every_run([("a", True, ""), ("b", True, "")]).verdict == REPRODUCED
    assert rules.every_run([("a", True, ""), ("b", False, "x")]).verdict == NOT_REPRODUCED
    j = rules.every_run([("a", True, ""), ("b", None, "stalled")])
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable"
    assert rules.every_run([]).verdict == INCONCLUSIVE


def test_collapses_verdicts() -> None:
    assert rules.collapses([("a", -0.5, False), ("b", None, True)], TH).verdict == REPRODUCED
    assert rules.collapses([("a", -1e-4, False)], TH).verdict == NOT_REPRODUCED
    assert rules.collapses([("a", None, False)], TH).verdict == INCONCLUSIVE


def test_a_bound_is_tested_only_by_runs_above_the_floor_and_not_vacuous() -> None:
    j = rules.bound_holds([("a", "consistent", False), ("b", "consistent", True), ("c", "vacuous", False)])
    assert j.verdict == REPRODUCED and "1 test the rate" in j.evidence and "1 reached the floor" in j.evidence
    assert rules.bound_holds([("a", "rate_exceeded", False)]).verdict == NOT_REPRODUCED
    j = rules.bound_holds([("a", "consistent", True), ("b", "consistent", True)])
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable"  # floor-reaching runs test no rate
    j = rules.bound_holds([("a", "vacuous", False)])
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "bound vacuous"


def test_at_least_spearman_and_pair_rules() -> None:
    assert rules.at_least([("a", 0.5)], TH, "keep_min").verdict == REPRODUCED
    assert rules.at_least([("a", 0.01)], TH, "keep_min").verdict == NOT_REPRODUCED
    assert rules.spearman_order({"window": (1.0, "")}, TH).verdict == REPRODUCED
    assert rules.spearman_order({"window": (-0.5, "")}, TH).verdict == NOT_REPRODUCED
    assert rules.spearman_order({"window": (0.5, "")}, TH).verdict == INCONCLUSIVE
    assert rules.spearman_order({"window": (math.nan, "")}, TH).cause_kind == "not testable"
    assert rules.pairs_ordered([("p", 0.1, 0.5)]).verdict == REPRODUCED
    assert rules.pairs_ordered([("p", 0.5, 0.1)]).verdict == NOT_REPRODUCED
    assert rules.pairs_ordered([]).verdict == INCONCLUSIVE


def test_every_cause_kind_has_a_builder_and_the_set_is_closed() -> None:
    assert set(causes.CAUSES) == {
        "precision floor",
        "norm effect",
        "stand-in differs",
        "not testable",
        "sample too small",
        "non-finite",
        "threshold",
        "bound vacuous",
        "untested",
        "no data",
        "failed runs",
        "measured otherwise",
    }
    for kind in causes.CAUSES:
        assert callable(getattr(causes, kind.replace(" ", "_").replace("-", "_")))


# ----------------------------------------------------------------------------- the referee's items (issue 26)


def raw_and_rel(mu_rel: np.ndarray, norm: np.ndarray, dtype: str = "float32") -> tuple[Curve, Curve]:
    """Raw mu and mu_rel curves of the same samples (mu = mu_rel ||X||_F), read back from stored rows."""
    rows = pd.DataFrame(curve_rows({"mu": mu_rel * norm, "mu_rel": mu_rel}, dtype, x_norm=norm))
    n = mu_rel.shape[0]
    return Curve.from_rows(rows, "mu", dtype, n), Curve.from_rows(rows, "mu_rel", dtype, n)


def early_fall_then_floor(layers: int = 128, fall_until: int = 32, dtype: str = "float32") -> np.ndarray:
    """mu_rel per sample: falls steadily to the dtype's floor by ``fall_until``, then rounding noise there
    (the causal curve of Fig. 6: raw mu 2.6e2 -> 1.5e-4 by t = 32, flat after)."""
    gen = np.random.default_rng(0)
    t = np.arange(layers + 1)
    floor = floor_rel(dtype)
    level = np.exp(np.log(0.8) + (np.log(floor / 4) - np.log(0.8)) * np.minimum(t / fall_until, 1.0))
    noise = np.exp(0.3 * gen.standard_normal((8, layers + 1)))
    return np.maximum(level * noise, floor / 8)


def test_a_curve_that_falls_to_the_floor_and_stays_is_never_kept_on_raw_mu_either() -> None:
    # raw mu with a constant token norm: flat over the last half (the old rule read its last half only and
    # called it "kept"); the floor is mu_rel's on the same samples
    rel = early_fall_then_floor()
    raw, _ = raw_and_rel(rel, np.full_like(rel, 300.0))
    san_raw, _ = raw_and_rel(rel / 10, np.full_like(rel, 300.0))
    # what the old rule saw: no trend in the last half
    assert level_status(raw, TH, None).name is not StatusName.FALLING
    st = trend_status(raw, TH, None)
    assert st.name is StatusName.AT_FLOOR and st.floor_t is not None and st.floor_t <= 40
    j = rules.ln_stops({"causal, float32": san_raw}, {"causal, float32": raw}, TH, None)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "precision floor"


def test_no_decreasing_trend_is_read_from_the_first_block_over_the_whole_curve() -> None:
    # falls x0.9 per layer for the first half, then flat well above the floor: the last half alone is "kept"
    v = samples(-0.1, layers=24, late_rate=0.0, noise=0.002)
    c = Curve.from_samples(v, "mu_rel", "float64")
    assert level_status(c, TH, None).name is StatusName.KEPT  # the old reading
    assert trend_status(c, TH, None).name is StatusName.FALLING
    san = Curve.from_samples(samples(-0.5, layers=24, noise=0.002), "mu_rel", "float64")
    j = rules.ln_stops({"causal, float64": san}, {"causal, float64": c}, TH, None)
    assert j.verdict == NOT_REPRODUCED and "falling" in j.decided_by


def test_raw_mu_at_the_float64_floor_is_collapsed_and_asks_for_no_more_samples() -> None:
    # Theorem 1's raw mu: falls to the float64 floor, then rounding noise (last-half rate ~ 0 ± spread)
    rel = early_fall_then_floor(layers=128, fall_until=40, dtype="float64")
    raw, _ = raw_and_rel(rel, np.ones_like(rel), "float64")
    old = Curve.from_samples(
        rel, "mu", "float64"
    )  # raw mu without mu_rel beside it: the old floor (underflow)
    assert collapse_status(old, TH).name in (StatusName.UNCLEAR, StatusName.NOT_COLLAPSING)
    st = collapse_status(raw, TH)
    assert st.name is StatusName.AT_FLOOR and not st.margins
    j = rules.san_collapse({"causal, float64": raw}, TH)
    assert j.verdict == REPRODUCED and j.cause_kind == "" and not j.undecided


def test_the_row_prints_the_condition_that_decided_it() -> None:
    good = Curve.from_samples(samples(-0.5, noise=0.01), "mu_rel", "float64")
    flat = Curve.from_samples(samples(0.0, noise=0.01), "mu_rel", "float64")
    j = rules.san_collapse({"window:w=1, float64, SAN": good, "causal, float64, SAN": flat}, TH)
    assert j.verdict == NOT_REPRODUCED
    assert j.decided_by.startswith("causal, float64, SAN") and j.key is not None
    assert j.key.what.startswith("causal, float64, SAN") and j.key.decided
    _, _, interval = sampling_state(Judged(j, frozenset()), None, TH, j.cause_kind)
    assert interval.startswith("causal, float64, SAN")  # not the window:w=1 curve's interval
    ok = rules.san_collapse(
        {"a, float64": good, "b, float64": Curve.from_samples(samples(-0.3), "mu_rel", "float64")}, TH
    )
    assert (
        ok.verdict == REPRODUCED and ok.key is not None and ok.key.decided
    )  # a decided row: a decided interval


def two_networks(rate_a: float, rate_b: float, layers: int = 12) -> list[Curve]:
    """Two networks (weight draws) whose 8 excerpts each agree closely, but not with each other."""
    return [
        Curve.from_samples(samples(rate, layers=layers, noise=0.001, seed=k), "mu_rel", "float64")
        for k, rate in enumerate((rate_a, rate_b))
    ]


def test_the_network_is_the_unit_of_a_random_init_row() -> None:
    nets = two_networks(-0.06, -0.04)
    pooled = Curve.pool(nets)  # the old unit: 16 excerpts, as if independent
    per_net = Curve.pool(nets, NETWORK)
    assert pooled.rate(0, 12).n == 16 and per_net.rate(0, 12).n == 2
    assert pooled.rate(0, 12).hi < -0.02  # 16 excerpts "decide" what two weight draws cannot
    assert collapse_status(pooled, TH).name is StatusName.COLLAPSING
    assert collapse_status(per_net, TH).name is StatusName.UNCLEAR
    assert "2 networks" in per_net.rate(0, 12).text()
    one = Curve.pool(nets[:1], NETWORK)
    assert one.networks == 1 and math.isinf(one.rate(0, 12).half)  # one network: no interval at all


def test_a_row_of_many_conditions_uses_a_bonferroni_level() -> None:
    # eight conditions, each a comparison 2.5 standard errors past its threshold: alone each decides; as
    # eight chances for "any fails" they do not (the old rule read "not reproduced")
    m = [Margin(f"c{i}", 2.5, 1.0, 0.0, 1000) for i in range(8)]
    assert all(x.decided for x in m)
    with conditions(8):
        inside = [Margin(f"c{i}", 2.5, 1.0, 0.0, 1000) for i in range(8)]
    assert not any(x.decided for x in inside) and inside[0].tests == 8
    assert z(None, 8) > z(None, 1)
    with conditions(2), conditions(4):
        assert current_tests() == 8  # nested conditions multiply


def test_stable_in_certain_directions_is_judged_on_the_spectrum_and_directional_starts() -> None:
    # saddles: stable directions whose starts return, an unstable one too, no nearby start back (the old
    # rule, "some nearby start comes back", read them "not reproduced")
    saddles = {2: [(1, 1), (2, 2)], 3: [(2, 2), (0, 0)]}
    assert rules.stable_in_certain_directions(saddles, {}).verdict == REPRODUCED
    assert rules.stable_in_certain_directions({2: [(0, 0), (0, 0)]}, {}).verdict == NOT_REPRODUCED
    j = rules.stable_in_certain_directions({2: [(2, 1)]}, {})  # spectrum and map disagree
    assert j.verdict == INCONCLUSIVE
    assert rules.stable_in_certain_directions({2: []}, {}).cause_kind == "not testable"


def test_stable_directions_without_a_returning_start_do_not_reproduce_small_regions_of_attraction() -> None:
    # N = d = 4: every rank has stable directions whose starts return (the first half holds), but no
    # nearby start comes back at rank 3 or 4, even with token 1 held; the old single rule read the whole
    # statement "reproduced"
    directions = {2: [(4, 4)], 3: [(3, 3), (2, 2)], 4: [(1, 1)]}
    basins = {2: [(0.5, 0.0), (0.0, 0.0)], 3: [(0.0, 0.0), (0.0, 0.0)], 4: [(0.0, 0.0)]}
    assert rules.stable_in_certain_directions(directions, {}).verdict == REPRODUCED  # the old rule
    j = rules.regions_of_attraction(basins, {3: "2 equilibria, 0 of 16 starts back"})
    assert j.verdict == NOT_REPRODUCED
    assert j.decided_by.startswith("rank 3: 2 equilibria, 0 of 16 starts back")  # the first failing rank
    assert j.cause_kind == "measured otherwise"


def test_regions_of_attraction_judge_the_held_protocol_and_name_the_weakest_rank() -> None:
    # token 1 held: some equilibrium of every rank draws starts back; every token perturbed: none does
    basins = {2: [(0.75, 0.0), (0.0, 0.0)], 3: [(0.25, 0.0)]}
    j = rules.regions_of_attraction(basins, {2: "rank-2 words", 3: "rank-3 words"})
    assert j.verdict == REPRODUCED and j.decided_by == "rank 3: rank-3 words"
    perturbed_only = {2: [(0.0, 0.5)]}  # the perturbed protocol alone never reproduces it
    assert rules.regions_of_attraction(perturbed_only, {}).verdict == NOT_REPRODUCED
    assert rules.regions_of_attraction({2: []}, {}).cause_kind == "not testable"


def test_stable_directions_name_the_rank_with_the_fewest_saddles() -> None:
    ranks = {2: [(1, 1), (2, 2)], 3: [(2, 2), (0, 0)]}
    j = rules.stable_in_certain_directions(ranks, {2: "two", 3: "one"})
    assert j.verdict == REPRODUCED and j.decided_by == "rank 3: one"


def test_a_bound_tested_at_radius_one_only_says_so() -> None:
    runs = [
        ("complete", "consistent", False, 1.0),
        ("causal", "consistent", False, 1.0),
        ("window", "vacuous", False, 16.0),
    ]
    j = rules.bound_holds(runs)
    assert j.verdict == REPRODUCED and j.scope == "tested at r = 1 only"
    assert rules.bound_holds([("a", "consistent", False, 1.0), ("b", "consistent", False, 4.0)]).scope == ""


# ----------------------------------------------------------------------------- power_law (a slope in log t)

POWER_TH = Thresholds.of("test", {"min_samples": 4, "rate_tol": 0.02, "exponent_tol": 0.25})


def power_curve(
    exponent: float, *, layers: int = 64, n: int = 8, noise: float = 0.01, seed: int = 0
) -> Curve:
    """[n, layers+1] samples of ``0.5 (1 + t)^exponent`` times a little per-sample noise (in log)."""
    gen = np.random.default_rng(seed)
    t = np.arange(layers + 1, dtype=float)
    logs = math.log(0.5) + exponent * np.log1p(t) + noise * gen.standard_normal((n, layers + 1))
    return Curve.from_samples(np.exp(logs), "mu_rel", "float64")


def test_a_decay_as_one_over_t_has_slope_minus_one_in_log_t() -> None:
    j = rules.power_law({"pre, float64": power_curve(-1.0, noise=0.0)}, -1.0, POWER_TH)
    # (1 + t)^-1 over layers 32-64: the slope in log t is -log(65 / 33) / log 2, not quite -1
    assert j.verdict == REPRODUCED
    assert j.margins[0].value == pytest.approx(-math.log(65 / 33) / math.log(2), rel=1e-9)


def test_a_quadratic_decay_is_faster_than_t_to_the_minus_one() -> None:
    j = rules.power_law({"pre, float64": power_curve(-2.0)}, -1.0, POWER_TH)
    assert j.verdict == NOT_REPRODUCED and "faster than t^-1" in j.cause


def test_an_exponential_decay_is_not_a_power_law() -> None:
    # x0.9 per layer: the slope in log t over layers 32-64 is 32 log(0.9) / log 2 = -4.9
    j = rules.power_law({"post, float64": curve(math.log(0.9), layers=64)}, -1.0, POWER_TH)
    assert j.verdict == NOT_REPRODUCED and "faster than" in j.cause


def test_a_level_curve_decays_slower_than_the_power_law() -> None:
    j = rules.power_law({"pre, float64": power_curve(0.0)}, -1.0, POWER_TH)
    assert j.verdict == NOT_REPRODUCED and "slower than t^-1" in j.cause


def test_a_slope_at_the_edge_of_the_tolerance_is_open_and_too_few_is_inconclusive() -> None:
    edge = rules.power_law({"pre": power_curve(-1.25, noise=0.3, n=4)}, -1.0, POWER_TH)
    assert edge.verdict == INCONCLUSIVE and edge.cause_kind == "sample too small"
    few = rules.power_law({"pre": power_curve(-1.0, n=3)}, -1.0, POWER_TH)
    assert few.verdict == INCONCLUSIVE and "3" in few.cause


def test_a_curve_at_its_floor_cannot_show_a_power_law() -> None:
    j = rules.power_law({"post, float64": curve(-2.0, layers=64)}, -1.0, POWER_TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable" and "floor" in j.cause


def test_power_law_counts_both_sides_of_each_curve_in_bonferroni() -> None:
    """Four networks whose slopes spread by 0.07 in log t: inside the tolerance for sure at one curve's two
    comparisons, open at two curves' four."""
    spread = [power_curve(-1.0 + 0.07 * (k - 1.5), noise=0.0, seed=k) for k in range(4)]
    alone = rules.power_law({"a": Curve.pool(spread, NETWORK)}, -1.0, POWER_TH)
    pooled = Curve.pool(spread, NETWORK)
    wide = rules.power_law({"a": pooled, "b": pooled}, -1.0, POWER_TH)
    assert (alone.verdict, wide.verdict) == (REPRODUCED, INCONCLUSIVE)


def test_largest_pins_every_verdict() -> None:
    """One estimate (a window mean over networks) against every other: above all for sure reproduced, below
    one for sure not reproduced, overlapping inconclusive, fewer than 2 networks sample too small."""
    def one(mean: float, se: float, n: int = 6, unit: str = "networks") -> Layered:
        sd = np.array([se * math.sqrt(n)])
        return Layered("speed", np.array([mean]), np.array([se]), sd, n, unit)

    ahead = {"peri": one(0.5, 0.01), "pre": one(0.3, 0.01), "post": one(0.2, 0.01)}
    assert rules.largest(ahead, "peri", TH, "speed").verdict == REPRODUCED
    behind = {"peri": one(0.5, 0.01), "pre": one(0.3, 0.01), "post": one(0.7, 0.01)}
    j = rules.largest(behind, "peri", TH, "speed")
    assert j.verdict == NOT_REPRODUCED and "peri vs post" in j.evidence
    close = {"peri": one(0.5, 0.05), "pre": one(0.45, 0.05)}
    assert rules.largest(close, "peri", TH, "speed").verdict == INCONCLUSIVE
    # 0.5 vs 0.44 with se 0.01 each: decided with one comparison, open under Bonferroni over 20
    near = {"peri": one(0.5, 0.01), **{f"p{k}": one(0.44, 0.01) for k in range(20)}}
    assert rules.largest({"peri": near["peri"], "p0": near["p0"]}, "peri", TH, "speed").verdict == REPRODUCED
    assert rules.largest(near, "peri", TH, "speed").verdict == INCONCLUSIVE
    few = {"peri": one(0.5, 0.001, 3, "samples"), "pre": one(0.1, 0.001, 3, "samples")}  # < min_samples
    j = rules.largest(few, "peri", TH, "speed")
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert rules.largest({"pre": one(0.3, 0.01)}, "peri", TH, "speed").cause_kind == "not testable"


# ------------------------------------------------------------------------ rates before the floor (issue 40)


def floored(rate: float, **kw: object) -> Curve:
    """A float32 mu_rel curve falling at ``rate`` per layer from 0.5: it reaches the float32 floor
    (3.8e-6) once ``0.5 exp(rate t)`` does (rate -6: t = 2; rate -15: t = 1, no rate above it)."""
    return curve(rate, dtype="float32", **kw)


def test_a_rate_is_measured_before_the_floor_or_not_at_all() -> None:
    """Curve.rate, the one rate: cut at the last layer with no sample at the floor, never averaged
    through it (the old rate of a floor-reaching curve was the floor's own, ln(32 eps / 0.5) / L)."""
    c = floored(-2.0)
    r = c.rate(0, 12)
    assert c.above_floor() == 5 and (r.start, r.end, r.floor_t) == (0, 5, 6) and r.cut and r.measured
    assert r.mean == pytest.approx(-2.0, abs=0.05)  # through the floor: about -0.98
    assert "before the floor at t=6" in r.text()
    whole = curve(-2.0)  # float64: never at its floor over 12 layers
    assert whole.rate(0, 12).floor_t is None and not whole.rate(0, 12).cut
    gone = floored(-15.0).rate(0, 12)
    assert not gone.measured and math.isnan(gone.mean) and gone.floor_t == 1
    assert "fewer than 2 layers above it" in gone.text()
    nets = Curve.pool([floored(-2.0, seed=k) for k in range(3)], NETWORK)
    assert nets.rate(0, 12).end == 5 and nets.rate(0, 12).mean == pytest.approx(-2.0, abs=0.05)


def test_local_slower_compares_rates_above_the_floor_not_the_floors_own() -> None:
    """Gaussian SAN, 128 layers: complete and causal-window both reach the float32 floor, so their rates
    through the floor were both ln(32 eps)/L and read 'not distinguishable'. Above the floor the more
    local mask is slower; a curve at the floor from t = 1 has no rate (inconclusive, that cause)."""
    radius = {"complete": 1, "causal-window:w=1": 127}
    both = {"complete, float32": floored(-6.0), "causal-window:w=1, float32": floored(-2.0, seed=1)}
    j = rules.local_slower(both, radius, TH)
    assert j.verdict == REPRODUCED and "before the floor at t=2" in j.evidence
    early = {"complete, float32": floored(-15.0), "causal-window:w=1, float32": floored(-2.0, seed=1)}
    j = rules.local_slower(early, radius, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "precision floor"
    assert "fewer than 2 layers above it" in j.cause and j.cause.startswith("complete")


def test_dqk_slows_reads_no_effect_from_a_curve_at_the_floor() -> None:
    """d_qk = 64 at the floor from t = 1: its rate over the first layers was the floor's, making a large
    'effect' of d_qk (the old rule: reproduced); it has no rate there."""
    j = rules.dqk_slows({"complete": {1 / 64: floored(-0.5), 64.0: floored(-15.0, seed=1)}}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "precision floor" and "complete" in j.cause


def test_dqk_effect_compares_both_rates_over_the_same_layers_above_the_floor() -> None:
    """d_qk = 64 reaches the floor at t = 3 (rate -5 until then); d_qk = 1/64 falls at -0.1 until t = 2
    and then at -3: over the common layers 0..2 the effect is +4.9, over mismatched windows (0..3 against
    0..2) it would be about +3.9."""
    t = np.arange(13.0)
    slow = np.where(t <= 2, -0.1 * t, -0.2 - 3.0 * (t - 2))
    gen = np.random.default_rng(0)
    small = Curve.from_samples(0.5 * np.exp(slow + 0.001 * gen.standard_normal((8, 13))), "mu_rel", "float32")
    big = floored(-5.0, noise=0.001, seed=1)
    assert big.above_floor() == 2
    j = rules.dqk_slows({"complete": {1 / 64: small, 64.0: big}}, TH)
    assert j.verdict == REPRODUCED and j.margins[0].value == pytest.approx(4.9, abs=0.05)


def test_dqk_global_reads_no_effect_from_a_curve_at_the_floor() -> None:
    big = {1 / 64: floored(-0.1), 64.0: floored(-15.0, seed=1)}  # through the floor: effect about +3.8
    small = {1 / 64: floored(-0.4, seed=2), 64.0: floored(-0.5, seed=3)}
    j = rules.dqk_global({"complete": big, "window:w=1": small}, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "precision floor" and j.cause.startswith("complete")


def test_dqk_shallow_reads_no_deep_effect_from_a_curve_at_the_floor() -> None:
    """d_qk = 64 sits at the floor from t = 6, so the deep layers (9..12) have no rate; through the floor
    the deep effect read -0.5 against a shallow +1.5 (the old rule: reproduced)."""
    curves = {"complete": {1 / 64: floored(-0.5, seed=1), 64.0: floored(-2.0)}}
    j = rules.dqk_shallow(curves, TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "precision floor" and "deep layers" in j.cause


def test_power_law_reads_no_slope_through_the_floor() -> None:
    """Three of eight samples reach the floor at t = 7, inside the last half (6..12): fewer than half, so
    the curve is not 'at floor', but its slope through the floor is the floor's: no slope is measured."""
    v = samples(-0.1, n=8, noise=0.001)
    v[:3, 7:] = 1e-7  # below the float32 floor
    c = Curve.from_samples(v, "mu_rel", "float32")
    assert c.first_at_floor() is None and c.above_floor() == 6
    j = rules.power_law({"pre": c}, -1.0, POWER_TH)
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "precision floor"


def test_power_law_reads_its_slope_in_log_t_over_the_layers_above_the_floor() -> None:
    """y = 0.9 / t with three of eight samples at the floor from t = 8: the slope over 6..7 (the last half
    above the floor) in log t is -1; read with the whole half's log(12 / 6) it would be -1.33."""
    t = np.arange(13.0)
    gen = np.random.default_rng(0)
    v = 0.9 / np.maximum(t, 1.0) * np.exp(0.0005 * gen.standard_normal((8, 13)))
    v[:3, 8:] = 1e-7
    c = Curve.from_samples(v, "mu_rel", "float32")
    assert c.above_floor() == 7
    j = rules.power_law({"pre": c}, -1.0, POWER_TH)
    assert j.verdict == REPRODUCED and "over layers 6-7" in j.evidence
    assert j.margins[0].value == pytest.approx(-1.0, abs=0.02)


def test_a_status_never_reads_a_rate_through_the_floor() -> None:
    """Three of eight samples at the floor from t = 1 (fewer than half: not 'at floor' by share): no rate
    can be measured above it, so the curve is judged at the floor, never by a rate through it."""
    v = samples(-0.3, n=8)
    v[:3, 1:] = 1e-7
    c = Curve.from_samples(v, "mu_rel", "float32")
    assert c.first_at_floor() is None and c.above_floor() == 0
    for st in (collapse_status(c, TH), level_status(c, TH, 0.05), trend_status(c, TH, 0.05)):
        assert st.name is StatusName.AT_FLOOR and "fewer than 2 layers above it" in st.words
    for t in (9, 7):  # the last half (6..12) read above the floor (6..8), or none of it: the rate above it
        late = samples(-0.3, n=8)
        late[:3, t:] = 1e-7
        st = collapse_status(Curve.from_samples(late, "mu_rel", "float32"), TH)
        assert st.name is StatusName.COLLAPSING and f"before the floor at t={t}" in st.words


# --------------------------------------------------------------- the deciding condition (issue 40, 5 and 7)


def fig6_ln(n: int = 4, layers: int = 24) -> tuple[Curve, Curve]:
    """Fig. 6's SAN + LayerNorm in float32: the complete mask at the floor from t = 2 (flat as plotted from
    X(1)), the causal mask falling 4.7 decades and at the floor from t = 22."""
    t = np.arange(layers + 1.0)
    gen = np.random.default_rng(0)
    noise = np.exp(0.01 * gen.standard_normal((n, layers + 1)))
    complete = np.where(t >= 2, 1e-7, np.where(t == 1, 0.03, 0.5)) * noise
    causal = 0.2 * np.exp(-0.5 * t) * noise
    return Curve.from_samples(complete, "mu_rel", "float32"), Curve.from_samples(causal, "mu_rel", "float32")


def test_ln_stops_is_decided_by_the_curve_that_moves_not_one_flat_at_the_floor() -> None:
    complete, causal = fig6_ln()
    masks = ("complete", "causal")
    san = {m: curve(-0.5, dtype="float32", layers=24, n=4, seed=i) for i, m in enumerate(masks)}
    j = rules.ln_stops(san, {"complete": complete, "causal": causal}, TH, 0.05)
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "precision floor"
    assert j.decided_by.startswith("causal: ") and j.cause.startswith("causal")  # the old rule: complete
    assert "flat at the floor from the start, deciding nothing by itself: complete (from t=2)" in j.evidence
    alone = rules.ln_stops({"complete": san["complete"]}, {"complete": complete}, TH, 0.05)
    assert alone.verdict == NOT_REPRODUCED and alone.decided_by.startswith("complete: ")  # nothing else


def test_a_statement_at_every_layer_is_decided_by_its_weakest_layer() -> None:
    """Fig. 4's sigma_min: 635 x the rank tolerance at t = 0 with a wide interval, 25.7 x at t = 12 with a
    narrow one. The old row named t = 0 (its interval the closest to the threshold in standard errors);
    the weakest layer, the one with the smallest margin, is t = 12, in decided_by and in the interval."""
    ratio = lay([635.0, 300.0, 25.7], se=[150.0, 20.0, 1.0])
    j = rules.sigma_ratio(ratio, [1.0, 1.0, 1.0], TH)
    assert j.verdict == REPRODUCED and j.decided_by.startswith("t=2: ")
    assert j.key is not None and j.key.what.startswith("t=2: ") and j.key.value == pytest.approx(25.7)
    _, _, interval = sampling_state(Judged(j, frozenset()), None, TH, j.cause_kind)
    assert interval.startswith("t=2: ")
    # not reproduced at two layers: the lower share decides (the old rule: the first failing layer)
    low = rules.full_rank(lay([0.5, 1.0, 0.2], share=True), TH)
    assert low.verdict == NOT_REPRODUCED and low.decided_by.startswith("t=2: ") and "t=2" in low.cause
    # open at every layer: the weakest open layer prints the interval of the undecided row
    both = rules.dominant_sv(lay([9.0, 2.3, 2.1], se=0.5, n=4), lay([0.5, 0.5, 0.5], n=4), TH, first=0)
    assert both.verdict == INCONCLUSIVE and both.decided_by.startswith("t=2: ")
    assert both.undecided[0].what.startswith("t=2: sigma_1/sigma_2")
    # an open layer is named by its open comparison, not by a decided one that sits nearer its threshold
    near = rules.dominant_sv(lay([2.5], se=1.0, n=4), lay([1.1e-3], se=1e-6, n=4), TH, first=0)
    assert near.verdict == INCONCLUSIVE and near.key is not None and not near.key.decided
    assert "sigma_1/sigma_2" in near.key.what


@pytest.mark.parametrize("tests", [1, 26])
def test_an_undecided_cause_prints_the_interval_the_row_prints(tests: int) -> None:
    """The cause sentence of an undecided comparison shows the same interval as the row's interval column
    (``Margin.text``): with ``tests`` comparisons, Bonferroni-widened in both (a verdict map's row printed
    ± 0.65 in one column and the unadjusted ± 0.27 in the other)."""
    m = Margin("complete, t=4: ratio", value=0.2, se=0.1, threshold=0.0, n=6, unit="networks", tests=tests)
    assert not m.decided
    lo, hi = m.bounds()
    half = f"± {(hi - lo) / 2:.2g}"
    assert half in m.text() and half in causes.sample_too_small([m])
    share = Margin("share", value=0.9, se=math.nan, threshold=0.95, n=12, share=True, tests=tests)
    lo, hi = share.bounds()
    assert f"[{lo:.1%}, {hi:.1%}]" in causes.sample_too_small([share])

"""kit.rules.steps: every verdict each rule over training steps can give, pinned on synthetic networks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.experiments.kit.rules import steps as tr
from rankcollapse.experiments.kit.thresholds import Thresholds

TH = Thresholds.of(
    "training",
    {"move_min": 0.1, "phase_min": 0.1, "onset_level": 0.25},
)


def S(values, steps=None) -> tr.Series:
    v = np.asarray(values, dtype=float)
    steps = np.arange(v.shape[1]) * 100.0 if steps is None else np.asarray(steps, dtype=float)
    return tr.Series(steps, v, tuple(f"r{i}" for i in range(v.shape[0])))


def test_series_reads_one_metric_of_one_layer_per_network_and_the_mean_over_layers():
    rows = [
        {"run_id": r, "step": s, "layer": t, "metric": m, "value": 10 * i + s + t}
        for i, r in enumerate(("a", "b"))
        for s in (0, 5)
        for t in (0, 1, 2)
        for m in ("mu_rel", "sink_rate")
    ]
    frame = pd.DataFrame(rows)
    s = tr.series(frame, "mu_rel", 2)
    assert s.runs == ("a", "b") and list(s.steps) == [0, 5]
    assert s.values.tolist() == [[2, 7], [12, 17]]
    assert tr.series(frame, "sink_rate").values.tolist() == [[1.5, 6.5], [11.5, 16.5]]  # layers 1, 2
    assert tr.log_ratio(s) == pytest.approx([math.log(7 / 2), math.log(17 / 12)])


def test_moved_from_init_pins_moved_stayed_open_and_too_few():
    moved = tr.moved_from_init({"m": np.log([2.0, 2.1, 1.9, 2.05])}, TH)
    assert moved.verdict == "reproduced" and moved.unit == "networks" and moved.n == 4
    down = tr.moved_from_init({"m": np.log([0.5, 0.52, 0.48])}, TH)
    assert down.verdict == "reproduced"
    stayed = tr.moved_from_init({"m": np.array([0.01, -0.01, 0.0, 0.005])}, TH)
    assert stayed.verdict == "not reproduced" and stayed.cause_kind == "measured otherwise"
    wide = tr.moved_from_init({"m": np.array([0.5, -0.3, 0.4])}, TH)
    assert wide.verdict == "inconclusive" and wide.cause_kind == "sample too small"
    assert wide.key is not None
    need = wide.key.needed_n()
    assert need is None or need > 3
    few = tr.moved_from_init({"m": np.array([1.0])}, TH)
    assert few.verdict == "inconclusive" and "fewer than 2" in few.cause
    # any stayed condition decides the row; Bonferroni widens each interval
    both = tr.moved_from_init({"a": np.log([2.0, 2.1, 1.9]), "b": np.array([0.0, 0.01, -0.01])}, TH)
    assert both.verdict == "not reproduced" and both.decided_by.startswith("b:")


def test_onset_found_reports_the_step_and_pins_every_never_at_init_and_mixed():
    """Issue 40 (4): the onset is a finding (its step and interval), never compared with another model's
    step count; the old rule refuted an onset at step 100 against a second-hand window of 1k-2k steps."""
    steps = np.arange(0, 3001, 100)

    def ramp(onsets, last=3000):
        st = steps[steps <= last]
        return S([(st >= o).astype(float) * 0.5 for o in onsets], st)

    def verdict(s, scope=""):
        return tr.onset_found({"causal": s}, TH, scope)

    early = verdict(ramp([100, 200, 200]), "small model")
    assert early.verdict == "reproduced" and early.scope == "small model"  # early is a finding, not a miss
    assert "mean onset step 166.7" in early.evidence and "of 3000 steps" in early.evidence
    never = verdict(ramp([9999, 9999, 9999], last=300))
    assert never.verdict == "not reproduced" and "no onset by step 300 in any of 3 networks" in never.cause
    at_init = verdict(ramp([0, 1500, 1500]))
    assert at_init.verdict == "inconclusive" and "nothing to emerge" in at_init.cause
    mixed = verdict(ramp([1500, 1500, 9999]))
    assert mixed.verdict == "inconclusive" and "onset in 2 of 3 networks" in mixed.evidence
    assert mixed.cause_kind == "not testable" and "no mean onset step" in mixed.cause
    few = verdict(ramp([100]))
    assert few.verdict == "inconclusive" and "fewer than 2" in few.cause


def test_phase_ratios_find_the_early_dip_the_peak_after_it_and_the_end():
    s = S([[10, 5, 4, 8, 9, 6], [10, 4, 5, 7, 10, 5]])
    r = tr.phase_ratios(s, early=200)
    assert r["t_min"].tolist() == [200, 100] and r["t_peak"].tolist() == [400, 400]
    assert r["collapse"] == pytest.approx([math.log(0.4), math.log(0.4)])
    assert r["expand"] == pytest.approx([math.log(9 / 4), math.log(10 / 4)])
    assert r["compress"] == pytest.approx([math.log(6 / 9), math.log(5 / 10)])
    assert np.isnan(tr.phase_ratios(s, early=50)["collapse"]).all()  # no probe but step 0 in the window


def test_phases_pins_all_three_no_collapse_and_an_unseen_later_phase():
    base = np.array([[10, 5, 4, 8, 9, 6], [10, 4, 5, 7, 10, 5], [10, 5, 4, 8, 9, 5], [10, 5, 5, 9, 10, 6]])
    three = tr.phases({"causal": tr.phase_ratios(S(base), 200)}, TH, "500 steps")
    assert three.verdict == "reproduced"
    flat = base.copy().astype(float)
    flat[:, 1:3] = 10.0
    none = tr.phases({"causal": tr.phase_ratios(S(flat), 200)}, TH, "500 steps")
    assert none.verdict == "not reproduced" and "no collapse" in none.cause
    no_compress = base.copy().astype(float)
    no_compress[:, -1] = no_compress[:, -2]
    open_ = tr.phases({"causal": tr.phase_ratios(S(no_compress), 200)}, TH, "500 steps")
    assert open_.verdict == "inconclusive" and open_.cause_kind == "not testable"
    assert "no compress for sure (500 steps)" in open_.cause
    falling = np.array([[10, 6, 5, 4, 3, 2]] * 2) + np.array([[0], [0.1]])
    still = tr.phases({"causal": tr.phase_ratios(S(falling), 200)}, TH, "500 steps")
    assert still.verdict == "inconclusive" and "no expand for sure" in still.cause  # never refuted


def test_phases_with_a_least_value_reads_a_network_already_at_it_as_not_testable():
    """An effective rank is >= 1: a last layer at rank one at step 0 cannot collapse by phase_min, so the
    row is not testable there (refuted without ``least``); one starting above x e^phase_min is judged."""
    stuck = np.array([[1.0, 1.0, 1.0, 1.2, 1.3, 1.3]] * 3) + np.array([[0.0], [1e-4], [2e-4]])
    at_one = tr.phases({"complete": tr.phase_ratios(S(stuck), 200)}, TH, "500 steps", least=1.0)
    assert at_one.verdict == "inconclusive" and at_one.cause_kind == "not testable"
    assert "3 of 3 networks start within" in at_one.cause and "nothing to collapse" in at_one.cause
    blind = tr.phases({"complete": tr.phase_ratios(S(stuck), 200)}, TH, "500 steps")
    assert blind.verdict == "not reproduced" and "no collapse" in blind.cause
    above = stuck.copy()
    above[:, 0] = 1.3  # x1.3 > e^0.1 of one: a collapse to 1.0 (-0.26) can be seen, and is
    dips = tr.phases({"complete": tr.phase_ratios(S(above), 200)}, TH, "500 steps", least=1.0)
    (collapse, *_) = dips.margins  # the collapse log(1.0 / 1.3) seen for sure, beyond -phase_min
    assert collapse.bounds()[1] < -0.1 and "start within" not in dips.cause
    assert "no compress for sure" in dips.cause  # open on the later phase only, as any short run

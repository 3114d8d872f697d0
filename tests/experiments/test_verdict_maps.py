"""The verdict maps of the NeurIPS paper against Cirrincione (depth x mask x notion) and of Karagodin against
LayerNorm Scaling (placement x depth): each row's rule (``kit.maps.somewhere``, ``nowhere``, ``apart``;
``kit.rules.sweeps.crossing``) on planted inputs whose answer is known, through the story's own value
functions where the row reads the runs' frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit.maps import AFTER, BEFORE, apart, nowhere, somewhere, verdict_map
from rankcollapse.experiments.kit.rules.sweeps import crossing
from rankcollapse.experiments.kit.thresholds import Thresholds
from rankcollapse.experiments.stories import verdict_maps as vm

TH = Thresholds.of("verdict_maps", {"min_samples": 4, "mitigate_min": 2.0, "margin_min": 1.0,
                                    "keep_min": 0.05, "cos_min": 0.95})
XS = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
UNITS = 6


def planted(offsets: list[list[float]], noise: float, rng: np.random.Generator, units: int = UNITS):
    """A map's rows: per row and x, ``units`` values ``offset + noise * N(0, 1)`` against the level 0."""
    rows = [(float(r), [o + noise * rng.standard_normal(units) for o in row])
            for r, row in enumerate(offsets)]
    return verdict_map(XS, rows, 0.0, x_name="x", y_name="row", what="planted", sides=("below", "above"),
                       labels=[f"r{r}" for r in range(len(offsets))])


# ---- the rules on planted maps ---------------------------------------------------------------------------
def test_somewhere_and_nowhere_read_a_single_planted_cell():
    rng = np.random.default_rng(0)
    one = [[-1.0] * len(XS), [-1.0] * 4 + [1.0] + [-1.0] * 4]  # one cell well above, every other well below
    vmap = planted(one, 0.05, rng)
    assert vmap.cells(1)[4] == AFTER and vmap.cells(0) == [BEFORE] * len(XS)
    assert somewhere(vmap, TH).verdict is REPRODUCED
    assert nowhere(vmap, TH).verdict is NOT_REPRODUCED
    below = planted([[-1.0] * len(XS)] * 2, 0.05, rng)
    assert somewhere(below, TH).verdict is NOT_REPRODUCED
    assert nowhere(below, TH).verdict is REPRODUCED
    assert somewhere(vmap, TH, rows=[0]).verdict is NOT_REPRODUCED  # the rows argument is honoured


def test_the_region_rules_stay_open_on_the_level_and_leave_out_thin_cells():
    rng = np.random.default_rng(1)
    vmap = planted([[0.0] * len(XS)] * 2, 1.0, rng)  # every mean on the level: no cell decided
    assert somewhere(vmap, TH).verdict is INCONCLUSIVE and nowhere(vmap, TH).verdict is INCONCLUSIVE
    assert "would decide" in nowhere(vmap, TH).cause
    rows = [(0.0, [-1.0 + 0.05 * rng.standard_normal(UNITS) for _ in XS]),
            (1.0, [np.array([5.0, 5.1, 5.2])] + [-1.0 + 0.05 * rng.standard_normal(UNITS) for _ in XS[1:]])]
    thin = verdict_map(XS, rows, 0.0, x_name="x", y_name="row", what="planted", sides=("below", "above"))
    assert thin.cells(1)[0] == AFTER  # 3 units decide it, but fewer than min_samples: left out
    j = nowhere(thin, TH)
    assert j.verdict is REPRODUCED and "1 cell(s) with fewer than 4" in j.evidence
    empty = verdict_map(XS, [(0.0, [np.array([]) for _ in XS])], 0.0, x_name="x", y_name="row", what="p",
                        sides=("below", "above"))
    assert nowhere(empty, TH).verdict is INCONCLUSIVE  # a notion measured nowhere decides nothing


def test_a_region_rules_n_is_the_fewest_units_in_a_measured_cell_and_its_evidence_says_so():
    rng = np.random.default_rng(2)
    rows = [(0.0, [-1.0 + 0.05 * rng.standard_normal(8) for _ in XS]),
            (1.0, [-1.0 + 0.05 * rng.standard_normal(5 if k == 3 else 8) for k in range(len(XS))])]
    vmap = verdict_map(XS, rows, 0.0, x_name="x", y_name="row", what="planted", sides=("below", "above"))
    j = nowhere(vmap, TH)
    assert j.verdict is REPRODUCED and j.n == 5
    assert "n = 5, the fewest networks in a measured cell (cells hold 5-8)" in j.evidence
    even = planted([[-1.0] * len(XS)], 0.05, rng)
    assert nowhere(even, TH).n == UNITS and "fewest" not in nowhere(even, TH).evidence


def test_apart_finds_the_column_between_two_planted_boundaries_and_refutes_the_reverse():
    rng = np.random.default_rng(2)
    a = [x - 3.5 for x in XS]  # row a past the level from x = 4 on (no mean on the level)
    b = [x - 7.5 for x in XS]  # row b from x = 8 on
    vmap = planted([a, b], 0.1, rng)
    j = apart(vmap, TH, 0, 1)
    assert j.verdict is REPRODUCED and "x 4, 5, 6" in j.evidence
    assert apart(vmap, TH, 1, 0).verdict is NOT_REPRODUCED  # b past while a before: the reverse
    same = planted([a, a], 0.1, rng)
    assert apart(same, TH, 0, 1).verdict is NOT_REPRODUCED  # decided alike at every x
    loose = planted([a, b], 30.0, rng)
    assert apart(loose, TH, 0, 1).verdict is INCONCLUSIVE


def test_apart_is_right_in_at_least_95_percent_of_200_seeds():
    """Rows whose boundaries are known (x = 3 and x = 7, noise 0.5 per unit): apart(a, b) never refuted
    wrongly in >= 190 of 200 maps, and it finds the split in most."""
    a, b = [x - 3.0 for x in XS], [x - 7.0 for x in XS]
    verdicts = [apart(planted([a, b], 0.5, np.random.default_rng(s)), TH, 0, 1).verdict for s in range(200)]
    assert sum(v is not NOT_REPRODUCED for v in verdicts) >= 190
    assert sum(v is REPRODUCED for v in verdicts) >= 150


def test_categorical_rows_print_their_labels():
    vmap = planted([[-1.0] * len(XS), [1.0] * len(XS)], 0.05, np.random.default_rng(3))
    assert list(vmap.grid(("lo", "hi"))["row"]) == ["r1", "r0"]  # the last row first, as drawn
    assert set(vmap.table()["row"]) == {"r0", "r1"}
    with pytest.raises(ValueError, match="labels"):
        verdict_map(XS, [(0.0, [np.zeros(4)] * len(XS))], 0.0, x_name="x", y_name="r", what="p",
                    sides=("a", "b"), labels=["one", "two"])


# ---- the NeurIPS paper against Cirrincione: planted runs --------------------------------------------------
LAYERS = 12
MITIGATED = 4  # the planted complete-mask LayerNorm keeps mu_rel x 4 up to this depth, then the same


def ln_frames(rng: np.random.Generator, one_step: float = 0.0, noise: float = 0.05):
    """Planted ``curve`` rows (mu_rel_drop without and with LayerNorm per mask, seed, layer) and ``notion``
    rows (the affine rank across each LayerNorm, one resolved and one unresolved input per network)."""
    curves, notions = [], []
    for mask in vm.MASKS:
        for seed in range(UNITS):
            for t in range(LAYERS + 1):
                base = -0.5 * t + noise * rng.standard_normal()
                effect = math.log(4.0) if mask == "complete" and 1 <= t <= MITIGATED else (
                    -math.log(10.0) if mask == "causal" and t >= 1 else 0.0)
                for mode, drop in (("attn", base), ("attn+layernorm", base + effect
                                                   + noise * rng.standard_normal())):
                    curves.append({"mask": mask, "seed": seed, "layer": t, "mode": mode, "mu_rel_drop": drop})
                if t >= 1:
                    rise = one_step if (mask, t) == ("causal", 4) else 0.0
                    notions.append({"mask": mask, "seed": seed, "layer": t, "mode": "attn+layernorm",
                                    "norm_in_affine_rank": 5.0, "norm_out_affine_rank": 5.0 + rise,
                                    "norm_rank_margin": 2.0})
                    notions.append({"mask": mask, "seed": seed, "layer": t, "mode": "attn+layernorm",
                                    "norm_in_affine_rank": 5.0, "norm_out_affine_rank": 6.0,
                                    "norm_rank_margin": 0.2})  # unresolved: never counted
    return pd.DataFrame(curves), pd.DataFrame(notions)


def test_the_limit_map_finds_the_planted_mitigation_and_its_depth():
    curves, notions = ln_frames(np.random.default_rng(4))
    limit, step = vm.ln_maps(curves, notions, LAYERS, TH)
    assert limit.labels == vm.MASKS and limit.xs.tolist() == [1, 2, 4, 8, 12]
    complete = limit.labels.index("complete")
    assert limit.cells(complete) == [AFTER, AFTER, AFTER, BEFORE, BEFORE]  # x 4 up to t = 4, then x 1
    assert limit.cells(limit.labels.index("causal")) == [BEFORE] * 5  # x 0.1: contributes, no mitigation
    assert somewhere(limit, TH).verdict is REPRODUCED
    assert nowhere(step, TH).verdict is REPRODUCED  # the unresolved inputs' +1 is not counted
    flat, _ = ln_frames(np.random.default_rng(5))
    flat.loc[flat["mode"] == "attn+layernorm", "mu_rel_drop"] = flat.loc[flat["mode"] == "attn",
                                                                         "mu_rel_drop"].to_numpy()
    assert somewhere(vm.ln_maps(flat, notions, LAYERS, TH)[0], TH).verdict is NOT_REPRODUCED


def test_the_one_step_map_refutes_a_planted_rise_of_the_affine_rank():
    curves, notions = ln_frames(np.random.default_rng(6), one_step=1.0)
    step = vm.ln_maps(curves, notions, LAYERS, TH)[1]
    assert step.cells(step.labels.index("causal"))[2] == AFTER  # t = 4
    assert nowhere(step, TH).verdict is NOT_REPRODUCED
    # the resolution filter matters: with margin_min 0.1 the unresolved inputs' +1 enters every cell
    _, flat = ln_frames(np.random.default_rng(7))
    assert nowhere(vm.ln_maps(curves, flat, LAYERS, TH)[1], TH).verdict is REPRODUCED
    loose = Thresholds.of("verdict_maps", {**TH.values, "margin_min": 0.1})
    assert nowhere(vm.ln_maps(curves, flat, LAYERS, loose)[1], loose).verdict is not REPRODUCED


# ---- Karagodin against LayerNorm Scaling: planted runs ----------------------------------------------------
DEEP = 64


def placement_frames(rng: np.random.Generator, lns_scale: float):
    """Planted curves: post-LN mu_rel = e^(-t/2) (below 0.05 from t = 2 ln 20 = 6.0), pre-LN 1/(1 + t/10)
    (never below within 64 layers); cosines 1 - 0.5/t for pre-LN (cos_min 0.95 at t = 10) and 1 -
    lns_scale/t for pre-LN + LNS; each network's own 3 % noise."""
    curves, growth = [], []
    for seed in range(UNITS):
        for t in range(DEEP + 1):
            for placement, mu in (("post", math.exp(-t / 2)), ("pre", 1 / (1 + t / 10))):
                curves.append({"placement": placement, "seed": seed, "layer": t, "dtype": "float64",
                               "mu_rel": mu * (1 + 0.03 * rng.standard_normal())})
            for placement, c in (("pre", 0.5), ("pre+lns", lns_scale)):
                cos = 1 - c / t if t else math.nan
                for sample in range(2):
                    growth.append({"placement": placement, "seed": seed, "layer": t, "sample": sample,
                                   "layer_cos": cos + 0.001 * rng.standard_normal()})
    return pd.DataFrame(curves), pd.DataFrame(growth)


def test_the_placement_maps_locate_the_planted_boundaries():
    curves, growth = placement_frames(np.random.default_rng(7), lns_scale=2.0)
    kept, cos = vm.placement_maps(curves, growth, DEEP, TH)
    post, pre = kept.labels.index("post-LN"), kept.labels.index("pre-LN")
    lo, hi = kept.bracket(post)
    assert lo <= 2 * math.log(20) <= hi and kept.covers(post, 2 * math.log(20))
    assert kept.cells(pre) == [BEFORE] * len(kept.xs)
    assert apart(kept, TH, post, pre).verdict is REPRODUCED  # Karagodin's side: post collapsed, pre resists
    assert apart(kept, TH, pre, post).verdict is NOT_REPRODUCED
    row = cos.labels.index("pre-LN")
    assert cos.covers(row, 10.0)
    depths = vm.depth_grid(DEEP)
    values = vm.cos_values(growth)
    at = values[values["placement"] == "pre"]
    j = crossing(depths, [at.loc[at["layer"] == d, "value"].to_numpy() for d in depths], 0.95, TH, "cos", "t")
    assert j.verdict is REPRODUCED and "crosses it at t" in j.evidence
    # LNS planted further from the identity (cos_min at t = 40): pre near-identity while LNS moves
    assert apart(cos, TH, row, cos.labels.index("pre-LN + LNS")).verdict is REPRODUCED
    _, nearer = vm.placement_maps(curves, placement_frames(np.random.default_rng(8), lns_scale=0.25)[1], DEEP,
                                  TH)
    # LNS planted nearer the identity (cos_min at t = 5): the reverse, refuted
    assert apart(nearer, TH, row, nearer.labels.index("pre-LN + LNS")).verdict is NOT_REPRODUCED


def test_depth_grid():
    assert vm.depth_grid(8) == [1, 2, 4, 8]
    assert vm.depth_grid(24) == [1, 2, 4, 8, 12, 16, 20, 24]
    assert vm.depth_grid(10) == [1, 2, 4, 8, 10]
    assert vm.depth_grid(64) == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]

"""Story ``fig2`` on synthetic run tables: who decides Fig. 6's LayerNorm row, the depth a bundled model's
label states, and how an underflow to 0 is judged and drawn (issue 40, items 7 and 8).

Each run's curves are drawn by hand per mode and mask, so what each rule should read is known before it
reads it: Fig. 6's SAN + LayerNorm with the complete mask at the float32 floor from t = 2 (flat as
plotted) and the causal mask falling until it reaches the floor; a bundled model's SAN whose whole X rounds
to 0 (drawn by hand: SmolLM2's own SAN overflows instead, ``test_kit_rules``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from rankcollapse.experiments.contract.story import Data, StoryData
from rankcollapse.experiments.engine.config import load_arms
from rankcollapse.experiments.kit.curves import curve_rows
from rankcollapse.experiments.kit.plots import UNDERFLOW_LABEL
from rankcollapse.experiments.stories import all_stories
from rankcollapse.experiments.stories.fig2 import claims, figures

Law = Callable[[str, str, str, np.ndarray], tuple[np.ndarray, np.ndarray]]  # -> (mu_rel, ||X||_F) per layer


def _arm(profile: str, arm: str, law: Law, model: dict[str, object], only: str = "") -> StoryData:
    """StoryData of one fig2 arm whose runs carry ``law(mode, mask, dtype, t)`` per sample, a little noise
    on each; ``model``: the rows' model columns; ``only``: keep the runs of this model name."""
    found = all_stories()["fig2"]
    arms = load_arms(found.config, profile, "fig2", found.story.tasks)
    exp = next(e for e in arms if e.name == f"fig2.{arm}")
    frames, index = [], []
    for spec in exp.runs():
        p = spec.params
        if only and p.get("model") != only:
            continue
        depth = int(p.get("layers") or 8)
        t = np.arange(depth + 1, dtype=float)
        b = int(p["samples"])
        gen = np.random.default_rng(int(spec.seed))
        dtype = str(p["dtype"])
        for mode in p["variants"]:
            for mask in p["masks"]:
                rel, norm = law(mode, mask, dtype, t)
                noise = np.exp(0.01 * gen.standard_normal((b, depth + 1)))
                x_norm = np.broadcast_to(norm, (b, depth + 1)) * noise
                zero = x_norm == 0
                mu_rel = np.where(zero, np.nan, rel * noise)
                mu = np.where(zero, 0.0, mu_rel * x_norm)
                keys = {"kind": "curve", "mode": mode, "mask": mask, "d_qk": 64.0, "dtype": dtype,
                        "run_id": spec.run_id, **model}
                rows = curve_rows({"mu": mu, "mu_rel": mu_rel}, dtype, zero, x_norm)
                frames.append(pd.DataFrame([{**keys, **r} for r in rows]))
        index.append({"run_id": spec.run_id, "status": "ok", "error": "", "seed": spec.seed, "dtype": dtype})
    data = Data(exp, pd.concat(frames, ignore_index=True), pd.DataFrame(index))
    return StoryData("fig2", {arm: data}, dict(exp.verdict), dict(exp.ranges))


def fig6(mode: str, mask: str, dtype: str, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fig. 6 in 8 layers: SAN + LayerNorm under the complete mask at the floor from t = 2 in both dtypes,
    under the causal mask falling 8 decades (the float32 floor at t = 5, above the float64 one); the SAN
    collapses; the rest keep a level."""
    below = 1e-7 if dtype == "float32" else 1e-16  # under each dtype's floor (3.8e-6, 7.1e-15)
    if mode == "attn":
        return 0.5 * np.exp(-0.6 * t), 10.0 * 0.3**t
    if mode == "attn+ln" and mask == "complete":
        return np.where(t >= 2, below, np.where(t == 1, 0.03, 0.5)), np.full_like(t, 10.0)
    if mode == "attn+ln" and mask == "causal":
        return 0.2 * np.exp(-2.2 * t), np.full_like(t, 10.0)
    return np.full_like(t, 0.45), np.full_like(t, 10.0)


RANDOM = {"model_label": "tiny bert, 8 layers (random init)", "model_name": "tiny:bert,layers=8",
          "model_kind": "tiny", "pretrained": False, "stand_in_for": "", "d_model": 32}


def test_fig6s_layernorm_row_is_decided_by_the_causal_curve_that_moves() -> None:
    """The complete mask's curve is flat at the floor as plotted: it decides nothing by itself (the old row
    named it); the causal curve falls and then reaches the floor: it decides, and one line of the
    evidence says the complete curve is flat at the floor."""
    rows = {c.id: c for c in claims(_arm("tiny", "deep", fig6, RANDOM))}
    row = rows["fig2.ln_stops_deep[random, 8 layers]"]
    assert row.verdict == "not reproduced" and row.cause_kind == "precision floor"
    plotted, mechanism = row.decided_by.split(" · ")
    for half in (plotted, mechanism):
        assert "— causal, float32, SAN + LayerNorm" in half
    assert "flat at the floor from the start, deciding nothing by itself: complete, float32" in row.evidence
    assert row.cause.startswith("causal, float32")


def smollm2(mode: str, mask: str, dtype: str, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A SAN in float32 whose token norm falls x0.01 per layer until X rounds to exactly 0 at t = 17 (raw
    mu = 0, mu_rel = 0/0; by hand: SmolLM2's own SAN overflows); with its norm and in full blocks a level."""
    if mode == "attn":
        return 0.6 * np.exp(-0.05 * t), np.where(t >= 17, 0.0, 100.0 * 0.01**t)
    return np.full_like(t, 0.5), np.full_like(t, 30.0)


SMOLLM2 = {"model_label": "SmolLM2-135M (pretrained)", "model_name": "smollm2", "model_kind": "bundled",
           "pretrained": True, "stand_in_for": "", "d_model": 576, "model_layers": 30}


@pytest.fixture(scope="module")
def bundled() -> StoryData:
    return _arm("quick", "bundled_models", smollm2, SMOLLM2, only="smollm2")


def test_an_x_that_underflows_to_zero_is_at_the_floor_in_both_halves(bundled: StoryData) -> None:
    """One treatment of an underflow: raw mu = 0 and mu_rel = 0/0 both sit at the floor (the old mechanism
    read 'non-finite', inconclusive, beside a plotted half at the floor)."""
    row = next(c for c in claims(bundled) if c.id == "fig2.san_collapse[bundled_models: smollm2]")
    assert row.as_plotted == "reproduced" and row.mechanism == "reproduced" and row.cause_kind != "non-finite"
    assert "||X||_F underflows to 0 in float32 from t=17" in row.mechanism_evidence


def test_a_bundled_models_label_says_its_layers_were_cycled(bundled: StoryData) -> None:
    """SmolLM2 has 30 layers (the rows' model_layers), the arm runs 64: row, title and caption say so."""
    assert {c.model for c in claims(bundled)} == {"SmolLM2-135M (pretrained), 30 layers cycled to 64"}
    (spec,) = figures(bundled)
    title = spec.figure._suptitle.get_text()
    assert "30 layers cycled to 64" in spec.caption and "30 layers cycled to 64" in title


def test_an_underflow_to_zero_is_no_data_point_on_a_log_axis(bundled: StoryData) -> None:
    """Where the SAN's raw mu (and its whole X) rounded to 0 the curve is not drawn (NaN: a gap), an open
    circle sits at the floor line instead, in the legend as 'underflow (0)', and the caption says so."""
    (spec,) = figures(bundled)
    assert "Underflow (0), open circles" in spec.caption
    legend = [t.get_text() for t in spec.figure.legends[0].get_texts()]
    assert UNDERFLOW_LABEL in legend and not any("▼" in t for t in legend)
    raw_panel = spec.figure.axes[0]
    san = next(line for line in raw_panel.get_lines() if line.get_label() == "SAN (attention only)")
    y = np.asarray(san.get_ydata(), dtype=float)
    assert np.isnan(y[17:]).all() and np.isfinite(y[:17]).all()
    marks = [line for line in raw_panel.get_lines() if line.get_label() == UNDERFLOW_LABEL]
    assert marks and marks[0].get_marker() == "o" and marks[0].get_markerfacecolor() == "none"
    assert (np.asarray(marks[0].get_xdata()) >= 18).all()  # t + 1 of the underflowed layers only


"""Position bias (Wu, Wang, Jegelka, Jadbabaie, ICML 2025, arXiv 2502.01951): a follow-up, judged apart.

The same authors' next paper reads the products of masked attention matrices as position bias: the
cumulative context ``P(t) = A(t) ... A(1)`` (``metrics.rollout``) converges to the first token under a
causal mask, exponentially with depth, and a sliding window slows it, at a rate set by
``ceil((N - 1) / (w - 1))`` (the layers the first token needs to reach the last:
``masks.first_token_prediction``'s hops). Its rows are the follow-up's (``Story.paper``): counted in
their own section, never in the NeurIPS 2024 paper's tally. Statements as recorded in
``docs/followups.md``, from a structured summary of the paper's text (FOLLOWUPS.md), not the text itself.

Quantity: per network (seed), the largest first-token gap over tokens ``max_i (1 - P(t)[i, 0])`` (the
simulator's ``first_token_gap_max``, summed over the other positions, so it keeps its precision far
below eps); as plotted in float32, the mechanism in float64. Rules: the kit's ``san_collapse`` (the gap
falls exponentially) and ``local_slower`` with the hops as the radius (every pair of masks ordered).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.data import curves_by, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.plots import (
    interval_points,
    label_axes,
    mean_band,
    panel_grid,
    reference_line,
)
from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``).
PAPER = "2502.01951"
SOURCE = "Wu et al. 2025 (arXiv 2502.01951), [text, via a structured summary]"
GAP = "first_token_gap_max"
STATEMENTS = (
    Statement(
        "causal_first_token",
        "Under causal masks the cumulative context converges to the first token exponentially with depth",
        SOURCE,
        "the largest first-token gap max_i (1 - P(t)[i, 0]) under the causal mask 'collapsing' (per-layer "
        "log rate over all layers and over the last half below -rate_tol for sure, over networks) -> "
        "reproduced; 'not collapsing' -> not reproduced (float32 as plotted, float64 the mechanism)",
    ),
    Statement(
        "window_slows",
        "A sliding window slows the convergence to the first token, at a rate set by ceil((N - 1)/(w - 1))",
        SOURCE,
        "for every pair of masks with different hops r = ceil((N - 1)/(w - 1)) (causal: r = 1), the one with "
        "more hops has the higher (slower) per-layer log rate of the first-token gap over all layers for "
        "sure (kit.rules.local_slower, Bonferroni over the pairs) -> reproduced; lower for sure -> not "
        "reproduced (float32 as plotted, float64 the mechanism)",
    ),
)
ARMS = (Arm("paper", SIMULATE_CURVES),)
NAMES = ("first-token gap in float32 (as plotted)", "first-token gap in float64 (the mechanism)")


def hops(mask: str, n: int) -> int:
    """The layers the first token needs to reach the last (``masks.first_token_prediction``)."""
    from rankcollapse.experiments.kit.tasks.masks import first_token_prediction

    pred = first_token_prediction(mask, n)
    if pred.hops is None:
        raise ValueError(f"{mask} at n = {n}: {pred.why}")
    return pred.hops


def _gap_curves(frame: pd.DataFrame, dtype: str) -> dict[str, Curve]:
    """``{"<mask>, <dtype>": Curve}`` of the gap in ``dtype``, pooled over networks (seeds)."""
    sub = frame[frame["dtype"] == dtype]
    return {f"{k[0]}, {k[1]}": c for k, c in curves_by(sub, GAP, ["mask"]).items()}


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("position_bias", sd.verdict, sd.ranges)
    data = sd.arm("paper")
    if data is None:
        return []
    frame = rows_of(data, "curve")
    n = int(data.exp.base["tokens"])
    by = {dt: _gap_curves(frame, dt) for dt in ("float32", "float64")}
    note = sample_note(runs_of(data, frame), frame)
    out = []
    causal = {dt: {k: c for k, c in cs.items() if k.startswith("causal,")} for dt, cs in by.items()}
    if causal["float32"] or causal["float64"]:
        sub = frame[frame["mask"] == "causal"]
        out.append(
            claim_row(
                "position_bias",
                STATEMENTS[0],
                data,
                th,
                judged(lambda t: rules.san_collapse(causal["float32"], t), th),
                judged(lambda t: rules.san_collapse(causal["float64"], t), th),
                axes_frame=sub,
                runs=runs_of(data, sub),
                figure="position_bias_first_token",
                sample_note=note,
                names=NAMES,
            )
        )
    radius = {str(m): float(hops(str(m), n)) for m in frame["mask"].unique()}
    out.append(
        claim_row(
            "position_bias",
            STATEMENTS[1],
            data,
            th,
            judged(lambda t: rules.local_slower(by["float32"], radius, t), th),
            judged(lambda t: rules.local_slower(by["float64"], radius, t), th),
            axes_frame=frame,
            runs=data.ok,
            figure="position_bias_first_token",
            sample_note=note,
            names=NAMES,
        )
    )
    return out


def _table(sd: StoryData) -> pd.DataFrame:
    """Per mask and dtype: the hops, the measured per-layer factor of the gap (mean over networks) and the
    first layer where the gap falls below 1/2."""
    data = sd.arm("paper")
    if data is None:
        return pd.DataFrame()
    frame = rows_of(data, "curve")
    n = int(data.exp.base["tokens"])
    out = []
    for dt in ("float32", "float64"):
        for label, c in _gap_curves(frame, dt).items():
            mask = label.split(", ")[0]
            r = c.rate(0, c.layers)
            half = np.nonzero(c.mean < 0.5)[0]
            out.append(
                {
                    "mask": mask,
                    "dtype": dt,
                    "hops": hops(mask, n),
                    "factor": r.factor,
                    "log_rate": r.mean,
                    "log_rate_half_interval": r.half,
                    "networks": r.n,
                    "first_layer_below_half": int(half[0]) if half.size else math.nan,
                }
            )
    return pd.DataFrame(out)


def figures(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("paper")
    if data is None:
        return []
    frame = rows_of(data, "curve")
    n = int(data.exp.base["tokens"])
    curves = _gap_curves(frame, "float64")
    table = _table(sd)
    fig, (ax, ax2) = panel_grid(2, ncols=2, w=5, h=3.8)
    ordered = sorted(curves.items(), key=lambda kv: hops(kv[0].split(", ")[0], n))
    for i, (label, c) in enumerate(ordered):  # the mean and the range over samples (the std spans decades)
        mask = label.split(", ")[0]
        mean_band(ax, np.arange(c.layers + 1), c.mean, c.lo, c.hi, i, f"{mask} (r = {hops(mask, n)})",
                  floor=c.clamp)
        reference_line(ax, hops(mask, n), vertical=True, color=f"C{i}", lw=0.9)
    label_axes(ax, "layer", "max_i (1 - P(t)[i, 0]) (float64)", logy=True, legend=7)
    for i, dt in enumerate(("float32", "float64")):
        g = table[table["dtype"] == dt].sort_values("hops")
        half = g["log_rate_half_interval"]
        interval_points(ax2, g["hops"], g["log_rate"], g["log_rate"] - half, g["log_rate"] + half, i,
                        f"{dt}: mean over networks ± interval", hollow=i > 0)
    label_axes(ax2, "hops r = ceil((N - 1)/(w - 1))", "per-layer log rate of the gap (all layers)", logx=True,
               base=2, legend=7)
    caption = (
        f"Wu et al. 2025: the cumulative context P(t) = A(t)...A(1) of single-head SANs without residual, "
        f"N = {n}, Gaussian inputs and weights. Left: the largest first-token gap max_i (1 - P(t)[i, 0]) per "
        "layer (mean, and the range over samples and networks, float64; the gap is summed over the other "
        "positions, so it keeps its precision far below eps); it stays at 1 until the first token reaches "
        "the "
        "last token, at layer r (dotted). Right: its per-layer log rate over all layers against the hops r, "
        "mean over networks with the interval the rule reads, float32 and float64 (they coincide where one "
        "series hides the other)."
    )
    return [FigureSpec("position_bias_first_token", fig, table, caption)]


def headlines(sd: StoryData) -> list[str]:
    table = _table(sd)
    if table.empty:
        return []
    g = table[table["dtype"] == "float64"].sort_values("hops")
    per = ", ".join(
        f"r = {int(r['hops'])}: x{r['factor']:.3g}/layer (below 1/2 from layer {r['first_layer_below_half']})"
        for _, r in g.iterrows()
    )
    return [f"The first-token gap max_i (1 - P(t)[i, 0]) falls, by hops: {per} (float64, over networks)."]


STORY = story_here(__name__)

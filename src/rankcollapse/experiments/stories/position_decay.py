"""Position bias under decay masks, RoPE and biased data (Wu et al., ICML 2025, arXiv 2502.01951): the rest.

``position_bias`` judges the paper's causal and sliding-window statements; this story records its other
statements (``docs/followups.md``) and judges what the simulator can speak to. Its rows are the follow-up's
(``Story.paper``), counted in that paper's section.

- **Decay mask** (``decay_nonmonotone``): the paper's decay mask ``gamma^(i - j)`` on the scores, i.e. the
  ALiBi-type bias ``-m (i - j)`` (``m = -log gamma``) added to the logits through ``core.attention``'s one
  masked softmax (the simulator's ``alibi_slope``), makes the last token's cumulative context non-monotone
  in the distance ``x = i - j``, peaking near ``x* = t / (e^m - 1)`` (``masks.decay_critical_distance``;
  the uniform-content oracle ``masks.decay_uniform_context``). Judged per network at the kept layers
  ``t`` with ``t e^-m >= 2`` (a clear rise) and ``x* <= (N - 2) / 2`` (the fall is inside the sequence) by
  ``kit.influence.peaked`` on ``metrics.influence.profile_peak``.
- **RoPE's decay term** and the **lost-in-the-middle U with start- and end-biased data**: untested, each with
  its reason; **prefix masks**: the summary names them in the setting without a statement of its own.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged, not_testable_row
from rankcollapse.experiments.kit.data import layered, profile_summaries, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.influence import peaked
from rankcollapse.experiments.kit.plots import MARKERS, figure
from rankcollapse.experiments.kit.tasks import SIMULATE_CURVES
from rankcollapse.experiments.kit.thresholds import Thresholds
from rankcollapse.masks import decay_critical_distance, decay_uniform_context
from rankcollapse.metrics.influence import profile_peak

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``).
PAPER = "2502.01951"
SOURCE = "Wu et al. 2025 (arXiv 2502.01951), [text, via a structured summary]"
FIGURE = "position_decay_profile"
SLOPE = "alibi_slope"
STATEMENTS = (
    Statement(
        "decay_nonmonotone",
        "Under a decay (ALiBi-type) mask the cumulative context is non-monotone in the distance, with a "
        "critical point x* = t/(e^m - 1)",
        SOURCE,
        "the last token's profile P(t)[N-1, :] over the distance x = N-1-j (the first token, the sink, left "
        "out): its peak above the token itself and above position 1 by more than hump_log_min (log) and "
        "(x_hat + 1)/(x* + 1) within e^+-peak_log_tol, for sure over networks at every judged layer "
        "(kit.influence.peaked) -> reproduced; a monotone profile or a peak elsewhere for sure -> not "
        "reproduced (float32 as plotted, float64 the mechanism)",
    ),
    Statement(
        "rope_decay",
        "Under RoPE the decay term of the attention scores scales as (i - j)^2 theta_1^2",
        SOURCE,
        "needs RoPE in the simulator (a rotation of queries and keys, not an additive bias on the logits)",
    ),
    Statement(
        "lost_in_middle",
        "The lost-in-the-middle U shape appears only with training data biased to the start and the end",
        SOURCE,
        "needs SANs trained on the paper's retrieval task with start- and end-biased answers against "
        "unbiased ones; the simulator's SANs are untrained",
    ),
)
ARMS = (Arm("paper", SIMULATE_CURVES),)
NAMES = ("the profile's peak in float32 (as plotted)", "the profile's peak in float64 (the mechanism)")
ROPE_WHY = "RoPE rotates queries and keys; the simulator adds only a logit bias (no RoPE arm is built)"
LOST_WHY = (
    "a claim about SANs trained on start- and end-biased data; the simulator's SANs are untrained and the "
    "paper's training grid was not run on these CPUs"
)


def judged_layers(n: int, slope: float, depth: int) -> list[int]:
    """The kept layers (0, 1, 2, 4, ...) where the decay profile has a clear rise (``t e^-m >= 2``: below it
    the uniform-content mode, ``floor((t e^-m - 1)/(1 - e^-m)) + 1``, sits at 1 or 2, far under its mean
    ``x*``) and its fall is inside the sequence (``x* <= (N - 2) / 2``)."""
    from rankcollapse.experiments.kit.tasks import profile_layers

    return [t for t in profile_layers(depth)
            if t * math.exp(-slope) >= 2 and decay_critical_distance(t, slope) <= (n - 2) / 2]


def _peaks(data: Data, slope: float) -> pd.DataFrame:
    """Per run and kept layer: ``rise``, ``fall``, ``place``, ``peak_distance`` of the last token's
    profile."""

    def summary(p: np.ndarray, t: int) -> dict[str, float]:
        got = {k: float(v) for k, v in profile_peak(torch.tensor(p)).items()}
        x_star = decay_critical_distance(t, slope) if t > 0 else 0.0
        place = math.log((got["peak_distance"] + 1.0) / (x_star + 1.0))
        return {"rise": got["peak_over_self_log"], "fall": got["peak_over_far_log"], "place": place,
                "peak_distance": got["peak_distance"]}

    return profile_summaries(rows_of(data, "influence"), summary, (SLOPE,))


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("position_decay", sd.verdict, sd.ranges)
    data = sd.arm("paper")
    out: list[Claim] = []
    if data is not None:
        n, depth = int(data.exp.base["n"]), int(data.exp.base["layers"])
        slope = float(data.exp.base[SLOPE])
        peaks = _peaks(data, slope)
        layers = judged_layers(n, slope, depth)
        parts = {}
        for dt in ("float32", "float64"):
            sub = peaks[peaks["dtype"] == dt] if not peaks.empty else peaks
            parts[dt] = {
                f"t = {t}, {dt}": tuple(layered(sub[sub["layer"] == t].assign(layer=0), c)
                                        for c in ("rise", "fall", "place"))
                for t in layers if not sub.empty and (sub["layer"] == t).any()
            }
        if parts["float32"] or parts["float64"]:
            frame = rows_of(data, "curve")
            out.append(
                claim_row(
                    "position_decay",
                    STATEMENTS[0],
                    data,
                    th,
                    judged(lambda t: peaked(parts["float32"], t), th),
                    judged(lambda t: peaked(parts["float64"], t), th),
                    axes_frame=frame,
                    runs=runs_of(data, frame),
                    figure=FIGURE,
                    sample_note=sample_note(runs_of(data, frame), frame),
                    names=NAMES,
                )
            )
    out.append(not_testable_row("position_decay", STATEMENTS[1], data, ROPE_WHY))
    out.append(not_testable_row("position_decay", STATEMENTS[2], data, LOST_WHY))
    return out


def _table(sd: StoryData) -> pd.DataFrame:
    """Per judged layer and dtype: the peak distance (mean over networks), x* and the uniform-content mode."""
    data = sd.arm("paper")
    if data is None:
        return pd.DataFrame()
    n, depth = int(data.exp.base["n"]), int(data.exp.base["layers"])
    slope = float(data.exp.base[SLOPE])
    peaks = _peaks(data, slope)
    if peaks.empty:
        return peaks
    out = []
    for (dt, t), g in peaks.groupby(["dtype", "layer"]):
        if t not in judged_layers(n, slope, depth):
            continue
        oracle = decay_uniform_context(n, slope, int(t))[-1]
        out.append({"dtype": dt, "layer": int(t), "peak_distance_mean": float(g["peak_distance"].mean()),
                    "peak_distance_min": float(g["peak_distance"].min()),
                    "peak_distance_max": float(g["peak_distance"].max()),
                    "x_star": decay_critical_distance(int(t), slope),
                    "uniform_mode": float(profile_peak(oracle)["peak_distance"]), "networks": len(g)})
    return pd.DataFrame(out)


def figures(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("paper")
    if data is None:
        return []
    n, depth = int(data.exp.base["n"]), int(data.exp.base["layers"])
    slope = float(data.exp.base[SLOPE])
    rows = rows_of(data, "influence")
    if rows.empty:
        return []
    rows = rows[rows["dtype"] == "float64"]
    prof = rows.groupby(["layer", "position"], as_index=False)["influence"].mean()
    fig = figure(10, 3.8, layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    for i, t in enumerate(judged_layers(n, slope, depth)):
        g = prof[prof["layer"] == t].sort_values("position")
        x = n - 1 - g["position"].to_numpy()
        keep = x < n - 1  # the first token (the sink) apart
        (line,) = ax.plot(x[keep], g["influence"].to_numpy()[keep], MARKERS[i % len(MARKERS)] + "-", ms=3,
                          label=f"t = {t}")
        oracle = decay_uniform_context(n, slope, t)[-1].flip(0)[:-1].numpy()
        ax.plot(np.arange(n - 1), oracle, ":", color=line.get_color(), lw=1)
        ax.axvline(decay_critical_distance(t, slope), color=line.get_color(), ls="--", lw=0.8)
    ax.set_xlabel("distance x = (N - 1) - j from the last token")
    ax.set_ylabel("P(t)[N-1, j] (float64, mean over networks)")
    ax.legend(fontsize=7, title="dotted: uniform content; dashed: x*", title_fontsize=7)
    table = _table(sd)
    for i, (dt, marker) in enumerate((("float32", "o"), ("float64", "x"))):
        g = table[table["dtype"] == dt] if not table.empty else table
        if g.empty:
            continue
        ax2.errorbar(g["layer"], g["peak_distance_mean"],
                     yerr=[g["peak_distance_mean"] - g["peak_distance_min"],
                           g["peak_distance_max"] - g["peak_distance_mean"]],
                     fmt=marker, color=f"C{i}", capsize=3, label=f"{dt}: mean, range over networks")
    if not table.empty:
        ts = np.array(sorted(table["layer"].unique()), dtype=float)
        ax2.plot(ts, ts / math.expm1(slope), "k--", lw=1, label="x* = t/(e^m - 1)")
        g = table[table["dtype"] == "float64"].sort_values("layer")
        ax2.plot(g["layer"], g["uniform_mode"], "k:", lw=1, label="mode under uniform content")
    ax2.set_xlabel("layer t")
    ax2.set_ylabel("peak distance x_hat")
    ax2.legend(fontsize=7)
    caption = (
        "Wu et al. 2025's decay mask: single-head causal SANs with the ALiBi-type bias -m (i - j), "
        f"m = {slope:g}, added to the logits (N = {n}, Gaussian inputs and weights, d_qk = d). Left: the "
        "last token's cumulative context over the distance back from it at the judged layers (mean over "
        "networks, float64; the first token, which gathers the tail, left out), beside the uniform-content "
        "oracle (dotted) and x* (dashed): it rises from the token, peaks and falls. Right: the peak's "
        "distance per layer (mean and range over networks) against x* and the uniform-content mode."
    )
    return [FigureSpec(FIGURE, fig, pd.concat([table, prof.assign(kind="profile")], ignore_index=True),
                       caption)]


def headlines(sd: StoryData) -> list[str]:
    table = _table(sd)
    if table.empty:
        return []
    g = table[table["dtype"] == "float64"].sort_values("layer")
    per = ", ".join(
        f"t = {int(r['layer'])}: {r['peak_distance_mean']:.3g} (x* {r['x_star']:.3g}, uniform mode "
        f"{r['uniform_mode']:.0f})"
        for _, r in g.iterrows()
    )
    return [f"The decay mask's profile peaks at distance {per} (float64, mean over networks)."]


STORY = story_here(__name__)

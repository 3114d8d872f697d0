"""Fig. 4 (paper §5): token geometry of pretrained BERT, GPT-2, T5 and ALBERT, layer by layer.

Arms: ``paper`` (``paper:<checkpoint>``: the checkpoint when it is in the local Hugging Face cache,
else a pretrained stand-in, named; a checkpoint whose only offline stand-in is its random init is
``untested``), float32 (the paper's) and float64; and ours, ``bundled_models`` (MiniLM and SmolLM2 on
Shakespeare, N = 64). Each model's own blocks at its own depth. Statements: full rank at every layer
(against the structural maximum of the layer that produced X), sigma_min well above 0 (relative to
sigma_max, against the rank tolerance of the dtype), mean |cos| grows into a narrow region.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import Model, judged, model_row
from rankcollapse.experiments.kit.data import (
    arm_models,
    layered,
    model_groups,
    pooled_layer,
    rows_of,
    runs_of,
    sample_note,
)
from rankcollapse.experiments.kit.plots import figure, label_axes, line, mean_band, shared_legend
from rankcollapse.experiments.kit.tasks.curves import MODEL_GEOMETRY
from rankcollapse.experiments.kit.thresholds import Thresholds

SOURCE = "paper §5, Fig. 4"
STATEMENTS = (
    Statement(
        "full_rank",
        "The token matrix keeps full rank at every layer",
        SOURCE,
        "share of samples whose numerical rank (torch.linalg.matrix_rank's tolerance, max(N, d) eps "
        "sigma_max) reaches rank_max, the largest rank the input allows (distinct rows of X(0); at t = 0 "
        "also an embedding's width), >= full_rank_min for sure at every layer (Wilson interval, "
        "Bonferroni over the layers) -> reproduced; below it for sure at some layer -> not reproduced; as "
        "plotted in float32, mechanism in float64",
    ),
    Statement(
        "sigma_min",
        "The smallest singular value stays well above 0",
        SOURCE,
        "mean sigma_min / sigma_max (sigma_min = the rank_max-th singular value) >= ratio_margin x the "
        "rank tolerance of the dtype for sure at every layer (Bonferroni over the layers) -> reproduced; "
        "below it for sure at some layer -> not reproduced; as plotted in float32 (the paper's dtype; "
        "absolute sigma_min shown), mechanism in float64",
    ),
    Statement(
        "cos_grows",
        "The mean |cos| of token pairs grows with depth: tokens concentrate in a narrow region",
        SOURCE,
        "mean |cos| at the last layer minus at the first > 2 standard errors and the last >= aniso_factor x "
        "sqrt(2 / (pi d)) (independent isotropic tokens) -> reproduced; falls for sure -> not reproduced",
    ),
)
ARMS = (Arm("paper", MODEL_GEOMETRY), Arm("bundled_models", MODEL_GEOMETRY, extension=True))


def _by_dtype(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {dt: frame[frame["dtype"] == dt] for dt in ("float32", "float64") if (frame["dtype"] == dt).any()}


def _rank(g: pd.DataFrame, t: Thresholds) -> rules.Judgement:
    limit = str(g["rank_limit"].iloc[0]) if "rank_limit" in g else ""
    return rules.full_rank(layered(g, "full_rank", share=True), t, limit)


def _ratio(g: pd.DataFrame, t: Thresholds) -> rules.Judgement:
    tol, _, _ = pooled_layer(g, "rank_tol_rel")
    smin, _, _ = pooled_layer(g, "sigma_min")
    j = rules.sigma_ratio(layered(g, "sigma_ratio"), tol, t)
    return j.amended(
        after=f"; absolute sigma_min {np.nanmin(smin):.3g} at its lowest (as the paper plots it)"
    )


def _cos(g: pd.DataFrame, t: Thresholds) -> rules.Judgement:
    return rules.cos_grows(layered(g, "mean_abs_cos"), int(g["d_model"].iloc[0]), t)


#: statement -> (its rule on one dtype's rows, judged again in float64 as the mechanism?)
RULES = ((STATEMENTS[0], _rank, True), (STATEMENTS[1], _ratio, True), (STATEMENTS[2], _cos, False))


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("fig4", sd.verdict, sd.ranges)
    out: list[Claim] = []
    for arm, data, _, _, frame in arm_models(sd, ("paper", "bundled_models"), "geometry"):
        per = _by_dtype(frame)
        plotted_dt = "float32" if "float32" in per else next(iter(per))
        tag = str(frame["model"].iloc[0])
        for st, fn, two in RULES:
            plotted = judged(lambda t, fn=fn, g=per[plotted_dt]: fn(g, t), th)
            mech = (
                judged(lambda t, fn=fn, g=per["float64"]: fn(g, t), th) if two and "float64" in per else None
            )
            out.append(
                model_row(
                    "fig4",
                    st,
                    data,
                    th,
                    plotted,
                    mech,
                    per[plotted_dt],
                    qualifier=tag if arm == "paper" else f"{arm}: {tag}",
                    figure="fig4" if arm == "paper" else "ext_fig4",
                    names=(f"{plotted_dt} (the paper's dtype)", "float64"),
                    mechanism_frame=per["float64"] if mech is not None else None,
                )
            )
    return out


PANELS = (
    ("full_rank", "share of samples with full rank", False),
    ("sigma_ratio", "sigma_min / sigma_max (rank tolerance dotted)", True),
    ("sigma_min", "sigma_min (absolute, as the paper plots it)", True),
    ("mean_abs_cos", "mean |cos| of token pairs", False),
)


def _figure(sd: StoryData, arm: str, stem: str, what: str) -> FigureSpec | None:
    data = sd.arm(arm)
    if data is None:
        return None
    groups = [g for g in model_groups(rows_of(data, "geometry")) if not Model.of(g[2]).untested]
    if not groups:
        return None
    fig = figure(3.7 * len(PANELS), 3.3)
    axes = fig.subplots(1, len(PANELS))
    tables = []
    for i, (label, _, frame) in enumerate(groups):
        for dt, g in _by_dtype(frame).items():
            for ax, (col, title, logy) in zip(axes, PANELS, strict=True):
                mean, std, n = pooled_layer(g, col)
                depth = len(mean) - 1
                x = np.arange(len(mean)) / max(depth, 1)
                name = f"{label}, {depth} layers — {dt}"
                if dt == "float32":
                    low = np.maximum(mean - std, mean * 1e-3) if logy else mean - std
                    mean_band(ax, x, mean, low, mean + std, i, name, alpha=0.12, every=0)
                else:  # float64: dashed, hollow markers, so the legend tells them apart
                    line(ax, x, mean, i, f"{name} (dashed, hollow)", style=1, ms=5, lw=0.9, hollow=True,
                         every=0)
                if col == "sigma_ratio":
                    tol, _, _ = pooled_layer(g, "rank_tol_rel")
                    ax.plot(x, tol, ":", color="0.4", lw=0.8)
                label_axes(ax, "relative depth t / L (0 = embeddings)", title=title, logy=logy)
                tables.append(
                    pd.DataFrame(
                        {
                            "model": label,
                            "dtype": dt,
                            "quantity": col,
                            "layer": np.arange(len(mean)),
                            "relative_depth": x,
                            "mean": mean,
                            "std": std,
                            "samples": n,
                        }
                    )
                )
    axes[0].set_ylim(-0.05, 1.05)
    fig.suptitle(
        f"{what}: token geometry per layer, mean ± std over samples (float32 solid, float64 dashed with "
        "hollow markers)",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.04, 1, 0.93))
    shared_legend(fig, axes[:1], below=True, ncol=2, fontsize=7)
    notes = "; ".join(f"{label}: {sample_note(runs_of(data, g), g)}" for label, _, g in groups)
    untested = [lab for lab, _, g in model_groups(rows_of(data, "geometry")) if Model.of(g).untested]
    caption = (
        f"{what}: each model's own blocks on its corpus's excerpts, x = relative depth so models of "
        "different depths align. Full-rank share, sigma_min / sigma_max with the rank tolerance of each "
        "dtype (dotted), absolute sigma_min as the paper plots it, mean |cos| of token pairs. "
        f"{notes}."
        + (
            f" Not drawn (untested: no pretrained weights offline): {', '.join(untested)}."
            if untested
            else ""
        )
    )
    return FigureSpec(stem, fig, pd.concat(tables, ignore_index=True), caption)


def figures(sd: StoryData) -> list[FigureSpec]:
    out = [
        _figure(sd, "paper", "fig4", "Fig. 4 (paper's setting, stand-ins named)"),
        _figure(sd, "bundled_models", "ext_fig4", "Ours, Fig. 4 reading (bundled models)"),
    ]
    return [f for f in out if f is not None]


def headlines(sd: StoryData) -> list[str]:
    """Where float32 cannot resolve full rank: sigma_min / sigma_max against each dtype's rank tolerance."""
    out = []
    for _, _, label, _, frame in arm_models(sd, ("paper",), "geometry"):
        if Model.of(frame).untested:
            continue
        per = _by_dtype(frame)
        if "float32" not in per or "float64" not in per:
            continue
        r32, _, _ = pooled_layer(per["float32"], "sigma_ratio")
        tol32, _, _ = pooled_layer(per["float32"], "rank_tol_rel")
        share64, _, _ = pooled_layer(per["float64"], "full_rank")
        t = int(np.nanargmin(r32 / tol32))
        if r32[t] / tol32[t] < 10:
            out.append(
                f"{label}: in float32 sigma_min / sigma_max reaches {r32[t]:.2g} at t = {t}, "
                f"{r32[t] / tol32[t]:.1f}x "
                f"the float32 rank tolerance {tol32[t]:.1g}, so float32 cannot tell full rank there; in "
                "float64 "
                f"the lowest full-rank share is {np.nanmin(share64):.0%}."
            )
    return out


STORY = story_here(__name__)

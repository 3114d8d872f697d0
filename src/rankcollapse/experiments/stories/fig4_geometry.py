"""Fig. 4 (paper §5): token geometry of pretrained models against depth.

Task: ``experiments.tasks.analyze`` (full blocks, each model's own depth). Claims: full rank at
every layer output, yet anisotropic tokens (mean |cos| well above the isotropic value). Figure:
full-rank share, smallest singular value and mean |cos| against depth.
"""

from __future__ import annotations

import math

import pandas as pd

from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import NOT_REPRODUCED, REPRODUCED, Claim, Data, fmt
from rankcollapse.experiments.plotting import empty, pyplot
from rankcollapse.experiments.tasks import analyze

SOURCE = "ours (bundled models; reading paper §5, Fig. 4 — the paper's setting is fig4_geometry_paper)"
FIGURE = "fig4_geometry"
S_RANK = "Pretrained models keep full-rank token representations at every layer (Fig. 4)"
S_ANISO = "…yet the representations are anisotropic: high mean |cosine| between tokens (Fig. 4)"


def isotropic_abs_cos(d_model: float) -> float:
    """Mean |cos| of two independent isotropic Gaussian vectors in R^d, about sqrt(2 / (pi d))."""
    return math.sqrt(2 / (math.pi * d_model)) if d_model > 0 else math.nan


def claims(data: Data) -> list[Claim]:
    fr_min = data.v("full_rank_min", 0.99)
    r_rank = (
        f"full-rank share >= {fr_min} at every layer output t >= 1 of every model -> reproduced, else not "
        "(the embeddings X(0) are reported apart: a token repeated in a window repeats its embedding row)"
    )
    factor = data.v("aniso_factor", 3.0)
    r_aniso = (
        f"max over layers t>=1 of mean |cos| >= {factor} x sqrt(2/(pi d)) (mean |cos| of isotropic "
        "Gaussian tokens) for every model -> reproduced, else not"
    )
    ok = data.ok
    if ok.empty:
        return [
            data.no_data("fig4.full_rank", S_RANK, SOURCE, r_rank, FIGURE),
            data.no_data("fig4.anisotropy", S_ANISO, SOURCE, r_aniso, FIGURE),
        ]
    rank_parts, rank_ok, an_parts, an_ok = [], True, [], True
    for model, grp in data.groups(ok, "model"):
        rows = data.table[data.table["run_id"].isin(grp["run_id"])]
        per_layer = rows.groupby("layer")[["full_rank", "num_rank", "mean_abs_cos"]].mean()
        outputs = per_layer["full_rank"][per_layer.index >= 1]
        worst = float(outputs.min()) if len(outputs) else math.nan
        rank_ok &= bool(worst >= fr_min)
        emb = float(per_layer["full_rank"].get(0, math.nan))
        ranks = per_layer["num_rank"][per_layer.index >= 1]
        rank_parts.append(
            f"{model}: min full-rank share {fmt(worst)} over layers 1..{int(per_layer.index.max())}, "
            f"mean numerical rank >= {fmt(float(ranks.min()), 4)} (embeddings: share {fmt(emb)}, "
            f"rank {fmt(float(per_layer['num_rank'].get(0, math.nan)), 4)})"
        )
        d_model = float(grp["summary.d_model"].iloc[0]) if "summary.d_model" in grp else math.nan
        baseline = isotropic_abs_cos(d_model)
        deep = per_layer["mean_abs_cos"][per_layer.index >= 1]
        top = float(deep.max()) if len(deep) else math.nan
        an_ok &= bool(top >= factor * baseline)
        an_parts.append(
            f"{model}: max mean |cos| {fmt(top)} (layer {int(deep.idxmax()) if len(deep) else 'n/a'}) "
            f"vs isotropic {fmt(baseline)}"
        )
    v_rank = REPRODUCED if rank_ok else NOT_REPRODUCED
    v_aniso = REPRODUCED if an_ok else NOT_REPRODUCED
    return [
        data.claim("fig4.full_rank", S_RANK, SOURCE, r_rank, "; ".join(rank_parts), v_rank, figure=FIGURE),
        data.claim("fig4.anisotropy", S_ANISO, SOURCE, r_aniso, "; ".join(an_parts), v_aniso, figure=FIGURE),
    ]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "Fig. 4: token geometry of pretrained models against depth (0 = embeddings): share of "
        "samples whose token matrix has full rank min(N, d), smallest singular value, mean |cosine| "
        "over token pairs (dashed: the isotropic-Gaussian value sqrt(2/(pi d)))."
    )
    ok = data.ok
    if ok.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    from rankcollapse.models.plot import PANELS

    rows = data.table.merge(ok[["run_id"]], on="run_id")
    keys = [k for k, _, _ in PANELS]
    table = rows.groupby(["model", "layer"], sort=False)[keys].mean().reset_index()
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3), constrained_layout=True)
    for i, (model, c) in enumerate(table.groupby("model", sort=False)):
        for ax, (key, label, logy) in zip(axes, PANELS, strict=True):
            ax.plot(c["layer"], c[key], marker="o", ms=2.5, color=f"C{i}", label=model)
            ax.set_title(label)
            ax.set_xlabel("layer t")
            if logy:
                ax.set_yscale("log")
        d = ok[ok["model"] == model]["summary.d_model"].iloc[0] if "summary.d_model" in ok else None
        if d is not None and not pd.isna(d):
            axes[2].axhline(isotropic_abs_cos(float(d)), color=f"C{i}", ls="--", lw=0.8)
    axes[0].set_ylim(-0.05, 1.05)
    axes[2].set_ylim(bottom=0)
    axes[0].legend(fontsize=7)
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="fig4_geometry", task=analyze, claims=claims, figures=figures)

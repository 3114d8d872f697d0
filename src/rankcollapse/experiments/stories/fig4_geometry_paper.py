"""Fig. 4 in the paper's own setting: token geometry of BERT, GPT-2, T5, ALBERT (paper §5).

Task: :func:`~rankcollapse.experiments.paper_tasks.paper_geometry`, one run per model and seed:
the model's own blocks at its own depth on 128-token Wikipedia excerpts. Each model is the
paper's checkpoint when it is in the local Hugging Face cache, else a stand-in named in every
title, row and CSV. Claims per model: full rank at every layer; sigma_min well above 0 (judged on
the absolute value the paper plots and on sigma_min / sigma_max); mean |cos| grows into a narrow
region. Figure: per layer, mean ± std over samples, one curve per model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import NOT_REPRODUCED, Claim, Data
from rankcollapse.experiments.paper_data import (
    model_groups,
    one_way_claim,
    pooled_layer,
    rows_of,
    runs_of,
    sample_note,
    two_way_claim,
)
from rankcollapse.experiments.paper_plots import MARKERS, pyplot
from rankcollapse.experiments.paper_rules import (
    Judgement,
    Thresholds,
    rule_cos_grows,
    rule_full_rank,
    rule_sigma_min,
)
from rankcollapse.experiments.paper_tasks import paper_geometry

SOURCE = "paper §5, Fig. 4"
FIGURE = "fig4_geometry_paper"
S_RANK = ("The token matrix keeps full rank at every layer",
          "share of samples with rank >= k = min(distinct rows of X(0), d) (torch.linalg.matrix_rank's "
          "tolerance; a repeated token without absolute positions is one row) >= full_rank_min at every "
          "layer -> reproduced, else not reproduced")
S_SIGMA = ("The smallest singular value stays well above 0",
           "sigma_min = the k-th singular value (k as for full rank); absolute: mean sigma_min >= "
           "sigma_abs_min at every layer; relative: mean "
           "sigma_min / sigma_max >= ratio_min at every layer; each -> reproduced, else not reproduced; "
           "the row combines both")
S_COS = ("The mean |cos| of token pairs grows with depth: tokens concentrate in a narrow region",
         "mean |cos| at the last layer minus at the first > 2 standard errors and the last >= aniso_factor x "
         "sqrt(2 / (pi d)) (independent isotropic tokens) -> reproduced; falls for sure -> not reproduced")
PANELS = (("full_rank", "share of samples with full rank", False),
          ("sigma_min", "sigma_min (absolute)", True),
          ("sigma_ratio", "sigma_min / sigma_max", True),
          ("mean_abs_cos", "mean |cos| of token pairs", False))


def claims(data: Data) -> list[Claim]:
    th = Thresholds.from_verdict(data.exp.verdict)
    frame = rows_of(data, "geometry")
    if frame.empty:
        return [data.no_data(f"fig4.{k}", s, SOURCE, r, FIGURE)
                for k, (s, r) in (("full_rank", S_RANK), ("sigma_min", S_SIGMA), ("cos", S_COS))]
    out = []
    for label, _, g in model_groups(frame):
        runs, tag = runs_of(data, g), str(g["model"].iloc[0])
        share, _, n = pooled_layer(g, "full_rank")
        judged = rule_full_rank(share, n, th)
        if judged.verdict == NOT_REPRODUCED and share[0] < th.full_rank_min:
            judged = Judgement(judged.verdict, judged.evidence + "; X(0), the embeddings, already lacks full "
                               "rank: a property of the embedding layer (e.g. an embedding of width N = 128 "
                               "after a centring LayerNorm has rank <= 127), not of the layers' dynamics")
        out.append(one_way_claim(data, f"fig4.full_rank[{tag}]", S_RANK[0], SOURCE, S_RANK[1], judged, runs,
                                 g, FIGURE, label))
        smin, _, _ = pooled_layer(g, "sigma_min")
        ratio, _, _ = pooled_layer(g, "sigma_ratio")
        absolute, relative = rule_sigma_min(smin, ratio, n, th)
        out.append(two_way_claim(data, f"fig4.sigma_min[{tag}]", S_SIGMA[0], SOURCE, S_SIGMA[1], absolute,
                                 relative, runs, g, FIGURE, label,
                                 names=("absolute sigma_min (as the paper plots it)",
                                        "sigma_min / sigma_max")))
        mean, std, _ = pooled_layer(g, "mean_abs_cos")
        out.append(one_way_claim(data, f"fig4.cos_grows[{tag}]", S_COS[0], SOURCE, S_COS[1],
                                 rule_cos_grows(mean, std, n, int(g["d_model"].iloc[0]), th), runs, g, FIGURE,
                                 label))
    return out


def figures(data: Data) -> list[FigureSpec]:
    frame = rows_of(data, "geometry")
    if frame.empty:
        return []
    plt = pyplot()
    fig, axes = plt.subplots(1, len(PANELS), figsize=(3.6 * len(PANELS), 3.2))
    tables = []
    groups = model_groups(frame)
    for i, (label, _, g) in enumerate(groups):
        for ax, (col, title, logy) in zip(axes, PANELS, strict=True):
            mean, std, n = pooled_layer(g, col)
            t = np.arange(len(mean))
            (line,) = ax.plot(t, mean, marker=MARKERS[i % len(MARKERS)], ms=3, label=label)
            low = np.maximum(mean - std, mean * 1e-3) if logy else mean - std
            ax.fill_between(t, low, mean + std, color=line.get_color(), alpha=0.15, lw=0)
            if logy:
                ax.set_yscale("log")
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("layer t")
            tables.append(pd.DataFrame({"model": label, "quantity": col, "layer": t, "mean": mean, "std": std,
                                        "samples": n}))
    axes[0].set_ylim(-0.05, 1.05)
    handles, labels = axes[0].get_legend_handles_labels()
    stand = [lab for lab in labels if "stand-in" in lab]
    fig.suptitle("Fig. 4 (paper's setting): token geometry per layer, mean ± std over samples"
                 + (f"\nstand-ins: {'; '.join(stand)}" if stand else ""), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    note = "; ".join(f"{label}: {sample_note(runs_of(data, g), g)}" for label, _, g in groups)
    caption = ("Fig. 4 in the paper's setting: the models' own blocks on 128-token Wikipedia excerpts. "
               "Share of samples with full rank, sigma_min (absolute, as the paper plots it, and relative "
               f"to sigma_max), mean |cos| of token pairs; stand-ins are named in the legend. {note}.")
    return [FigureSpec(FIGURE, fig, pd.concat(tables, ignore_index=True), caption)]


STORY = Story(name="fig4_geometry_paper", task=paper_geometry, claims=claims, figures=figures)

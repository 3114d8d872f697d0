"""Fig. 8 (paper App. G.3): every singular value of X(t) per layer, random init and pretrained.

Arm ``paper``: BERT, GPT-2 and T5 with their own blocks and depth, at initialisation (the exact
configs) and pretrained where a pretrained stand-in exists offline (named); the figure shows the
whole spectrum of 3 samples per layer, as the paper. The statement (one dominant singular value, the
smallest never near 0) is judged on the per-layer means over ALL samples of the runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import Model, judged, model_row
from rankcollapse.experiments.kit.data import arm_models, layered, model_groups, rows_of
from rankcollapse.experiments.kit.plots import figure, label_axes, quantity_label, slug
from rankcollapse.experiments.kit.tasks.curves import MODEL_GEOMETRY
from rankcollapse.experiments.kit.thresholds import Thresholds

STATEMENTS = (
    Statement(
        "dominant",
        "The spectrum of X(t) has one dominant singular value, and the smallest is never near 0",
        "paper App. G.3, Fig. 8",
        "per layer t >= 1 (X(0), the embedding lookup no layer has acted on, is reported, not judged: the "
        "statement is about what the layers do, and the paper says 'usually'): mean sigma_1 / sigma_2 >= "
        "dominance_min and mean sigma_min / sigma_max >= ratio_min for sure at every layer (Bonferroni over "
        "layers and the two ratios; the network is the unit at initialisation) -> reproduced; either below "
        "for sure at some layer -> not reproduced",
    ),
)
ARMS = (Arm("paper", MODEL_GEOMETRY),)


#: The first layer judged: X(0) is the embedding lookup, on which no layer has acted yet (at
#: initialisation a random Gaussian table, sigma_1/sigma_2 near 1); it is reported, not judged.
FIRST_JUDGED = 1


def _dominant(frame: pd.DataFrame, t: Thresholds) -> rules.Judgement:
    return rules.dominant_sv(
        layered(frame, "sigma_dominance"), layered(frame, "sigma_ratio"), t, first=FIRST_JUDGED
    )


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("fig8", sd.verdict, sd.ranges)
    return [
        model_row(
            "fig8",
            STATEMENTS[0],
            data,
            th,
            judged(lambda t, f=frame: _dominant(f, t), th),
            None,
            frame,
            qualifier=str(frame["model"].iloc[0]),
            figure=f"fig8_{slug(label)}",
            names=("float32 (the paper's dtype)", ""),
        )
        for _, data, label, _, frame in arm_models(sd, ("paper",), "geometry")
    ]


def figures(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("paper")
    out: list[FigureSpec] = []
    if data is None:
        return out
    sv = rows_of(data, "sv")
    if sv.empty:
        return out
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    for label, _, g in model_groups(sv):
        if Model.of(g).untested:
            continue
        run = g["run_id"].iloc[0]  # the 3 plotted samples come from one run
        g = g[g["run_id"] == run]
        samples = sorted(g["sample"].unique())
        fig = figure(3.6 * len(samples) + 0.8, 3.2)
        axes = fig.subplots(1, len(samples), squeeze=False)
        layers = sorted(int(t) for t in g["layer"].unique())
        cmap, norm = colormaps["viridis"], Normalize(vmin=0, vmax=max(layers[-1], 1))
        for ax, s in zip(axes[0], samples, strict=True):
            for t in layers:
                one = g[(g["sample"] == s) & (g["layer"] == t)].sort_values("index")
                ax.plot(one["index"] + 1, one["sigma"], color=cmap(norm(t)), lw=1)
            label_axes(ax, "index i of sigma_i (largest first)", logx=True, logy=True,
                       title=f"excerpt {int(s) + 1}")
        label_axes(axes[0][0], y="singular value sigma_i of X(t)")
        bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=list(axes[0]), pad=0.02)
        bar.set_label(f"{quantity_label('layer')} (0 = embeddings)")
        bar.set_ticks(np.unique(np.linspace(0, layers[-1], min(len(layers), 7)).round().astype(int)))
        fig.suptitle(f"Fig. 8 (paper's setting): all singular values per layer — {label}", fontsize=10)
        caption = (
            f"Fig. 8 — {label}: every singular value of X(t) of {len(samples)} excerpts, one curve per layer "
            "(colour: layer t, colour bar), as the paper shows. The row is judged on the means over all "
            "samples of the runs."
        )
        table = g[["model_label", "layer", "sample", "index", "sigma"]].copy()
        out.append(FigureSpec(f"fig8_{slug(label)}", fig, table, caption))
    return out


STORY = story_here(__name__)

"""Fig. 8 in the paper's own setting: all singular values of X(t) per layer (paper App. G.3).

Task: :func:`~rankcollapse.experiments.paper_tasks.paper_geometry` with ``spectrum_samples = 3``:
BERT randomly initialised and pretrained (or its stand-in), its own blocks and depth. The figure
shows the full spectrum of 3 samples per layer, as the paper; the claim (one dominant singular
value, the smallest never near 0) is judged on the per-layer means over ALL samples of the runs,
never on the 3 plotted ones alone.
"""

from __future__ import annotations

from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import Claim, Data
from rankcollapse.experiments.paper_data import model_groups, one_way_claim, pooled_layer, rows_of, runs_of
from rankcollapse.experiments.paper_plots import pyplot, slug
from rankcollapse.experiments.paper_rules import Thresholds, rule_dominant_sv
from rankcollapse.experiments.paper_tasks import paper_geometry

SOURCE = "paper App. G.3, Fig. 8"
STATEMENT = ("The spectrum of X(t) has one dominant singular value, and the smallest is never near 0",
             "mean sigma_1 / sigma_2 >= dominance_min and mean sigma_min / sigma_max >= ratio_min at every "
             "layer (means over all samples of the runs) -> reproduced, else not reproduced")


def claims(data: Data) -> list[Claim]:
    th = Thresholds.from_verdict(data.exp.verdict)
    frame = rows_of(data, "geometry")
    if frame.empty:
        return [data.no_data("fig8.dominant", STATEMENT[0], SOURCE, STATEMENT[1], "fig8_spectrum")]
    out = []
    for label, pretrained, g in model_groups(frame):
        dom, _, n = pooled_layer(g, "sigma_dominance")
        ratio, _, _ = pooled_layer(g, "sigma_ratio")
        tag = "pretrained" if pretrained else "random"
        out.append(one_way_claim(data, f"fig8.dominant[{tag}]", STATEMENT[0], SOURCE, STATEMENT[1],
                                 rule_dominant_sv(dom, ratio, n, th), runs_of(data, g), g,
                                 f"fig8_spectrum_{slug(label)}", label))
    return out


def figures(data: Data) -> list[FigureSpec]:
    sv = rows_of(data, "sv")
    out = []
    if sv.empty:
        return out
    plt = pyplot()
    for label, _, g in model_groups(sv):
        run = g["run_id"].iloc[0]  # the 3 plotted samples come from one run
        g = g[g["run_id"] == run]
        samples = sorted(g["sample"].unique())
        fig, axes = plt.subplots(1, len(samples), figsize=(3.6 * len(samples), 3.2), squeeze=False)
        layers = sorted(g["layer"].unique())
        cmap = plt.get_cmap("viridis")
        for ax, s in zip(axes[0], samples, strict=True):
            for t in layers:
                one = g[(g["sample"] == s) & (g["layer"] == t)].sort_values("index")
                ax.plot(one["index"] + 1, one["sigma"], color=cmap(t / max(layers[-1], 1)), lw=1,
                        label=f"t = {t}" if t in (layers[0], layers[-1]) else None)
            ax.set_yscale("log")
            ax.set_xscale("log")
            ax.set_title(f"sample {int(s) + 1}", fontsize=9)
            ax.set_xlabel("index i of sigma_i (largest first)")
        axes[0][0].set_ylabel("singular value sigma_i of X(t)")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"Fig. 8 (paper's setting): all singular values per layer — {label}", fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        caption = (f"Fig. 8 — {label}: every singular value of X(t) (colour: layer, dark = embeddings, "
                   f"yellow = last layer) of {len(samples)} excerpts, as the paper shows. The claim row is "
                   "judged on the means over all samples of the runs.")
        table = g[["model_label", "layer", "sample", "index", "sigma"]].copy()
        out.append(FigureSpec(f"fig8_spectrum_{slug(label)}", fig, table, caption))
    return out


STORY = Story(name="fig8_spectrum", task=paper_geometry, claims=claims, figures=figures)

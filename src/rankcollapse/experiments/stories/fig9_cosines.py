"""Fig. 9 in the paper's own setting: pairwise cosines of the initial embeddings (paper App. G.4).

Task: :func:`~rankcollapse.experiments.paper_tasks.paper_geometry` with ``layers = 0`` (the
embeddings X(0) only) and ``cosine_samples = 3``: BERT and ALBERT, randomly initialised and
pretrained (or stand-ins). Figure: histograms of the pairwise cosines of 3 samples, as the paper.
Claim per model: all initial cosines >= 0 (``phi(0) >= 0``, the condition of Corollary 1), as the
share of ALL samples whose smallest pairwise cosine is >= 0. A ``pretrained:`` row whose only
stand-in offline is a random init (ALBERT) would repeat the random-init row: its claim is
inconclusive (untested, said so) and it gets no panel.
"""

from __future__ import annotations

from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import INCONCLUSIVE, Claim, Data
from rankcollapse.experiments.paper_data import model_groups, one_way_claim, rows_of, runs_of
from rankcollapse.experiments.paper_plots import pyplot
from rankcollapse.experiments.paper_rules import Thresholds, rule_initial_cos
from rankcollapse.experiments.paper_tasks import paper_geometry

SOURCE = "paper App. G.4, Fig. 9"
FIGURE = "fig9_cosines"
STATEMENT = ("All pairwise cosines of the initial token embeddings are >= 0 (phi(0) >= 0) in BERT and ALBERT",
             "share of samples whose smallest pairwise cosine of X(0) is >= 0, over all samples of the runs, "
             ">= share_min -> reproduced, else not reproduced")


def claims(data: Data) -> list[Claim]:
    th = Thresholds.from_verdict(data.exp.verdict)
    frame = rows_of(data, "phi0")
    if frame.empty:
        return [data.no_data("fig9.nonnegative", STATEMENT[0], SOURCE, STATEMENT[1], FIGURE)]
    out = []
    for label, _, g in model_groups(frame):
        tag = str(g["model"].iloc[0])  # the grid's name: pretrained:<ckpt> or random:<ckpt>
        if _repeats_random(g):
            why = (f"[{label}] untested: no pretrained weights of this checkpoint offline, and its "
                   "stand-in is the random init, the same model as the random-init row (judged there)")
            out.append(data.claim(f"fig9.nonnegative[{tag}]", f"{STATEMENT[0]} [{label}]", SOURCE,
                                  STATEMENT[1], why, INCONCLUSIVE, runs_of(data, g), figure=FIGURE))
            continue
        judged = rule_initial_cos(g["phi0"].to_numpy(dtype=float), th)
        neg = float(g["negative_share"].mean())
        judged = type(judged)(judged.verdict, f"{judged.evidence}; share of negative pairs {neg:.2%}")
        out.append(one_way_claim(data, f"fig9.nonnegative[{tag}]", STATEMENT[0], SOURCE, STATEMENT[1], judged,
                                 runs_of(data, g), g.assign(samples=len(g) // max(g["run_id"].nunique(), 1)),
                                 FIGURE, label))
    return out


def _repeats_random(g: object) -> bool:
    """A ``pretrained:`` group whose weights are a random init (the stand-in of last resort)."""
    return str(g["model"].iloc[0]).startswith("pretrained:") and not bool(g["pretrained"].iloc[0])  # type: ignore[index]


def figures(data: Data) -> list[FigureSpec]:
    hist, phi = rows_of(data, "cos_hist"), rows_of(data, "phi0")
    if hist.empty:
        return []
    plt = pyplot()
    groups = [grp for grp in model_groups(hist) if not _repeats_random(grp[2])]
    fig, axes = plt.subplots(1, len(groups), figsize=(3.6 * len(groups), 3.0), squeeze=False)
    for ax, (label, _, g) in zip(axes[0], groups, strict=True):
        run = g["run_id"].iloc[0]
        g = g[g["run_id"] == run]
        for s in sorted(g["sample"].unique()):
            one = g[g["sample"] == s].sort_values("bin_lo")
            edges = [*one["bin_lo"], one["bin_hi"].iloc[-1]]
            ax.stairs(one["count"].to_numpy(), edges, label=f"sample {int(s) + 1}")
        ax.axvline(0.0, color="red", lw=0.8)
        p = phi[phi["model_label"] == label]
        share = float((p["phi0"] >= 0).mean()) if not p.empty else float("nan")
        ax.set_title(f"{label}\nphi(0) >= 0 in {share:.0%} of {len(p)} samples", fontsize=8)
        ax.set_xlabel("pairwise cosine of initial embeddings")
    axes[0][0].set_ylabel("number of token pairs")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Fig. 9 (paper's setting): pairwise cosines of the initial embeddings X(0)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    caption = ("Fig. 9: histograms of the pairwise cosines cos(x_i(0), x_j(0)), i != j, of 3 excerpts per "
               "model (red line: 0). Titles give the share of all samples with phi(0) = min cos >= 0, the "
               "condition of Corollary 1; stand-ins are named. A pretrained checkpoint whose only offline "
               "stand-in is its random init has no panel (it would repeat the random-init one).")
    table = hist[["model_label", "sample", "bin_lo", "bin_hi", "count"]].copy()
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="fig9_cosines", task=paper_geometry, claims=claims, figures=figures)

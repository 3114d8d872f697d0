"""Fig. 9 (paper App. G.4): pairwise cosines of the initial embeddings X(0), and phi(0) >= 0.

Arms (both the paper's setting): ``random_init`` (BERT, ALBERT, GPT-2, T5 configs, Hugging Face's
init, over several weight seeds) and ``pretrained`` (``paper:<checkpoint>``: the checkpoint when cached,
else a pretrained stand-in, named; ALBERT and T5 have none offline: untested). The paper's statement
is about BERT and ALBERT; GPT-2 and T5 are ours (the same measure). Each row names the tokenizer and
the token pairs with the most negative cosine.
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import Model, judged, model_row
from rankcollapse.experiments.kit.data import arm_models, model_groups, rows_of, runs_of, sample_layered
from rankcollapse.experiments.kit.plots import label_axes, panel_grid, reference_line
from rankcollapse.experiments.kit.tasks.curves import MODEL_GEOMETRY
from rankcollapse.experiments.kit.thresholds import Thresholds

RULE = (
    "as plotted (the histogram of the pairwise cosines of X(0)): the mean share of negative token pairs per "
    "sample below negative_pairs_max for sure -> reproduced, above it for sure -> not reproduced; "
    "mechanism (Corollary 1's hypothesis phi(0) = min cos >= 0): the share of samples with phi(0) >= 0 at "
    "least share_min for sure (Wilson interval over samples; at initialisation the network is the unit, "
    "a t interval over the weight seeds' shares) -> holds, below it for sure -> differs"
)
STATEMENTS = (
    Statement(
        "nonnegative",
        "All pairwise cosines of the initial token embeddings are >= 0 (phi(0) >= 0) in BERT and ALBERT",
        "paper App. G.4, Fig. 9",
        RULE,
    ),
    Statement(
        "nonnegative_other",
        "The same phi(0) >= 0 in GPT-2 and T5",
        "ours (the paper shows BERT and ALBERT only)",
        RULE,
        ours=True,
    ),
)
ARMS = (Arm("random_init", MODEL_GEOMETRY), Arm("pretrained", MODEL_GEOMETRY))
PAPER_FAMILIES = ("bert", "albert")


def _family(frame: pd.DataFrame) -> str:
    name = str(frame["model"].iloc[0]).split(":", 1)[-1].split(",")[0]
    return name.split("-")[0]


def _pairs(g: pd.DataFrame) -> str:
    worst = g.sort_values("phi0").head(3)
    return ", ".join(
        f"'{r.pair}' ({r.phi0:.2g})" for r in worst.itertuples() if isinstance(r.pair, str) and r.pair
    )


def _pairs_negative(g: pd.DataFrame, seeds: int, t: Thresholds) -> rules.Judgement:
    """As plotted: the share of negative token pairs per sample."""
    tok = str(g["tokenizer"].iloc[0]) if "tokenizer" in g else ""
    j = rules.nonnegative_pairs(sample_layered(g, "negative_share"), t, _pairs(g))
    return j.amended(after=f"; {seeds} seed(s); tokenizer: {tok}")


def _phi0(g: pd.DataFrame, t: Thresholds) -> rules.Judgement:
    """Mechanism: Corollary 1's phi(0) >= 0, per sample."""
    nonneg = pd.DataFrame(
        {
            "run_id": g["run_id"].to_numpy(),
            "pretrained": g["pretrained"].to_numpy(),
            "phi0_nonnegative": (g["phi0"].astype(float) >= 0).to_numpy(dtype=float),
        }
    )
    smallest = float(g["phi0"].astype(float).min()) if not g.empty else float("nan")
    return rules.initial_cos(sample_layered(nonneg, "phi0_nonnegative", share=True), t, smallest)


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("fig9", sd.verdict, sd.ranges)
    out = []
    for _, data, _, _, g in arm_models(sd, ("random_init", "pretrained"), "phi0"):
        statement = STATEMENTS[0] if _family(g) in PAPER_FAMILIES else STATEMENTS[1]
        seeds = len({int(s) for s in runs_of(data, g)["seed"]})
        out.append(
            model_row(
                "fig9",
                statement,
                data,
                th,
                judged(lambda t, g=g, k=seeds: _pairs_negative(g, k, t), th),
                judged(lambda t, g=g: _phi0(g, t), th),
                g,
                qualifier=str(g["model"].iloc[0]),
                figure="fig9",
                names=("negative token pairs (the histogram)", "phi(0) >= 0 per sample (Corollary 1)"),
            )
        )
    return out


def figures(sd: StoryData) -> list[FigureSpec]:
    groups = []
    for arm in ("random_init", "pretrained"):
        data = sd.arm(arm)
        if data is not None:
            hist, phi = rows_of(data, "cos_hist"), rows_of(data, "phi0")
            groups += [
                (label, g, phi[phi["model_label"] == label])
                for label, _, g in model_groups(hist)
                if not Model.of(g).untested
            ]
    if not groups:
        return []
    fig, flat = panel_grid(len(groups), ncols=4, w=3.6, h=3.0)
    for ax, (label, g, p) in zip(flat, groups, strict=True):
        run = g["run_id"].iloc[0]
        g = g[g["run_id"] == run]
        for s in sorted(g["sample"].unique()):
            one = g[g["sample"] == s].sort_values("bin_lo")
            edges = [*one["bin_lo"], one["bin_hi"].iloc[-1]]
            ax.stairs(one["count"].to_numpy(), edges, label=f"excerpt {int(s) + 1}")
        reference_line(ax, 0.0, vertical=True, color="red", ls="-")
        share = float((p["phi0"] >= 0).mean()) if not p.empty else float("nan")
        neg = float(p["negative_share"].mean()) if not p.empty else float("nan")
        label_axes(ax, "pairwise cosine of initial embeddings", logy=True,
                   title=f"{label}\nnegative pairs {neg:.2%}; phi(0) >= 0 in {share:.0%} of {len(p)} samples")
    label_axes(flat[0], y="number of token pairs (log)", legend=7)
    fig.suptitle("Fig. 9 (paper's setting): pairwise cosines of the initial embeddings X(0)", fontsize=10)
    caption = (
        "Fig. 9: histograms of the pairwise cosines cos(x_i(0), x_j(0)), i != j, of 3 excerpts per model, "
        "log counts so the negative tail shows (red line: 0). Titles give the mean share of negative token "
        "pairs per sample (what the histogram shows: the row's 'as plotted') and the share of all samples "
        "with phi(0) = min cos >= 0, the condition of Corollary 1 (its 'mechanism'); stand-ins are named; "
        "checkpoints whose only "
        "offline stand-in is a random init are not drawn (untested)."
    )
    table = pd.concat(
        [g[["model_label", "sample", "bin_lo", "bin_hi", "count"]] for _, g, _ in groups], ignore_index=True
    )
    return [FigureSpec("fig9", fig, table, caption)]


STORY = story_here(__name__)

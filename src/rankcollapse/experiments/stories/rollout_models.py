"""Rollout of real models' own attention (Herasimchyk et al., arXiv 2602.16837, against Wu et al. 2025).

Herasimchyk et al.'s abstract says that at finite depth the residual-aware influence profile is U-shaped,
matching what is measured in pretrained ALiBi language models. No ALiBi model is offline
(``residual_rollout.u_shape_alibi`` stays untested); the bundled pretrained MiniLM (an encoder, absolute
positions, complete mask) and SmolLM2-135M (a causal decoder, RoPE) stand in for them, each labelled as a
stand-in in its rows. Measured on text excerpts (``models.rollout`` through ``kit.rollout_tasks``): the
rollout of each model's own attention, per head and averaged over heads, with the residual-aware mixing
``lam I + (1 - lam) A(t)`` for the lams of the YAML, the last token's influence profile by depth, the
first-token share by depth, and beside them the sink measures the project already has
(``first_token_attention``, ``sink_rate``) from the same attention.

Rules: ``kit.influence.u_shaped`` (the U: both ends of the last token's profile above its middle, per
position, at the model's last layer), one row per model and lam > 0; ``kit.rules.san_collapse`` on the
first-token gap of the plain rollout (lam = 0) of the causal models (ours: Wu et al.'s convergence to the
first token, re-judged on a pretrained causal LM). The unit is the excerpt (pretrained weights: one network).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import judged, model_row
from rankcollapse.experiments.kit.data import arm_models, curves_by, layered, rows_of
from rankcollapse.experiments.kit.influence import u_shaped
from rankcollapse.experiments.kit.plots import MARKERS, figure
from rankcollapse.experiments.kit.rollout_tasks import MODEL_ROLLOUT
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``): its section of the report.
PAPER = "2602.16837"
SOURCE = "Herasimchyk et al. 2026 (arXiv 2602.16837), [abstract]; pretrained non-ALiBi LMs as stand-ins"
LAM = "rollout_residual"
FIGURE = "rollout_models_influence"
GAP = "first_token_gap_max"
STATEMENTS = (
    Statement(
        "u_shape_models",
        "At finite depth the residual-aware influence profile (lam I + (1 - lam) A(t)) is U-shaped, matching "
        "what is measured in pretrained language models",
        SOURCE,
        "per model and lam > 0, at the model's last layer, the last token's profile P(L)[n-1, :]: both its "
        "start (the first `ends` positions) and its end (the last `ends`) above the middle by more than "
        "u_log_min in log mean influence per position, for sure over the excerpts -> reproduced; one arm "
        "below for sure -> not reproduced (kit.influence.u_shaped, Bonferroni over the arms)",
    ),
    Statement(
        "first_token_models",
        "In a pretrained causal language model the plain rollout of its own attention (lam = 0) converges to "
        "the first token with depth (Wu et al. 2025's causal result, on a real model)",
        "ours (re-judging Wu et al. 2025, arXiv 2502.01951, on a pretrained causal LM's own attention)",
        "the first-token gap max_i (1 - P(t)[i, 0]) of the head-averaged rollout at lam = 0 'collapsing' or "
        "at the floor, for each model whose own mask is causal (kit.rules.san_collapse)",
        ours=True,
    ),
)
ARMS = (Arm("models", MODEL_ROLLOUT),)
NAMES = ("last token's rollout profile (head-averaged)", "")


def _name(frame: pd.DataFrame) -> str:
    """The model's name as the grid gives it (``minilm``, ``smollm2``): a row's qualifier."""
    return str(frame["model_name"].iloc[0])


def _u_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    out = []
    for _, data, label, _, frame in arm_models(sd, ("models",), "shape"):
        for lam in sorted(v for v in frame[LAM].unique() if v > 0):
            sub = frame[frame[LAM] == lam]
            arms = {f"{label}, lam = {lam:g}": (layered(sub, "start_over_middle_log"),
                                                layered(sub, "end_over_middle_log"))}
            out.append(
                model_row("rollout_models", STATEMENTS[0], data, th,
                          judged(lambda t, a=arms: u_shaped(a, t), th), None, sub,
                          qualifier=f"{_name(sub)}, lam={lam:g}", figure=FIGURE, names=NAMES)
            )
    return out


def _first_token_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    out = []
    for _, data, label, _, frame in arm_models(sd, ("models",), "curve"):
        sub = frame[(frame[LAM] == 0) & (frame["own_mask"] == "causal")]
        if sub.empty:
            continue
        curves = {f"{label}, lam = 0, {dt}": c for (_, dt), c in curves_by(sub, GAP, [LAM]).items()}
        out.append(
            model_row("rollout_models", STATEMENTS[1], data, th,
                      judged(lambda t, c=curves: rules.san_collapse(c, t), th), None, sub,
                      qualifier=_name(sub), figure=FIGURE,
                      names=("first-token gap of the plain rollout", ""))
        )
    return out


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("rollout_models", sd.verdict, sd.ranges)
    if sd.arm("models") is None:
        return []
    return _u_rows(sd, th) + _first_token_rows(sd, th)


def _table(sd: StoryData) -> pd.DataFrame:
    """Per model and lam: the last layer's arms (mean log ratio over the middle), the first-token share of
    the rollout at the last layer, and the sink measures' means over layers."""
    out = []
    for _, _, label, _, frame in arm_models(sd, ("models",), "shape"):
        data = sd.arm("models")
        curve = rows_of(data, "curve")
        sink = rows_of(data, "sink")
        curve, sink = curve[curve["model_label"] == label], sink[sink["model_label"] == label]
        for lam in sorted(frame[LAM].unique()):
            sub = frame[frame[LAM] == lam]
            last = int(sub["layer"].max())
            start, end = layered(sub, "start_over_middle_log"), layered(sub, "end_over_middle_log")
            c = curve[(curve[LAM] == lam) & (curve["layer"] == last)]
            out.append(
                {
                    "model": label,
                    "own_mask": str(sub["own_mask"].iloc[0]),
                    "lam": float(lam),
                    "layers": last,
                    "start_over_middle_log": float(start.mean[last]),
                    "end_over_middle_log": float(end.mean[last]),
                    "first_token_share_last": float(c["first_token_share_mean"].mean()),
                    "first_token_attention_mean": float(sink["first_token_attention"].mean()),
                    "sink_rate_mean": float(sink["sink_rate"].mean()),
                    "samples": start.n,
                }
            )
    return pd.DataFrame(out)


def figures(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("models")
    if data is None:
        return []
    influence, curve, sink = rows_of(data, "influence"), rows_of(data, "curve"), rows_of(data, "sink")
    head = rows_of(data, "head_share")
    if influence.empty:
        return []
    fig = figure(14, 4.8, layout="constrained")
    (ax, ax2, ax3) = fig.subplots(1, 3)
    labels = list(dict.fromkeys(influence["model_label"]))
    styles = ["-", "--", "-.", ":"]
    for i, label in enumerate(labels):
        g = influence[influence["model_label"] == label]
        last = int(g["layer"].max())
        for k, lam in enumerate(sorted(g[LAM].unique())):
            p = g[(g[LAM] == lam) & (g["layer"] == last)].groupby("position")["influence"].mean()
            x = p.index.to_numpy() / max(len(p) - 1, 1)
            ax.plot(x, np.maximum(p.to_numpy(), 1e-12), styles[k % len(styles)], color=f"C{i}", lw=1.2,
                    label=f"{label.split(' ')[0]}, lam = {lam:g} (t = {last})")
        c = curve[curve["model_label"] == label]
        for k, lam in enumerate(sorted(c[LAM].unique())):
            cc = c[c[LAM] == lam].groupby("layer")["first_token_share_mean"].mean()
            t = cc.index.to_numpy() / max(int(cc.index.max()), 1)
            ax2.plot(t, cc.to_numpy(), styles[k % len(styles)] + MARKERS[i % len(MARKERS)], color=f"C{i}",
                     ms=3, label=f"{label.split(' ')[0]}: rollout, lam = {lam:g}")
        s = sink[sink["model_label"] == label].groupby("layer")["first_token_attention"].mean()
        if not s.empty:
            ax2.plot(s.index.to_numpy() / max(int(s.index.max()), 1), s.to_numpy(), ":", color=f"C{i}",
                     lw=2, alpha=0.6, label=f"{label.split(' ')[0]}: first_token_attention (one layer)")
        h = head[(head["model_label"] == label) & (head[LAM] == 0)]
        for j, (_, hg) in enumerate(h.groupby("head")):
            hg = hg.sort_values("layer")
            ax3.plot(hg["layer"] / max(int(hg["layer"].max()), 1), hg["first_token_share_mean"], "-",
                     color=f"C{i}", lw=0.7, alpha=0.5,
                     label=f"{label.split(' ')[0]}, per head" if j == 0 else None)
    ax.set_yscale("log")
    ax.set_xlabel("input position j / (n - 1)")
    ax.set_ylabel("P(L)[n-1, j]: influence on the last token")
    ax.set_title("last token's profile at the last layer", fontsize=8)
    ax.legend(fontsize=6)
    ax2.set_xlabel("relative depth t / L")
    ax2.set_ylabel("first-token share, mean over tokens")
    ax2.set_title("head-averaged rollout vs one layer's attention", fontsize=8)
    ax2.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    ax3.set_xlabel("relative depth t / L")
    ax3.set_ylabel("per-head rollout (lam = 0): first-token share")
    ax3.set_title("per head", fontsize=8)
    ax3.legend(fontsize=6)
    caption = (
        "Herasimchyk et al. 2026 on real models: the rollout P(t) = M(t)...M(1), "
        "M(t) = lam I + (1 - lam) A(t), "
        "of each pretrained model's own attention on Wikipedia excerpts (stand-ins for pretrained ALiBi LMs: "
        "MiniLM is an encoder with a complete mask, SmolLM2 a causal decoder with RoPE). Left: the last "
        "token's influence over the input positions at the model's last layer (mean over excerpts, "
        "head-averaged; values below 1e-12 drawn at 1e-12): a U has both ends above the middle. Middle: "
        "the first-token share of the rollout by relative depth (mean over tokens and excerpts), beside the "
        "one-layer first_token_attention (dotted, mean over heads): the product concentrates on the first "
        "token far more than any one layer's attention does. Right: the same share for the rollout of each "
        "head on its own (lam = 0)."
    )
    return [FigureSpec(FIGURE, fig, _table(sd), caption)]


def headlines(sd: StoryData) -> list[str]:
    table = _table(sd)
    if table.empty:
        return []
    out = []
    for label, g in table.groupby("model", sort=False):
        per = ", ".join(
            f"lam = {r['lam']:g}: first-token share {r['first_token_share_last']:.3g}, start x"
            f"{np.exp(r['start_over_middle_log']):.3g} / end x{np.exp(r['end_over_middle_log']):.3g} "
            "the middle"
            for _, r in g.iterrows()
        )
        sinks = g.iloc[0]
        out.append(
            f"{label} ({sinks['own_mask']} mask, {int(sinks['layers'])} layers): {per}; one layer's "
            f"first_token_attention {sinks['first_token_attention_mean']:.2g}, sink_rate "
            f"{sinks['sink_rate_mean']:.2g} (means over layers)."
        )
    return out


STORY = story_here(__name__)

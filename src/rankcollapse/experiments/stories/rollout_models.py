"""Rollout of real models' own attention (Herasimchyk et al., arXiv 2602.16837, against Wu et al. 2025).

Herasimchyk et al.'s abstract says that at finite depth the residual-aware influence profile is U-shaped,
matching what is measured in pretrained ALiBi language models. No ALiBi model is offline
(``residual_rollout.u_shape_alibi`` stays untested); the bundled pretrained MiniLM and MPNet (encoders,
complete mask; MiniLM absolute positions, MPNet relative position buckets) and SmolLM2-135M (a causal
decoder, RoPE) stand in for them, each labelled as a stand-in in its rows (arm ``models``); the opt-in
Gemma-3-270M (local/global sliding windows) and Qwen2.5-Coder-0.5B (GQA) of ``make models-extra`` are the
arm ``extra`` (``opt_in`` in the YAML: run by ``--profile paper`` or ``--only rollout_models.extra``, never
by a default call; refused in one line when not installed). Measured on text excerpts
(``models.rollout`` through ``kit.tasks.rollout``): the rollout of each model's own attention, per head
and averaged over heads, with the residual-aware mixing ``lam I + (1 - lam) A(t)`` for the lams of the
YAML, the last token's influence profile by depth, the first-token share by depth, and beside them, by
depth, the sink measures the project already has (``first_token_attention``, ``sink_rate``) from the same
attention (figure ``rollout_models_depth``).

Rules: ``kit.rules.profiles.u_shaped`` (the U: both ends of the last token's profile above its middle, per
position, at the model's last layer), one row per model and lam > 0; ``kit.rules.san_collapse`` on the
first-token gap of the plain rollout (lam = 0) of the causal models (own mask lower triangular: causal,
or a causal window; ours: Wu et al.'s convergence to the first token, re-judged on a
pretrained causal LM). The unit is the excerpt (pretrained weights: one network).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import judged, model_row
from rankcollapse.experiments.kit.data import arm_models, curves_by, layered, rows_of
from rankcollapse.experiments.kit.plots import label_axes, line, panel_grid
from rankcollapse.experiments.kit.rules.profiles import u_shaped
from rankcollapse.experiments.kit.tasks.masks import parse_mask
from rankcollapse.experiments.kit.tasks.rollout import MODEL_ROLLOUT
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``): its section of the report.
PAPER = "2602.16837"
SOURCE = "Herasimchyk et al. 2026 (arXiv 2602.16837), [abstract]; pretrained non-ALiBi LMs as stand-ins"
LAM = "rollout_residual"
FIGURE = "rollout_models_influence"
DEPTH_FIGURE = "rollout_models_depth"
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
        "below for sure -> not reproduced (kit.rules.profiles.u_shaped, Bonferroni over the arms)",
    ),
    Statement(
        "first_token_models",
        "In a pretrained causal language model the plain rollout of its own attention (lam = 0) converges to "
        "the first token with depth (Wu et al. 2025's causal result, on a real model)",
        "ours (re-judging Wu et al. 2025, arXiv 2502.01951, on a pretrained causal LM's own attention)",
        "the first-token gap max_i (1 - P(t)[i, 0]) of the head-averaged rollout at lam = 0 'collapsing' or "
        "at the floor, for each model whose own mask is causal or a causal window (kit.rules.san_collapse)",
        ours=True,
    ),
)
#: ``models``: the bundled default models; ``extra``: the opt-in ones (``make models-extra``), ``opt_in``
#: in the YAML. Both are judged by the same rules, one row per model.
ARMS = (Arm("models", MODEL_ROLLOUT), Arm("extra", MODEL_ROLLOUT))
MODEL_ARMS = ("models", "extra")
NAMES = ("last token's rollout profile (head-averaged)", "")


def _name(frame: pd.DataFrame) -> str:
    """The model's name as the grid gives it (``minilm``, ``smollm2``): a row's qualifier."""
    return str(frame["model_name"].iloc[0])


def _short(label: str) -> str:
    """A model label without its weights' note (``all-mpnet-base-v2 (pretrained)`` -> ``all-mpnet-base-v2``,
    ``tiny gpt2 (random init)`` -> ``tiny gpt2``)."""
    return label.split(" (")[0]


def causal_own_mask(spec: str, tokens: int) -> bool:
    """True when the mask ``spec`` is lower triangular at ``tokens`` (causal, or a causal window): no
    token attends to a later one, so Wu et al.'s first-token result applies."""
    band = parse_mask(spec).band(tokens)
    return band is not None and band[1] == 0


def _rows(sd: StoryData, kind: str) -> pd.DataFrame:
    """Rows of ``kind`` of every model arm with finished runs (``models``, then ``extra``)."""
    parts = [rows_of(d, kind) for d in (sd.arm(a) for a in MODEL_ARMS) if d is not None]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _u_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    out = []
    for _, data, label, _, frame in arm_models(sd, MODEL_ARMS, "shape"):
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
    for _, data, label, _, frame in arm_models(sd, MODEL_ARMS, "curve"):
        tokens = int(data.exp.base["tokens"])
        causal = frame["own_mask"].map(lambda m, n=tokens: causal_own_mask(str(m), n))
        sub = frame[(frame[LAM] == 0) & causal]
        if sub.empty:
            continue
        curves = {f"{label}, lam = 0, {dt}": c for (_, dt), c in curves_by(sub, GAP, [LAM]).items()}
        out.append(
            model_row("rollout_models", STATEMENTS[1], data, th,
                      judged(lambda t, c=curves: rules.san_collapse(c, t), th), None, sub,
                      qualifier=_name(sub), figure=DEPTH_FIGURE,
                      names=("first-token gap of the plain rollout", ""))
        )
    return out


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("rollout_models", sd.verdict, sd.ranges)
    if all(sd.arm(a) is None for a in MODEL_ARMS):
        return []
    return _u_rows(sd, th) + _first_token_rows(sd, th)


def _table(sd: StoryData) -> pd.DataFrame:
    """Per model and lam: the last layer's arms (mean log ratio over the middle), the first-token share of
    the rollout at the last layer, and the sink measures' means over layers."""
    out = []
    curve, sink = _rows(sd, "curve"), _rows(sd, "sink")
    for _, _, label, _, frame in arm_models(sd, MODEL_ARMS, "shape"):
        c_model, s_model = curve[curve["model_label"] == label], sink[sink["model_label"] == label]
        for lam in sorted(frame[LAM].unique()):
            sub = frame[frame[LAM] == lam]
            last = int(sub["layer"].max())
            start, end = layered(sub, "start_over_middle_log"), layered(sub, "end_over_middle_log")
            c = c_model[(c_model[LAM] == lam) & (c_model["layer"] == last)]
            out.append(
                {
                    "model": label,
                    "own_mask": str(sub["own_mask"].iloc[0]),
                    "lam": float(lam),
                    "layers": last,
                    "start_over_middle_log": float(start.mean[last]),
                    "end_over_middle_log": float(end.mean[last]),
                    "first_token_share_last": float(c["first_token_share_mean"].mean()),
                    "first_token_attention_mean": float(s_model["first_token_attention"].mean()),
                    "sink_rate_mean": float(s_model["sink_rate"].mean()),
                    "samples": start.n,
                }
            )
    return pd.DataFrame(out)


def depth_table(sd: StoryData) -> pd.DataFrame:
    """Per model and layer t = 0..L, from the same runs: the head-averaged rollout's first-token share
    (mean over tokens and excerpts) for each lam (``first_token_share_lam<lam>``), beside one layer's sink
    measures, ``first_token_attention`` (mean over heads) and ``sink_rate`` (t >= 1; NaN at t = 0), means
    over excerpts; ``depth`` = t / L."""
    curve, sink = _rows(sd, "curve"), _rows(sd, "sink")
    if curve.empty:
        return pd.DataFrame()
    out = []
    for label in dict.fromkeys(curve["model_label"]):
        c = curve[curve["model_label"] == label]
        s = sink[sink["model_label"] == label] if not sink.empty else sink
        share = {lam: g.groupby("layer")["first_token_share_mean"].mean() for lam, g in c.groupby(LAM)}
        first = s.groupby("layer")["first_token_attention"].mean() if not s.empty else pd.Series(dtype=float)
        rate = s.groupby("layer")["sink_rate"].mean() if not s.empty else pd.Series(dtype=float)
        depth = int(c["layer"].max())
        for t in range(depth + 1):
            row = {"model": label, "own_mask": str(c["own_mask"].iloc[0]), "layer": t,
                   "depth": t / max(depth, 1)}
            row.update({f"first_token_share_lam{lam:g}": float(v.get(t, np.nan)) for lam, v in share.items()})
            row["first_token_attention"] = float(first.get(t, np.nan))
            row["sink_rate"] = float(rate.get(t, np.nan))
            out.append(row)
    return pd.DataFrame(out)


def _influence_figure(influence: pd.DataFrame, head: pd.DataFrame, table: pd.DataFrame) -> FigureSpec:
    fig, (ax, ax3) = panel_grid(2, ncols=2, w=5, h=4.8)
    labels = list(dict.fromkeys(influence["model_label"]))
    for i, label in enumerate(labels):
        g = influence[influence["model_label"] == label]
        last = int(g["layer"].max())
        for k, lam in enumerate(sorted(g[LAM].unique())):
            p = g[(g[LAM] == lam) & (g["layer"] == last)].groupby("position")["influence"].mean()
            line(ax, p.index.to_numpy() / max(len(p) - 1, 1), p.to_numpy(), i,
                 f"{_short(label)}, lam = {lam:g} (t = {last})", style=k, floor=1e-12, marker=False, lw=1.2)
        h = head[(head["model_label"] == label) & (head[LAM] == 0)] if not head.empty else head
        for j, (_, hg) in enumerate(h.groupby("head")):
            hg = hg.sort_values("layer")
            ax3.plot(hg["layer"] / max(int(hg["layer"].max()), 1), hg["first_token_share_mean"], "-",
                     color=f"C{i}", lw=0.7, alpha=0.5, label=f"{_short(label)}, per head" if j == 0 else None)
    label_axes(ax, "input position j / (n - 1)", "P(L)[n-1, j]: influence on the last token", logy=True,
               title="last token's profile at the last layer")
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    label_axes(ax3, "relative depth t / L", "per-head rollout (lam = 0): first-token share", title="per head",
               legend=6)
    caption = (
        "Herasimchyk et al. 2026 on real models: the rollout P(t) = M(t)...M(1), "
        "M(t) = lam I + (1 - lam) A(t), "
        "of each pretrained model's own attention on Wikipedia excerpts (stand-ins for pretrained ALiBi LMs: "
        "MiniLM and MPNet are encoders with a complete mask, SmolLM2 a causal decoder with RoPE). Left: the "
        "last token's influence over the input positions at the model's last layer (mean over excerpts, "
        "head-averaged; values below 1e-12 drawn at 1e-12): a U has both ends above the middle. Right: the "
        "first-token share (mean over tokens and excerpts) of the rollout of each head on its own (lam = 0) "
        "by relative depth; the head-averaged one, beside the sink measures, is figure rollout_models_depth."
    )
    return FigureSpec(FIGURE, fig, table, caption)


def _depth_figure(table: pd.DataFrame) -> FigureSpec:
    from matplotlib.ticker import MaxNLocator

    labels = list(dict.fromkeys(table["model"]))
    fig, axes = panel_grid(len(labels), ncols=len(labels), w=3.4, h=3.6, sharey=True)
    shares = [c for c in table.columns if c.startswith("first_token_share_lam")]
    for ax, label in zip(axes, labels, strict=True):
        g = table[table["model"] == label]
        for k, col in enumerate(shares):
            line(ax, g["layer"], g[col], 0, f"rollout, lam = {col.removeprefix('first_token_share_lam')}",
                 style=k, every=0, ms=2.5, lw=1.2)
        ax.plot(g["layer"], g["first_token_attention"], ":", color="C3", lw=1.8,
                label="first_token_attention (one layer)")
        ax.step(g["layer"], g["sink_rate"], where="mid", color="C2", lw=1.0, alpha=0.8,
                label="sink_rate (one layer)")
        label_axes(ax, "layer", title=f"{_short(label)} ({g['own_mask'].iloc[0]})")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("share: of attention on the first token (rollout, one layer);\nof heads (sink_rate)",
                       fontsize=7)
    axes[0].legend(fontsize=6, loc="best")
    caption = (
        "First-token concentration by depth beside the sink measures, from the same runs and the same "
        "attention weights A_h(t): the first-token share of the head-averaged rollout P(t) (mean over tokens "
        "and excerpts) for each lam (blue), one layer's first_token_attention (mean over tokens, heads and "
        "excerpts; red, dotted) and sink_rate (the share of heads whose mean attention to the first token is "
        "above 0.3; green, steps), by layer t, one panel per model. At t = 1 the plain rollout's share is "
        "that layer's first_token_attention (P(1) = A(1)); beyond, the product gathers what one layer's "
        "attention does not show."
    )
    return FigureSpec(DEPTH_FIGURE, fig, table, caption)


def figures(sd: StoryData) -> list[FigureSpec]:
    influence = _rows(sd, "influence")
    if influence.empty:
        return []
    return [
        _influence_figure(influence, _rows(sd, "head_share"), _table(sd)),
        _depth_figure(depth_table(sd)),
    ]


def headlines(sd: StoryData) -> list[str]:
    """Two sentences, every model in each (the report shows a follow-up's first two): the U's arms per lam
    at the last layer; the first-token concentration by depth beside the sink measures."""
    table, depth = _table(sd), depth_table(sd)
    if table.empty:
        return []
    shapes, sinks = [], []
    for label, g in table.groupby("model", sort=False):
        first = g.iloc[0]
        arms = ", ".join(
            f"lam = {r['lam']:g} x{np.exp(r['start_over_middle_log']):.3g} / "
            f"x{np.exp(r['end_over_middle_log']):.3g}"
            for _, r in g.iterrows()
        )
        shapes.append(f"{_short(label)} ({first['own_mask']}, {int(first['layers'])} layers) {arms}")
        d = depth[depth["model"] == label].set_index("layer")
        if "first_token_share_lam0" not in d:
            continue
        last = int(d.index.max())
        by = ", ".join(
            f"t = {t}: {d.loc[t, 'first_token_share_lam0']:.2g} / {d.loc[t, 'first_token_attention']:.2g} / "
            f"{d.loc[t, 'sink_rate']:.2g}"
            for t in sorted({1, last // 2, last})
        )
        sinks.append(
            f"{_short(label)} {by} (means over layers: first_token_attention "
            f"{first['first_token_attention_mean']:.2g}, sink_rate {first['sink_rate_mean']:.2g})"
        )
    out = ["The last token's profile at the last layer, start / end over the middle: " + "; ".join(shapes)
           + "."]
    if sinks:
        out.append(
            "First-token concentration by depth beside the sink measures of the same attention, the plain "
            "rollout's first-token share (lam = 0) / one layer's first_token_attention / sink_rate: "
            + "; ".join(sinks) + "."
        )
    return out


STORY = story_here(__name__)

"""The first token as a key bias (Gu et al., "When Attention Sink Emerges in Language Models", ICLR 2025,
arXiv 2410.10781), on the bundled pretrained models' own queries and keys.

Known here second-hand (FOLLOWUPS.md, round 2): "the first token acts as a key bias (high cos(q_i, k_0), often
small ||k_0||)". No model Gu et al. measured is offline; the bundled pretrained MiniLM and MPNet (encoders,
complete mask, [CLS] first) and SmolLM2-135M (a causal decoder, RoPE, grouped-query heads) stand in, each
labelled as a stand-in in its rows. Measured on text excerpts (``models.key_bias`` through
``kit.tasks.key_bias``, the path ``analyze --diagnostics`` takes): per excerpt, layer and head, the sink
measure ``first_token_attention`` and the key-bias values of ``metrics.diagnostics`` from the queries and
keys each layer's attention function receives (after the rotary embedding): ``first_key_cos``
(``cos(q_i, k_0)`` over the queries ``i >= 1`` that see key 0), its baseline ``key_cos`` (the keys
``j >= 1``), ``first_key_norm`` (``||k_0||``) and its baseline ``key_norm`` (``mean_j ||k_j||``, ``j >= 1``).

Both statements are read as a property of the sink heads (ours: the reading the source's "acts as a key bias"
implies): a head of a layer is a sink head when its ``first_token_attention``, averaged over the model's
excerpts, lies above ``sink_threshold`` (Gu et al.'s 0.3). ``key_bias_cos``: the sink heads' ``first_key_cos -
key_cos`` above 0 and above the other heads'; ``key_bias_norm``: their ``log(first_key_norm / key_norm)``
below 0 and below the other heads' (``kit.rules.heads.set_apart``, per excerpt: the sink heads' mean and its
paired difference from the other heads' mean, Bonferroni over the two). The unit is the excerpt (pretrained
weights: one network; a random init of the tiny profile: the network).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import judged, model_row
from rankcollapse.experiments.kit.curves import n_words
from rankcollapse.experiments.kit.data import arm_models, head_arrays, rows_of
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.plots import (
    interval_points,
    label_grid,
    panel_grid,
    points,
    quantity_label,
    reference_line,
    shared_legend,
)
from rankcollapse.experiments.kit.rules.heads import (
    COMPARISONS,
    HeadValues,
    set_apart,
    split_units,
    unit_margin,
)
from rankcollapse.experiments.kit.tasks.key_bias import MODEL_KEY_BIAS
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``): its section of the report.
PAPER = "2410.10781"
SOURCE = ("Gu et al., ICLR 2025 (arXiv 2410.10781), [2nd-hand] (FOLLOWUPS.md, round 2); pretrained MiniLM, "
          "MPNet and SmolLM2 as stand-ins")
FIGURE = "key_bias_heads"
#: The split of the heads: a head whose first_token_attention (mean over the excerpts) is above this threshold
#: of the YAML is a sink head.
BY, SPLIT, GROUP = "first_token_attention", "sink_threshold", "sink heads"
#: The two statistics judged, each per head and excerpt: (column, stated direction below 0?).
COS, NORM = "first_key_cos_gap", "first_key_norm_log_ratio"
STATISTICS: dict[str, bool] = {COS: False, NORM: True}
STATEMENTS = (
    Statement(
        "key_bias_cos",
        "The first token acts as a key bias: high cos(q_i, k_0)",
        SOURCE,
        "per model, the sink heads (a layer's head whose first_token_attention, mean over the excerpts, is "
        "above sink_threshold) against the other heads, per excerpt: the sink heads' mean of first_key_cos - "
        "key_cos (the queries' cosine with the first key minus their mean cosine with the keys j >= 1) above "
        "0, and above the other heads' mean (paired by excerpt), both for sure -> reproduced; either below "
        "for sure -> not reproduced (kit.rules.heads.set_apart, Bonferroni over the two)",
    ),
    Statement(
        "key_bias_norm",
        "The first token acts as a key bias: often small ||k_0||",
        SOURCE,
        "per model, the sink heads against the other heads (as key_bias_cos), per excerpt: the sink "
        "heads' mean of log(first_key_norm / key_norm) (the first key's norm over the mean norm of the keys "
        "j >= 1, of the key head each query head reads) below 0, and below the other heads' mean (paired by "
        "excerpt), both for sure -> reproduced; either above for sure -> not reproduced "
        "(kit.rules.heads.set_apart, Bonferroni over the two)",
    ),
)
ARMS = (Arm("models", MODEL_KEY_BIAS),)
NAMES = {column: (f"{quantity_label(column)} in the sink heads", "") for column in (COS, NORM)}


def with_statistics(frame: pd.DataFrame) -> pd.DataFrame:
    """``kind = head`` rows with the two judged statistics: ``first_key_cos_gap = first_key_cos - key_cos``
    and ``first_key_norm_log_ratio = log(first_key_norm / key_norm)`` (NaN where a norm is not positive)."""
    out = frame.copy()
    out[COS] = out["first_key_cos"] - out["key_cos"]
    ratio = out["first_key_norm"] / out["key_norm"]
    out[NORM] = np.log(ratio.where(ratio > 0))
    return out


def networks_of(frame: pd.DataFrame, column: str) -> tuple[list[HeadValues], str]:
    """One model's :class:`~rankcollapse.experiments.kit.rules.heads.HeadValues` of ``column`` split by
    ``first_token_attention`` (one network of every run where pretrained, one per run otherwise), and the
    unit."""
    arrays, unit = head_arrays(frame, column, BY)
    return [HeadValues(by, value) for by, value in arrays], unit


def _name(frame: pd.DataFrame) -> str:
    return str(frame["model_name"].iloc[0])


def _short(model_label: str) -> str:
    """A model label without its weights' note (``all-MiniLM-L6-v2 (pretrained)`` -> ``all-MiniLM-L6-v2``)."""
    return model_label.split(" (")[0]


def claims(sd: StoryData) -> list[Claim]:
    if sd.arm("models") is None:
        return []
    th = Thresholds.of("key_bias", sd.verdict, sd.ranges)
    out = []
    for statement, (column, below) in zip(STATEMENTS, STATISTICS.items(), strict=True):
        for _, data, _, _, frame in arm_models(sd, ("models",), "head"):
            nets, unit = networks_of(with_statistics(frame), column)

            def rule(t: Thresholds, nets: list[HeadValues] = nets, unit: str = unit, column: str = column,
                     below: bool = below) -> Judgement:
                return set_apart(nets, unit, t, what=quantity_label(column), group=GROUP, split=SPLIT,
                                 below=below)

            out.append(model_row("key_bias", statement, data, th, judged(rule, th), None, frame,
                                 qualifier=_name(frame), figure=FIGURE, names=NAMES[column]))
    return out


def head_table(sd: StoryData) -> pd.DataFrame:
    """Per model, network and head (layer, head): the means over the network's excerpts of
    ``first_token_attention`` and of the two statistics; ``network``: the run of a random init's weights, ""
    for a pretrained model (one network)."""
    data = sd.arm("models")
    frame = rows_of(data, "head") if data is not None else pd.DataFrame()
    if frame.empty:
        return pd.DataFrame()
    frame = with_statistics(frame)
    out = []
    for model_label, g in frame.groupby("model_label", sort=False):
        pretrained = bool(g["pretrained"].astype(bool).all())
        keys = ["layer", "head"] if pretrained else ["run_id", "layer", "head"]
        means = g.groupby(keys, sort=True)[[BY, COS, NORM]].mean().reset_index()
        means.insert(0, "model", model_label)
        means.insert(1, "network", "" if pretrained else means.pop("run_id"))
        out.append(means)
    return pd.concat(out, ignore_index=True)


def _group_points(ax, nets: list[HeadValues], unit: str, threshold: float, column: str) -> str:
    """The two groups' means with the rule's intervals (the sink heads' is the one the rule reads; the other
    heads' at the same level) at their mean first_token_attention; the paired difference in words."""
    sp = split_units(nets, unit, threshold)
    if not sp.n:
        return "no sink head" if sp.heads_in == 0 else "no other head"
    by = [np.nanmean(v.by, axis=0) for v in nets]
    x_in = float(np.mean(np.concatenate([b[b > threshold] for b in by])))
    x_out = float(np.mean(np.concatenate([b[~(b > threshold)] for b in by])))
    for k, (x, values, name) in enumerate(((x_in, sp.inside, GROUP), (x_out, sp.outside, "other heads"))):
        m = unit_margin(values, name, unit, tests=COMPARISONS)
        lo, hi = m.bounds()
        bars = interval_points(ax, [x], [m.value], [lo], [hi], 3 if k == 0 else 0,
                               f"mean of the {name} (interval)", joined=False, ms=6, hollow=k == 1)
        bars.lines[0].set(markeredgecolor="black", markeredgewidth=1.2, zorder=5)  # over the heads' points
    d = unit_margin(sp.gap, "difference", unit, tests=COMPARISONS)
    lo, hi = d.bounds()
    return f"sink - other: {d.value:+.2f} [{lo:+.2f}, {hi:+.2f}]\n{n_words(sp.n, unit)}"


def _in_grid_order(sd: StoryData, frames: dict[str, pd.DataFrame]) -> list[str]:
    """The model labels of ``frames`` in the order of the arm's ``model`` grid axis (the YAML's)."""
    data = sd.arm("models")
    order = {name: k for k, name in enumerate((data.exp.grid or {}).get("model", []))} if data else {}
    return sorted(frames, key=lambda m: order.get(_name(frames[m]), len(order)))


def _figure(sd: StoryData) -> FigureSpec:
    th = Thresholds.of("key_bias", sd.verdict, sd.ranges)
    threshold = th[SPLIT]
    table = head_table(sd)
    frames = {m: with_statistics(f) for _, _, m, _, f in arm_models(sd, ("models",), "head")}
    models = _in_grid_order(sd, frames)
    rows = list(STATISTICS)
    fig, axes = panel_grid(len(rows) * len(models), ncols=len(models), w=3.4, h=3.0)
    for r, column in enumerate(rows):
        for c, model in enumerate(models):
            ax = axes[r * len(models) + c]
            g = table[table["model"] == model]
            sink = g[BY] > threshold
            points(ax, g.loc[sink, BY], g.loc[sink, column], 3, "sink head (one layer's head)", ms=3.5,
                   alpha=0.7)
            points(ax, g.loc[~sink, BY], g.loc[~sink, column], 0, "other head", hollow=True, ms=3.5,
                   alpha=0.7)
            reference_line(ax, threshold, f"{SPLIT} = {threshold:g}", vertical=True, color="0.2", ls="--")
            reference_line(ax, 0.0)
            nets, unit = networks_of(frames[model], column)
            words = _group_points(ax, nets, unit, threshold, column)
            ax.text(0.03 if STATISTICS[column] else 0.97, 0.03 if not STATISTICS[column] else 0.97, words,
                    transform=ax.transAxes, fontsize=6, ha="left" if STATISTICS[column] else "right",
                    va="bottom" if not STATISTICS[column] else "top",
                    bbox={"boxstyle": "round", "fc": "white", "ec": "0.7", "alpha": 0.85})
            ax.set_xlim(-0.02, 1.02)
    columns = [f"{_short(m)} ({int(frames[m]['layer'].max())} layers, {frames[m]['own_mask'].iloc[0]} mask)"
               for m in models]
    label_grid(axes, len(models), rows, columns, BY)
    shared_legend(fig, axes, ncol=3, fontsize=7)
    unit_words = ("each point one head of one layer, its means over the model's excerpts (a random init's: "
                  "over each network's)")
    caption = (
        "Gu et al. 2025 (second-hand): the first token as a key bias, on the bundled pretrained models' own "
        "queries and keys (stand-ins for the LMs Gu et al. measured). Top: how much more each head's queries "
        "point at the first key than at the others, first_key_cos - key_cos; bottom: the first key's norm "
        f"against the others', log(first_key_norm / key_norm); against the head's {BY} (x), {unit_words}. "
        f"Filled: sink heads ({BY} above {SPLIT} = {threshold:g}, dashed); open: the others. The large "
        "black-edged markers: the sink heads' mean with the interval the rule reads (the mean over the "
        "excerpts of their per-excerpt mean, Student t, Bonferroni over the rule's two comparisons), the "
        "other heads' mean with its interval at the same level; the box gives the rule's other comparison, "
        "the paired difference sink - other per excerpt, with its interval. The statement holds where the "
        "sink heads sit above 0 (top) or below 0 (bottom) and beyond the others."
    )
    return FigureSpec(FIGURE, fig, table, caption)


def figures(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("models")
    if data is None or rows_of(data, "head").empty:
        return []
    return [_figure(sd)]


def summary_table(sd: StoryData) -> pd.DataFrame:
    """Per model: the heads, the sink heads, and each statistic's mean over the sink heads and over the
    others (means over the excerpts' per-group means; a random init's: over its networks)."""
    th = Thresholds.of("key_bias", sd.verdict, sd.ranges)
    threshold = th[SPLIT]
    out = []
    for _, _, model_label, _, frame in arm_models(sd, ("models",), "head"):
        frame = with_statistics(frame)
        row: dict[str, object] = {"model": model_label}
        for column in STATISTICS:
            nets, unit = networks_of(frame, column)
            sp = split_units(nets, unit, threshold)
            row.update(heads=sp.heads, sink_heads=sp.heads_in, units=sp.n, unit=unit)
            row[f"{column}_sink"] = float(sp.inside.mean()) if sp.n else math.nan
            row[f"{column}_other"] = float(sp.outside.mean()) if sp.n else math.nan
        out.append(row)
    return pd.DataFrame(out)


def headlines(sd: StoryData) -> list[str]:
    """One sentence per statistic, every model in each: the sink heads' mean against the other heads'."""
    table = summary_table(sd)
    if table.empty:
        return []
    out = []
    for column, what in ((COS, "cos(q_i, k_0) - cos(q_i, k_j)"), (NORM, "log(||k_0|| / ||k_j||)")):
        bits = [
            f"{_short(str(r['model']))} {r[f'{column}_sink']:+.2f} vs {r[f'{column}_other']:+.2f} "
            f"({int(r['sink_heads'])} of {int(r['heads'])} heads sinks, "
            f"{n_words(int(r['units']), str(r['unit']))})"
            for _, r in table.iterrows()
        ]
        out.append(f"The first token as a key bias, {what} in the sink heads vs the other heads: "
                   + "; ".join(bits) + ".")
    return out


STORY = story_here(__name__)

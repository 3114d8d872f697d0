"""Cirrincione (arXiv 2604.23681): LayerNorm, the affine rank and the span, judged in two notions at once.

Known from its abstract only (FOLLOWUPS.md: [abstract]); every row says so. It disputes the NeurIPS 2024
paper's LayerNorm result with another notion of collapse: the *one-step affine rank* (the rank of X minus
its token mean, before and after one LayerNorm) instead of the *limit of mu* with depth. Both are measured
on the same runs (``dynamics.notions`` through ``kit.tasks.notions``) and each row carries both: the
claim's own notion as the row's first half, the other notion as its second, each named in the evidence.

What the closed form says before any run (``metrics.affine.normalised_rank_terms``): LayerNorm is
``N(x) = D x C`` with ``C`` the feature centring and ``D`` one scale per token, so
``aff(N x) = rank(x C) - [s in col(x C)]``. For generic tokens that do not span ``R^d`` (n <= d) the
affine rank is kept; where they span it (n > d generic tokens) the centring removes ``1_d`` and the affine
rank drops by one. Collapsing runs decay through the precision floor, where a one-step rank is not
resolved: only pairs whose singular values sit ``margin_min`` decades off the floor are counted.

Arms: ``paper`` (the simulator: single-head Gaussian attention with and without LayerNorm, with and
without residual, n below and above d, float32 beside float64, each seed one network) and ``bert``
(BERT-base: a random init of its exact config, and the pretrained stand-in MiniLM, with the model's own
parts switched off: attention only, attention + skip; no MLP, no LayerNorm).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged, model_row
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.data import arm_models, curves_by, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.plots import MARKERS, curve_axes, figure, quantity_label
from rankcollapse.experiments.kit.rules import ranks as notions
from rankcollapse.experiments.kit.tasks.curves import MODEL_CURVES
from rankcollapse.experiments.kit.tasks.notions import SIMULATE_NOTIONS
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``).
PAPER = "2604.23681"
SOURCE = "Cirrincione 2026 (arXiv 2604.23681), [abstract]: known from its abstract only"
DTYPES = ("float32", "float64")
LN_PAIRS = (("attn+layernorm", "attn"), ("attn+skip+layernorm", "attn+skip"))
ONE_STEP = "one-step affine rank across LayerNorm (Cirrincione's notion)"
LIMIT = "limit of mu_rel with depth (the NeurIPS paper's notion)"
FIG_RANK, FIG_LIMIT, FIG_SPAN, FIG_BERT = (
    "cirrincione_ln_affine_rank",
    "cirrincione_ln_limit",
    "cirrincione_span",
    "cirrincione_residual_bert",
)
STATEMENTS = (
    Statement(
        "ln_keeps_affine_rank",
        "LayerNorm leaves the affine rank of the token set (the rank of X minus its token mean; matrix rank "
        "when beta = 0) exactly unchanged [abstract only]",
        SOURCE,
        f"first half, {ONE_STEP}: per preset with LayerNorm, token count (n <= d, n > d) and dtype, the "
        "share of resolved (layer, sample) pairs whose affine rank differs before and after the layer's "
        "LayerNorm below change_max for sure -> reproduced, above it for sure in one condition -> not "
        "(kit.rules.ranks.rank_kept); second half, the limit notion: kit.rules.ranks.same_limit",
    ),
    Statement(
        "ln_neither",
        "LayerNorm neither contributes to nor mitigates rank collapse [abstract only; in the abstract's own "
        "notion, the affine rank]",
        SOURCE,
        f"first half, {ONE_STEP} (the claim's own notion): per preset with LayerNorm, token count and dtype, "
        "the share of resolved (layer, sample) pairs whose affine rank differs before and after the layer's "
        "LayerNorm below change_max for sure -> reproduced, above it for sure in one condition -> not "
        f"(kit.rules.ranks.rank_kept); second half, {LIMIT}, beside it: per pair (attention with / without "
        "LayerNorm, with / without residual), n and dtype, the same collapse status of mu_rel with and "
        "without LayerNorm on the same networks (kit.rules.ranks.same_limit)",
    ),
    Statement(
        "attention_span",
        "Attention-only stacks never leave the span of the input embeddings [abstract only]: in the sense "
        "tested here, the rows of X(t) lie in the row space of X(0) W_V(1) ... W_V(t)",
        SOURCE,
        "holds by construction (X(t) = A(t-1) ... A(0) X(0) W_V(0) ... W_V(t-1), so every row of X(t) is a "
        "combination of the rows of X(0) W_V(0) ... W_V(t-1)): the run checks the arithmetic, not the claim, "
        "and the row reads 'consistent: proven', never 'reproduced'. Per dtype, where n < d (with n >= d the "
        "span is all of R^d), every network's largest span residual ||X(t) - X(t) Q Q^T||_F / ||X(t)||_F "
        "over layers and samples (Q a basis of the row space of X(0) W_V(1) ... W_V(t)) within "
        "span_floor_max relative floors -> consistent; one network beyond it -> not reproduced (a bug in "
        "the stack or the measure; kit.rules.ranks.span_kept); the stacks with a residual or LayerNorm are "
        "reported beside it",
        kind="proof",
    ),
    Statement(
        "residual_prevents",
        "Residual connections generically prevent rank collapse in BERT-base, even without the MLP "
        "[abstract only]",
        SOURCE,
        "simulator rows: first half, the claim's own notion, the affine rank of X(t) against X(0): the share "
        "of (layer, sample) pairs where it dropped below change_max for sure -> reproduced "
        f"(kit.rules.ranks.rank_kept); second half, {LIMIT}, beside it: mu_rel of attention + skip "
        f"(no MLP, no "
        "LayerNorm) 'not collapsing' and 'kept' at keep_min or more over the last half "
        "(kit.rules.kept_stable). BERT rows: the limit notion only (the affine rank is not measured on "
        "BERT here), each row says so",
    ),
)
ARMS = (Arm("paper", SIMULATE_NOTIONS), Arm("bert", MODEL_CURVES))


def _regime(n: int, d: int) -> str:
    return f"n = {n} {'<=' if n <= d else '>'} d = {d}"


def _notion_rows(sd: StoryData) -> pd.DataFrame:
    data = sd.arm("paper")
    return pd.DataFrame() if data is None else rows_of(data, "notion")


def _step_counts(rows: pd.DataFrame, margin_min: float) -> dict[str, list[tuple[int, int]]]:
    """``"<mode>, <regime>, <dtype>" -> [(resolved, changed) per network]``: the affine rank before and
    after each LayerNorm, pairs resolved by ``margin_min`` decades."""
    out: dict[str, list[tuple[int, int]]] = {}
    sub = rows[rows["layer"] > 0].dropna(subset=["norm_in_affine_rank"])
    for (mode, n, d, dt), g in sub.groupby(["mode", "tokens", "d", "dtype"], sort=True):
        label = f"{mode}, {_regime(int(n), int(d))}, {dt}"
        per = []
        for _, r in g.groupby("run_id", sort=True):
            ok = r["norm_rank_margin"] >= margin_min
            changed = r["norm_in_affine_rank"] != r["norm_out_affine_rank"]
            per.append((int(ok.sum()), int((ok & changed).sum())))
        out[label] = per
    return out


def _depth_counts(rows: pd.DataFrame, mode: str) -> dict[str, list[tuple[int, int]]]:
    """``"<mode>, <regime>, <dtype>" -> [(pairs, pairs whose affine rank of X(t) fell below X(0)'s)]``."""
    out: dict[str, list[tuple[int, int]]] = {}
    sub = rows[rows["mode"] == mode]
    for (n, d, dt), g in sub.groupby(["tokens", "d", "dtype"], sort=True):
        per = []
        for _, r in g.groupby("run_id", sort=True):
            first = r[r["layer"] == 0].set_index("sample")["affine_rank"]
            later = r[r["layer"] > 0]
            dropped = later["affine_rank"].to_numpy() < first.loc[later["sample"]].to_numpy()
            per.append((len(later), int(dropped.sum())))
        out[f"{mode}, {_regime(int(n), int(d))}, {dt}"] = per
    return out


def _span_worst(rows: pd.DataFrame, mode: str) -> dict[str, list[float]]:
    """``"<mode>, <regime>, <dtype>" -> [largest span residual in floors per network]``, where n < d only:
    with n >= d generic tokens the value products span R^d and the test says nothing (their measured
    residual is then the floor's cut of the products' smallest directions, not a token leaving)."""
    sub = rows[(rows["mode"] == mode) & (rows["tokens"] < rows["d"])]
    out: dict[str, list[float]] = {}
    for (n, d, dt), g in sub.groupby(["tokens", "d", "dtype"], sort=True):
        out[f"{mode}, {_regime(int(n), int(d))}, {dt}"] = [
            float(r["span_floors"].max()) for _, r in g.groupby("run_id", sort=True)
        ]
    return out


def _rel_curves(sd: StoryData) -> dict[tuple, Curve]:
    """``(mode, n, d, dtype) -> Curve`` of mu_rel over networks."""
    data = sd.arm("paper")
    if data is None:
        return {}
    return curves_by(rows_of(data, "curve"), "mu_rel", ["mode", "tokens", "d"])


def _limit_pairs(curves: Mapping[tuple, Curve]) -> dict[str, tuple[Curve, Curve]]:
    out = {}
    for (mode, n, d, dt), c in sorted(curves.items(), key=lambda kv: tuple(map(str, kv[0]))):
        for with_ln, without in LN_PAIRS:
            other = curves.get((without, n, d, dt))
            if mode == with_ln and other is not None:
                out[f"{with_ln} vs {without}, {_regime(int(n), int(d))}, {dt}"] = (c, other)
    return out


def _paper_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    data = sd.arm("paper")
    rows = _notion_rows(sd)
    if data is None or rows.empty:
        return []
    frame = rows_of(data, "curve")
    note = sample_note(runs_of(data, frame), frame)
    curves = _rel_curves(sd)
    pairs = _limit_pairs(curves)
    names = (ONE_STEP, LIMIT)
    step = judged(lambda t: notions.rank_kept(_step_counts(rows, t["margin_min"]), t), th)
    limit = judged(lambda t: notions.same_limit(pairs, t), th)
    out = [  # each claim in its own notion first (the one-step affine rank), the NeurIPS paper's beside it
        claim_row("cirrincione", STATEMENTS[0], data, th, step, limit, axes_frame=frame, runs=data.ok,
                  figure=FIG_RANK, sample_note=note, names=names),
        claim_row("cirrincione", STATEMENTS[1], data, th, step, limit, axes_frame=frame, runs=data.ok,
                  figure=FIG_LIMIT, sample_note=note, names=names),
    ]
    if "attn" in set(rows["mode"]):
        span = judged(lambda t: notions.span_kept(_span_worst(rows, "attn"), t), th)
        sub = frame[frame["mode"] == "attn"]
        out.append(
            claim_row("cirrincione", STATEMENTS[2], data, th, span, axes_frame=sub, runs=runs_of(data, sub),
                      figure=FIG_SPAN, sample_note=note,
                      names=("span residual against X(0) W_V products, in floors", ""))
        )
    if "attn+skip" in set(rows["mode"]):
        skip = {k: c for k, c in curves.items() if k[0] == "attn+skip"}
        labelled = {f"attn+skip, {_regime(int(k[1]), int(k[2]))}, {k[3]}": c for k, c in skip.items()}
        kept = judged(lambda t: rules.kept_stable(labelled, t, t["keep_min"]), th)
        rank = judged(lambda t: notions.rank_kept(_depth_counts(rows, "attn+skip"), t), th)
        sub = frame[frame["mode"] == "attn+skip"]
        out.append(
            claim_row("cirrincione", STATEMENTS[3], data, th, rank, kept, qualifier="simulator",
                      axes_frame=sub, runs=runs_of(data, sub), figure=FIG_BERT, sample_note=note,
                      names=("affine rank of X(t) against X(0) (the claim's own notion, over depth)", LIMIT))
        )
    return out


def _bert_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    out = []
    for _, data, label, pretrained, frame in arm_models(sd, ("bert",), "curve"):
        skip = frame[frame["mode"] == "attn+skip"]
        if skip.empty:
            continue
        curves = {f"{k[0]}, {k[1]}": c for k, c in curves_by(skip, "mu_rel", ["mask"]).items()}
        kept = judged(lambda t, cs=curves: rules.kept_stable(cs, t, t["keep_min"]), th)
        out.append(
            model_row("cirrincione", STATEMENTS[3], data, th, kept, None, skip,
                      qualifier="pretrained" if pretrained else "random init", figure=FIG_BERT,
                      names=(f"{LIMIT} [{label}: attention + skip, the model's own weights; the claim's own "
                             "notion, the affine rank, is not measured on BERT here]", ""))
        )
    return out


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("cirrincione", sd.verdict, sd.ranges)
    return _paper_rows(sd, th) + _bert_rows(sd, th)


# --- tables, figures, headlines -----------------------------------------------------------------------


def _rank_table(sd: StoryData, margin_min: float) -> pd.DataFrame:
    rows = _notion_rows(sd)
    if rows.empty:
        return pd.DataFrame()
    out = []
    for label, per in _step_counts(rows, margin_min).items():
        resolved, changed = sum(r for r, _ in per), sum(c for _, c in per)
        mode, regime, dt = label.split(", ")
        sub = rows[(rows["mode"] == mode) & (rows["dtype"] == dt) & (rows["layer"] > 0)]
        sub = sub[[_regime(int(n), int(d)) == regime for n, d in zip(sub["tokens"], sub["d"], strict=True)]]
        ok = sub["norm_rank_margin"] >= margin_min
        change = (sub["norm_out_affine_rank"] - sub["norm_in_affine_rank"])[ok]
        out.append(
            {
                "condition": label,
                "pairs": int(sub.shape[0]),
                "resolved": resolved,
                "changed": changed,
                "share_changed": changed / resolved if resolved else np.nan,
                "mean_change": float(change.mean()) if len(change) else np.nan,
            }
        )
    return pd.DataFrame(out)


def _fig_rank(sd: StoryData, margin_min: float) -> FigureSpec | None:
    table = _rank_table(sd, margin_min)
    rows = _notion_rows(sd)
    if table.empty:
        return None
    fig = figure(11, 4.2, layout="constrained")
    (ax, ax2) = fig.subplots(1, 2)
    y = np.arange(len(table))
    ax.barh(y, table["share_changed"].fillna(0.0), color=["C3" if s > 0.5 else "C0" for s in
                                                         table["share_changed"].fillna(0.0)])
    for i, r in table.iterrows():
        ax.text(0.02, i, f"{r['changed']} / {r['resolved']} resolved (of {r['pairs']})", va="center",
                fontsize=6)
    ax.set_yticks(y, table["condition"], fontsize=6)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of resolved pairs whose affine rank changes across LayerNorm")
    sub = rows[(rows["layer"] > 0)].dropna(subset=["norm_rank_margin"])
    for i, ((mode, n, d, dt), g) in enumerate(sub.groupby(["mode", "tokens", "d", "dtype"], sort=True)):
        share = g.groupby("layer")["norm_rank_margin"].apply(lambda m: float((m >= margin_min).mean()))
        ax2.plot(share.index, share.to_numpy(), MARKERS[i % len(MARKERS)] + "-", ms=3, color=f"C{i % 10}",
                 label=f"{mode}, {_regime(int(n), int(d))}, {dt}")
    ax2.set_xlabel(quantity_label("layer"))
    ax2.set_ylabel(f"share of pairs resolved (margin >= {margin_min:g} decades)")
    ax2.set_ylim(-0.02, 1.02)
    ax2.legend(fontsize=5.5)
    caption = (
        "Cirrincione 2026 [abstract only], claim (i): does LayerNorm keep the affine rank of the token set? "
        "Left: per preset with LayerNorm, token count against d, and dtype, the share of (layer, sample) "
        "pairs whose affine rank (at the precision floor) differs before and after the layer's LayerNorm, "
        f"over the pairs resolved by at least {margin_min:g} decade(s) (counts beside each bar; red: most "
        "of them change). Right: the share of pairs resolved per layer: in collapsing stacks the singular "
        "values decay through the floor and the one-step rank stops being measurable."
    )
    return FigureSpec(FIG_RANK, fig, table, caption)


def _fig_limit(sd: StoryData) -> FigureSpec | None:
    curves = _rel_curves(sd)
    if not curves:
        return None
    regimes = sorted({(int(k[1]), int(k[2])) for k in curves})
    fig = figure(5.2 * len(regimes), 4, layout="constrained")
    axes = fig.subplots(1, len(regimes), squeeze=False)
    for ax, (n, d) in zip(axes[0], regimes, strict=True):
        series = [
            (f"{k[0]} ({k[3]})", c) for k, c in sorted(curves.items(), key=lambda kv: (kv[0][3], kv[0][0]))
            if (int(k[1]), int(k[2])) == (n, d)
        ]
        curve_axes(ax, series, f"{quantity_label('mu_rel')} (mean ± std over samples and networks)", DTYPES)
        ax.set_title(_regime(n, d), fontsize=8)
    caption = (
        "Cirrincione 2026 [abstract only], claim (ii) in the NeurIPS paper's notion: mu_rel = mu / ||X||_F "
        "with depth for attention with and without LayerNorm, with and without residual (single-head "
        "Gaussian networks, the same weights and inputs for every preset of a seed), float32 and float64 "
        "with their precision floors. LayerNorm changes the rate, not the limit: the stacks without a "
        "residual collapse with and without it, those with a residual do not."
    )
    table = pd.DataFrame(
        [{"mode": k[0], "tokens": k[1], "d": k[2], "dtype": k[3], "layer": t, "mu_rel": float(v)}
         for k, c in curves.items() for t, v in enumerate(c.mean)]
    )
    return FigureSpec(FIG_LIMIT, fig, table, caption)


def _fig_span(sd: StoryData, th: Thresholds) -> FigureSpec | None:
    rows = _notion_rows(sd)
    if rows.empty:
        return None
    regimes = sorted({(int(n), int(d)) for n, d in zip(rows["tokens"], rows["d"], strict=True)})
    fig = figure(5.2 * len(regimes), 4, layout="constrained")
    axes = fig.subplots(1, len(regimes), squeeze=False)
    table = (
        rows.groupby(["mode", "tokens", "d", "dtype", "layer"], as_index=False)["span_floors"]
        .max()
        .rename(columns={"span_floors": "max_span_floors"})
    )
    for ax, (n, d) in zip(axes[0], regimes, strict=True):
        g = table[(table["tokens"] == n) & (table["d"] == d)]
        for i, ((mode, dt), s) in enumerate(g.groupby(["mode", "dtype"], sort=True)):
            ax.plot(s["layer"], np.maximum(s["max_span_floors"], 1e-3), MARKERS[i % len(MARKERS)] + "-",
                    ms=3, color=f"C{i % 10}", label=f"{mode} ({dt})")
        ax.axhline(th["span_floor_max"], color="0.3", ls=":", lw=0.9, label="span_floor_max")
        ax.set_yscale("log")
        ax.set_xlabel(quantity_label("layer"))
        ax.set_ylabel(f"{quantity_label('span_floors')}\n(largest over samples and networks)")
        ax.set_title(_regime(n, d), fontsize=8)
        ax.legend(fontsize=5.5, ncol=2)
    caption = (
        "Cirrincione 2026 [abstract only], claim (iii): the largest residual of X(t)'s rows outside the row "
        "space of X(0) W_V(1) ... W_V(t), over samples and networks, in units of the dtype's relative "
        "precision floor (dotted: the rule's limit; values below 1e-3 floors drawn at 1e-3). Attention only "
        "stays at rounding; a residual or LayerNorm's centring leaves the span from the first layer "
        "(where n > d the value products already span R^d: the test is informative, and judged, only where "
        "n < d; at n > d the residual is the floor's cut of the products' smallest directions)."
    )
    return FigureSpec(FIG_SPAN, fig, table, caption)


def _fig_bert(sd: StoryData) -> FigureSpec | None:
    series: list[tuple[str, Curve]] = []
    for _, _, label, _, frame in arm_models(sd, ("bert",), "curve"):
        for (v, _mask, dt), c in curves_by(frame, "mu_rel", ["mode", "mask"]).items():
            series.append((f"{label}: {v} ({dt})", c))
    for (mode, n, d, dt), c in _rel_curves(sd).items():
        if mode in ("attn", "attn+skip") and dt == "float64":
            series.append((f"simulator {mode}, {_regime(int(n), int(d))} ({dt})", c))
    if not series:
        return None
    fig = figure(7.5, 4.5, layout="constrained")
    ax = fig.subplots()
    curve_axes(ax, series, f"{quantity_label('mu_rel')} (mean ± std)", DTYPES)
    caption = (
        "Cirrincione 2026 [abstract only], claim (iv): mu_rel with depth of attention only against attention "
        "+ skip (no MLP, no LayerNorm): BERT-base at random init (its exact config, Hugging Face's init) and "
        "the pretrained MiniLM standing in for bert-base-uncased (no wheel ships BERT-base's weights), each "
        "with its own weights and the complete mask, beside the Gaussian simulator (float64)."
    )
    table = pd.DataFrame(
        [{"series": lab, "layer": t, "mu_rel": float(v)} for lab, c in series for t, v in enumerate(c.mean)]
    )
    return FigureSpec(FIG_BERT, fig, table, caption)


def figures(sd: StoryData) -> list[FigureSpec]:
    th = Thresholds.of("cirrincione", sd.verdict, sd.ranges)
    made = [_fig_rank(sd, th["margin_min"]), _fig_limit(sd), _fig_span(sd, th), _fig_bert(sd)]
    return [f for f in made if f is not None]


def headlines(sd: StoryData) -> list[str]:
    th = Thresholds.of("cirrincione", sd.verdict, sd.ranges)
    table = _rank_table(sd, th["margin_min"])
    if table.empty:
        return []
    regime = table["condition"].str.split(", ").str[1]
    per = "; ".join(
        f"{reg}: {int(g['changed'].sum())} of {int(g['resolved'].sum())} resolved pairs change"
        for reg, g in table.groupby(regime, sort=False)
    )
    return [
        f"The affine rank across one LayerNorm (both presets with it, float32 and float64): {per}.",
        "Where each holds: Cirrincione's one-step statement holds where the tokens do not span R^d (n <= d) "
        "and LayerNorm changes no limit of mu_rel in these Gaussian networks, while the NeurIPS paper's "
        "LayerNorm result (fig1_fig5) needs its designed value matrices, where the per-token scaling does "
        "change the limit.",
    ]


STORY = story_here(__name__)

"""Transformers without Normalization (DyT; Zhu, Chen, He, LeCun, Liu, CVPR 2025, arXiv 2503.10622).

The abstract: "DyT is inspired by the observation that layer normalization in Transformers often produces
tanh-like, S-shaped input-output mappings", and DyT, "an element-wise operation DyT(x) = tanh(alpha x)", is
"a drop-in replacement for normalization layers in Transformers" (per channel ``gamma tanh(alpha x) + beta``).
Known from the abstract (FOLLOWUPS.md: [abstract]; the reading of its Fig. 2, earlier layers mostly linear and
deeper ones S-shaped, 2nd-hand).

Arm ``fits`` judges the abstract's observation on the bundled pretrained models: per norm inside their layers
the least-squares DyT fit of the norm's map from input to output before its own affine
(``metrics.dyt_fit``), its R² and the S-shape share, over excerpts (``kit.rules.layers.tanh_like``).

The other arms ask the NeurIPS paper's own questions with DyT in LayerNorm's place (ours: no paper asked
them). What the update says before any run: DyT reads no statistic of a token and projects nothing onto a
sphere, so only ``alpha W_V`` matters and the equilibria are those of ``X = tanh(alpha A X W_V)``, which
``equilibria.dyt`` enumerates exactly (triangular: scalar roots coordinate by coordinate; the spectra are
the Jacobian's diagonal). For ``alpha <= 2`` every equilibrium has all tokens equal (rank <= 1); above, the
same ``W_V`` gives equilibria of higher rank, but a coordinate ``u`` in ``(-1, 1)`` is stable only where
``beta (1 - u^2) < 1``. Arm ``equilibria``: the counterexample (Figs. 1, 5) and Theorem 3's construction,
every fixed point, and where random starts end, the sphere map (the paper's normalisation) on the same
starts as the control. Arms ``curves`` / ``deep``: Figs. 2 / 6 with DyT (alpha 0.5, DyT's initial value, each
norm's own weight and bias) in random-init BERT-base, every mask, float32 and float64 (``kit.rules.ln_stops``,
``full_stable`` as ``fig2`` judges LayerNorm).
"""

from __future__ import annotations

import math

import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import Judged, claim_row, judged, model_row
from rankcollapse.experiments.kit.combine import combine_parts
from rankcollapse.experiments.kit.curves import Curve, conditions
from rankcollapse.experiments.kit.data import (
    MASK_WORDS,
    MODE_WORDS,
    arm_models,
    by_label,
    curves_by,
    layered,
    norm_rates,
    ordered_masks,
    rows_of,
    runs_of,
    sample_note,
)
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.plots import (
    curves_figure,
    figure,
    interval_points,
    label_axes,
    line,
    mode_rows,
    panel_grid,
    reference_line,
    slug,
)
from rankcollapse.experiments.kit.rules.equilibria import (
    Basin,
    Ranks,
    basin_and_equilibria,
    fixed_points_kept,
    ranks_present,
)
from rankcollapse.experiments.kit.rules.layers import NormFit, tanh_like
from rankcollapse.experiments.kit.tasks.dyt import DYT_EQUILIBRIA, DYT_MODEL_CURVES, NORM_FITS
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``).
PAPER = "2503.10622"
SOURCE = "Zhu, Chen, He, LeCun, Liu, CVPR 2025 (arXiv 2503.10622), [abstract]"
OURS = ("ours: the NeurIPS paper's {what} asked of DyT (arXiv 2503.10622), DyT = tanh(alpha x) with "
        "gamma = 1, beta = 0 in the sphere normalisation's place (equilibria.dyt)")
FIG_MAPS, FIG_EQ = "dyt_norm_maps", "dyt_equilibria"
#: The rank a start must keep not to have collapsed (the counterexample's and Theorem 3's point: rank >= 2).
KEPT_RANK = 2
STATEMENTS = (
    Statement(
        "tanh_like",
        "Layer normalization in Transformers often produces tanh-like, S-shaped input-output mappings",
        f"{SOURCE}; earlier layers mostly linear, deeper ones S-shaped: its Fig. 2, [2nd-hand]",
        "per pretrained model, per norm inside its layers (in call order), the DyT fit of the norm's map "
        "from input to output before its own affine, gamma_k tanh(alpha x) + beta_k (metrics.dyt_fit): "
        "tanh-like and S-shaped when its R² >= r2_min and its S-shape share (what the tanh explains of a "
        "per-feature straight line's residual) >= s_min, both for sure over the excerpts; not when either "
        "lies below for sure (Bonferroni over the norms and the two statistics); 'often' (ours): at least "
        "often_min of the norms tanh-like and S-shaped -> reproduced; more than 1 - often_min of them not -> "
        "not reproduced (kit.rules.layers.tanh_like)",
    ),
    Statement(
        "rank_kept",
        "With DyT in LayerNorm's place the paper's constructions keep rank >= 2 from a set of starts of "
        "positive measure, for some alpha, as they do with LayerNorm (the counterexample, Figs. 1, 5; "
        "Theorem 3's construction)",
        OURS.format(what="counterexample (§4.3.1, Figs. 1, 5) and Theorem 3's construction (§4.3.2)"),
        "per construction (N = d = 2: the counterexample, w = 1.5, 2, 4; N = d = 3, 4: Theorem 3's W_V), for "
        "some (w, alpha) of the grid: as plotted, the share of random starts on the sphere whose end has "
        "rank >= 2 above 0 for sure (Wilson over the starts) -> reproduced; below basin_max for sure at "
        "every (w, alpha) -> not reproduced; mechanism: some stable equilibrium of rank >= 2 (exact "
        "spectra) -> reproduced; none in a complete enumeration -> not reproduced (kit.rules."
        "equilibria.basin_and_equilibria)",
        ours=True,
    ),
    Statement(
        "every_rank",
        "With DyT in LayerNorm's place Theorem 3's W_V (I + w J, causal, W_Q = W_K = 0) has equilibria of "
        "every rank 1..N, for some alpha",
        OURS.format(what="Theorem 3 (§4.3.2: equilibria of every rank)"),
        "per (N, w) of the grid: every rank 1..N among the equilibria of some alpha (a complete "
        "enumeration, equilibria.dyt) -> that (N, w) shows it; a rank missing at every alpha -> it does not; "
        "every (N, w) must show it (kit.rules.equilibria.ranks_present, combined over the constructions)",
        ours=True,
    ),
    Statement(
        "sphere_points",
        "The paper's own equilibria (of the sphere normalisation, best rescaled) are fixed points of the DyT "
        "map, for some alpha",
        OURS.format(what="equilibria (Theorem 3's construction, theorem3.paper_chain)"),
        "per (N, w): min over c of max |F(c X*) - c X*| / c at most residual_max for some alpha -> kept; "
        "above at every alpha -> not; every (N, w) must keep them (kit.rules.equilibria.fixed_points_kept)",
        ours=True,
    ),
    Statement(
        "dyt_stops",
        "Random init: with DyT in LayerNorm's place mu stops converging to 0 (what Fig. 2 states of "
        "LayerNorm)",
        OURS.format(what="Fig. 2 statement (§5, 'adding LayerNorm stops mu from converging to 0')"),
        "as fig2.ln_stops with SAN + DyT in SAN + LayerNorm's place: per mask and dtype, SAN + DyT 'kept' "
        "over the last half (flat within ±rate_tol; mu_rel also >= keep_min, off the floor) while the SAN "
        "collapses -> reproduced; falling, low or at the floor -> not reproduced (kit.rules.ln_stops)",
        ours=True,
    ),
    Statement(
        "dyt_full_stable",
        "The full transformer with DyT in LayerNorm's place keeps mu stable (what Fig. 2 states of the "
        "full transformer)",
        OURS.format(what="Fig. 2 statement (§5, the full transformer)"),
        "as fig2.full_stable on the full transformer with DyT: per mask and dtype 'stable' (I(L) < "
        "unstable_min / 2) and, for mu_rel, never at the floor -> reproduced; unstable or at the floor -> "
        "not reproduced (kit.rules.full_stable)",
        ours=True,
    ),
)
ARMS = (
    Arm("fits", NORM_FITS),
    Arm("equilibria", DYT_EQUILIBRIA, extension=True),
    Arm("curves", DYT_MODEL_CURVES, extension=True),
    Arm("deep", DYT_MODEL_CURVES, extension=True),
)
#: Words of the modes with DyT (``models.dyt.DYT_MODES``), beside the paper's.
DYT_WORDS = {**MODE_WORDS, "attn+dyt": "SAN + DyT", "full+dyt": "full transformer, DyT in LN's place",
             "attn+skip+dyt": "SAN + skip + DyT"}
FIT_NAMES = ("the DyT fit of each norm's map (R², S-shape share over excerpts)", "")
EQ_NAMES = ("where random starts end (Wilson over the starts)", "the equilibria's exact spectra")
CHECK_NAMES = ("the exact enumeration of the equilibria", "")
PAPER_DTYPE = "float32"


# ---- (a) the tanh-like map ---------------------------------------------------------------------------------
def _norm_fits(frame: pd.DataFrame) -> dict[str, NormFit]:
    """``{"block t, which": NormFit}`` per norm of one model's ``kind = fit`` rows, in call order."""
    out: dict[str, NormFit] = {}
    for k, g in frame.groupby("layer", sort=True):
        one = g.assign(layer=0)
        label = f"norm {int(k)} (block {int(g['block'].iloc[0])}, {g['which'].iloc[0]})"
        out[label] = NormFit(layered(one, "dyt_r2"), layered(one, "s_shape"))
    return out


def _fit_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    data = sd.arm("fits")
    if data is None:
        return []
    fits = rows_of(data, "fit")
    out = []
    for name, frame in fits.groupby("model_name", sort=False):
        norms = _norm_fits(frame)
        runs = runs_of(data, frame)
        out.append(claim_row("dyt", STATEMENTS[0], data, th, judged(lambda t, n=norms: tanh_like(n, t), th),
                             qualifier=str(name), frame=frame, runs=runs, figure=FIG_MAPS, names=FIT_NAMES,
                             sample_note=sample_note(runs, frame)))
    return out


# ---- (b) the constructions ---------------------------------------------------------------------------------
def _construction(n: int) -> str:
    return "counterexample (N = d = 2)" if n == 2 else f"Theorem 3 (N = d = {n})"


def _basins(data: Data, norm: str = "dyt") -> pd.DataFrame:
    """The basin rows of ``norm`` with ``kept``: the starts ending at rank >= :data:`KEPT_RANK`."""
    rows = rows_of(data, "basin")
    if rows.empty:
        return rows
    rows = rows[rows["norm"] == norm].copy()
    ranks = [c for c in rows.columns if c.startswith("ends_rank_")]
    rows["kept"] = sum(rows[c].fillna(0) for c in ranks if int(c.rsplit("_", 1)[1]) >= KEPT_RANK)
    return rows


def _stable_kept(eq: pd.Series) -> int:
    cols = [c for c in eq.index if c.startswith("stable_rank_") and int(c.rsplit("_", 1)[1]) >= KEPT_RANK]
    return int(sum(eq[c] for c in cols if pd.notna(eq[c])))


def _per_alpha(data: Data, ns: list[int]) -> dict[str, Basin]:
    """``{"N = d = n, w = ., alpha = .": Basin}`` over the constructions ``ns`` of the arm."""
    basins = _basins(data)
    eqs = rows_of(data, "equilibria")
    out: dict[str, Basin] = {}
    for _, b in basins[basins["tokens"].isin(ns)].sort_values(["tokens", "w", "alpha"]).iterrows():
        same = (eqs["tokens"] == b["tokens"]) & (eqs["w"] == b["w"]) & (eqs["alpha"] == b["alpha"]) if not \
            eqs.empty else None
        match = eqs[same] if same is not None else eqs
        stable = _stable_kept(match.iloc[0]) if not match.empty else None
        complete = bool(match["complete"].iloc[0]) if not match.empty else False
        label = f"N = d = {int(b['tokens'])}, w = {b['w']:g}, alpha = {b['alpha']:g}"
        out[label] = Basin(int(b["kept"]), int(b["starts"]), stable, complete)
    return out


def _ranks(eq: pd.Series) -> Ranks:
    n = int(eq["tokens"])
    present = [k for k in range(n + 1) if eq.get(f"rank_{k}", 0) > 0]
    stable = [k for k in range(n + 1) if eq.get(f"stable_rank_{k}", 0) > 0]
    return Ranks(present, stable, n, bool(eq["complete"]), int(eq["count"]))


def _by_construction(eqs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {f"N = d = {int(n)}, w = {w:g}": g.sort_values("alpha")
            for (n, w), g in eqs.groupby(["tokens", "w"], sort=True)}


def _equilibria_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    data = sd.arm("equilibria")
    if data is None:
        return []
    out = []
    basins = _basins(data)
    if not basins.empty:
        larger = sorted(n for n in basins["tokens"].unique() if n > 2)
        for ns, qual in (([2], "counterexample"), (larger, "theorem3")):
            if not ns:
                continue
            per = _per_alpha(data, [int(n) for n in ns])
            both = [judged(lambda t, p=per, i=i: basin_and_equilibria(p, t)[i], th) for i in (0, 1)]
            frame = rows_of(data, "basin")
            frame = frame[frame["tokens"].isin(ns)]
            runs = runs_of(data, frame)
            out.append(claim_row("dyt", STATEMENTS[1], data, th, both[0], both[1], qualifier=qual,
                                 runs=runs, figure=FIG_EQ, names=EQ_NAMES,
                                 sample_note=f"{int(frame['starts'].iloc[0])} random starts on the sphere "
                                             "per (N, w, alpha), the same for every alpha; exact equilibria"))
    eqs = rows_of(data, "equilibria")
    if eqs.empty:
        return out
    groups = _by_construction(eqs)

    def every(t: Thresholds) -> Judgement:
        return combine_parts([(label, ranks_present({f"alpha = {a:g}": _ranks(r)
                                                     for a, r in zip(g["alpha"], (r for _, r in g.iterrows()),
                                                                     strict=True)}))
                              for label, g in groups.items()])

    def kept(t: Thresholds) -> Judgement:
        with conditions(1):
            return combine_parts([(label, fixed_points_kept(dict(zip((f"alpha = {a:g}" for a in g["alpha"]),
                                                                     g["paper_residual"].astype(float),
                                                                     strict=True)), t))
                                  for label, g in groups.items()])

    runs = runs_of(data, eqs)
    note = "exact enumeration of every equilibrium per (N, w, alpha) (no sample)"
    out.append(claim_row("dyt", STATEMENTS[2], data, th, judged(every, th), runs=runs, figure=FIG_EQ,
                         names=CHECK_NAMES, sample_note=note))
    out.append(claim_row("dyt", STATEMENTS[3], data, th, judged(kept, th), runs=runs, figure=FIG_EQ,
                         names=("the best-rescaled residual of the paper's equilibrium under DyT", ""),
                         sample_note=note))
    return out


# ---- (b) Figs. 2 and 6 with DyT ----------------------------------------------------------------------------
def _named(curves: dict[str, Curve], mode: str) -> dict[str, Curve]:
    return {f"{label}, {DYT_WORDS.get(mode, mode)}": c for label, c in curves.items()}


def _curve_judgements(key: str, frame: pd.DataFrame, masks: list[str], th: Thresholds
                      ) -> tuple[Judged, Judged, str] | None:
    mu, rel = curves_by(frame, "mu", ["mode", "mask"]), curves_by(frame, "mu_rel", ["mode", "mask"])
    dtypes = [d for d in ("float32", "float64") if d in set(frame["dtype"])]
    plotted_dt = [PAPER_DTYPE] if PAPER_DTYPE in dtypes else dtypes[:1]
    mode = "attn+dyt" if key == "dyt_stops" else "full+dyt"
    if mode not in set(frame["mode"]):
        return None
    raw, mech = (_named(by_label(mu, mode, masks, plotted_dt), mode),
                 _named(by_label(rel, mode, masks, dtypes), mode))
    f32 = {k: c for k, c in mech.items() if c.dtype == PAPER_DTYPE}
    words = norm_rates(raw, f32)
    if key == "dyt_stops":
        san_raw = _named(by_label(mu, "attn", masks, plotted_dt), mode)
        san_rel = _named(by_label(rel, "attn", masks, dtypes), mode)
        return (judged(lambda t: rules.ln_stops(san_raw, raw, t, None), th),
                judged(lambda t: rules.ln_stops(san_rel, mech, t, t["keep_min"]), th), words)
    return (judged(lambda t: rules.full_stable(raw, t), th), judged(lambda t: rules.full_stable(mech, t), th),
            words)


def _curve_stem(arm: str, label: str) -> str:
    return f"dyt_{'fig6' if arm == 'deep' else 'fig2'}_{slug(label)}"


def _curve_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    out = []
    for arm, data, label, _, frame in arm_models(sd, ("curves", "deep"), "curve"):
        masks = ordered_masks(frame, data.exp)
        for k, key in ((4, "dyt_stops"), (5, "dyt_full_stable")):
            got = _curve_judgements(key, frame, masks, th)
            if got is None:
                continue
            out.append(model_row("dyt", STATEMENTS[k], data, th, got[0], got[1], frame,
                                 qualifier=f"{arm}: {frame['model_name'].iloc[0]}",
                                 figure=_curve_stem(arm, label), norm_words=got[2]))
    return out


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("dyt", sd.verdict, sd.ranges)
    return [*_fit_rows(sd, th), *_equilibria_rows(sd, th), *_curve_rows(sd, th)]


# ---- figures -----------------------------------------------------------------------------------------------
def _maps_figure(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("fits")
    if data is None:
        return []
    fits, points = rows_of(data, "fit"), rows_of(data, "scatter")
    if fits.empty:
        return []
    models = list(dict.fromkeys(fits["model_name"]))
    fig = figure(3.4 * len(models), 6.2, layout="constrained")
    axes = fig.subplots(2, len(models), squeeze=False)
    tables = []
    for j, name in enumerate(models):
        f = fits[fits["model_name"] == name]
        label = str(f["model_label"].iloc[0])
        top, bottom = axes[0][j], axes[1][j]
        pts = points[points["model_name"] == name] if not points.empty else points
        for i, (k, g) in enumerate(pts.groupby("layer", sort=True) if not pts.empty else []):
            g = g.sort_values("x")
            scale = float(g["x"].std()) or 1.0  # the tanh's shape does not depend on x's scale
            which = f"norm {int(k)} (block {int(g['block'].iloc[0])}, {g['which'].iloc[0]})"
            top.scatter(g["x"] / scale, g["y"], s=2, color=f"C{i}", alpha=0.25, rasterized=True)
            top.plot(g["x"] / scale, g["fitted_mean"], color=f"C{i}", lw=1.1, label=which)
        top.set_xscale("symlog", linthresh=2.0)
        label_axes(top, "norm input x / its std (one excerpt; symlog)",
                   "output before the affine (dots); DyT fit (line)", title=label)
        if not pts.empty:
            top.legend(fontsize=6, markerscale=3)
        per = f.groupby("layer", as_index=False)[["dyt_r2", "s_shape", "dyt_r2_std", "s_shape_std"]].mean()
        limits = (("dyt_r2", "tanh R²", "r2_min"), ("s_shape", "S-shape share", "s_min"))
        for i, (col, words, limit) in enumerate(limits):
            interval_points(bottom, per["layer"], per[col], per[col] - per[f"{col}_std"],
                            per[col] + per[f"{col}_std"], i, f"{words} (mean ± std over excerpts)", ms=3)
            reference_line(bottom, float(sd.verdict[limit]), color=f"C{i}")
        bottom.set_ylim(-0.05, 1.05)
        label_axes(bottom, "norm, in call order (two per layer)", "R² and S-shape share", legend=6)
        tables.append(per.assign(model=label))
    caption = (
        "DyT's observation (Zhu et al. 2025, [abstract]) on the bundled models: top, one excerpt's map from "
        "each norm's input (divided by its standard deviation, symlog axis: massive activations lie far "
        "out) to its output before its own affine (every token and feature a dot) for the first, the middle "
        "and the last norm inside the layers, with the least-squares DyT fit gamma_k tanh(alpha x) + beta_k "
        "(lines: drawn with the features' mean gamma and beta, one curve per norm); "
        "bottom, per norm the fit's R² and the S-shape share (what the tanh explains of a per-feature "
        "straight line's residual), mean ± std over excerpts, dotted: r2_min and s_min."
    )
    out = pd.concat([*tables, points.assign(kind="scatter")], ignore_index=True)
    return [FigureSpec(FIG_MAPS, fig, out, caption)]


def _equilibria_figure(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("equilibria")
    if data is None:
        return []
    dyt, sphere, eqs = _basins(data), _basins(data, "sphere"), rows_of(data, "equilibria")
    if dyt.empty:
        return []
    fig, (ax1, ax2) = panel_grid(2, ncols=2, w=5.25, h=3.8)
    for i, ((n, w), g) in enumerate(dyt.groupby(["tokens", "w"], sort=True)):
        g = g.sort_values("alpha")
        share = g["kept"] / g["starts"]
        line(ax1, g["alpha"], 100 * share, i, f"DyT, N = {int(n)}, w = {w:g}", every=0, ms=4)
        s = sphere[(sphere["tokens"] == n) & (sphere["w"] == w)] if not sphere.empty else sphere
        if not s.empty:
            reference_line(ax1, 100 * float(s["kept"].iloc[0] / s["starts"].iloc[0]), color=f"C{i}", ls="--")
    label_axes(ax1, "DyT's alpha (its whole scale: only alpha W_V matters)",
               f"% of random starts ending at rank >= {KEPT_RANK}", logx=True, legend=6,
               title="dashed: the sphere normalisation (LN's, the paper's) on the same starts")
    if not eqs.empty:
        big = eqs[eqs["tokens"] == eqs["tokens"].max()]
        big = big[big["w"] == big["w"].iloc[0]].sort_values("alpha")
        n = int(big["tokens"].iloc[0])
        for k in range(n + 1):
            line(ax2, big["alpha"], big[f"rank_{k}"], k, f"rank {k}: all", floor=0.7, every=0, ms=4)
            line(ax2, big["alpha"], big[f"stable_rank_{k}"], k, f"rank {k}: stable", style=3, floor=0.7,
                 every=0, ms=4, hollow=True)
        label_axes(ax2, "DyT's alpha", f"equilibria (N = d = {n}, w = {big['w'].iloc[0]:g}; 0 drawn at 0.7)",
                   logx=True, logy=True, legend=6, ncol=2)
        ax2.set_ylim(0.6, None)
    caption = (
        "Ours: the NeurIPS paper's constructions (causal, W_Q = W_K = 0, W_V = I + w J) with DyT, X <- "
        "tanh(alpha A X W_V), in the sphere normalisation's place. Left: the share of random starts on the "
        "sphere whose "
        f"end has rank >= {KEPT_RANK} after the iterations, per construction and alpha; dashed, the paper's "
        "normalisation on the same starts (the counterexample's basin of rank 2). Right: every equilibrium "
        "of the largest construction, counted per rank (solid) and the stable ones (dotted, exact spectra), "
        "against alpha."
    )
    table = pd.concat([dyt.assign(kind="basin"), sphere.assign(kind="basin_sphere"),
                       eqs.assign(kind="equilibria")], ignore_index=True)
    return [FigureSpec(FIG_EQ, fig, table, caption)]


def _curve_figures(sd: StoryData) -> list[FigureSpec]:
    out = []
    for arm, data, label, _, frame in arm_models(sd, ("curves", "deep"), "curve"):
        mu, rel = curves_by(frame, "mu", ["mode", "mask"]), curves_by(frame, "mu_rel", ["mode", "mask"])
        masks = ordered_masks(frame, data.exp)
        modes = [v for v in ("attn", "attn+ln", "attn+dyt", "full", "full+dyt") if v in set(frame["mode"])]
        rows = mode_rows(mu, rel, modes, masks, DYT_WORDS, MASK_WORDS)
        if not rows:
            continue
        depth = int(frame["layer"].max())
        what = "Fig. 6" if arm == "deep" else "Fig. 2"
        title = (f"Ours, {what} asked of DyT: {label}, {depth} layers, N = {int(data.exp.base['tokens'])}; "
                 "mean ± std over samples")
        caption = (
            f"Ours: {what}'s modes of {label} ({depth} layers) with the model's own LayerNorm and with DyT "
            f"(alpha {data.exp.base.get('dyt_alpha', 0.5)}, each norm's own weight and bias) in its place, "
            "on the same excerpts and weights. Rows: raw mu in float32 and float64, then mu_rel = mu / "
            "||X||_F with both precision floors. Log-log against t + 1. "
            f"{sample_note(runs_of(data, frame), frame)}."
        )
        stem = _curve_stem(arm, label)
        out.append(curves_figure(stem, title, caption, rows, {"mu": mu, "mu_rel": rel}, label))
    return out


def figures(sd: StoryData) -> list[FigureSpec]:
    return [*_maps_figure(sd), *_equilibria_figure(sd), *_curve_figures(sd)]


# ---- headlines ---------------------------------------------------------------------------------------------
def _fit_headline(sd: StoryData) -> str:
    data = sd.arm("fits")
    if data is None:
        return ""
    fits = rows_of(data, "fit")
    th = sd.verdict
    bits = []
    for _, f in fits.groupby("model_name", sort=False):
        per = f.groupby("layer")[["dyt_r2", "s_shape"]].mean()
        ok = per[(per["dyt_r2"] >= float(th["r2_min"])) & (per["s_shape"] >= float(th["s_min"]))]
        half = len(per) // 2
        first, last = per["s_shape"].iloc[:half].mean(), per["s_shape"].iloc[half:].mean()
        bits.append(f"{f['model_label'].iloc[0]}: {len(ok)} of {len(per)} norms at R² >= {th['r2_min']} and "
                    f"S-shape share >= {th['s_min']} on the mean (S-shape share {first:.2f} in the first "
                    f"half of the norms, {last:.2f} in the second)")
    return "The DyT fit of the norms' maps: " + "; ".join(bits) + "." if bits else ""


def _equilibria_headline(sd: StoryData) -> str:
    data = sd.arm("equilibria")
    if data is None:
        return ""
    dyt, sphere, eqs = _basins(data), _basins(data, "sphere"), rows_of(data, "equilibria")
    if dyt.empty or eqs.empty:
        return ""
    ranks_at = {}
    stable_max = 0
    for _, e in eqs.iterrows():
        n = int(e["tokens"])
        if all(e.get(f"rank_{k}", 0) > 0 for k in range(1, n + 1)):
            ranks_at.setdefault(n, float(e["alpha"]))
            ranks_at[n] = min(ranks_at[n], float(e["alpha"]))
        stable = [k for k in range(n + 1) if e.get(f"stable_rank_{k}", 0) > 0]
        stable_max = max([stable_max, *stable])
    kept, starts = int(dyt["kept"].sum()), int(dyt["starts"].sum())
    sph = "" if sphere.empty else (
        f"; the sphere normalisation (LN's) keeps rank >= 2 from {int(sphere['kept'].sum())} of its "
        f"{int(sphere['starts'].sum())} starts (the same starts, once per construction)")
    every = ", ".join(f"N = {n} from alpha = {a:g}" for n, a in sorted(ranks_at.items()))
    lost = kept == 0 and stable_max <= 1 and len(ranks_at) == eqs["tokens"].nunique()
    return (f"With DyT in LayerNorm's place the paper's W_V has equilibria of every rank "
            f"({every or 'at no alpha'}), and the largest rank of a stable one is {stable_max}: {kept} of "
            f"{starts} random starts (every construction and alpha) end at rank >= 2{sph}."
            + (" DyT keeps the equilibria of every rank and loses their basins: it squashes each entry "
               "on its own, projects no token onto a sphere, and the rank-one consensus attracts."
               if lost else ""))


def _causal_at(frame: pd.DataFrame, mode: str, q: str, dtype: str, t: int | None = None) -> float:
    """The mean of ``q`` over the runs of ``mode`` under the causal mask in ``dtype`` at layer ``t`` (the
    last by default)."""
    g = frame[(frame["mask"] == "causal") & (frame["mode"] == mode) & (frame["dtype"] == dtype)]
    v = g[g["layer"] == (g["layer"].max() if t is None else t)][q]
    return float(v.mean()) if not v.empty else math.nan


def _curve_headline(sd: StoryData) -> str:
    out = []
    for arm, _, label, _, frame in arm_models(sd, ("curves", "deep"), "curve"):
        dt = "float64" if "float64" in set(frame["dtype"]) else str(frame["dtype"].iloc[0])
        depth = int(frame["layer"].max())
        norm = {m: (_causal_at(frame, m, "x_norm", "float32"), _causal_at(frame, m, "x_norm", "float32", 0))
                for m in ("full", "full+dyt")}
        shrink = {m: (a / b) ** (1 / depth) for m, (a, b) in norm.items()}  # the norm's factor per layer
        rel = {m: _causal_at(frame, m, "mu_rel", dt) for m in ("attn", "attn+ln", "attn+dyt")}
        out.append(
            f"{label} ({arm}, t = {depth}, causal mask, {dt}): mu_rel {rel['attn']:.3g} (SAN), "
            f"{rel['attn+ln']:.3g} (+ LayerNorm), {rel['attn+dyt']:.3g} (+ DyT); the full transformer's "
            f"token norm x{shrink['full']:.3g} per layer with LayerNorm, x{shrink['full+dyt']:.3g} with DyT "
            "(float32)")
    if not out:
        return ""
    return ("At random init DyT's tanh(0.5 x) is nearly linear on the stream, so it rescales: mu_rel with "
            "DyT follows the SAN's, and in the post-LN block, where the stream itself passes through the "
            "norms, each DyT multiplies it by about alpha: " + "; ".join(out) + ".")


def headlines(sd: StoryData) -> list[str]:
    return [h for h in (_equilibria_headline(sd), _curve_headline(sd), _fit_headline(sd)) if h]


STORY = story_here(__name__)

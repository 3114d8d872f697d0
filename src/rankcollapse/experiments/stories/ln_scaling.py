"""LayerNorm Scaling (Sun et al., "The Curse of Depth", NeurIPS 2025, arXiv 2502.05795) and Peri-LN (Kim et
al., ICML 2025, arXiv 2502.02732): two follow-ups on where and how the norm sits, judged on the same runs.

LayerNorm Scaling's abstract: "While Pre-LN stabilizes the training of Transformer LLMs, its output variance
exponentially grows with the model depth, which undesirably causes the derivative of the deep Transformer
blocks to be an identity matrix"; LNS "scales the variance of output of the layer normalization inversely by
the square root of its depth. This simple modification mitigates the output variance explosion" (a summary
adds: from exponential to polynomial, 2nd-hand). Peri-LN's abstract: "Peri-LN strikes an ideal balance in
variance growth -- unlike Pre-LN and Post-LN, which are prone to vanishing gradients and 'massive
activations'" (FOLLOWUPS.md reads it as Pre-LN prone to massive activations, Post-LN keeping the variance but
weakening gradients; the formula Var(x_(l+1)) ~ Var(x_l) + beta_0 for Peri-LN, 2nd-hand). Each statement is
counted with its own paper (``Statement.paper``): this story's PAPER is LayerNorm Scaling's.

Quantities (``metrics.growth``): the stream variance ``stream_var`` per layer, its growth law fitted three
ways with intervals (``kit.rules.growth``: exponential, polynomial, linear, the best by residual in ``log v``
for sure over units), the consecutive-layer cosine ``layer_cos`` over the deep half of the layers, the largest
activation over the median one ``massive_ratio`` (its maximum over the layers, in log10). What the update
says before any run, at initialisation: pre-LN adds ``f(LN(x))``, of a variance fixed by the weights, to the
stream, so its variance grows linearly; Peri-LN adds ``LN(f(LN(x)))`` of variance ``beta_0``: linear too;
LNS adds ``f(LN(x) / sqrt(l))``, of variance about ``c / l`` for a near-linear ``f``: ``v(L) ~ log L``;
post-LN re-normalises: flat. The abstracts' exponential growth is about trained LLMs, which the init rows
cannot refute (``kit.combine.unstated_conditions``); the pretrained rows can.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged, not_testable_row
from rankcollapse.experiments.kit.combine import unstated_conditions
from rankcollapse.experiments.kit.curves import n_words
from rankcollapse.experiments.kit.data import Layered, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.plots import MARKERS, figure, quantity_label
from rankcollapse.experiments.kit.rules.growth import (
    GrowthFits,
    at_least,
    at_most,
    best_growth,
    estimate,
    fit_growth,
    flat_growth,
    growth_fits,
    unit_curves,
)
from rankcollapse.experiments.kit.tasks.growth import MODEL_GROWTH, SIMULATE_GROWTH
from rankcollapse.experiments.kit.thresholds import Thresholds

#: LayerNorm Scaling's arXiv id (the story's paper); Peri-LN's statements name theirs.
PAPER = "2502.05795"
PERI = "2502.02732"
LNS_SRC = "Sun et al. 2025, The Curse of Depth (arXiv 2502.05795), [abstract]"
PERI_SRC = "Kim et al. 2025, Peri-LN (arXiv 2502.02732), [abstract]"
FIG_INIT, FIG_MODELS = "ln_scaling_init", "ln_scaling_models"
#: Where the init rows' statements hold by their source (it does not say whether at initialisation).
TRAINED = "in trained Transformers (the abstracts' subject; whether at initialisation they do not say)"
#: Words of the placements (the simulator's and a model's ``norm_placement``).
PLACEMENT_WORDS = {"post": "post-LN", "pre": "pre-LN", "peri": "Peri-LN", "sandwich": "Peri-style (sandwich)",
                   "pre+lns": "pre-LN + LayerNorm Scaling"}
STATEMENTS = (
    Statement(
        "preln_exponential",
        "In Pre-LN Transformer LLMs the output variance exponentially grows with the model depth",
        LNS_SRC,
        "per setting with pre-LN norms (the simulator and random GPT-2 at initialisation; pretrained "
        "SmolLM2, "
        "Qwen2.5 where installed): the stream variance's growth over layers 1..L fitted as exponential, "
        "polynomial and linear (kit.rules.growth.fit_growth, per unit); the exponential law's "
        "residual below each "
        "other law's for sure over units -> reproduced; another law better for sure -> not reproduced "
        "(kit.rules.growth.best_growth); at initialisation a refutation reads 'not testable' (the "
        "claim is about "
        "trained LLMs: kit.combine.unstated_conditions)",
    ),
    Statement(
        "deep_identity",
        "[The variance growth] causes the derivative of the deep Transformer blocks [of Pre-LN LLMs] to be "
        "an "
        "identity matrix: deep blocks barely change the stream",
        f"{LNS_SRC}; read (ours) on the blocks' outputs, not their derivative",
        "per pre-LN setting: per unit the mean consecutive-layer cosine cos(x_i(t-1), x_i(t)) over the deep "
        "half of the layers (t > L/2) at least cos_min for sure -> reproduced; below it for sure -> not "
        "reproduced (kit.rules.growth.at_least); at initialisation a refutation reads 'not testable'",
    ),
    Statement(
        "lns_polynomial",
        "LayerNorm Scaling (each LN output of layer l times 1/sqrt(l)) mitigates the output variance "
        "explosion: the variance grows polynomially, not exponentially, with depth",
        f"{LNS_SRC}; 'polynomial' from a summary, [2nd-hand]",
        "per setting with LayerNorm Scaling (the simulator and random GPT-2 at initialisation; no model "
        "trained with it is here): the polynomial law's residual below each other law's for sure -> "
        "reproduced; another law better for sure -> not reproduced, read 'not testable' at initialisation "
        "(kit.rules.growth.best_growth, kit.combine.unstated_conditions)",
    ),
    Statement(
        "periln_linear",
        "With LN before and after each sublayer (Peri-LN) the variance grows linearly, Var(x_(l+1)) ~ "
        "Var(x_l) + beta_0: a balanced growth",
        f"{PERI_SRC}; the formula from a summary, [2nd-hand]",
        "per Peri-LN setting (the simulator at initialisation; Gemma-3, Peri-style, where installed): the "
        "linear law's residual below each other law's for sure -> reproduced; another law better for sure -> "
        "not reproduced (kit.rules.growth.best_growth)",
        paper=PERI,
    ),
    Statement(
        "preln_massive",
        "Pre-LN is prone to 'massive activations'",
        f"{PERI_SRC}; its pairing of Pre-LN with massive activations (and Post-LN with vanishing "
        "gradients) is "
        "FOLLOWUPS.md's reading, [2nd-hand]",
        "per pretrained pre-LN model (SmolLM2; Qwen2.5 where installed): per excerpt log10 of the largest "
        "max |x| / median |x| over the layers at least log10(massive_min) for sure over excerpts -> "
        "reproduced; below for sure -> not reproduced (kit.rules.growth.at_least); on random weights "
        "a refutation "
        "reads 'not testable' (what training does)",
        paper=PERI,
    ),
    Statement(
        "postln_no_massive",
        "The post-LN encoders (MiniLM, MPNet) show no massive activations",
        "ours: the contrast to Peri-LN's statement on Pre-LN (arXiv 2502.02732)",
        "per pretrained post-LN model: per excerpt log10 of the largest max |x| / median |x| over the layers "
        "below log10(massive_min) for sure over excerpts -> confirmed; above for sure -> refuted "
        "(kit.rules.growth.at_most)",
        ours=True,
        paper=PERI,
    ),
    Statement(
        "periln_balanced",
        "Peri-LN is not prone to massive activations, unlike Pre-LN",
        PERI_SRC,
        "Gemma-3-270M (Peri-style: a norm before and after each sublayer; opt-in, make models-extra): per "
        "excerpt log10 of the largest max |x| / median |x| over the layers below log10(massive_min) for sure "
        "-> reproduced; above for sure -> not reproduced (kit.rules.growth.at_most); 'not testable "
        "here' where the "
        "model is not installed",
        paper=PERI,
    ),
    Statement(
        "postln_keeps",
        "Post-LN keeps the variance [of the hidden states] across depth (but weakens gradients)",
        f"{PERI_SRC}; 'keeps the variance' from a summary, [2nd-hand]",
        "per post-LN setting (the simulator at initialisation; pretrained MiniLM, MPNet): the exponential "
        "law's "
        "per-layer log rate of the stream variance within ±rate_tol for sure over units -> reproduced; "
        "outside it for sure -> not reproduced (kit.rules.growth.flat_growth)",
        paper=PERI,
    ),
)
ARMS = (
    Arm("init", SIMULATE_GROWTH),
    Arm("random_models", MODEL_GROWTH),
    Arm("models", MODEL_GROWTH),
    Arm("extra", MODEL_GROWTH),
)
KEYS = {s.key: s for s in STATEMENTS}


# ---- the settings ------------------------------------------------------------------------------------------
class Setting:
    """One model (or the simulator's preset) of one arm: its growth rows, placement, words and units."""

    def __init__(self, arm: str, data: Data, frame: pd.DataFrame) -> None:
        self.arm, self.data, self.frame = arm, data, frame
        self.placement = str(frame["placement"].iloc[0])
        self.pretrained = bool(frame["pretrained"].astype(bool).all()) if "pretrained" in frame else False
        self.name = str(frame["model_name"].iloc[0]) if "model_name" in frame and arm != "init" else ""
        label = str(frame["model_label"].iloc[0]) if "model_label" in frame and arm != "init" else ""
        self.label = label if arm != "init" else "simulator"
        where = "pretrained" if self.pretrained else "init"
        self.models = arm in ("models", "extra")  # the models' own arms: massive activations are read there
        placed = PLACEMENT_WORDS.get(self.placement, self.placement)
        self.qualifier = f"{where}: {self.name or 'simulator'}, {placed}"
        self.runs = runs_of(data, frame)

    def fits(self) -> GrowthFits:
        curves, unit = unit_curves(self.frame, "stream_var")
        return growth_fits(curves, unit)

    def deep_cos(self) -> Layered:
        curves, unit = unit_curves(self.frame, "layer_cos")
        depth = curves.shape[1] - 1
        return estimate(np.nanmean(curves[:, depth // 2 + 1:], axis=1), unit, "layer_cos")

    def massive(self) -> Layered:
        curves, unit = unit_curves(self.frame, "massive_ratio")
        return estimate(np.log10(np.nanmax(curves[:, 1:], axis=1)), unit, "log10 massive_ratio")

    def note(self) -> str:
        return sample_note(self.runs, self.frame)


def _settings(sd: StoryData) -> list[Setting]:
    out = []
    for arm in ("init", "random_models", "models", "extra"):
        data = sd.arm(arm)
        if data is None:
            continue
        rows = rows_of(data, "growth_sample")
        if rows.empty:
            continue
        keys = ["placement"] if arm == "init" else ["model_name", "placement"]
        for _, frame in rows.groupby(keys, sort=False):
            out.append(Setting(arm, data, frame))
    return out


#: Statements about trained models: on random weights their refutation reads 'not testable'.
TRAINED_ONLY = ("preln_exponential", "deep_identity", "lns_polynomial", "preln_massive", "periln_balanced")


def _row(key: str, s: Setting, th: Thresholds, rule, names: tuple[str, str], figure_name: str) -> Claim:
    """One row of statement ``key`` on setting ``s``; on random weights a statement of :data:`TRAINED_ONLY`
    is refuted only as 'not testable' (``unstated_conditions``: the abstracts speak of trained LLMs, and
    "prone to" massive activations is what training does); Peri-LN's growth formula and Post-LN's kept
    variance are judged plainly at initialisation (a per-layer recursion that holds there)."""
    init = not s.pretrained and key in TRAINED_ONLY

    def judge(t: Thresholds) -> Judgement:
        j = rule(t)
        return unstated_conditions(j, TRAINED, f"{s.label} at initialisation") if init else j

    return claim_row("ln_scaling", KEYS[key], s.data, th, judged(judge, th), qualifier=s.qualifier,
                     frame=s.frame, runs=s.runs, figure=figure_name, names=names, sample_note=s.note())


GROWTH_NAMES = ("the stream variance's growth law (fitted per unit, with intervals)", "")
COS_NAMES = ("the mean consecutive-layer cosine over the deep half of the layers", "")
MASSIVE_NAMES = ("log10 of the largest max |x| / median |x| over the layers", "")


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("ln_scaling", sd.verdict, sd.ranges)
    settings = _settings(sd)
    out: list[Claim] = []
    for s in settings:  # LayerNorm Scaling's statements first: its paper opens the story's section
        fig = FIG_MODELS if s.models else FIG_INIT
        if s.placement == "pre":
            fits, cos = s.fits(), s.deep_cos()
            out.append(_row("preln_exponential", s, th,
                            lambda t, f=fits, s=s: best_growth({s.label: f}, "exponential", t), GROWTH_NAMES,
                            fig))
            out.append(_row("deep_identity", s, th,
                            lambda t, c=cos, s=s: at_least({s.label: c}, t["cos_min"], t, "deep-half cosine"),
                            COS_NAMES, fig))
        if s.placement == "pre+lns":
            fits = s.fits()
            out.append(_row("lns_polynomial", s, th,
                            lambda t, f=fits, s=s: best_growth({s.label: f}, "polynomial", t), GROWTH_NAMES,
                            fig))
    for s in settings:
        fig = FIG_MODELS if s.models else FIG_INIT
        if s.placement in ("peri", "sandwich"):
            fits = s.fits()
            out.append(_row("periln_linear", s, th,
                            lambda t, f=fits, s=s: best_growth({s.label: f}, "linear", t), GROWTH_NAMES, fig))
        if s.models:
            m = s.massive()

            def side(t: Thresholds, m: Layered = m, s: Setting = s, up: bool = s.placement == "pre"
                     ) -> Judgement:
                rule = at_least if up else at_most
                return rule({s.label: m}, math.log10(t["massive_min"]), t, "log10 max |x| / median |x|")

            key = {"pre": "preln_massive", "post": "postln_no_massive"}.get(s.placement, "periln_balanced")
            out.append(_row(key, s, th, side, MASSIVE_NAMES, FIG_MODELS))
        if s.placement == "post":
            fits = s.fits()
            out.append(_row("postln_keeps", s, th, lambda t, f=fits, s=s: flat_growth({s.label: f}, t),
                            GROWTH_NAMES, fig))
    if not any(c.key == "periln_balanced" for c in out):
        why = ("the Peri-style pretrained model, Gemma-3-270M, is opt-in (make models-extra; "
               "ln_scaling.extra) and was not run; at initialisation there are no massive activations to "
               "speak of")
        out.append(not_testable_row("ln_scaling", KEYS["periln_balanced"], sd.arm("models"), why, FIG_MODELS))
    return out


# ---- figures -----------------------------------------------------------------------------------------------
#: The placements in the figures' order, each its colour (``C<k>``) in every panel.
ORDER = ("post", "pre", "peri", "pre+lns", "sandwich")


def _colour(placement: str) -> int:
    return ORDER.index(placement) if placement in ORDER else len(ORDER)


def _mean_band(ax: Any, frame: pd.DataFrame, column: str, label: str, i: int) -> pd.DataFrame:
    curves, _ = unit_curves(frame, column)
    t = np.arange(curves.shape[1])
    keep = ~np.isnan(curves).all(axis=0)  # layer_cos has no value at t = 0
    t, curves = t[keep], curves[:, keep]
    mean = np.nanmean(curves, axis=0)
    lo, hi = np.nanmin(curves, axis=0), np.nanmax(curves, axis=0)
    ax.plot(t, mean, color=f"C{i}", marker=MARKERS[i % len(MARKERS)], ms=2.5, lw=1.1, label=label)
    ax.fill_between(t, lo, hi, color=f"C{i}", alpha=0.15)
    return pd.DataFrame({"layer": t, "mean": mean, "min": lo, "max": hi, "series": label, "column": column})


def _law_curve(ax: Any, frame: pd.DataFrame, i: int, rate_tol: float) -> str:
    """The best law of the mean curve, fitted and drawn dashed; its words (``flat`` where the whole depth
    changes it by at most ``rate_tol`` in log: the three laws then fit alike)."""
    curves, _ = unit_curves(frame, "stream_var")
    v = np.nanmean(curves, axis=0)
    f = fit_growth(v)
    if f is None:
        return "no fit"
    if abs(math.log(v[-1] / v[1])) <= rate_tol:  # all of depth changes it by less than rate_tol in log
        return "flat"
    t = np.arange(1, v.size, dtype=float)
    y = np.log(v[1:])
    law = f.best
    if law == "exponential":
        fitted = np.exp(np.polyval(np.polyfit(t, y, 1), t))
    elif law == "polynomial":
        fitted = np.exp(np.polyval(np.polyfit(np.log(t), y, 1), np.log(t)))
    else:
        s = 1.0 / f.param["linear"] - 1.0
        fitted = (t + s) * np.exp(np.mean(y - np.log(t + s)))
    ax.plot(t, fitted, color=f"C{i}", ls="--", lw=0.8)
    return f"best: {law}"


def _init_figure(sd: StoryData) -> list[FigureSpec]:
    settings = [s for s in _settings(sd) if not s.models]
    if not settings:
        return []
    fig = figure(10.5, 7.0, layout="constrained")
    axes = fig.subplots(2, 2)
    tables = []
    for col, arm in enumerate(("init", "random_models")):
        mine = sorted((s for s in settings if s.arm == arm), key=lambda s: ORDER.index(s.placement)
                      if s.placement in ORDER else len(ORDER))
        top, bottom = axes[0][col], axes[1][col]
        for s in mine:
            i = _colour(s.placement)
            words = PLACEMENT_WORDS.get(s.placement, s.placement)
            law = _law_curve(top, s.frame, i, float(sd.verdict["rate_tol"]))
            tables.append(_mean_band(top, s.frame, "stream_var", f"{words} ({law})", i))
            tables.append(_mean_band(bottom, s.frame, "layer_cos", words, i))
        base = sd.arm("init").exp.base if sd.arm("init") is not None else {}
        name = (f"the simulator (N = {base.get('tokens')}, d = {base.get('d')}, Gaussian)" if arm == "init"
                else mine[0].label if mine else "random GPT-2")
        top.set_yscale("log")
        top.set_title(f"{name}: stream variance", fontsize=8)
        top.set_xlabel(quantity_label("layer"))
        top.set_ylabel(f"{quantity_label('stream_var')} (mean, range over networks)")
        bottom.set_title(f"{name}: consecutive-layer cosine", fontsize=8)
        bottom.set_xlabel(quantity_label("layer"))
        bottom.set_ylabel(f"{quantity_label('layer_cos')} (mean, range over networks)")
        bottom.axhline(float(sd.verdict["cos_min"]), color="0.5", ls=":", lw=0.8)
        for ax in (top, bottom):
            if mine:
                ax.legend(fontsize=6)
    caption = (
        "LayerNorm Scaling and Peri-LN at initialisation (ours): the stream variance against depth (top, log "
        "scale; dashed: the best of the three growth laws fitted to the mean curve) and the cosine between "
        "each token before and after a layer (bottom; dotted: cos_min), mean and range over networks. Left: "
        "the simulator's transformer block with each norm placement (Gaussian weights per layer, causal "
        "mask); right: Hugging Face's random init of GPT-2, pre-LN without and with LayerNorm Scaling "
        "(each norm output of layer l times 1/sqrt(l))."
    )
    return [FigureSpec(FIG_INIT, fig, pd.concat(tables, ignore_index=True), caption)]


def _models_figure(sd: StoryData) -> list[FigureSpec]:
    settings = [s for s in _settings(sd) if s.models]
    if not settings:
        return []
    fig = figure(10.5, 3.6, layout="constrained")
    ax1, ax2, ax3 = fig.subplots(1, 3)
    tables = []
    for i, s in enumerate(settings):
        label = f"{s.label}, {PLACEMENT_WORDS.get(s.placement, s.placement)}"
        i = i + 4  # the placements' colours are the init figure's
        tables.append(_mean_band(ax1, s.frame, "stream_var", label, i))
        tables.append(_mean_band(ax2, s.frame, "layer_cos", label, i))
        tables.append(_mean_band(ax3, s.frame, "massive_ratio", label, i))
    ax1.set_yscale("log")
    ax3.set_yscale("log")
    ax3.axhline(float(sd.verdict["massive_min"]), color="0.5", ls=":", lw=0.8)
    ax2.axhline(float(sd.verdict["cos_min"]), color="0.5", ls=":", lw=0.8)
    for ax, what in ((ax1, "stream_var"), (ax2, "layer_cos"), (ax3, "massive_ratio")):
        ax.set_xlabel(quantity_label("layer"))
        ax.set_ylabel(f"{quantity_label(what)} (mean, range over excerpts)")
        ax.legend(fontsize=6)
    caption = (
        "The bundled pretrained models on Wikipedia excerpts: the stream variance of each hidden state "
        "(pre-LN: the residual stream before the final norm; post-LN: the last norm's output), the cosine "
        "between each token before and after a layer (dotted: cos_min), and the largest activation over the "
        "median one (dotted: massive_min); mean and range over excerpts."
    )
    return [FigureSpec(FIG_MODELS, fig, pd.concat(tables, ignore_index=True), caption)]


def figures(sd: StoryData) -> list[FigureSpec]:
    return [*_init_figure(sd), *_models_figure(sd)]


# ---- headlines ---------------------------------------------------------------------------------------------
def _law_words(s: Setting, rate_tol: float) -> str:
    """``linear (+0.65 v(1)/layer) in 6 of 6``, or ``flat`` where depth changes the mean variance by at most
    ``rate_tol`` in log (the three laws then fit alike)."""
    curves, _ = unit_curves(s.frame, "stream_var")
    v = np.nanmean(curves, axis=0)
    if v.size > 2 and abs(math.log(v[-1] / v[1])) <= rate_tol:
        return "flat"
    f = s.fits()
    if not f.n:
        return "no fit"
    win = f.winners()
    best = max(win, key=lambda law: win[law])
    law = {"exponential": f"x{math.exp(float(f.values('param', 'exponential').mean())):.3g}/layer",
           "polynomial": f"t^{float(f.values('param', 'polynomial').mean()):.2g}",
           "linear": f"+{float(f.values('param', 'linear').mean()):.2g} v(1)/layer"}[best]
    return f"{best} ({law}) in {win[best]} of {n_words(f.n, f.unit)}"


def headlines(sd: StoryData) -> list[str]:
    settings = _settings(sd)
    tol = float(sd.verdict["rate_tol"])
    init, cos = [], {}
    for s in settings:
        if s.models:
            continue
        placed = PLACEMENT_WORDS.get(s.placement, s.placement)
        cos[(s.arm, s.placement)] = float(s.deep_cos().mean[0])
        init.append(f"{s.label}, {placed}: {_law_words(s, tol)}")
    out = []
    if init:
        both = [arm for arm in ("init", "random_models") if (arm, "pre") in cos and (arm, "pre+lns") in cos]
        pairs = [f"{arm.replace('_', ' ')}: {cos[(arm, 'pre+lns')]:.4f} with LNS, {cos[(arm, 'pre')]:.4f} "
                 "without" for arm in both]
        nearer = both and all(cos[(arm, "pre+lns")] > cos[(arm, "pre")] for arm in both)
        tail = (f" The deep-half consecutive-layer cosine, {'; '.join(pairs)}"
                + (": at initialisation LayerNorm Scaling brings the deep layers nearer the identity, not "
                   "farther." if nearer else ".")) if pairs else ""
        out.append(f"At initialisation, the stream variance's best growth law: {'; '.join(init)}.{tail}")
    trained = []
    for s in settings:
        if not s.models:
            continue
        curves, _ = unit_curves(s.frame, "stream_var")
        v = np.nanmean(curves, axis=0)
        jump = int(np.argmax(np.diff(np.log(v[1:])))) + 2 if v.size > 2 else 0
        ratio = float(10 ** s.massive().mean[0])
        placed = PLACEMENT_WORDS.get(s.placement, s.placement)
        trained.append(f"{s.label}, {placed}: variance {v[1]:.3g} at t = 1, {v.max():.3g} at most (its "
                       f"largest step into t = {jump}), {v[-1]:.3g} at t = {v.size - 1}; max |x| / median "
                       f"|x| up to {ratio:.3g}; deep-half cosine {float(s.deep_cos().mean[0]):.3f}")
    if trained:
        out.append("The models (mean over units): " + "; ".join(trained) + ".")
    return out


STORY = story_here(__name__)

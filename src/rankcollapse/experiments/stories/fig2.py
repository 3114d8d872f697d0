"""Fig. 2 (paper §5) and its 128-layer twin Fig. 6 (App. G.1): masks x LayerNorm, raw μ and μ_rel.

Arms: ``paper`` (BERT, random init and pretrained: ``paper:bert-base-uncased``, the checkpoint when
cached, else its stand-in; five variants x four masks, 12 layers), ``deep`` (the paper's 128-layer
random BERT-base, every layer its own init: Fig. 6), and our own settings ``gaussian_san`` (the
simulator: Gaussian SAN against the theory's LayerNorm) and ``bundled_models`` (MiniLM and SmolLM2,
their own masks, their own layers cycled to the arm's depth: 128, 64 in the quick profile; every label
says so, ``SmolLM2-135M (pretrained), 30 layers cycled to 128``, from ``kit.data.depth_words``). Every
statement is judged once per model and arm, on raw μ in float32 as the paper plots it and on μ_rel against
the precision floor in float32 and float64. In the figures a value that underflowed to exactly 0 (raw μ,
or a whole X so that μ_rel = 0/0) is no point on a log axis: the curve is not drawn there, an open circle
at the floor line marks it (legend "underflow (0)"), and the caption says so (``kit.plots.underflow_marks``,
drawn by ``kit.plots.band`` in every figure).
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import Judged, judged, model_row
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.data import (
    MASK_WORDS,
    MODE_WORDS,
    arm_models,
    by_label,
    curves_by,
    depth_words,
    mask_radius,
    norm_rates,
    ordered_masks,
    runs_of,
    sample_note,
)
from rankcollapse.experiments.kit.plots import curves_figure, mode_rows, slug, underflow_marks
from rankcollapse.experiments.kit.tasks.curves import MODEL_CURVES, SIMULATE_CURVES
from rankcollapse.experiments.kit.thresholds import Thresholds

FIG2, FIG6 = "paper §5, Fig. 2", "paper App. G.1, Fig. 6"
STATEMENTS = (
    Statement(
        "san_collapse",
        "In SANs mu(X(t)) converges to 0 exponentially under every mask",
        FIG2,
        "every SAN curve (each mask, each dtype) 'collapsing' (per-layer log rate below -rate_tol for "
        "sure) or 'at floor' -> reproduced; any 'not collapsing' -> not reproduced",
    ),
    Statement(
        "local_slower",
        "More local masks slow the collapse (complete/causal fastest, sliding windows slowest)",
        FIG2,
        "for every pair of masks with different graph radius (complete 1, causal 1, window:w=1 64, "
        "causal-window:w=1 127 at N = 128): SAN log rate of the more local mask higher for sure -> "
        "reproduced; lower for sure -> not reproduced",
    ),
    Statement(
        "ln_stops",
        "Random init: adding LayerNorm stops mu from converging to 0; it stays at a stable "
        "level well above 0",
        FIG2,
        "per mask and dtype: SAN + LayerNorm 'kept' over the last half of the layers (flat within "
        "±rate_tol; mu_rel also >= keep_min, off the floor) while the SAN collapses -> reproduced; LN "
        "curve falling, low or at the floor, or SAN not collapsing either -> not reproduced",
    ),
    Statement(
        "ln_stops_deep",
        "Random init, 128 layers: with LayerNorm mu shows no decreasing trend even after 128 layers",
        FIG6,
        "as ln_stops, on the 128-layer model",
    ),
    Statement(
        "ln_skip_stable",
        "Pretrained: LayerNorm together with the skip connection prevents collapse and stabilises mu",
        FIG2,
        "per mask and dtype: SAN + skip + LayerNorm 'not collapsing' over all layers and 'kept' over the "
        "last half -> reproduced; collapsing, falling, growing or at the floor -> not reproduced",
    ),
    Statement(
        "skip_unstable",
        "Skip connections alone make mu unstable, more so in deeper layers",
        f"{FIG2}; deeper: {FIG6}",
        "per mask and dtype, at the deepest depth run (128 layers for the random init, with I(t=12) "
        "beside it): SAN + skip 'unstable' (I(L) >= unstable_min, or non-finite) and I growing from the "
        "middle layer to the last for sure -> reproduced; 'stable' (I(L) < unstable_min / 2) -> not",
    ),
    Statement(
        "full_stable",
        "The full transformer keeps mu stable",
        f"{FIG2}; {FIG6}",
        "per mask and dtype: full transformer 'stable' (I(L) < unstable_min / 2) and, for mu_rel, never "
        "at the floor -> reproduced; unstable or at the floor -> not reproduced",
    ),
)
ARMS = (
    Arm("paper", MODEL_CURVES),
    Arm("deep", MODEL_CURVES),
    Arm("gaussian_san", SIMULATE_CURVES, extension=True),
    Arm("bundled_models", MODEL_CURVES, extension=True),
)
#: Which statements each arm judges (random init / pretrained models of the arm).
JUDGED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "paper": (
        ("san_collapse", "local_slower", "ln_stops", "skip_unstable", "full_stable"),
        ("san_collapse", "local_slower", "ln_skip_stable", "skip_unstable", "full_stable"),
    ),
    "deep": (("ln_stops_deep", "skip_unstable", "full_stable"), ()),
    "gaussian_san": (("san_collapse", "local_slower", "ln_stops"), ()),
    "bundled_models": ((), ("san_collapse", "full_stable")),
}
#: The mode each statement reads (the LayerNorm one: the model's own LN, or the theory's).
MODE = {
    "san_collapse": "attn",
    "local_slower": "attn",
    "ln_stops": "ln",
    "ln_stops_deep": "ln",
    "ln_skip_stable": "attn+skip+ln",
    "skip_unstable": "attn+skip",
    "full_stable": "full",
}
PAPER_DTYPE = "float32"


class Group:
    """One model of one arm: its curves of raw mu and mu_rel, masks and dtypes, in config order."""

    def __init__(self, data: Data, label: str, pretrained: bool, frame: pd.DataFrame) -> None:
        self.data, self.label, self.pretrained, self.frame = data, label, pretrained, frame
        self.mu = curves_by(frame, "mu", ["mode", "mask"])
        self.rel = curves_by(frame, "mu_rel", ["mode", "mask"])
        self.masks = ordered_masks(frame, data.exp)
        self.dtypes = [d for d in ("float32", "float64") if d in set(frame["dtype"])]
        self.modes = set(frame["mode"])
        self.ln = "attn+sphere" if "attn+sphere" in self.modes else "attn+ln"
        self.tokens = int(data.exp.base.get("tokens", 128))

    def mode(self, key: str) -> str:
        v = MODE[key]
        return self.ln if v == "ln" else v

    def plotted(self, mode: str, named: str = "") -> dict[str, Curve]:
        """Raw mu in the paper's dtype, ``{"<mask>, <dtype>, <mode words>": Curve}`` (``named``: the
        mode whose words name the conditions, default ``mode``)."""
        dt = PAPER_DTYPE if PAPER_DTYPE in self.dtypes else self.dtypes[:1]
        return _named(
            by_label(self.mu, mode, self.masks, [dt] if isinstance(dt, str) else dt), named or mode
        )

    def mechanism(self, mode: str, named: str = "") -> dict[str, Curve]:
        """mu_rel in every dtype run, labelled as :meth:`plotted`."""
        return _named(by_label(self.rel, mode, self.masks, self.dtypes), named or mode)


def _named(curves: dict[str, Curve], mode: str) -> dict[str, Curve]:
    """Labels that name the whole condition a row's interval comes from: mask, dtype and mode."""
    return {f"{label}, {MODE_WORDS.get(mode, mode)}": c for label, c in curves.items()}


def _judge(key: str, g: Group, th: Thresholds, deeper: Group | None = None) -> tuple[Judged, Judged] | None:
    """(plotted, mechanism) judgements of statement ``key`` on one model, or None when it does not apply."""
    v = g.mode(key)
    if v not in g.modes or (key in ("ln_stops", "ln_stops_deep") and "attn" not in g.modes):
        return None
    raw, rel = g.plotted(v), g.mechanism(v)
    if key == "san_collapse":
        return judged(lambda t: rules.san_collapse(raw, t), th), judged(
            lambda t: rules.san_collapse(rel, t), th
        )
    if key == "local_slower":
        radius = {m: mask_radius(m, g.tokens) for m in g.masks}
        if len({r for r in radius.values() if r == r}) < 2:  # NaN: a model's own mask
            return None

        return (
            judged(lambda t: rules.local_slower(raw, radius, t), th),
            judged(lambda t: rules.local_slower(rel, radius, t), th),
        )
    if key in ("ln_stops", "ln_stops_deep"):
        san_raw, san_rel = g.plotted("attn", named=v), g.mechanism("attn", named=v)
        return (
            judged(lambda t: rules.ln_stops(san_raw, raw, t, None), th),
            judged(lambda t: rules.ln_stops(san_rel, rel, t, t["keep_min"]), th),
        )
    if key == "ln_skip_stable":
        return (
            judged(lambda t: rules.kept_stable(raw, t, None), th),
            judged(lambda t: rules.kept_stable(rel, t, t["keep_min"]), th),
        )
    if key == "skip_unstable":
        return judged(lambda t: rules.skip_unstable(raw, t), th), judged(
            lambda t: rules.skip_unstable(rel, t), th
        )
    return judged(lambda t: rules.full_stable(raw, t), th), judged(lambda t: rules.full_stable(rel, t), th)


def _figure_stem(arm: str, label: str) -> str:
    return {"paper": "fig2", "deep": "fig6"}.get(arm, "ext_fig2") + f"_{slug(label)}"


ARM_ORDER = ("paper", "deep", "gaussian_san", "bundled_models")


def model_words(label: str, frame: pd.DataFrame) -> str:
    """The model's label with its depth where the run cycles the model's own layers past it
    (``SmolLM2-135M (pretrained), 30 layers cycled to 128``, ``kit.data.depth_words``); else the label."""
    depth = depth_words(frame)
    return f"{label}, {depth}" if "cycled" in depth else label


def _qualifier(arm: str, pretrained: bool, frame: pd.DataFrame) -> str:
    if arm == "paper":
        return "pretrained" if pretrained else "random"
    if arm == "deep":
        return f"random, {int(frame['layer'].max())} layers"
    return arm if arm == "gaussian_san" else f"{arm}: {frame['model_name'].iloc[0]}"


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("fig2", sd.verdict, sd.ranges)
    out: list[Claim] = []
    deep = sd.arm("deep")
    for arm, data, label, pretrained, frame in arm_models(sd, ARM_ORDER, "curve"):
        g = Group(data, label, pretrained, frame)
        for key in JUDGED[arm][1 if pretrained else 0]:
            if key == "skip_unstable" and arm == "paper" and not pretrained and deep is not None:
                continue  # judged on the deep run, whose first 12 layers are this model's
            got = _judge(key, g, th)
            if got is None:
                continue
            v = g.mode(key)
            f32 = {k: c for k, c in g.mechanism(v).items() if c.dtype == PAPER_DTYPE}
            labelled = frame.assign(model_label=model_words(label, frame))  # the row's model, with its depth
            out.append(
                model_row(
                    "fig2",
                    _statement(key),
                    data,
                    th,
                    got[0],
                    got[1],
                    labelled,
                    qualifier=_qualifier(arm, pretrained, frame),
                    figure=_figure_stem(arm, label),
                    norm_words=norm_rates(g.plotted(v), f32),
                )
            )
    return out


def _statement(key: str) -> Statement:
    return next(s for s in STATEMENTS if s.key == key)


def figures(sd: StoryData) -> list[FigureSpec]:
    """Per arm and model: raw mu (float32 as the paper plots it, then float64) and mu_rel in float32 and
    float64 with both precision floors; one column per mask."""
    out = []
    for arm, data, label, _, frame in arm_models(sd, ARM_ORDER, "curve"):
        g = Group(data, label, False, frame)
        modes = [
            v
            for v in ("attn", "attn+skip", "attn+ln", "attn+sphere", "attn+skip+ln", "full")
            if v in g.modes
        ]
        rows = mode_rows(g.mu, g.rel, modes, g.masks, MODE_WORDS, MASK_WORDS)  # band marks underflows
        if not rows:
            continue
        what = {"paper": "Fig. 2 (paper's setting)", "deep": "Fig. 6 (paper's setting)"}.get(
            arm, f"Ours, Fig. 2 reading ({arm.replace('_', ' ')})"
        )
        depth = depth_words(frame)
        layers = "" if depth in label else f", {depth}"
        title = f"{what}: {label}{layers}, N = {g.tokens}; mean ± std over samples"
        caption = (
            f"{what} — {label}{layers}. Rows: raw mu(X(t)) in float32 as the paper plots it, raw mu in "
            "float64 (each series' own floor 32 eps ||X||_F dotted in its colour where it comes near), then "
            "mu_rel = mu / ||X||_F in float32 and float64 with both precision floors (grey: float32 dotted, "
            "float64 dash-dot; a curve on a floor has collapsed to rounding noise). Log-log against "
            f"t + 1. {sample_note(runs_of(data, frame), frame)}."
        )
        marked = [c for c in (*g.mu.values(), *g.rel.values()) if underflow_marks(c)[1].size]
        if marked:
            caption += (
                " Underflow (0), open circles: where some sample's raw mu (mu_rel rows: its whole X) rounded "
                "to exactly 0 in its dtype, a value no log axis can show: the curve is not drawn there, the "
                "circle sits at the floor line (raw mu: 32 eps ||X||_F, or the dtype's smallest normal "
                "number where ||X||_F is 0 too); the rules count these samples at the floor."
            )
        spec = curves_figure(
            _figure_stem(arm, label), title, caption, rows, {"mu": g.mu, "mu_rel": g.rel}, label
        )
        out.append(spec)
    return out


def _at(curves: dict[tuple, Curve], key: tuple, t: int | None = None) -> float | None:
    c = curves.get(key)
    if c is None:
        return None
    return float(c.mean[c.layers if t is None else t])


def headlines(sd: StoryData) -> list[str]:
    """The findings of the paper's random-init BERT-base in numbers: SAN + LayerNorm under the complete
    mask sits at each dtype's floor (in our re-run, the level that stays flat), under the causal mask it
    keeps falling; at 128 layers SAN + skip grows and the full transformer collapses under the complete
    mask."""
    out = []
    for arm, data, label, pretrained, frame in arm_models(sd, ("paper", "deep"), "curve"):
        if pretrained:
            continue
        g = Group(data, label, pretrained, frame)
        depth = int(frame["layer"].max())
        f32, f64 = (
            _at(g.mu, ("attn+ln", "complete", "float32")),
            _at(g.mu, ("attn+ln", "complete", "float64")),
        )
        rel32 = _at(g.rel, ("attn+ln", "complete", "float32"))
        if arm == "paper" and f32 is not None and f64 is not None and rel32 is not None:
            out.append(
                f"In our re-run of the paper's setting ({label}), SAN + LayerNorm under the complete mask "
                f"ends at raw mu = {f32:.2g} in float32 but {f64:.2g} in float64 (t = {depth}): the level "
                f"that stays flat there is the float32 precision floor (mu_rel {rel32:.2g})."
            )
        c0, c1 = _at(g.mu, ("attn+ln", "causal", "float32"), 0), _at(g.mu, ("attn+ln", "causal", "float32"))
        if arm == "paper" and c0 is not None and c1 is not None:
            out.append(
                f"Under the causal mask SAN + LayerNorm raw mu keeps falling, {c0:.3g} -> {c1:.2g} over "
                f"{depth} layers (x{(c1 / c0) ** (1 / depth):.2f} per layer)."
            )
        if arm == "deep":
            grow = [
                (m, _at(g.mu, ("attn+skip", m, "float32"), 0), _at(g.mu, ("attn+skip", m, "float32")))
                for m in g.masks
                if m != "complete"
            ]
            grow = [(m, a, b) for m, a, b in grow if a is not None and b is not None]
            if grow:
                out.append(
                    f"At {depth} layers SAN + skip raw mu grows "
                    + ", ".join(f"{a:.3g} -> {b:.2g} ({m})" for m, a, b in grow)
                    + ": 'more so in deeper layers'."
                )
            r0, r1 = (
                _at(g.rel, ("full", "complete", "float32"), 0),
                _at(g.rel, ("full", "complete", "float32")),
            )
            if r0 is not None and r1 is not None:
                out.append(
                    f"The full transformer at {depth} layers under the complete mask falls from mu_rel "
                    f"{r0:.2g} to {r1:.2g}: not stable at that depth."
                )
    return out


STORY = story_here(__name__)

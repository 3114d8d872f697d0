"""Figs. 3 and 7 (paper §5, App. G.2): d_QK, the number under the square root of the logits, in SANs.

Arms: ``paper`` (the SAN of BERT, pretrained (Fig. 3; ``paper:bert-base-uncased``, the checkpoint when
cached, else its stand-in) and at initialisation (Fig. 7); ``d_qk`` in {1/64, 1, 64} — our reading of
the figure's legend (we have the paper's text, not its images), BERT's own being 64; the four masks) and
ours, ``gaussian_san`` (the simulator's Gaussian SAN, the same d_qk). Each statement is judged per model
on raw μ as the paper plots it and on μ_rel with the floor, float32 and float64. A mask whose SAN does
not collapse at the model's own d_qk is left out, with the reason: its curves are not a collapse-rate
experiment.
"""

from __future__ import annotations

from fractions import Fraction

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import judged, model_row
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.data import (
    MASK_WORDS,
    arm_models,
    curves_by,
    ordered_masks,
    runs_of,
    sample_note,
)
from rankcollapse.experiments.kit.plots import Panel, curves_figure, dtype_rows, slug
from rankcollapse.experiments.kit.tasks.curves import MODEL_CURVES, SIMULATE_CURVES
from rankcollapse.experiments.kit.thresholds import Thresholds

FIG3, FIG7 = "paper §5, Fig. 3", "paper App. G.2, Fig. 7"
STATEMENTS = (
    Statement(
        "slows",
        "A smaller d_QK slows the (initial) rate of rank collapse",
        f"{FIG3}; {FIG7}",
        "per mask and dtype: mean per-layer log rate over the first k = initial_layers layers at the "
        "smallest d_QK minus at the largest > 0 for sure (2 standard errors) -> reproduced; < 0 for sure "
        "-> not reproduced; a mask whose SAN does not collapse at the model's own d_QK is left out",
    ),
    Statement(
        "global",
        "The d_QK effect is larger with global attention than with sparse masks",
        f"{FIG3}; {FIG7}",
        "per dtype, for every (global, sparse) pair of masks (global_masks, sparse_masks): initial-rate "
        "effect of d_QK larger under the global mask for sure -> reproduced; smaller for sure -> not",
    ),
    Statement(
        "shallow",
        "The d_QK effect is larger in shallow than in deep layers",
        f"{FIG3}; {FIG7}",
        "per mask and dtype: d_QK effect on the rate over the first k layers minus over the last k "
        "layers > 0 for sure -> reproduced; < 0 for sure -> not reproduced",
    ),
)
ARMS = (Arm("paper", MODEL_CURVES), Arm("gaussian_san", SIMULATE_CURVES, extension=True))
PAPER_DTYPE = "float32"


def dqk_words(d: float) -> str:
    frac = Fraction(d).limit_denominator(4096)
    text = str(frac) if frac.denominator > 1 else f"{int(frac)}"
    return f"d_QK = {text}"


def per_mask(curves: dict[tuple, Curve], masks: list[str], dtype: str) -> dict[str, dict[float, Curve]]:
    """``{mask: {d_qk: Curve}}`` of the SAN in one dtype (masks with at least two d_qk values)."""
    out: dict[str, dict[float, Curve]] = {}
    for (mode, mask, d, dt), c in curves.items():
        if mode == "attn" and dt == dtype and mask in masks:
            out.setdefault(mask, {})[float(d)] = c
    return {m: out[m] for m in masks if m in out and len(out[m]) >= 2}


ARM_ORDER = ("paper", "gaussian_san")
KEYS = ["mode", "mask", "d_qk"]


def _stem(arm: str, pretrained: bool, label: str) -> str:
    return (("fig3" if pretrained else "fig7") if arm == "paper" else "ext_fig3") + f"_{slug(label)}"


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("fig3", sd.verdict, sd.ranges)
    out: list[Claim] = []
    for arm, data, label, pretrained, frame in arm_models(sd, ARM_ORDER, "curve"):
        mu, rel = curves_by(frame, "mu", KEYS), curves_by(frame, "mu_rel", KEYS)
        masks = ordered_masks(frame, data.exp)
        dtypes = [d for d in ("float32", "float64") if d in set(frame["dtype"])]
        plotted_curves = per_mask(mu, masks, PAPER_DTYPE if PAPER_DTYPE in dtypes else dtypes[0])
        mech_curves = {dt: per_mask(rel, masks, dt) for dt in dtypes}
        for st in STATEMENTS:
            plotted = judged(lambda t, k=st.key, c=plotted_curves: rules.dqk(k, c, t), th)
            mech = judged(
                lambda t, k=st.key, m=mech_curves: rules.per_group(
                    {dt: (lambda tt, c=c: rules.dqk(k, c, tt)) for dt, c in m.items()}, t
                ),
                th,
            )
            qualifier = ("pretrained" if pretrained else "random") if arm == "paper" else arm
            out.append(
                model_row(
                    "fig3",
                    st,
                    data,
                    th,
                    plotted,
                    mech,
                    frame,
                    qualifier=qualifier,
                    figure=_stem(arm, pretrained, label),
                )
            )
    return out


def figures(sd: StoryData) -> list[FigureSpec]:
    out = []
    for arm, data, label, pretrained, frame in arm_models(sd, ARM_ORDER, "curve"):
        mu, rel = curves_by(frame, "mu", KEYS), curves_by(frame, "mu_rel", KEYS)
        masks = ordered_masks(frame, data.exp)

        def panels(curves: dict[tuple, Curve], dt: str, masks: list[str] = masks) -> list[Panel]:
            drawn = []  # one panel per mask, one curve per d_QK
            for m in masks:
                series = sorted(((d, c) for (_, mm, d, t), c in curves.items() if mm == m and t == dt),
                                key=lambda p: p[0])
                if series:
                    drawn.append((MASK_WORDS.get(m, m), [(dqk_words(d), c) for d, c in series]))
            return drawn

        rows = dtype_rows(mu, rel, panels)
        if not rows:
            continue
        which = (
            "Ours, Fig. 3 reading (Gaussian SAN)"
            if arm != "paper"
            else "Fig. 3 (pretrained SAN)"
            if pretrained
            else "Fig. 7 (SAN at initialisation)"
        )
        caption = (
            f"{which} — {label}: the SAN (attention layers only) with logits q k^T / sqrt(d_QK), d_QK in "
            "1/64, 1, 64 (BERT's own: 64; these values are our reading of the paper's legend, whose image we "
            "do not have). Raw mu as the paper plots it, and mu_rel with the float32 and "
            f"float64 floors. A mask whose SAN raw mu grows at the model's own d_QK is no collapse-rate "
            f"experiment: the rows leave it out and say so. {sample_note(runs_of(data, frame), frame)}."
        )
        out.append(
            curves_figure(
                _stem(arm, pretrained, label),
                f"{which}: {label}, attention only, d_QK varied; mean ± std",
                caption,
                rows,
                {"mu": mu, "mu_rel": rel},
                label,
            )
        )
    return out


STORY = story_here(__name__)

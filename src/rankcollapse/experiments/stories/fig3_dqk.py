"""Figs. 3 and 7 in the paper's own setting: d_QK in the SAN of BERT, pretrained and at init (paper §5, G.2).

Task: :func:`~rankcollapse.experiments.paper_tasks.paper_curves` with the SAN variant only,
``d_qk`` in {1/64, 1, 64} (the number under the square root; BERT's own is 64) and the four
masks. Claims per model (pretrained = Fig. 3, random init = Fig. 7), each judged on raw mu and on
mu_rel with the floor, in every dtype run: smaller d_qk slows the initial collapse; the effect
is larger under global attention than under sparse masks; larger in shallow than deep layers.
"""

from __future__ import annotations

from fractions import Fraction

from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import Claim, Data, combine_verdicts
from rankcollapse.experiments.paper_curves import Curve
from rankcollapse.experiments.paper_data import (
    MASK_WORDS,
    curves_by,
    model_groups,
    rows_of,
    runs_of,
    sample_note,
    two_way_claim,
)
from rankcollapse.experiments.paper_plots import curve_data, panel_figure, slug
from rankcollapse.experiments.paper_rules import (
    Judgement,
    Thresholds,
    rule_dqk_global,
    rule_dqk_shallow,
    rule_dqk_slows,
)
from rankcollapse.experiments.paper_tasks import paper_curves

STATEMENTS = {
    "slows": ("A smaller d_QK slows the (initial) rate of rank collapse",
              "per mask and dtype: mean per-layer log rate over the first k = initial_layers layers at "
              "the smallest d_QK minus at the largest > 0 for sure (2 standard errors) -> reproduced; "
              "< 0 for sure -> not reproduced"),
    "global": ("The d_QK effect is larger with global attention than with sparse masks",
               "per dtype, for every (global, sparse) pair of masks (global_masks, sparse_masks of the "
               "YAML): initial-rate effect of d_QK larger under the global mask for sure -> reproduced; "
               "smaller for sure -> not reproduced"),
    "shallow": ("The d_QK effect is larger in shallow than in deep layers",
                "per mask and dtype: d_QK effect on the rate over the first k layers minus over the last k "
                "layers > 0 for sure -> reproduced; < 0 for sure -> not reproduced"),
}


def dqk_words(d: float) -> str:
    frac = Fraction(d).limit_denominator(4096)
    text = str(frac) if frac.denominator > 1 else f"{int(frac)}"
    return f"d_QK = {text}" + (" (BERT's own)" if d == 64 else "")


def per_mask(curves: dict[tuple, Curve], masks: list[str], dtype: str) -> dict[str, dict[float, Curve]]:
    out: dict[str, dict[float, Curve]] = {}
    for (variant, mask, d, dt), c in curves.items():
        if variant == "attn" and dt == dtype and mask in masks:
            out.setdefault(mask, {})[float(d)] = c
    return {m: out[m] for m in masks if m in out and len(out[m]) >= 2}


def judge_dtypes(curves: dict[tuple, Curve], masks: list[str], key: str, data: Data) -> Judgement:
    th = Thresholds.from_verdict(data.exp.verdict)
    parts = []
    for dt in ("float32", "float64"):
        pm = per_mask(curves, masks, dt)
        if not pm:
            continue
        if key == "slows":
            j = rule_dqk_slows(pm, th)
        elif key == "global":
            glob = list(data.exp.verdict.get("global_masks", ["complete"]))
            sparse = list(data.exp.verdict.get("sparse_masks", ["window:w=1", "causal-window:w=1"]))
            j = rule_dqk_global(pm, glob, sparse, th)
        else:
            j = rule_dqk_shallow(pm, th)
        parts.append((dt, j))
    if not parts:
        return Judgement("inconclusive", "no data")
    return Judgement(combine_verdicts([j.verdict for _, j in parts]),
                     " ## ".join(f"{dt}: {j.evidence}" for dt, j in parts))


def claims(data: Data) -> list[Claim]:
    masks = list(data.exp.base.get("masks") or [])
    frame = rows_of(data, "curve")
    if frame.empty:
        return [data.no_data(f"fig3.{k}", s, "paper §5, Fig. 3", r) for k, (s, r) in STATEMENTS.items()]
    out = []
    for label, pretrained, g in model_groups(frame):
        source = "paper §5, Fig. 3" if pretrained else "paper App. G.2, Fig. 7"
        keys = ["variant", "mask", "d_qk"]
        cm, cr = curves_by(g, "mu", keys), curves_by(g, "mu_rel", keys)
        for key, (stmt, rule) in STATEMENTS.items():
            raw, rel = judge_dtypes(cm, masks, key, data), judge_dtypes(cr, masks, key, data)
            tag = "pretrained" if pretrained else "random"
            out.append(two_way_claim(data, f"fig3.{key}[{tag}]", stmt, source, rule, raw, rel,
                                     runs_of(data, g), g, f"fig3_dqk_{slug(label)}", label))
    return out


def figures(data: Data) -> list[FigureSpec]:
    masks = list(data.exp.base.get("masks") or [])
    frame = rows_of(data, "curve")
    out = []
    for label, pretrained, g in model_groups(frame):
        keys = ["variant", "mask", "d_qk"]
        cm, cr = curves_by(g, "mu", keys), curves_by(g, "mu_rel", keys)
        rows = []
        for curves, dt, ylabel, floors in ((cm, "float32", "raw mu(X(t)), float32 (as in the paper)", False),
                                           (cr, "float32", "mu_rel, float32", True),
                                           (cr, "float64", "mu_rel, float64", True)):
            panels = []
            for m in masks:
                series = sorted(((d, c) for (v, mm, d, t), c in curves.items() if mm == m and t == dt),
                                key=lambda p: p[0])
                if series:
                    panels.append((MASK_WORDS.get(m, m), [(dqk_words(d), c) for d, c in series]))
            if panels:
                rows.append((ylabel, floors, panels))
        if not rows:
            continue
        which = "Fig. 3 (pretrained SAN)" if pretrained else "Fig. 7 (SAN at initialisation)"
        fig, notes = panel_figure(f"{which}: {label}, attention only, d_QK varied; mean ± std", rows)
        caption = (f"{which} — {label}: the SAN (attention layers only) with logits q k^T / sqrt(d_QK), "
                   f"d_QK in 1/64, 1, 64 (BERT's own). Raw mu in float32 as the paper plots it, and mu_rel "
                   f"with the float32 and float64 floors. {sample_note(runs_of(data, g), g)}.")
        if notes:
            caption += " Notes: " + " | ".join(notes) + "."
        series_map = {f"{q} | {' | '.join(map(str, k))}": c for q, cs in (("mu", cm), ("mu_rel", cr))
                      for k, c in cs.items()}
        table = curve_data(series_map)
        table.insert(0, "model", label)
        out.append(FigureSpec(f"fig3_dqk_{slug(label)}", fig, table, caption))
    return out


STORY = Story(name="fig3_dqk", task=paper_curves, claims=claims, figures=figures)

"""Fig. 2 in the paper's own setting: BERT, random-init and pretrained, 5 variants x 4 masks (paper §5).

Task: :func:`~rankcollapse.experiments.paper_tasks.paper_curves`, one run per model, dtype and
seed; each run measures every variant (SAN, + skip, + LayerNorm, + skip + LayerNorm, the full
transformer) under every mask (complete, causal, sliding window w = 1, uni-directional sliding
window w = 1) on the same 128-token Wikipedia excerpts. Claims (one row per statement and model,
each judged on raw mu and on mu_rel with the floor): see :func:`curve_claims`. Figures: per model,
raw mu (float32, as the paper) and mu_rel in float32 and float64 with the floors, mean ± std.
"""

from __future__ import annotations

from typing import Any

from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import Claim, Data
from rankcollapse.experiments.paper_data import (
    MASK_WORDS,
    VARIANT_WORDS,
    aligned,
    by_mask,
    curves_by,
    model_groups,
    norm_rates,
    rows_of,
    runs_of,
    sample_note,
    two_way_claim,
)
from rankcollapse.experiments.paper_plots import curve_data, panel_figure, slug, variant_rows
from rankcollapse.experiments.paper_rules import (
    Thresholds,
    rule_full_stable,
    rule_kept_stable,
    rule_ln_stops,
    rule_local_slower,
    rule_san_collapse,
    rule_skip_unstable,
)
from rankcollapse.experiments.paper_tasks import paper_curves

SOURCE = "paper §5, Fig. 2"
STATEMENTS: dict[str, tuple[str, str]] = {
    "san_collapse": (
        "In SANs mu(X(t)) converges to 0 exponentially under every mask",
        "every SAN curve (each mask, each dtype) 'collapsing' (per-layer log rate below -rate_tol "
        "for sure) or 'at floor' -> reproduced; any 'not collapsing' -> not reproduced",
    ),
    "local_slower": (
        "More local masks slow the collapse (complete/causal fastest, sliding windows slowest)",
        "for every pair of masks with different graph radius (complete 1, causal 1, sliding "
        "window 64, uni-directional 127 at N = 128): SAN log rate of the more local mask higher "
        "for sure -> reproduced; lower for sure -> not reproduced",
    ),
    "ln_stops": (
        "Random init: adding LayerNorm stops mu from converging to 0; it stays at a stable level "
        "well above 0",
        "per mask and dtype: SAN + LayerNorm 'kept' over the last half of the layers (flat within "
        "±rate_tol; mu_rel also >= keep_min, off the floor) while the SAN collapses -> reproduced; "
        "LN curve falling, low or at the floor, or SAN not collapsing either -> not reproduced",
    ),
    "ln_skip_stable": (
        "Pretrained: LayerNorm together with the skip connection prevents collapse and stabilises mu",
        "per mask and dtype: SAN + skip + LayerNorm not collapsing over all layers and 'kept' "
        "over the last half -> reproduced; collapsing, falling, growing or at the floor -> not",
    ),
    "skip_unstable": (
        "Skip connections alone make mu unstable, more so in deeper layers",
        "per mask and dtype: SAN + skip 'unstable' (typical log change I(L) >= unstable_min, or "
        "non-finite) and I growing from the middle layer to the last -> reproduced; 'stable' "
        "(I(L) < unstable_min / 2) -> not reproduced",
    ),
    "full_stable": (
        "The full transformer keeps mu stable",
        "per mask and dtype: full transformer 'stable' (I(L) < unstable_min / 2) and, for mu_rel, "
        "never at the floor -> reproduced; unstable or at the floor -> not reproduced",
    ),
}
#: Which statements apply to which models (the paper separates random-init and pretrained).
FOR_RANDOM = ("san_collapse", "local_slower", "ln_stops", "skip_unstable", "full_stable")
FOR_PRETRAINED = ("san_collapse", "local_slower", "ln_skip_stable", "skip_unstable", "full_stable")


def mask_radii(masks: list[str], n: int) -> dict[str, float]:
    from rankcollapse.masks import parse_mask

    return {m: float(parse_mask(m).radius(n) or n) for m in masks}


def curve_claims(
    data: Data,
    prefix: str,
    source: str,
    figure_stem: str,
    statements: dict[str, tuple[str, str]],
    for_random: tuple[str, ...],
    for_pretrained: tuple[str, ...],
) -> list[Claim]:
    """The claim rows of a variants x masks story (Figs. 2 and 6), one per statement and model."""
    th = Thresholds.from_verdict(data.exp.verdict)
    masks = list(data.exp.base.get("masks") or data.exp.grid.get("masks", [[]])[0])
    frame = rows_of(data, "curve")
    groups = model_groups(frame)
    if not groups:
        return [data.no_data(f"{prefix}.{k}", s, source, r, figure_stem) for k, (s, r) in statements.items()]
    radius = mask_radii(masks, int(data.exp.base.get("tokens", 128)))
    claims = []
    for label, pretrained, g in groups:
        runs = runs_of(data, g)
        fig = f"{figure_stem}_{slug(label)}"
        keys = for_pretrained if pretrained else for_random
        cm, cr = curves_by(g, "mu", ["variant", "mask"]), curves_by(g, "mu_rel", ["variant", "mask"])
        tag = "pretrained" if pretrained else "random"
        for key in keys:
            stmt, rule = statements[key]
            got = []
            for curves, keep in ((cm, None), (cr, th.keep_min)):

                def of(v: str, curves: dict = curves) -> dict[str, list]:
                    return by_mask(curves, lambda k, v=v: k[0] == v, masks)

                if key == "san_collapse":
                    got.append(rule_san_collapse(of("attn"), th))
                elif key == "local_slower":
                    got.append(rule_local_slower(of("attn"), radius, th))
                elif key == "ln_stops":
                    san, ln = aligned(of("attn"), of("attn+ln"))
                    got.append(rule_ln_stops(san, ln, th, keep))
                elif key == "ln_skip_stable":
                    got.append(rule_kept_stable(of("attn+skip+ln"), th, keep))
                elif key == "skip_unstable":
                    got.append(rule_skip_unstable(of("attn+skip"), th))
                else:
                    got.append(rule_full_stable(of("full"), th))
            variant = {
                "san_collapse": "attn",
                "local_slower": "attn",
                "ln_stops": "attn",
                "ln_skip_stable": "attn+skip+ln",
                "skip_unstable": "attn+skip",
                "full_stable": "full",
            }[key]
            norms = norm_rates(
                by_mask(cm, lambda k, v=variant: k[0] == v, masks),
                by_mask(cr, lambda k, v=variant: k[0] == v, masks),
            )
            claims.append(
                two_way_claim(
                    data,
                    f"{prefix}.{key}[{tag}]",
                    stmt,
                    source,
                    rule,
                    got[0],
                    got[1],
                    runs,
                    g,
                    fig,
                    label,
                    norms,
                )
            )
    return claims


def claims(data: Data) -> list[Claim]:
    return curve_claims(data, "fig2", SOURCE, "fig2_bert", STATEMENTS, FOR_RANDOM, FOR_PRETRAINED)


def curve_figures(data: Data, stem: str, what: str) -> list[FigureSpec]:
    """One figure per model: rows raw mu (float32) and mu_rel (float32, float64); columns the masks."""
    frame = rows_of(data, "curve")
    masks = list(data.exp.base.get("masks") or [])
    variants = list(data.exp.base.get("variants") or [])
    out = []
    for label, _, g in model_groups(frame):
        cm, cr = curves_by(g, "mu", ["variant", "mask"]), curves_by(g, "mu_rel", ["variant", "mask"])
        rows = variant_rows(cm, cr, variants, masks, VARIANT_WORDS, MASK_WORDS)
        if not rows:
            continue
        depth = int(g["layer"].max())
        note = sample_note(runs_of(data, g), g)
        title = f"{what}: {label}, {depth} layers, N = {int(data.exp.base.get('tokens', 128))}; mean ± std"
        fig, notes = panel_figure(title, rows)
        caption = (
            f"{what} — {label}. Top: raw mu(X(t)) in float32 as the paper plots it (log-log, mean ± std "
            f"over samples). Below: mu_rel = mu / ||X||_F in float32 and float64 with both precision "
            f"floors (grey: float32 dotted, float64 dash-dot); a curve on a floor has collapsed to "
            f"rounding noise. {note}."
        )
        if notes:
            caption += " Notes: " + " | ".join(notes) + "."
        series: dict[str, Any] = {}
        for key, c in cm.items():
            series[f"mu | {' | '.join(map(str, key))}"] = c
        for key, c in cr.items():
            series[f"mu_rel | {' | '.join(map(str, key))}"] = c
        table = curve_data(series)
        table.insert(0, "model", label)
        out.append(FigureSpec(f"{stem}_{slug(label)}", fig, table, caption))
    return out


def figures(data: Data) -> list[FigureSpec]:
    return curve_figures(data, "fig2_bert", "Fig. 2 (paper's setting)")


STORY = Story(name="fig2_bert", task=paper_curves, claims=claims, figures=figures)

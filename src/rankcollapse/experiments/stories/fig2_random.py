"""Fig. 2 with random weights (paper §5): pure attention against attention + sphere normalisation.

Task: the simulator, one run per mask, preset, dtype and seed. Claims: every pure-attention curve
collapses; per mask, the normalised curves are kept (the paper) or fall (then a disagreement note
says what we measured). Figure: log-log mu_rel panels per mask, float32 and float64 floors marked.
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.experiments.analysis import floor_rel, majority
from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Data,
    fmt,
)
from rankcollapse.experiments.plotting import curves, empty, floor_lines, loglog, panel_grid
from rankcollapse.experiments.stories._shared import classified
from rankcollapse.experiments.tasks import simulate

SOURCE = "ours (Gaussian SAN, our sizes; reading paper §5, Fig. 2 — the paper's setting is fig2_bert)"
FIGURE = "fig2_random"
S_PURE = "Pure attention: mu(X(t)) collapses exponentially under every mask, at mask-dependent rates (Fig. 2)"
R_PURE = "every pure-attention curve (majority over seeds) is 'at floor' or 'collapsing' -> reproduced"
S_LN = "Adding LayerNorm alone: mu(X(t)) no longer converges to zero in randomly initialised models (Fig. 2)"
R_LN = (
    "per mask: LN curves 'kept' in both dtypes -> reproduced; 'at floor' or 'collapsing' in float64 "
    "-> not reproduced; otherwise inconclusive"
)


def pure_claim(data: Data, pure: pd.DataFrame) -> Claim:
    """Reproduced iff every (mask, dtype) majority class is 'at floor' or 'collapsing'."""
    parts, good = [], True
    for mask, grp in data.groups(pure, "mask"):
        per_dtype = []
        for dtype, g2 in grp.groupby("dtype"):
            cls = majority([c for c, _ in classified(data, g2)])
            good &= cls in ("at floor", "collapsing")
            per_dtype.append(f"{dtype} {cls}")
        parts.append(f"{mask}: " + ", ".join(per_dtype))
    verdict = (REPRODUCED if good else NOT_REPRODUCED) if parts else INCONCLUSIVE
    evidence = "; ".join(parts) or "no pure-attention run"
    return data.claim("fig2.pure_collapse", S_PURE, SOURCE, R_PURE, evidence, verdict, pure, FIGURE)


def ln_verdict(by_dtype: dict[str, str]) -> str:
    """Kept in every dtype -> reproduced; float64 (else float32) at floor/collapsing -> not."""
    f64 = by_dtype.get("float64", by_dtype.get("float32", "unclear"))
    if by_dtype and all(c == "kept" for c in by_dtype.values()):
        return REPRODUCED
    if f64 in ("at floor", "collapsing"):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def ln_claims(data: Data, ln: pd.DataFrame) -> list[Claim]:
    """One claim per mask on the normalised runs."""
    out = []
    for mask, grp in data.groups(ln, "mask"):
        by_dtype: dict[str, str] = {}
        finals = []
        for dtype, g2 in grp.groupby("dtype"):
            by_dtype[str(dtype)] = majority([c for c, _ in classified(data, g2)])
            finals.append(
                f"{dtype} {by_dtype[str(dtype)]} (final mu_rel {fmt(g2['summary.final_mu_rel'].median())})"
            )
        verdict = ln_verdict(by_dtype)
        note = ""
        if verdict == NOT_REPRODUCED:
            note = (
                f"With random Gaussian weights and LayerNorm (tokens on the sphere), mu_rel under the {mask} "
                f"mask still falls ({'; '.join(finals)}); the paper reports that LN stops the collapse."
            )
        out.append(
            data.claim(
                f"fig2.ln_random[{mask}]",
                S_LN + f" — mask {mask}",
                SOURCE,
                R_LN,
                "; ".join(finals),
                verdict,
                grp,
                FIGURE,
                note,
            )
        )
    return out


def claims(data: Data) -> list[Claim]:
    ok = data.ok
    if ok.empty:
        return [
            data.no_data("fig2.pure_collapse", S_PURE, SOURCE, R_PURE, FIGURE),
            data.no_data("fig2.ln_random", S_LN, SOURCE, R_LN, FIGURE),
        ]
    return [pure_claim(data, ok[ok["preset"] == "attn"]), *ln_claims(data, ok[ok["preset"] != "attn"])]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "Fig. 2 (random weights): relative mu(X(t)) / ||X(t)||_F against depth t+1, log-log; "
        "solid = float64, dashed = float32; blue = pure attention, orange = + LayerNorm; "
        "dotted/dash-dot lines = float32/float64 precision floors, hollow markers = at the floor "
        "(collapsed, not stable). Median over seeds; values under the floor drawn on it."
    )
    table = curves(data, ["mask", "preset", "dtype"])
    if table.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    masks = list(dict.fromkeys(table["mask"]))
    fig, axes = panel_grid(len(masks))
    colors = {"attn": "C0"}
    for ax, mask in zip(axes, masks, strict=True):
        sub = table[table["mask"] == mask]
        for (preset, dtype), c in sub.groupby(["preset", "dtype"], sort=False):
            loglog(
                ax,
                c["layer"],
                c["mu_rel"],
                floor_rel(dtype),
                color=colors.get(preset, "C1"),
                ls="-" if dtype == "float64" else "--",
                lw=1.3,
                label=f"{preset}, {dtype}",
            )
        floor_lines(ax, sorted(set(sub["dtype"])))
        ax.set_title(mask)
        ax.set_xlabel("layer t + 1")
        ax.set_ylabel("mu_rel")
    axes[0].legend(fontsize=7, loc="lower left")
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="fig2_random", task=simulate, claims=claims, figures=figures)

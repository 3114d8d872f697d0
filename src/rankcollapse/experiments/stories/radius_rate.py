"""Local masks slow collapse (paper §4, reading of Thm 1): mask radius r against the fitted rate.

Task: the simulator, one run per window mask and seed. Claim: within each window family, the
fitted log-rate grows with the radius (Spearman). Figure: per-layer factor against r, and the
mu_rel curves.
"""

from __future__ import annotations

import math

import numpy as np

from rankcollapse.experiments.analysis import floor_rel, spearman
from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Data,
    column,
    combine_verdicts,
    fmt,
)
from rankcollapse.experiments.plotting import curves, empty, floor_lines, loglog, pyplot
from rankcollapse.experiments.stories._shared import family
from rankcollapse.experiments.tasks import simulate

SOURCE = "paper §4, Thm 1 (rate (1 - eps^r)^(1/r) grows with r)"
FIGURE = "radius_rate"


def family_verdict(rho: float, min_rho: float) -> str:
    """One window family: rho >= min_rho reproduced, rho <= 0 not, in between (or NaN) inconclusive."""
    return REPRODUCED if rho >= min_rho else NOT_REPRODUCED if rho <= 0 else INCONCLUSIVE


def claims(data: Data) -> list[Claim]:
    stmt = "Local (sparser) masks slow collapse: the collapse rate grows with the radius r"
    min_rho = data.v("min_rho", 0.8)
    rule = (
        f"within each window family, Spearman(radius, fitted log-rate) >= {min_rho} -> reproduced; "
        "<= 0 in any family -> not reproduced; fewer than 3 fitted rates or in between -> inconclusive"
    )
    ok = data.ok
    if ok.empty:
        return [data.no_data("radius.slows", stmt, SOURCE, rule, FIGURE)]
    parts, verdicts = [], []
    for fam, grp in ok.groupby(ok["mask"].map(family), sort=False):
        grp = grp[column(grp, "summary.fit_log_rate").notna()]
        if grp["mask"].nunique() < 3:
            parts.append(f"{fam}: too few fitted rates")
            verdicts.append(INCONCLUSIVE)
            continue
        per_mask = grp.groupby("mask").agg(
            r=("summary.radius", "first"), rate=("summary.fit_log_rate", "median")
        )
        per_mask = per_mask.sort_values("r")
        rho = spearman(per_mask["r"].tolist(), per_mask["rate"].tolist())
        pairs = ", ".join(
            f"r={int(r)}: {math.exp(v):.3f}" for r, v in zip(per_mask["r"], per_mask["rate"], strict=True)
        )
        parts.append(f"{fam}: per-layer factor exp(rate) {pairs}; Spearman {fmt(rho)}")
        verdicts.append(family_verdict(rho, min_rho))
    evidence = "; ".join(parts)
    return [
        data.claim("radius.slows", stmt, SOURCE, rule, evidence, combine_verdicts(verdicts), figure=FIGURE)
    ]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "Local masks slow collapse: fitted per-layer collapse factor exp(slope of log mu_rel over the "
        "pre-floor layers) against the mask radius r, one point per run; the bound's factor "
        "(1 - eps^r)^{1/r} is drawn hollow. Right: the mu_rel curves (log-log)."
    )
    ok = data.ok
    if ok.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    plt = pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True)
    pts = ok[
        ["run_id", "mask", "seed", "summary.radius", "summary.fit_log_rate", "summary.theory.rate"]
    ].copy()
    pts.columns = ["run_id", "mask", "seed", "radius", "fit_log_rate", "bound_factor"]
    pts["family"] = pts["mask"].str.split(":").str[0]
    pts["fit_factor"] = np.exp(pts["fit_log_rate"].astype(float))
    for i, (fam, g) in enumerate(pts.groupby("family", sort=False)):
        ax.plot(g["radius"], g["fit_factor"], "o", color=f"C{i}", label=f"{fam} (measured)")
        ax.plot(g["radius"], g["bound_factor"], "o", mfc="none", color=f"C{i}", label=f"{fam} (bound)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("radius r")
    ax.set_ylabel("per-layer factor of mu_rel")
    ax.legend(fontsize=7)
    table = curves(data, ["mask"])
    dtype = str(data.exp.base.get("dtype", "float64"))
    cmap = plt.get_cmap("viridis")
    masks = list(dict.fromkeys(table["mask"]))
    for i, mask in enumerate(masks):
        c = table[table["mask"] == mask]
        loglog(
            ax2,
            c["layer"],
            c["mu_rel"],
            floor_rel(dtype),
            color=cmap(i / max(1, len(masks) - 1)),
            ls="-" if mask.startswith("window") else "--",
            lw=1,
            label=mask,
        )
    floor_lines(ax2, [dtype])
    ax2.set_xlabel("layer t + 1")
    ax2.set_ylabel("mu_rel")
    ax2.legend(fontsize=6, ncol=2)
    return [FigureSpec(FIGURE, fig, pts, caption)]


STORY = Story(name="radius_rate", task=simulate, claims=claims, figures=figures)

"""LayerNorm + orthogonal W_V (paper §4.2, Thm 2 and Cor. 1): hemisphere inputs still collapse.

Task: the simulator with sphere normalisation, orthogonal value matrices and inputs in one open
hemisphere, one run per mask and seed. Claim: every run reaches the floor or has a fitted
log-rate below ``-min_log_rate``. Figure: mu_rel against depth per mask.
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.experiments.analysis import floor_rel
from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import NOT_REPRODUCED, REPRODUCED, Claim, Data, fmt
from rankcollapse.experiments.plotting import curves, empty, pyplot
from rankcollapse.experiments.tasks import simulate

SOURCE = "ours (hemisphere inputs, no bound); the paper's Thm 2 / Cor 1 with their conditions: story theorem2"
FIGURE = "ln_orthogonal"


def claims(data: Data) -> list[Claim]:
    stmt = "With LayerNorm and orthogonal W_V, tokens in one open hemisphere still collapse exponentially"
    min_rate = data.v("min_log_rate", 1e-3)
    rule = (
        f"every run reaches the floor or has fitted log-rate < -{min_rate} per layer -> reproduced, else not"
    )
    ok = data.ok
    if ok.empty:
        return [data.no_data("ln.orthogonal", stmt, SOURCE, rule, FIGURE)]
    parts, fails = [], 0
    for mask, grp in data.groups(ok, "mask"):
        rates = grp["summary.fit_log_rate"].astype(float)
        hits = grp["summary.layers_to_floor"]
        fails += int(sum(1 for h, r in zip(hits, rates, strict=True) if pd.isna(h) and not (r < -min_rate)))
        hit_txt = f", floor by t={int(hits.max())}" if hits.notna().all() else ""
        parts.append(f"{mask}: rate {fmt(rates.median())}/layer{hit_txt}")
    verdict = REPRODUCED if fails == 0 else NOT_REPRODUCED
    return [data.claim("ln.orthogonal", stmt, SOURCE, rule, "; ".join(parts), verdict, figure=FIGURE)]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "LayerNorm (tokens on the sphere) + orthogonal W_V, inputs in one open "
        "hemisphere: mu_rel against depth (linear t, log mu); floor dash-dot."
    )
    table = curves(data, ["mask"])
    if table.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.4), constrained_layout=True)
    dtype = str(data.exp.base.get("dtype", "float64"))
    for mask, c in table.groupby("mask", sort=False):
        ax.plot(c["layer"], c["mu_rel"], label=mask)
    ax.axhline(floor_rel(dtype), color="0.4", ls="-.", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("layer t")
    ax.set_ylabel("mu_rel")
    ax.legend(fontsize=7)
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="ln_orthogonal", task=simulate, claims=claims, figures=figures)

"""Fig. 3 (paper §5): the temperature d_QK (logits / sqrt(d_QK)) against the collapse rate.

Task: the simulator, pure attention, one run per mask, ``d_qk`` and seed.
Claims: smaller d_QK slows collapse for every mask; the effect is largest with the complete mask;
smaller d_QK loses the first decade of mu_rel later (shallow layers). Figure: mu_rel panels per mask.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rankcollapse.experiments.analysis import spearman
from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Data,
    combine_verdicts,
    fmt,
)
from rankcollapse.experiments.plotting import curves, empty, mu_rel_panels
from rankcollapse.experiments.tasks import simulate

SOURCE = "ours (Gaussian SAN, our sizes; reading paper §5, Fig. 3 — the paper's setting is fig3_dqk)"
FIGURE = "fig3_temperature"
S_TEMP = "Smaller temperature d_QK (sharper attention) slows rank collapse, for every mask (Fig. 3)"
S_GLOB = "The temperature effect is larger with global (complete) attention than with sparser masks (Fig. 3)"
R_GLOB = (
    "spread max-min of fitted log-rate over d_QK: complete > every other mask -> reproduced; "
    "smaller than some mask -> not reproduced"
)
S_SHALLOW = (
    "Smaller d_QK alleviates collapse most in shallow layers: the first decade of mu_rel is lost later"
)


def rho_verdict(rho: float, min_rho: float) -> str:
    """One mask: rho <= -min_rho reproduced (smaller d_QK -> slower), >= +min_rho not, else inconclusive."""
    return REPRODUCED if rho <= -min_rho else NOT_REPRODUCED if rho >= min_rho else INCONCLUSIVE


def _r_temp(min_rho: float) -> str:
    return (
        f"per mask, Spearman(d_QK, fitted log-rate) <= -{min_rho} (smaller d_QK -> slower) -> reproduced "
        f"for that mask; >= +{min_rho} -> not reproduced; all masks must agree"
    )


def _r_shallow(level: float, min_rho: float) -> str:
    return (
        f"per mask, t_{level:g} = first layer with mu_rel < {level:g} (depth + 1 if never); Spearman(d_QK, "
        f"t_{level:g}) <= -{min_rho} -> reproduced for that mask; >= +{min_rho} -> not; all masks must agree"
    )


def temperature_claims(data: Data, ok: pd.DataFrame, min_rho: float) -> tuple[Claim, Claim]:
    """The rate claim (per mask Spearman of d_QK against the fitted rate) and the global-mask claim."""
    parts, verdicts, spreads = [], [], {}
    for mask, grp in data.groups(ok, "mask"):
        rate = grp["summary.fit_log_rate"].astype(float)
        rate = rate.fillna(-np.inf)  # collapsed within < 3 layers: no fitted rate; rank those runs as fastest
        per_t = rate.groupby(grp["d_qk"].astype(float)).median()
        finite = per_t.replace(-np.inf, np.nan).dropna()
        spreads[mask] = float(finite.max() - finite.min()) if len(finite) >= 2 else math.nan
        rho = spearman(grp["d_qk"].astype(float).tolist(), rate.clip(lower=-1e6).tolist())
        txt = ", ".join(
            f"d_QK={t:g}: {f'{math.exp(v):.3f}' if math.isfinite(v) else 'floor<3 layers'}"
            for t, v in per_t.items()
        )
        parts.append(f"{mask}: factor/layer {txt}; rho {fmt(rho)}")
        verdicts.append(rho_verdict(rho, min_rho))
    temp = data.claim(
        "fig3.temperature",
        S_TEMP,
        SOURCE,
        _r_temp(min_rho),
        "; ".join(parts),
        combine_verdicts(verdicts),
        figure=FIGURE,
    )
    if "complete" in spreads and len(spreads) > 1 and math.isfinite(spreads["complete"]):
        others = {m: s for m, s in spreads.items() if m != "complete" and math.isfinite(s)}
        ev = "spread of log-rate over d_QK: " + ", ".join(f"{m} {fmt(s)}" for m, s in spreads.items())
        if not others:
            verdict = INCONCLUSIVE
        else:
            verdict = REPRODUCED if all(spreads["complete"] > s for s in others.values()) else NOT_REPRODUCED
    else:
        ev, verdict = "complete mask missing or not fitted", INCONCLUSIVE
    return temp, data.claim("fig3.global", S_GLOB, SOURCE, R_GLOB, ev, verdict, figure=FIGURE)


def shallow_claim(data: Data, ok: pd.DataFrame, min_rho: float) -> Claim:
    """Shallow layers: depth at which mu_rel first falls below ``shallow_level`` against d_QK."""
    level = data.v("shallow_level", 0.1)
    parts, verdicts = [], []
    for mask, grp in data.groups(ok, "mask"):
        depth = []
        for run_id in grp["run_id"]:
            curve = data.curve(run_id)
            depth.append(next((t for t, v in enumerate(curve) if v < level), len(curve)))
        temps = grp["d_qk"].astype(float).tolist()
        rho = spearman(temps, depth)
        per_t = pd.Series(depth, index=temps).groupby(level=0).median()
        parts.append(
            f"{mask}: t_{level:g} "
            + ", ".join(f"d_QK={t:g}: {v:g}" for t, v in per_t.items())
            + f"; rho {fmt(rho)}"
        )
        verdicts.append(rho_verdict(rho, min_rho))
    rule = _r_shallow(level, min_rho)
    return data.claim(
        "fig3.shallow", S_SHALLOW, SOURCE, rule, "; ".join(parts), combine_verdicts(verdicts), figure=FIGURE
    )


def claims(data: Data) -> list[Claim]:
    min_rho = data.v("min_abs_rho", 0.8)
    ok = data.ok
    if ok.empty:
        return [
            data.no_data("fig3.temperature", S_TEMP, SOURCE, _r_temp(min_rho), FIGURE),
            data.no_data("fig3.global", S_GLOB, SOURCE, R_GLOB, FIGURE),
        ]
    temp, glob = temperature_claims(data, ok, min_rho)
    return [temp, shallow_claim(data, ok, min_rho), glob]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "Fig. 3: mu_rel against depth (log-log) for d_QK in {1/64, 1, 64} (logits / sqrt(d_QK); "
        "smaller = sharper attention), pure attention, float64; floor dash-dot, hollow markers = at "
        "the floor."
    )
    table = curves(data, ["mask", "d_qk"])
    if table.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    dtype = str(data.exp.base.get("dtype", "float64"))

    def label(temp: float) -> str:
        return "d_QK = " + ("1/64" if abs(temp - 1 / 64) < 1e-12 else f"{temp:g}")

    fig = mu_rel_panels(table, "mask", "d_qk", dtype, label, sort=True)
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="fig3_temperature", task=simulate, claims=claims, figures=figures)

"""Theorem 1 (paper §4): pure masked attention collapses exponentially when the mask has a center.

Task: the simulator (``experiments.tasks.simulate``), one run per mask and seed; its summary has the
theorem's check (``theory.*``: holds, epsilon, max_ratio) and the fitted collapse rate. Claims:
collapse under center masks, the bound itself, and no forced collapse without a center. Figure:
measured mu(X(t)) against the bound, per mask.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.analysis import floor_rel
from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Data,
    column,
    fmt,
)
from rankcollapse.experiments.plotting import curves, empty, panel_grid
from rankcollapse.experiments.tasks import simulate

SOURCE = "paper §4, Thm 1"
FIGURE = "theorem1_bound"


def _statements(data: Data) -> dict[str, tuple[str, str]]:
    """claim id -> (statement, rule)."""
    min_rate, keep_min = data.v("min_log_rate", 1e-3), data.v("keep_min", 0.1)
    return {
        "thm1.collapse": (
            "Pure masked attention collapses exponentially when the mask has a center node (Thm 1)",
            f"every center-mask run reaches the floor or has fitted log-rate < -{min_rate}"
            " per layer -> reproduced; any run above that and off the floor -> not reproduced",
        ),
        "thm1.bound": (
            "mu(X(t)) <= C (1 - eps^r)^{t/r} with eps the smallest edge weight, r the radius (Thm 1)",
            "per run (rankcollapse.dynamics.theory): measured tail rate of mu <= the bound's rate "
            "(1 - eps^r)^{1/r}, or floor reached = consistent; slower = rate_exceeded; bound falling "
            "by less than 2x over the run = vacuous. Any rate_exceeded -> not reproduced; else some "
            "consistent -> reproduced; all vacuous -> inconclusive",
        ),
        "thm1.no_center": (
            "Without a center node collapse need not happen (two disconnected blocks keep their differences)",
            f"every center-less run keeps final mu_rel >= {keep_min} -> reproduced, else not",
        ),
    }


def collapse_claim(data: Data, centered: pd.DataFrame) -> Claim:
    """Every center-mask run reaches the floor or has a fitted log-rate below ``-min_log_rate``."""
    stmt, rule = _statements(data)["thm1.collapse"]
    min_rate = data.v("min_log_rate", 1e-3)
    parts, fails = [], 0
    for mask, grp in data.groups(centered, "mask"):
        rates = [r for r in column(grp, "summary.fit_log_rate") if r is not None and not pd.isna(r)]
        hit = column(grp, "summary.layers_to_floor")
        floor_hits = [int(h) for h in hit if h is not None and not pd.isna(h)]
        collapsed = [
            (h is not None and not pd.isna(h)) or (r is not None and not pd.isna(r) and r < -min_rate)
            for h, r in zip(hit, column(grp, "summary.fit_log_rate"), strict=True)
        ]
        fails += sum(1 for c in collapsed if not c)
        rate_txt = f"rate {fmt(float(np.median(rates)))}/layer" if rates else "rate n/a"
        floor_txt = f", floor by t={max(floor_hits)}" if len(floor_hits) == len(grp) else ""
        parts.append(f"{mask} (r={fmt(grp['summary.radius'].iloc[0])}): {rate_txt}{floor_txt}")
    verdict = INCONCLUSIVE if centered.empty else (REPRODUCED if fails == 0 else NOT_REPRODUCED)
    evidence = "; ".join(parts) or "no center mask"
    return data.claim("thm1.collapse", stmt, SOURCE, rule, evidence, verdict, centered, FIGURE)


def bound_verdict(verdicts: list[str]) -> str:
    """Per-run checks of the bound (``dynamics.theory``: consistent / rate_exceeded / vacuous):
    any rate_exceeded -> not reproduced; else some consistent -> reproduced; else inconclusive."""
    if "rate_exceeded" in verdicts:
        return NOT_REPRODUCED
    return REPRODUCED if "consistent" in verdicts else INCONCLUSIVE


def bound_claim(data: Data, centered: pd.DataFrame) -> Claim:
    """The measured tail rate never exceeds the bound's rate; reproduced only if some check is not vacuous."""
    stmt, rule = _statements(data)["thm1.bound"]
    applicable = centered[column(centered, "summary.theory.applicable").fillna(False).astype(bool)]
    if applicable.empty:
        ev = "no run with an applicable bound"
        return data.claim("thm1.bound", stmt, SOURCE, rule, ev, INCONCLUSIVE, centered, FIGURE)
    verdicts = [str(v) for v in column(applicable, "summary.theory.verdict")]
    counts = ", ".join(f"{v} {verdicts.count(v)}" for v in dict.fromkeys(verdicts))
    eps = column(applicable, "summary.theory.epsilon").astype(float)
    c0 = column(applicable, "summary.theory.c_over_mu0").astype(float)
    ev = (
        f"{len(applicable)} runs: {counts}; eps {fmt(eps.min())}..{fmt(eps.max())}; "
        f"largest C/mu(0) {fmt(c0.max(), 3)}"
    )
    return data.claim("thm1.bound", stmt, SOURCE, rule, ev, bound_verdict(verdicts), applicable, FIGURE)


def no_center_claim(data: Data, centerless: pd.DataFrame) -> Claim:
    """Every center-less run keeps final mu_rel >= ``keep_min``."""
    stmt, rule = _statements(data)["thm1.no_center"]
    if centerless.empty:
        ev = "no center-less mask in the grid"
        return data.claim("thm1.no_center", stmt, SOURCE, rule, ev, INCONCLUSIVE, figure=FIGURE)
    finals = centerless["summary.final_mu_rel"].astype(float)
    kept = bool((finals >= data.v("keep_min", 0.1)).all())
    masks = ", ".join(sorted(set(centerless["mask"])))
    depth = int(centerless["layers"].iloc[0])
    ev = f"{masks}: final mu_rel {fmt(finals.min())}..{fmt(finals.max())} after {depth} layers"
    verdict = REPRODUCED if kept else NOT_REPRODUCED
    return data.claim("thm1.no_center", stmt, SOURCE, rule, ev, verdict, centerless, FIGURE)


def claims(data: Data) -> list[Claim]:
    ok = data.ok
    if ok.empty:
        return [data.no_data(cid, s, SOURCE, r, FIGURE) for cid, (s, r) in _statements(data).items()]
    radius = column(ok, "summary.radius")
    centered, centerless = ok[radius.notna()], ok[radius.isna()]
    return [collapse_claim(data, centered), bound_claim(data, centered), no_center_claim(data, centerless)]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "Theorem 1: measured mu(X(t)) (solid, median over seeds, band = min..max) against "
        "the bound C (1 - eps^r)^{t/r} (dashed, smallest C covering every layer, smallest measured eps), "
        "linear depth, "
        "log mu. Block masks have no center node: no bound."
    )
    ok = data.ok
    if ok.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    table = curves(data, ["mask"], "mu")
    if "bound" in data.table:
        b = (
            data.table.merge(ok[["run_id"]], on="run_id")
            .groupby(["mask", "layer"], sort=False)["bound"]
            .max()
        )
        table = table.merge(b.reset_index(), on=["mask", "layer"], how="left")
    masks = list(dict.fromkeys(table["mask"]))
    fig, axes = panel_grid(len(masks), ncols=5, w=3.0)
    floor = floor_rel(str(data.exp.base.get("dtype", "float64")))
    for ax, mask in zip(axes, masks, strict=True):
        c = table[table["mask"] == mask]
        low = floor * float(c["mu"].iloc[0])  # the floor of mu at this scale; lower values drawn on it
        ax.plot(c["layer"], np.maximum(c["mu"], low), color="C0", label="measured mu")
        ax.fill_between(
            c["layer"], np.maximum(c["mu_min"], low), np.maximum(c["mu_max"], low), color="C0", alpha=0.2
        )
        if "bound" in c and c["bound"].notna().any():
            ax.plot(c["layer"], c["bound"], "--", color="C3", label="Thm 1 bound")
        ax.axhline(low, color="0.4", ls="-.", lw=0.8)
        ax.set_yscale("log")
        radius = ok[ok["mask"] == mask]["summary.radius"].iloc[0]
        ax.set_title(f"{mask} (r = {'none' if pd.isna(radius) else int(radius)})")
        ax.set_xlabel("layer t")
    axes[0].set_ylabel("mu(X(t))")
    axes[0].legend(fontsize=7)
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="theorem1", task=simulate, claims=claims, figures=figures)

"""Rank against entropy collapse (Giorlandino & Goldt, arXiv 2505.24333) and ``Y = LN(lam X + SA(X))`` (Joseph
et al., arXiv 2410.10609): two follow-ups on the residual strength, judged on the same engine at
initialisation.

Giorlandino & Goldt's abstract (v1, read on arXiv): "We identify and characterise two regimes governed by the
variance of the query and key initialisations: a low-variance regime, where we recover the known rank collapse
behaviour; and a previously unexplored high-variance regime, where signal is preserved but entropy collapse
occurs. In the low-variance regime, we calculate the critical strength for the residual connection to ensure
signal propagation." Their setting: vanilla transformer blocks with self-attention, layer normalisation,
skip connections and a ReLU MLP, at initialisation. The critical strength's formula is in the paper's text,
which we could not read: our crossing stands alone (its value is not compared with theirs).

Joseph et al. (FOLLOWUPS.md, [abstract]): in ``Y = LN(lam X + SA(X))`` a condition on ``lam`` prevents
collapse. The exact inequality is not known here (FOLLOWUPS.md: "find the exact inequality before judging
it"; the abstract was not found in the reference texts searched): what is stated is judged (some ``lam``
keeps the rank where ``lam = 0`` loses it, a crossing located with its interval); the inequality itself is a
'not testable' row, with that reason.

Quantities (``dynamics.phases``, ``kit.tasks.phases``), per network: mu_rel's per-layer log rate over the L
layers, ``mu_rel(L)`` clamped at its dtype's precision floor (rank collapse below ``-rate_tol``), the
normalised attention entropy averaged over layers 1..L
(entropy collapse at most ``entropy_max``). The critical strength: ``kit.rules.sweeps.crossing`` of the rate
over the residual strength against ``-rate_tol``. What the update says before any run: with near-uniform
attention (small logits) ``SA(X) ~ 1 xbar W_V``, so ``Norm(a X + SA(X))`` adds a common vector to every token
and the spread shrinks by about ``a / sqrt(a^2 + |xbar W_V|^2 / |xbar|^2)`` per layer: a collapse for every
finite ``a`` whose rate falls like ``1 / (2 a^2)``, so a per-layer tolerance locates a crossing near
``a ~ 1 / sqrt(2 rate_tol)`` (5 at 0.02): ours, and depth-bound (a finite network's "propagation").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged, not_testable_row
from rankcollapse.experiments.kit.combine import combine_parts
from rankcollapse.experiments.kit.curves import conditions, floor_rel
from rankcollapse.experiments.kit.data import rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.plots import (
    annotated_heatmap,
    label_axes,
    panel_grid,
    reference_line,
)
from rankcollapse.experiments.kit.rules.growth import at_least, at_most, estimate, unit_curves
from rankcollapse.experiments.kit.rules.sweeps import Crossing, crossing, locate
from rankcollapse.experiments.kit.tasks.phases import SIMULATE_PHASES
from rankcollapse.experiments.kit.thresholds import Thresholds

#: Giorlandino & Goldt's arXiv id (the story's paper); Joseph et al.'s statements name theirs.
PAPER = "2505.24333"
JOSEPH = "2410.10609"
GG_SRC = "Giorlandino & Goldt 2025, Two failure modes of deep transformers (arXiv 2505.24333), [abstract]"
JOSEPH_SRC = "Joseph et al. 2024 (arXiv 2410.10609), [abstract, via FOLLOWUPS.md]"
FIG = "entropy_collapse_phase"
STATEMENTS = (
    Statement(
        "low_variance_rank_collapse",
        "In the low-variance regime of the query and key initialisations we recover the known rank collapse "
        "behaviour",
        GG_SRC,
        "arm phase, the smallest logit scale s, at every residual strength a <= weak_residual: per network "
        "mu_rel's per-layer log rate over the L layers at most -rate_tol for sure over networks -> "
        "reproduced; above for sure -> not reproduced (kit.rules.growth.at_most, Bonferroni over a)",
    ),
    Statement(
        "high_variance_entropy_collapse",
        "In the high-variance regime signal is preserved but entropy collapse occurs",
        GG_SRC,
        "arm phase, the largest logit scale s, at every residual strength a <= weak_residual: the "
        "normalised attention entropy (mean over layers 1..L) at most entropy_max for sure AND mu_rel's "
        "per-layer log rate at least -rate_tol for sure (the signal kept) -> reproduced; either on the "
        "wrong side for sure -> not reproduced (kit.rules.growth.at_most, at_least; Bonferroni over "
        "a and the two)",
    ),
    Statement(
        "critical_residual",
        "In the low-variance regime a critical strength of the residual connection ensures signal "
        "propagation",
        f"{GG_SRC}; its formula is in the paper's text, not read here: the value is ours, not compared",
        "arm phase, the smallest logit scale s: mu_rel's per-layer log rate over the residual strengths a "
        "crosses -rate_tol once inside the sweep, located with its interval (kit.rules.sweeps.crossing: "
        "below for sure at small a, above for sure at large a -> reproduced; none or not a single one -> not "
        "reproduced)",
    ),
    Statement(
        "lambda_prevents",
        "In Y = LN(lam X + SA(X)) a condition on lam prevents rank collapse",
        JOSEPH_SRC,
        "arm lambda (Y = LN(lam X + SA(X)) exactly, the simulator's attn+skip+layernorm with skip 1 / lam): "
        "mu_rel's per-layer log rate over lam crosses -rate_tol once inside the sweep, located with its "
        "interval (kit.rules.sweeps.crossing) -> reproduced; collapse at every lam, or at none -> not "
        "reproduced",
        paper=JOSEPH,
    ),
    Statement(
        "lambda_condition",
        "The exact inequality on lam (and the quantities it involves) under which collapse is prevented",
        f"{JOSEPH_SRC}; the inequality itself not known here",
        "not testable: the inequality is not known (FOLLOWUPS.md asks for it before judging; the paper's "
        "text and abstract were not found here); the located crossing of lambda_prevents is what can be set "
        "beside it once it is",
        paper=JOSEPH,
    ),
)
ARMS = (Arm("phase", SIMULATE_PHASES), Arm("lambda", SIMULATE_PHASES))
KEYS = {s.key: s for s in STATEMENTS}
RATE = "mu_rel's per-layer log rate"
ENTROPY = "normalised attention entropy (mean over layers)"


# ---- the cells ---------------------------------------------------------------------------------------------
class Cell:
    """The runs of one (logit scale, residual strength): per network mu_rel's rate and the mean entropy."""

    def __init__(self, data: Data, frame: pd.DataFrame) -> None:
        self.data, self.frame = data, frame
        self.qk_scale = float(frame["qk_scale"].iloc[0])
        self.residual = float(frame["residual"].iloc[0])
        rel, self.unit = unit_curves(frame, "mu_rel")
        depth = rel.shape[1] - 1
        floor = floor_rel(str(frame["dtype"].iloc[0]))  # a network at the floor: its rate at least this fast
        with np.errstate(divide="ignore", invalid="ignore"):
            self.rates = (np.log(np.maximum(rel[:, -1], floor)) - np.log(rel[:, 0])) / max(depth, 1)
        ent, _ = unit_curves(frame, "attention_entropy")
        self.entropies = np.nanmean(ent[:, 1:], axis=1) if ent.shape[1] > 1 else np.full(len(ent), math.nan)
        self.runs = runs_of(data, frame)

    def note(self) -> str:
        return sample_note(self.runs, self.frame)


def _cells(sd: StoryData, arm: str) -> list[Cell]:
    data = sd.arm(arm)
    if data is None:
        return []
    rows = rows_of(data, "phase_sample")
    if rows.empty:
        return []
    return [Cell(data, g) for _, g in rows.groupby(["qk_scale", "residual"], sort=True)]


def _sweep(cells: list[Cell], qk_scale: float, level: float) -> Crossing | None:
    """The crossing of the rate over the residual strengths at one logit scale (None: fewer than 2)."""
    mine = sorted((c for c in cells if c.qk_scale == qk_scale), key=lambda c: c.residual)
    if len(mine) < 2:
        return None
    return locate([c.residual for c in mine], [c.rates for c in mine], level, unit=mine[0].unit)


def _row(key: str, data: Data, frame: pd.DataFrame, th: Thresholds, rule, qualifier: str, note: str) -> Claim:
    names = (f"{ENTROPY} and {RATE}" if "entropy" in key else RATE, "")
    return claim_row("entropy_collapse", KEYS[key], data, th, judged(rule, th), qualifier=qualifier,
                     frame=frame, runs=runs_of(data, frame), figure=FIG, names=names, sample_note=note)


def _regime(cells: list[Cell], t: Thresholds, entropy: bool) -> Judgement:
    """At the given cells (one logit scale, every weak residual): rank collapse (``entropy`` False) or the
    signal kept with entropy collapse (``entropy`` True), Bonferroni over the cells and conditions."""
    tol = t["rate_tol"]
    parts: list[tuple[str, Judgement]] = []
    with conditions(2 if entropy else 1):
        for c in cells:
            label = f"s = {c.qk_scale:g}, a = {c.residual:g}"
            rate = {label: estimate(c.rates, c.unit, "rate")}
            if not entropy:
                parts.append((label, at_most(rate, -tol, t, RATE)))
                continue
            ent = {label: estimate(c.entropies, c.unit, "entropy")}
            parts.append((f"{label}, entropy", at_most(ent, t["entropy_max"], t, ENTROPY)))
            parts.append((f"{label}, signal", at_least(rate, -tol, t, RATE)))
    return combine_parts(parts)


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("entropy_collapse", sd.verdict, sd.ranges)
    out: list[Claim] = []
    cells = _cells(sd, "phase")
    if cells:
        data = cells[0].data
        scales = sorted({c.qk_scale for c in cells})
        weak = [c for c in cells if c.residual <= th["weak_residual"]]
        for key, s, entropy in (("low_variance_rank_collapse", scales[0], False),
                                ("high_variance_entropy_collapse", scales[-1], True)):
            mine = [c for c in weak if c.qk_scale == s]
            frame = pd.concat([c.frame for c in mine])
            out.append(_row(key, data, frame, th, lambda t, m=mine, e=entropy: _regime(m, t, e),
                            f"s = {s:g}, a <= {th['weak_residual']:g}", mine[0].note()))
        low = sorted((c for c in cells if c.qk_scale == scales[0]), key=lambda c: c.residual)
        frame = pd.concat([c.frame for c in low])
        out.append(_row("critical_residual", data, frame, th,
                        lambda t, m=low: crossing([c.residual for c in m], [c.rates for c in m],
                                                  -t["rate_tol"], t, RATE, "a", unit=m[0].unit),
                        f"s = {scales[0]:g}", low[0].note()))
    lam = sorted(_cells(sd, "lambda"), key=lambda c: c.residual)
    if lam:
        data = lam[0].data
        frame = pd.concat([c.frame for c in lam])
        out.append(_row("lambda_prevents", data, frame, th,
                        lambda t, m=lam: crossing([c.residual for c in m], [c.rates for c in m],
                                                  -t["rate_tol"], t, RATE, "lam", unit=m[0].unit),
                        f"s = {lam[0].qk_scale:g}", lam[0].note()))
    why = ("the exact inequality on lam of arXiv 2410.10609 is not known here (FOLLOWUPS.md: find it before "
           "judging; neither the paper's text nor its abstract was found in the reference texts searched)")
    out.append(not_testable_row("entropy_collapse", KEYS["lambda_condition"], sd.arm("lambda"), why, FIG))
    return out


# ---- figure ------------------------------------------------------------------------------------------------
def _grid(cells: list[Cell], what: str) -> tuple[np.ndarray, list[float], list[float]]:
    scales = sorted({c.qk_scale for c in cells})
    residuals = sorted({c.residual for c in cells})
    table = np.full((len(scales), len(residuals)), math.nan)
    for c in cells:
        v = c.rates if what == "rate" else c.entropies
        v = v[np.isfinite(v)]
        table[scales.index(c.qk_scale), residuals.index(c.residual)] = float(v.mean()) if v.size else math.nan
    return table, scales, residuals


def _heat(ax: Any, table: np.ndarray, scales: list[float], residuals: list[float], title: str, cmap: str,
          vmin: float, vmax: float) -> Any:
    im = annotated_heatmap(ax, table, [f"{a:g}" for a in residuals], [f"{s:g}" for s in scales], cmap=cmap,
                           vmin=vmin, vmax=vmax, shift=0.22, origin="lower")  # above the crossing's bar
    label_axes(ax, "residual strength a (Norm(a X + f(X)))", "logit scale s (W_Q, W_K std s / sqrt(d))",
               title=title)
    return im


def _index_of(x: float, residuals: list[float]) -> float:
    """Position of residual strength ``x`` on the heat map's index axis (linear between its columns)."""
    r = np.asarray(residuals, dtype=float)
    return float(np.interp(x, r, np.arange(r.size)))


def _table_row(arm: str, c: Cell) -> dict[str, Any]:
    return {"arm": arm, "qk_scale": c.qk_scale, "residual": c.residual,
            "rate_mean": float(np.nanmean(c.rates)), "entropy_mean": float(np.nanmean(c.entropies)),
            "networks": len(c.rates)}


def figures(sd: StoryData) -> list[FigureSpec]:
    cells, lam = _cells(sd, "phase"), sorted(_cells(sd, "lambda"), key=lambda c: c.residual)
    if not cells and not lam:
        return []
    tol = float(sd.verdict["rate_tol"])
    fig, (ax1, ax2, ax3) = panel_grid(3, ncols=3, w=4, h=3.8)
    tables = []
    if cells:
        rate, scales, residuals = _grid(cells, "rate")
        ent, _, _ = _grid(cells, "entropy")
        im = _heat(ax1, rate, scales, residuals, f"{RATE} (mean over networks; collapse below {-tol:g})",
                   "viridis", float(np.nanmin(rate)), 0.0)
        fig.colorbar(im, ax=ax1, shrink=0.8)
        im = _heat(ax2, ent, scales, residuals, "normalised attention entropy (1 uniform, 0 one key)",
                   "magma", 0.0, 1.0)
        fig.colorbar(im, ax=ax2, shrink=0.8)
        for i, s in enumerate(scales):  # the located crossing per logit scale: a bar on the rate map
            c = _sweep(cells, s, -tol)
            if c is not None and math.isfinite(c.estimate) and math.isfinite(c.low):
                lo, hi = _index_of(c.low, residuals), _index_of(c.high, residuals)
                mid = _index_of(c.estimate, residuals)
                ax1.errorbar(mid, i, xerr=[[mid - lo], [hi - mid]], fmt="o", color="r", ms=3, capsize=2, lw=1)
        tables.extend(_table_row("phase", c) for c in cells)
    if lam:
        xs = np.array([c.residual for c in lam])
        means = np.array([np.nanmean(c.rates) for c in lam])
        for c in lam:
            ax3.plot([c.residual] * len(c.rates), c.rates, ".", color="0.6", ms=3)
            tables.append(_table_row("lambda", c))
        ax3.plot(xs, means, "o-", color="C0", ms=3, label="mean over networks")
        reference_line(ax3, -tol, f"-rate_tol = {-tol:g}")
        c = locate(xs, [c.rates for c in lam], -tol, unit=lam[0].unit)
        if math.isfinite(c.estimate) and math.isfinite(c.low):
            ax3.axvspan(c.low, c.high, color="r", alpha=0.15, label="located crossing (interval)")
            reference_line(ax3, c.estimate, vertical=True, color="r", ls="-")
        ax3.set_xscale("symlog", linthresh=0.25)
        ax3.set_xlim(0.0, float(xs.max()) * 1.2)
        label_axes(ax3, "lam (Y = LN(lam X + SA(X)))", f"{RATE} (per network)",
                   title="Y = LN(lam X + SA(X)): the lam sweep", legend=6)
    caption = (
        "Rank against entropy collapse at initialisation (ours, in the simulator). Left: mu_rel's per-layer "
        "log rate over the L layers per cell of logit scale s x residual strength a of the post-LN "
        "transformer block Norm(a X + f(X)) (mean over networks; red: where the rate crosses -rate_tol, "
        "located with its interval, kit.rules.sweeps). Middle: the normalised attention entropy, mean over "
        "layers. Right: Y = LN(lam X + SA(X)), the rate per network against lam, with the located crossing."
    )
    return [FigureSpec(FIG, fig, pd.DataFrame(tables), caption)]


# ---- headlines ---------------------------------------------------------------------------------------------
def headlines(sd: StoryData) -> list[str]:
    tol = float(sd.verdict["rate_tol"])
    out = []
    cells = _cells(sd, "phase")
    if cells:
        scales = sorted({c.qk_scale for c in cells})
        found = []
        for s in scales:
            c = _sweep(cells, s, -tol)
            if c is not None:
                found.append(f"s = {s:g}: {c.words('the rate', 'a')}")
        low = [c for c in cells if c.qk_scale == scales[0]]
        high = [c for c in cells if c.qk_scale == scales[-1]]
        e_low = float(np.nanmean(np.concatenate([c.entropies for c in low])))
        e_high = float(np.nanmean(np.concatenate([c.entropies for c in high])))
        r_low = {c.residual: float(np.nanmean(c.rates)) for c in low}
        r_high = {c.residual: float(np.nanmean(c.rates)) for c in high}
        pairs = "; ".join(f"a = {a:g}: {r_low[a]:.3g} at s = {scales[0]:g}, {r_high.get(a, math.nan):.3g} at "
                          f"s = {scales[-1]:g}" for a in sorted(r_low))
        out.append(f"The phase diagram (post-LN block, mean over networks): the normalised attention entropy "
                   f"is {e_low:.3g} at s = {scales[0]:g} and {e_high:.3g} at s = {scales[-1]:g} (mean over "
                   f"residual strengths and layers); {RATE} per residual strength: {pairs}. Where the rate "
                   f"crosses {-tol:g}: " + "; ".join(found) + ".")
    lam = sorted(_cells(sd, "lambda"), key=lambda c: c.residual)
    if lam:
        c = locate([x.residual for x in lam], [x.rates for x in lam], -tol, unit=lam[0].unit)
        rates = "; ".join(f"lam = {x.residual:g}: {float(np.nanmean(x.rates)):.3g}" for x in lam)
        out.append(f"Y = LN(lam X + SA(X)): {RATE} {rates}; {c.words('the rate', 'lam')}.")
    return out


STORY = story_here(__name__)

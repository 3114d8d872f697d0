"""Theorem 2 and Corollary 1 (paper §4.2): sphere LayerNorm + orthogonal W_V collapses; the causal advantage.

Task ``ln_bounds``: ``rankcollapse.equilibria.orthogonal.ln_collapse_run`` (post- or pre-LN, Haar ``W_V``,
inputs on the sphere or in the positive orthant) with the bound checks of
``rankcollapse.dynamics.theory.check_ln_results``: each result applies only where its conditions hold,
otherwise its check names the failing condition. Claims: each bound; exponential collapse wherever some
result applies; causal collapses more slowly than complete (post- and pre-LN). Figure: mu_rel per mask.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.analysis import floor_rel
from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput
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
from rankcollapse.experiments.stories.theorem1 import bound_verdict

SOURCE = "paper §4.2, Thm 2, Cor 1"
FIGURE = "theorem2_ln_orthogonal"
RESULTS = {"thm2": "Theorem 2", "cor1": "Corollary 1", "cor1n": "Corollary 1 (n centers)"}


def ln_bounds(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """One Theorem 2 / Corollary 1 run. Params: mask, n, d, placement, inputs, samples, layers, seed,
    qk_scale, d_qk. Rows per layer: mu (mean), mu_rel (median, min, max over samples). Summary: epsilon,
    tail_rate, centers, final mu_rel, and per result (thm2, cor1, cor1n) applicable / verdict / reason /
    rate / c_over_mu0."""
    from rankcollapse.equilibria.orthogonal import ln_collapse_run

    run = ln_collapse_run(
        str(params["mask"]),
        int(params["n"]),
        int(params["d"]),
        placement=str(params["placement"]),
        inputs=str(params["inputs"]),
        samples=int(params["samples"]),
        layers=int(params["layers"]),
        seed=int(params["seed"]),
        qk_scale=float(params.get("qk_scale", 1.0)),
        d_qk=float(params.get("d_qk", 1.0)),
    )
    rows = []
    for t in range(run.mu.shape[0]):
        rel = run.mu_rel[t]
        rows.append(
            {
                "layer": t,
                "mu": float(run.mu[t].mean()),
                "mu_rel": float(rel.median()),
                "mu_rel_min": float(rel.min()),
                "mu_rel_max": float(rel.max()),
            }
        )
    on_layer(int(params["layers"]))
    summary: dict[str, Any] = {
        "epsilon": run.epsilon,
        "tail_rate": run.tail_rate,
        "centers": run.extra["centers"],
        "final_mu_rel_max": float(run.mu_rel[-1].max()),
        "source": run.source,
    }
    for key, name in RESULTS.items():
        c = run.check(name)
        summary.update(
            {
                f"{key}_applicable": c.applicable,
                f"{key}_verdict": c.verdict,
                f"{key}_reason": c.reason,
                f"{key}_rate": c.rate,
                f"{key}_c_over_mu0": c.c_over_mu0,
            }
        )
    return RunOutput(rows, summary)


STATEMENTS = {
    "thm2": (
        "Strongly connected mask, orthogonal W_V, N <= d, full-rank X(0): "
        "mu(X(t)) <= C (1 - N eps^{2r})^{t/(2r)}"
    ),
    "cor1": (
        "Quasi-strongly connected mask, orthogonal W_V, phi(0) >= 0: mu(X(t)) <= C (1 - eps^{2r})^{t/(2r)}"
    ),
    "cor1n": "With n center nodes the rate of Corollary 1 is (1 - n eps^{2r})^{1/(2r)}",
}
BOUND_RULE = (
    "per run where the result's conditions hold: measured tail rate <= the bound's rate (or floor reached) = "
    "consistent, slower = rate_exceeded, bound falling < 2x over the run = vacuous; any rate_exceeded -> not "
    "reproduced; else some consistent -> reproduced; else inconclusive. Runs where a condition fails are "
    "not applicable and named in the evidence"
)


def bound_claim(data: Data, key: str) -> Claim:
    """One result's bound over the runs where its conditions hold."""
    ok = data.ok
    cid = f"{key}.bound"
    applies = column(ok, f"summary.{key}_applicable").fillna(False).astype(bool)
    runs, rest = ok[applies], ok[~applies]
    reasons = sorted({str(r) for r in column(rest, f"summary.{key}_reason")})
    na = f"; not applicable in {len(rest)} runs: " + " / ".join(reasons) if len(rest) else ""
    if runs.empty:
        return data.claim(
            cid,
            STATEMENTS[key],
            SOURCE,
            BOUND_RULE,
            f"no run meets the conditions{na}",
            INCONCLUSIVE,
            figure=FIGURE,
        )
    verdicts = [str(v) for v in column(runs, f"summary.{key}_verdict")]
    counts = ", ".join(f"{v} {verdicts.count(v)}" for v in dict.fromkeys(verdicts))
    rates = column(runs, f"summary.{key}_rate").astype(float)
    ev = (
        f"{len(runs)} runs ({', '.join(sorted(set(runs['mask'])))}): {counts}; bound rate "
        f"{fmt(rates.min(), 4)}..{fmt(rates.max(), 4)}{na}"
    )
    return data.claim(cid, STATEMENTS[key], SOURCE, BOUND_RULE, ev, bound_verdict(verdicts), runs, FIGURE)


def collapse_claim(data: Data) -> Claim:
    """Every run where some result applies collapses exponentially (tail rate or the floor)."""
    stmt = (
        "Under the conditions of Theorem 2 or Corollary 1, tokens collapse exponentially (post- and pre-LN)"
    )
    min_rate = data.v("min_log_rate", 1e-3)
    rule = (
        f"every run where a result applies has tail log-rate < -{min_rate} or reaches the float64 floor "
        "-> reproduced; any other -> not reproduced"
    )
    ok = data.ok
    applies = column(ok, "summary.thm2_applicable").fillna(False).astype(bool) | column(
        ok, "summary.cor1_applicable"
    ).fillna(False).astype(bool)
    runs = ok[applies]
    if runs.empty:
        return data.claim(
            "ln.collapse",
            stmt,
            SOURCE,
            rule,
            "no run meets a result's conditions",
            INCONCLUSIVE,
            figure=FIGURE,
        )
    floor = floor_rel("float64")
    parts, fails = [], 0
    for mask, grp in data.groups(runs, "mask"):
        tails = column(grp, "summary.tail_rate").astype(float)
        finals = column(grp, "summary.final_mu_rel_max").astype(float)
        good = [
            (f <= floor) or (not math.isnan(r) and math.log(max(r, 1e-300)) < -min_rate)
            for r, f in zip(tails, finals, strict=True)
        ]
        fails += good.count(False)
        parts.append(
            f"{mask}: tail rate {fmt(np.nanmax(tails) if tails.notna().any() else math.nan)}/layer, "
            f"final mu_rel <= {fmt(finals.max())}"
        )
    verdict = REPRODUCED if fails == 0 else NOT_REPRODUCED
    return data.claim("ln.collapse", stmt, SOURCE, rule, "; ".join(parts), verdict, runs, FIGURE)


def advantage_claim(data: Data, placement: str) -> Claim:
    """Causal's measured tail rate is slower than complete's for every (inputs, seed) pair."""
    cid = f"cor1.causal_advantage[{placement}]"
    stmt = (
        f"The advantage of the causal mask ({placement}-LN): collapse under causal is slower than under "
        "complete, as Corollary 1's n-center rates rank them"
    )
    rule = (
        "pairs of runs (same seed, inputs, weights): causal tail rate > complete tail rate in every pair -> "
        "reproduced; any pair not -> not reproduced; no pair -> inconclusive"
    )
    ok = data.ok
    runs = (
        ok[(ok["placement"] == placement) & ok["mask"].isin(["causal", "complete"])] if not ok.empty else ok
    )
    pairs = []
    for (_, _), grp in runs.groupby(["inputs", "seed"], sort=False):
        r = {m: g["summary.tail_rate"].iloc[0] for m, g in grp.groupby("mask")}
        if {"causal", "complete"} <= set(r) and not pd.isna(r["causal"]) and not pd.isna(r["complete"]):
            pairs.append((float(r["complete"]), float(r["causal"])))
    if not pairs:
        return data.claim(cid, stmt, SOURCE, rule, "no causal/complete pair", INCONCLUSIVE, figure=FIGURE)
    wins = sum(c > k for k, c in pairs)
    comp, caus = [p[0] for p in pairs], [p[1] for p in pairs]
    ev = (
        f"{wins}/{len(pairs)} pairs: tail rate complete {fmt(min(comp))}..{fmt(max(comp))}"
        f", causal {fmt(min(caus))}..{fmt(max(caus))} per layer"
    )
    verdict = REPRODUCED if wins == len(pairs) else NOT_REPRODUCED
    return data.claim(cid, stmt, SOURCE, rule, ev, verdict, runs, FIGURE)


def claims(data: Data) -> list[Claim]:
    if data.ok.empty:
        out = [data.no_data(f"{k}.bound", s, SOURCE, BOUND_RULE, FIGURE) for k, s in STATEMENTS.items()]
        out.append(data.no_data("ln.collapse", "collapse under the conditions", SOURCE, "", FIGURE))
        return out
    out = [bound_claim(data, k) for k in STATEMENTS]
    out.append(collapse_claim(data))
    out += [advantage_claim(data, p) for p in ("post", "pre")]
    return out


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "The paper's Theorem 2 / Corollary 1: sphere LayerNorm + Haar-orthogonal W_V. mu_rel against depth "
        "(median over runs, log scale), one panel per placement and input family, one line per mask; "
        "floor dash-dot."
    )
    table = curves(data, ["placement", "inputs", "mask"])
    if table.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    keys = list(dict.fromkeys(zip(table["placement"], table["inputs"], strict=True)))
    fig, axes = panel_grid(len(keys), ncols=4, w=3.2)
    for ax, (pl, inp) in zip(axes, keys, strict=True):
        sub = table[(table["placement"] == pl) & (table["inputs"] == inp)]
        for i, (mask, c) in enumerate(sub.groupby("mask", sort=False)):
            ax.plot(c["layer"], np.maximum(c["mu_rel"], 1e-17), color=f"C{i}", label=mask)
        ax.axhline(floor_rel("float64"), color="0.4", ls="-.", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(f"{pl}-LN, {inp} inputs", fontsize=9)
        ax.set_xlabel("layer t")
    axes[0].set_ylabel("mu_rel")
    axes[0].legend(fontsize=7)
    fig.suptitle("the paper's Theorem 2 / Corollary 1: sphere LN, orthogonal W_V", fontsize=10)
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="theorem2", task=ln_bounds, claims=claims, figures=figures)

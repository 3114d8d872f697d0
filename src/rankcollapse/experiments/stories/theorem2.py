"""Theorem 2 and Corollary 1 (paper §4.2): the theory's LayerNorm + orthogonal W_V still collapses.

Arm ``bounds`` (the paper's setting: instances that meet each result's hypotheses, the others named):
``rankcollapse.equilibria.orthogonal.ln_collapse_run`` (post- or pre-LN, Haar ``W_V``, inputs on the
sphere or in the positive orthant) with the bound checks of ``rankcollapse.dynamics.theory``. Arm
``hemisphere`` (ours): the simulator with inputs in one open hemisphere, weaker than Theorem 2's
condition (*), no bound. A run that reaches the precision floor tests no rate.
"""

from __future__ import annotations

import math

import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.curves import floor_rel
from rankcollapse.experiments.kit.data import curves_by, mask_radius, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.plots import curve_axes, panel_grid, quantity_label
from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES
from rankcollapse.experiments.kit.tasks.equilibria import LN_BOUNDS
from rankcollapse.experiments.kit.thresholds import Thresholds

SOURCE = "paper §4.2, Thm 2, Cor 1"



BOUND_RULE = (
    "per run where the result's conditions hold: measured tail rate <= the bound's rate = consistent, "
    "slower = rate_exceeded, bound falling < 2x over the run = vacuous; a run at the precision floor tests "
    "no rate; any rate_exceeded -> not reproduced; some consistent run that tests the rate -> reproduced; "
    "else inconclusive. Runs where a condition fails are not applicable and named"
)
STATEMENTS = (
    Statement(
        "thm2",
        "Strongly connected mask, orthogonal W_V, N <= d, full-rank X(0): mu(X(t)) <= C (1 - N "
        "eps^{2r})^{t/(2r)}",
        SOURCE,
        BOUND_RULE,
    ),
    Statement(
        "cor1",
        "Quasi-strongly connected mask, orthogonal W_V, phi(0) >= 0: mu(X(t)) <= C (1 - eps^{2r})^{t/(2r)}",
        SOURCE,
        BOUND_RULE,
    ),
    Statement(
        "cor1n",
        "With n center nodes Corollary 1's bound becomes mu(X(t)) <= C (1 - n eps^{2r})^{t/(2r)}: the rate "
        "is at most (1 - n eps^{2r})^{1/(2r)} per layer (an upper bound, not the rate itself)",
        SOURCE,
        BOUND_RULE,
    ),
    Statement(
        "collapse",
        "Under the conditions of Theorem 2 or Corollary 1, tokens collapse exponentially (post- and pre-LN)",
        SOURCE,
        "every run where a result applies has a tail log rate < -min_log_rate or reaches the float64 floor "
        "-> "
        "reproduced; any other -> not reproduced",
    ),
    Statement(
        "causal_advantage",
        "The advantage of the causal mask: collapse under causal is slower than under "
        "complete, as Corollary 1's n-center rates rank them",
        SOURCE,
        "pairs of runs (same seed, inputs, weights): causal tail rate > complete tail rate in every pair -> "
        "reproduced; any pair not -> not reproduced; no pair -> inconclusive",
    ),
    Statement(
        "hemisphere",
        "With LayerNorm and orthogonal W_V, tokens in one open hemisphere still collapse exponentially",
        "ours (hemisphere inputs are weaker than Theorem 2's condition; no bound)",
        "every mask's curve 'collapsing' or 'at floor' -> confirmed; any 'not collapsing' -> refuted",
        ours=True,
    ),
)
ARMS = (
    Arm("bounds", LN_BOUNDS),
    Arm("hemisphere", SIMULATE_CURVES, extension=True),
)


def _flag(ok: pd.DataFrame, col: str) -> pd.Series:
    return ok[col].fillna(False).astype(bool) if col in ok else pd.Series(False, index=ok.index)


def _bound_row(data: Data, th: Thresholds, st: Statement) -> Claim:
    ok = data.ok
    applies = _flag(ok, f"summary.{st.key}_applicable")
    runs, rest = ok[applies], ok[~applies]
    reasons = sorted({str(r) for r in rest.get(f"summary.{st.key}_reason", [])})
    na = f"; not applicable in {len(rest)} runs: " + " / ".join(reasons) if len(rest) else ""
    checks = [
        (
            f"{r['mask']} {r['placement']}-LN {r['inputs']} seed {r['seed']}",
            str(r[f"summary.{st.key}_verdict"]),
            pd.isna(r[f"summary.{st.key}_tail"]),
            mask_radius(str(r["mask"]), int(r["tokens"])),
        )
        for _, r in runs.iterrows()
    ]
    if checks:
        j = rules.bound_holds(checks)
        rates = runs[f"summary.{st.key}_rate"].astype(float)
        j = j.amended(after=f"; bound rate {rates.min():.4g}..{rates.max():.4g}{na}")
    else:
        j = rules.Judgement(
            rules.INCONCLUSIVE,
            f"no run meets the conditions{na}",
            rules.causes.not_testable("no run meets the result's conditions"),
            "not testable",
        )
    return claim_row(
        "theorem2",
        st,
        data,
        th,
        judged(lambda t: j, th),
        runs=runs if checks else None,
        figure="theorem2_ln_orthogonal",
        names=("the bound check", ""),
    )


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("theorem2", sd.verdict, sd.ranges)
    out: list[Claim] = []
    data = sd.arm("bounds")
    if data is not None:
        ok = data.ok
        out += [_bound_row(data, th, st) for st in STATEMENTS[:3]]
        applies = _flag(ok, "summary.thm2_applicable") | _flag(ok, "summary.cor1_applicable")
        floor = floor_rel("float64")
        runs = [
            (
                f"{r['mask']} {r['placement']}-LN {r['inputs']} seed {r['seed']}",
                math.log(max(float(r["summary.tail_rate"]), 1e-300))
                if not pd.isna(r["summary.tail_rate"])
                else None,
                float(r["summary.final_mu_rel_max"]) <= floor,
            )
            for _, r in ok[applies].iterrows()
        ]
        out.append(
            claim_row(
                "theorem2",
                STATEMENTS[3],
                data,
                th,
                judged(lambda t: rules.collapses(runs, t), th),
                runs=ok[applies],
                figure="theorem2_ln_orthogonal",
                names=("tail rate of mu", ""),
            )
        )
        for placement in ("post", "pre"):
            sub = ok[(ok["placement"] == placement) & ok["mask"].isin(["causal", "complete"])]
            pairs = []
            for (inp, seed), grp in sub.groupby(["inputs", "seed"], sort=False):
                r = {m: g["summary.tail_rate"].iloc[0] for m, g in grp.groupby("mask")}
                if (
                    {"causal", "complete"} <= set(r)
                    and not pd.isna(r["causal"])
                    and not pd.isna(r["complete"])
                ):
                    pairs.append(
                        (
                            f"{inp} inputs, seed {seed}: complete vs causal",
                            float(r["complete"]),
                            float(r["causal"]),
                        )
                    )
            out.append(
                claim_row(
                    "theorem2",
                    STATEMENTS[4],
                    data,
                    th,
                    judged(lambda t, p=pairs: rules.pairs_ordered(p), th),
                    qualifier=f"{placement}-LN",
                    runs=sub,
                    figure="theorem2_ln_orthogonal",
                    names=("tail rate of mu, complete vs causal", ""),
                )
            )
    data = sd.arm("hemisphere")
    if data is not None:
        frame = rows_of(data, "curve")
        rel = {f"{k[1]}, {k[2]}": c for k, c in curves_by(frame, "mu_rel", ["mode", "mask"]).items()}
        out.append(
            claim_row(
                "theorem2",
                STATEMENTS[5],
                data,
                th,
                judged(lambda t: rules.san_collapse(rel, t), th),
                figure="ext_theorem2_hemisphere",
                sample_note=sample_note(runs_of(data, frame), frame),
                names=("mu_rel", ""),
            )
        )
    return out


def figures(sd: StoryData) -> list[FigureSpec]:
    out = []
    data = sd.arm("bounds")
    if data is not None:
        frame = rows_of(data, "curve")
        keys = list(dict.fromkeys(zip(frame["placement"], frame["inputs"], strict=True)))
        fig, axes = panel_grid(len(keys), ncols=4, w=3.2)
        for ax, (pl, inp) in zip(axes, keys, strict=True):
            sub = frame[(frame["placement"] == pl) & (frame["inputs"] == inp)]
            curve_axes(ax, [(k[0], c) for k, c in curves_by(sub, "mu_rel", ["mask"]).items()],
                       quantity_label("mu_rel"))
            ax.set_title(f"{pl}-LN, {inp} inputs", fontsize=9)
        fig.suptitle(
            "Theorem 2 / Corollary 1 (paper's setting): the theory's LN, orthogonal W_V; mu_rel per mask",
            fontsize=10,
        )
        caption = (
            "Theorem 2 / Corollary 1: the theory's LayerNorm (x / ||x||) + Haar-orthogonal W_V. mu_rel "
            "against "
            "depth (mean ± std over samples and seeds, log-log), one panel per placement and input family, "
            "one "
            "curve per mask; the float64 floor dash-dot. The bound checks are in the rows below."
        )
        out.append(FigureSpec("theorem2_ln_orthogonal", fig, frame, caption))
    data = sd.arm("hemisphere")
    if data is not None:
        frame = rows_of(data, "curve")
        fig, axes = panel_grid(1, ncols=1, w=5.0, h=3.4)
        curve_axes(axes[0], [(k[0], c) for k, c in curves_by(frame, "mu_rel", ["mask"]).items()],
                   quantity_label("mu_rel"))
        axes[0].set_title("Ours: theory's LN + orthogonal W_V, hemisphere inputs", fontsize=9)
        caption = (
            "Ours: the theory's LayerNorm + orthogonal W_V, inputs in one open hemisphere (weaker than "
            "Theorem "
            "2's condition): mu_rel (mean ± std) against depth, log-log; float64 floor dash-dot."
        )
        out.append(FigureSpec("ext_theorem2_hemisphere", fig, frame, caption))
    return out


STORY = story_here(__name__)

"""Figs. 1 and 5 (paper §4.3.1, App. E, Lemma 11): the N = d = 2 counterexample to collapse with LayerNorm.

Arm ``paper``: the paper's construction, causal mask, ``W_Q = W_K = 0``, ``W_V = [[1, w], [0, 1]]``:
the closed forms of ``rankcollapse.equilibria.counterexample_paper`` (A, B, the four arcs and their
limits, the red segment) checked against the iterated map, token 1's limit by the sign of X11(0), the
no-LayerNorm collapse (drawn as X / ||X||_F: this W_V violates A3), and, ours, the basin of B while
token 1 has not converged. Arm ``surrogate`` (ours): ``W_V = [[0.95, 1], [0, 1]]``, ``W_QK = I``.
Every verdict is a check of computed numbers against a tolerance of the YAML (``kit.rules.every_run``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.tasks.equilibria import (
    COUNTEREXAMPLE,
    PAPER_COUNTEREXAMPLE_RUN,
    counterexample_figures,
    paper_counterexample_figures,
)
from rankcollapse.experiments.kit.thresholds import Thresholds

SOURCE = "paper §4.3.1, App. E, Lemma 11, Figs. 1 and 5"
OURS = "ours (surrogate of paper §4.3.1: W_V = [[0.95, 1], [0, 1]], W_QK = I)"
FIG1, FIG5 = "fig1", "fig5"
EXT1, EXT5 = "ext_fig1_surrogate", "ext_fig5_surrogate"


STATEMENTS = (
    Statement(
        "arcs",
        "The four arcs cut by A, B, (0, +-1) are invariant, and each converges to one end, decided by "
        "the sign of X21 + 1/w (Lemma 11; Fig. 5)",
        SOURCE,
        "every start (per_arc per arc, 1e-3 inside the ends) ends within limit_tol of its arc's closed-form "
        "limit -> reproduced; any other -> not reproduced",
    ),
    Statement(
        "fixed_points",
        "A = (-1/w, +sqrt(1 - 1/w^2)) and B = (-1/w, -sqrt(1 - 1/w^2)) are the fixed points of token 2",
        SOURCE,
        "closed-form A and B map to themselves within residual_max -> reproduced",
    ),
    Statement(
        "rank2",
        "With LayerNorm, starts in the red segment (theta_A, 3pi/2) converge to [(0, 1); B], of "
        "rank 2: no collapse for a set of positive measure (Fig. 1 right)",
        SOURCE,
        "the red segment's arcs converge to B (share 1) and it has positive length -> reproduced",
    ),
    Statement(
        "token1",
        "Token 1 converges to (0, 1) if X11(0) > 0 and to (0, -1) if X11(0) < 0",
        SOURCE,
        "X11(0) = +0.3 / -0.3 end within 2 / (w t) of (0, 1) / (0, -1) after t layers (X12/X11 grows by w "
        "per "
        "layer: algebraic convergence) -> reproduced",
    ),
    Statement(
        "no_ln",
        "Without LayerNorm both tokens collapse to the same point (Fig. 1 left; X / ||X||_F, since "
        "this W_V violates A3)",
        SOURCE,
        "8 starts: token distance of X / ||X||_F below meet_tol at the end -> reproduced",
    ),
    Statement(
        "token1_moving",
        "Token 1 not yet converged: starts of token 2 still reach B from a set of positive "
        "measure, smaller than the red segment",
        "ours (measured; the paper assumes token 1 converged)",
        "measured share of token-2 starts ending at B > 0 and below the red segment's share -> confirmed",
        ours=True,
    ),
    Statement(
        "surrogate_meet",
        "Surrogate, N = 2, d = 2 without LayerNorm: both tokens converge to the same point",
        OURS,
        "every start ends with mu_rel <= meet_tol -> confirmed; starts that stalled (last attention weight "
        "of token 1 on token 0 x depth < meet_tol) -> inconclusive; others -> refuted",
        ours=True,
    ),
    Statement(
        "surrogate_token0",
        "Surrogate: token 0 (attending only to itself) converges to +-A, the dominant left "
        "eigenvector of W_V",
        OURS,
        "every LN run ends with token 0 within limit_tol of +-A -> confirmed",
        ours=True,
    ),
    Statement(
        "surrogate_rank2",
        "Surrogate: with LayerNorm, token 1 converges to a point B != +-A from an arc of "
        "starts: the tokens keep full rank",
        OURS,
        "some starts end with numerical rank 2 and their token-1 limits agree (limit_tol) at a point B with "
        "|<B, A>| < 1 - limit_tol -> confirmed; no start keeps rank 2 -> refuted",
        ours=True,
    ),
)
ARMS = (Arm("paper", PAPER_COUNTEREXAMPLE_RUN), Arm("surrogate", COUNTEREXAMPLE, extension=True))


def _paper_checks(data: Data, th: Thresholds) -> dict[str, list[tuple[str, bool | None, str]]]:
    ok, table = data.ok, data.rows
    tol, meet, res_max = th["limit_tol"], th["meet_tol"], th["residual_max"]
    checks: dict[str, list[tuple[str, bool | None, str]]] = {
        k: [] for k in ("arcs", "fixed_points", "rank2", "token1", "no_ln", "token1_moving")
    }
    for w, g in table.groupby("w", sort=False):
        for r in g.itertuples():
            checks["arcs"].append(
                (
                    f"w={w}, arc ({r.start:.4f}, {r.end:.4f})",
                    bool(r.max_distance <= tol),
                    f"-> {r.limit_name}: share {r.share_at_limit:.2f}, max distance {r.max_distance:.2g}",
                )
            )
        red = g[g["red"].astype(bool)]
        run = ok[ok["w"] == w].iloc[0]
        checks["rank2"].append(
            (
                f"w={w}",
                bool(not red.empty and (red["share_at_limit"] == 1.0).all()),
                f"red segment ({run['summary.red_start']:.6f}, {run['summary.red_end']:.6f}), "
                f"{run['summary.red_share']:.4f} of the circle",
            )
        )
    for _, r in ok.iterrows():
        res = max(float(r["summary.A_residual"]), float(r["summary.B_residual"]))
        checks["fixed_points"].append(
            (
                f"w={r['w']}",
                res <= res_max,
                f"A = ({r['summary.A_x']:.6f}, {r['summary.A_y']:.6f}), B = ({r['summary.B_x']:.6f}"
                f", {r['summary.B_y']:.6f}), residual {res:.2g}",
            )
        )
        scaled = float(r["summary.token1_distance_times_wt"])
        checks["token1"].append((f"w={r['w']}", scaled < 2, f"distance to (0, +-1) x w t = {scaled:.4g}"))
        nd = float(r["summary.noln_token_distance"])
        checks["no_ln"].append((f"w={r['w']}", nd < meet, f"largest token distance of X / ||X||_F {nd:.2g}"))
        ms, rs = float(r["summary.moving_share_to_B"]), float(r["summary.red_share"])
        checks["token1_moving"].append(
            (
                f"w={r['w']}",
                0 < ms < rs,
                f"{ms:.4f} of the circle reaches B (arcs {r['summary.moving_arcs']}) vs {rs:.4f} "
                "with token 1 converged",
            )
        )
    return checks


def _surrogate_checks(data: Data, th: Thresholds) -> dict[str, list[tuple[str, bool | None, str]]]:
    run = data.ok.iloc[0]
    rows = data.table[data.table["run_id"] == run["run_id"]]
    tol, meet = th["limit_tol"], th["meet_tol"]
    depth = float(data.exp.base.get("layers", 1))  # the YAML's steps: the layers iterated
    met = rows["noln_mu_rel"] <= meet
    stalled = rows["noln_attn_10"] * depth < meet
    meet_checks: list[tuple[str, bool | None, str]] = (
        [
            (
                f"{int(met.sum())}/{len(rows)} starts meet",
                True,
                f"max final mu_rel {rows['noln_mu_rel'][met].max():.2g}",
            )
        ]
        if met.any()
        else []
    )
    apart = rows[~met]
    if not apart.empty:
        holds = None if bool(stalled[~met].all()) else False
        meet_checks.append(
            (
                f"{len(apart)} starts apart (theta {apart['theta'].min():.2f}..{apart['theta'].max():.2f})",
                holds,
                f"mu_rel up to {apart['noln_mu_rel'].max():.2g}, attention of token 1 on token 0 <= "
                f"{apart['noln_attn_10'].max():.2g}" + (" (stalled)" if holds is None else ""),
            )
        )
    a = np.array([run["summary.sink_x"], run["summary.sink_y"]], dtype=float)
    t0 = rows[["ln_token0_x", "ln_token0_y"]].to_numpy(dtype=float)
    dist = float(np.minimum(np.linalg.norm(t0 - a, axis=1), np.linalg.norm(t0 + a, axis=1)).max())
    full = rows[rows["ln_rank"] >= 2]
    if full.empty:
        rank2 = [("every start", False, f"0/{len(rows)} starts keep rank 2")]
    else:
        pts = full[["ln_x", "ln_y"]].to_numpy(dtype=float)
        b = np.median(pts, axis=0)
        spread = float(np.linalg.norm(pts - b, axis=1).max())
        off = abs(float(b @ a))
        arc = (
            f"; basin arc of B ({run['summary.arc_start']:.3f}, {run['summary.arc_end']:.3f}) rad"
            if "summary.arc_start" in run and not pd.isna(run["summary.arc_start"])
            else ""
        )
        rank2 = [
            (
                f"{len(full)}/{len(rows)} starts keep rank 2",
                spread < tol and off < 1 - tol,
                f"token 1 ends at B = ({b[0]:.4f}, {b[1]:.4f}), |<B, A>| = {off:.4f}, spread "
                f"{spread:.2g}{arc}",
            )
        ]
    return {
        "surrogate_meet": meet_checks,
        "surrogate_token0": [
            (f"A = ({a[0]:.4f}, {a[1]:.4f})", dist < tol, f"max distance of token 0 to +-A {dist:.2g}")
        ],
        "surrogate_rank2": rank2,
    }


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("fig1_fig5", sd.verdict, sd.ranges)
    out: list[Claim] = []
    for arm, checks_of, figure in (("paper", _paper_checks, FIG1), ("surrogate", _surrogate_checks, EXT1)):
        data = sd.arm(arm)
        if data is None:
            continue
        keys = list(checks_of(data, th))
        for key in keys:
            st = next(s for s in STATEMENTS if s.key == key)
            j = judged(lambda t, key=key, data=data, fn=checks_of: rules.every_run(fn(data, t)[key]), th)
            out.append(
                claim_row(
                    "fig1_fig5",
                    st,
                    data,
                    th,
                    j,
                    runs=data.ok,
                    figure=FIG5 if key == "arcs" else figure,
                    names=("closed form against the iterated map", ""),
                )
            )
    return out


def figures(sd: StoryData) -> list[FigureSpec]:
    out = []
    data = sd.arm("paper")
    if data is not None:
        w = float(data.ok.iloc[0]["w"])
        arcs = data.rows.dropna(axis=1, how="all")
        fig1, fig5 = paper_counterexample_figures(w, tuple(data.exp.base.get("token1", (0.6, 0.8))))
        out += [
            FigureSpec(
                FIG1,
                fig1,
                arcs,
                "Fig. 1, the paper's construction (w of the first run): left, without LayerNorm, X(t) / "
                "||X(t)||_F (W_V violates A3): both tokens meet; right, with LayerNorm, the red segment "
                "converging to B. CSV: the four arcs with their measured limits.",
            ),
            FigureSpec(
                FIG5,
                fig5,
                arcs,
                "Fig. 5, the paper's construction: the four invariant arcs coloured by limit, and the ratio "
                "map g(y).",
            ),
        ]
    data = sd.arm("surrogate")
    if data is not None:
        rows = data.table[data.table["run_id"] == data.ok.iloc[0]["run_id"]].dropna(axis=1, how="all")
        fig1, fig5, f5 = counterexample_figures(data.exp.base)
        out += [
            FigureSpec(
                EXT1,
                fig1,
                rows,
                "Ours, Fig. 1 reading (surrogate W_V = [[0.95, 1], [0, 1]], W_QK = I): N = 2, d = 2, causal "
                "mask. Left: without LayerNorm, trajectories of both tokens. Right: with LayerNorm, token 1 "
                "converges to B from the red arc (token 0 at A) and to A otherwise.",
            ),
            FigureSpec(
                EXT5,
                fig5,
                f5,
                "Ours, Fig. 5 reading (surrogate): the angle map f of token 1 (token 0 at A) with its fixed "
                "points (filled = stable) and theta(t) for several starts.",
            ),
        ]
    return out


STORY = story_here(__name__)

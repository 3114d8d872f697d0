"""Figs. 1 and 5 with our surrogate (ours; the paper's own construction is ``counterexample_paper``).

Task ``counterexample``: token 1 started at evenly spaced angles, iterated with and without
LayerNorm (``rankcollapse.equilibria.counterexample``). Claims: without LN both tokens meet; token 0
converges to ±A; with LN token 1 converges to a point B != ±A from an arc of starts (full rank).
Figures: Fig. 1 (trajectories, the arc) and Fig. 5 (the angle map), drawn by
``rankcollapse.equilibria.plots``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Data,
    fmt,
)
from rankcollapse.experiments.plotting import empty

SOURCE = "ours (surrogate of paper §4.3.1: W_V = [[0.95, 1], [0, 1]], W_QK = I)"
FIG1, FIG5 = "fig1_counterexample", "fig5_second_token"


def counterexample(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """The N = 2, d = 2 LayerNorm counterexample (``rankcollapse.equilibria.counterexample``).

    Params: ``w_v`` (2x2, row convention), ``w_qk`` (2x2 or None = I), ``d_qk``, ``token0`` (start
    of token 0), ``angles`` (token-1 starts, evenly spaced on the circle), ``steps``, ``rank_tol``,
    ``seed`` (recorded; the run is deterministic). Rows: one per start angle ``theta`` with token 1's
    limit (``ln_x, ln_y``), the final numerical rank and |det| with LayerNorm, and the final mu_rel
    without LayerNorm. Summary: the computed fixed points, point B and its basin arc.
    """
    import torch

    from rankcollapse.equilibria.counterexample import (
        basin_arc,
        counterexample_2d,
        fixed_points_on_circle,
        simulate_pair,
    )
    from rankcollapse.equilibria.lnmap import attention_matrix, causal_mask

    cx = counterexample_2d(params["w_v"], params.get("w_qk"), float(params.get("d_qk", 1.0)))
    token0 = np.asarray(params.get("token0", [0.6, 0.8]), dtype=np.float64)
    steps = int(params.get("steps", 4000))
    tol = float(params.get("rank_tol", 1e-6))
    theta = (np.arange(int(params["angles"])) + 0.5) * (2 * math.pi / int(params["angles"]))
    with_ln = simulate_pair(token0, theta, cx, steps=steps, layer_norm=True)  # [b, 2, 2]
    without = simulate_pair(token0, theta, cx, steps=steps, layer_norm=False)
    on_layer(steps)
    sv = np.linalg.svd(with_ln, compute_uv=False)  # [b, 2]
    centred = without - without.mean(axis=1, keepdims=True)
    mu_rel = np.linalg.norm(centred, axis=(1, 2)) / np.maximum(np.linalg.norm(without, axis=(1, 2)), 1e-300)
    # weight of token 1 on token 0 in the last layer without LN: ~0 means token 1 no longer moves
    attn = attention_matrix(torch.as_tensor(without), causal_mask(2), cx.torch_w_qk(), cx.d_qk)[:, 1, 0]
    rows = [
        {
            "theta": float(th),
            "ln_x": float(x[1, 0]),
            "ln_y": float(x[1, 1]),
            "ln_token0_x": float(x[0, 0]),
            "ln_token0_y": float(x[0, 1]),
            "ln_rank": int((s > tol * s[0]).sum()),
            "ln_abs_det": float(abs(np.linalg.det(x))),
            "noln_mu_rel": float(m),
            "noln_attn_10": float(a),
        }
        for th, x, s, m, a in zip(theta, with_ln, sv, mu_rel, attn.tolist(), strict=True)
    ]
    fps = fixed_points_on_circle(cx)
    summary: dict[str, Any] = {
        "sink_x": float(cx.sink[0]),
        "sink_y": float(cx.sink[1]),
        "fixed_points": len(fps),
        "stable_fixed_points": sum(p.stable for p in fps),
    }
    try:
        arc = basin_arc(cx, grid=int(params.get("arc_grid", 4096)), steps=int(params.get("arc_steps", 4000)))
        summary.update(
            {
                "B_x": arc.target_point[0],
                "B_y": arc.target_point[1],
                "arc_start": arc.start,
                "arc_end": arc.end,
                "arc_length": arc.length,
            }
        )
    except RankCollapseError as err:  # no off-axis stable point: token 1 always collapses
        summary.update({"arc_length": 0.0, "arc_error": str(err)})
    return RunOutput(rows, summary)


S_MEET = "N = 2, d = 2 without LayerNorm: both tokens converge to the same point (Fig. 1, left)"
S_TOK0 = "Token 0 (attending only to itself) converges to (0, 1) or (0, -1) (Fig. 1)"
R_TOK0 = "every LN run ends with token 0 within 1e-6 of ±A, A the dominant left eigenvector of W_V"
S_LN = (
    "With LayerNorm, token 1 converges to a point B != ±A from an arc of starts: the tokens keep "
    "full rank (Fig. 1 right, Fig. 5)"
)
R_LN = (
    "some starts end with numerical rank 2 and their token-1 limits agree (1e-6) at a point B with "
    "|<B, A>| < 1 - 1e-6 -> reproduced; no start keeps rank 2 -> not reproduced"
)


def _r_meet(meet_tol: float) -> str:
    return (
        f"every start ends with mu_rel <= {meet_tol} -> reproduced; if every start that does not meet has "
        "stalled (last attention weight of token 1 on token 0 times the depth run < meet_tol: another run "
        "as deep could not close the gap visibly) -> inconclusive; otherwise not reproduced"
    )


def meet_claim(data: Data, rows: pd.DataFrame) -> Claim:
    """Without LN every start meets (reproduced); the rest stalled (inconclusive); else not."""
    meet_tol = data.v("meet_tol", 1e-8)
    n = len(rows)
    met = rows["noln_mu_rel"] <= meet_tol
    apart = rows[~met]
    if met.all():
        verdict, ev = REPRODUCED, f"{n}/{n} starts meet (max final mu_rel {fmt(rows['noln_mu_rel'].max())})"
    else:
        depth = float(data.exp.base.get("steps", 1))
        stalled = bool((apart["noln_attn_10"] * depth < meet_tol).all())
        verdict = INCONCLUSIVE if stalled else NOT_REPRODUCED
        ev = (
            f"{int(met.sum())}/{n} starts meet; {len(apart)} (token 1 from theta in "
            f"[{apart['theta'].min():.2f}, {apart['theta'].max():.2f}]) end apart with mu_rel up to "
            f"{fmt(apart['noln_mu_rel'].max())} and attention of token 1 on token 0 <= "
            f"{fmt(apart['noln_attn_10'].max())}" + (" (stalled)" if stalled else "")
        )
    return data.claim("cx.no_ln_meet", S_MEET, SOURCE, _r_meet(meet_tol), ev, verdict, figure=FIG1)


def token0_claim(data: Data, run: pd.Series, rows: pd.DataFrame) -> Claim:
    """Token 0 ends within 1e-6 of ±A in every LN run."""
    a = np.array([run["summary.sink_x"], run["summary.sink_y"]], dtype=float)
    t0 = rows[["ln_token0_x", "ln_token0_y"]].to_numpy(dtype=float)
    dist = np.minimum(np.linalg.norm(t0 - a, axis=1), np.linalg.norm(t0 + a, axis=1))
    verdict = REPRODUCED if float(dist.max()) < 1e-6 else NOT_REPRODUCED
    ev = f"A = ({a[0]:.4f}, {a[1]:.4f}); max distance of token 0 to ±A after the run {fmt(float(dist.max()))}"
    return data.claim("cx.token0", S_TOK0, SOURCE, R_TOK0, ev, verdict, figure=FIG1)


def full_rank_claim(data: Data, run: pd.Series, rows: pd.DataFrame) -> Claim:
    """Some starts keep rank 2 and their token 1 agrees at one off-axis point B."""
    a = np.array([run["summary.sink_x"], run["summary.sink_y"]], dtype=float)
    n = len(rows)
    full = rows[rows["ln_rank"] >= 2]
    if full.empty:
        return data.claim(
            "cx.ln_full_rank", S_LN, SOURCE, R_LN, f"0/{n} starts keep rank 2", NOT_REPRODUCED, figure=FIG1
        )
    pts = full[["ln_x", "ln_y"]].to_numpy(dtype=float)
    b = np.median(pts, axis=0)
    agree = bool(np.linalg.norm(pts - b, axis=1).max() < 1e-6)
    off_axis = abs(float(b @ a)) < 1 - 1e-6
    verdict = REPRODUCED if agree and off_axis else NOT_REPRODUCED
    arc = (
        f"; computed basin arc of B ({run.get('summary.arc_start', math.nan):.3f}, "
        f"{run.get('summary.arc_end', math.nan):.3f}) rad with token 0 at A"
        if "summary.arc_start" in run and not pd.isna(run["summary.arc_start"])
        else ""
    )
    spread = fmt(float(np.linalg.norm(pts - b, axis=1).max()))
    ev = (
        f"{len(full)}/{n} starts keep rank 2 (theta in [{full['theta'].min():.3f}, "
        f"{full['theta'].max():.3f}] rad, token 0 from {data.exp.base.get('token0')}); their token 1 "
        f"ends at B = ({b[0]:.4f}, {b[1]:.4f}), |<B, A>| = {abs(float(b @ a)):.4f}, spread {spread}{arc}"
    )
    return data.claim("cx.ln_full_rank", S_LN, SOURCE, R_LN, ev, verdict, figure=FIG1)


def claims(data: Data) -> list[Claim]:
    ok = data.ok
    if ok.empty:
        return [
            data.no_data("cx.no_ln_meet", S_MEET, SOURCE, _r_meet(data.v("meet_tol", 1e-8)), FIG1),
            data.no_data("cx.token0", S_TOK0, SOURCE, R_TOK0, FIG1),
            data.no_data("cx.ln_full_rank", S_LN, SOURCE, R_LN, FIG1),
        ]
    run = ok.iloc[0]
    rows = data.table[data.table["run_id"] == run["run_id"]]
    return [meet_claim(data, rows), token0_claim(data, run, rows), full_rank_claim(data, run, rows)]


def figures(data: Data) -> list[FigureSpec]:
    """Figs. 1 and 5, drawn by ``rankcollapse.equilibria.plots`` for the run's system."""
    cap1 = (
        "Fig. 1, ours (surrogate W_V = [[0.95, 1], [0, 1]], W_QK = I): N = 2, d = 2, causal mask. Left: "
        "without LayerNorm, trajectories of both tokens. Right: "
        "with LayerNorm, token 1 converges to B from the red arc (token 0 at A) and to A otherwise. "
        "CSV: every start angle with token 1's limit, the final rank with LN and mu_rel without LN."
    )
    cap5 = (
        "Fig. 5, ours (surrogate): convergence of the second token: the angle map f of token 1 (token 0 "
        "at A) with its "
        "fixed points (filled = stable) and theta(t) for several starts. CSV: theta, f(theta)."
    )
    ok = data.ok
    if ok.empty:
        why = data.failures() or "no runs"
        return [empty(FIG1, cap1, why), empty(FIG5, cap5, why)]
    from rankcollapse.equilibria.counterexample import angle_map, counterexample_2d
    from rankcollapse.equilibria.plots import plot_figure1, plot_figure5

    p = data.exp.base
    cx = counterexample_2d(p["w_v"], p.get("w_qk"), float(p.get("d_qk", 1.0)))
    rows = data.table[data.table["run_id"] == ok.iloc[0]["run_id"]].dropna(axis=1, how="all")
    theta = np.linspace(0, 2 * math.pi, 721)
    f5 = pd.DataFrame({"theta": theta, "f_theta": np.mod(angle_map(theta, cx), 2 * math.pi)})
    return [
        FigureSpec(FIG1, plot_figure1(cx, token0=tuple(p.get("token0", (0.6, 0.8)))), rows, cap1),
        FigureSpec(FIG5, plot_figure5(cx), f5, cap5),
    ]


STORY = Story(name="counterexample", task=counterexample, claims=claims, figures=figures)

"""Verdict maps (issue 44 item 5): where each side of the position-bias dispute holds, over lam and depth.

Wu et al. 2025 (arXiv 2502.01951, [text, via a structured summary]): under causal masks the cumulative
context converges to the first token. Herasimchyk et al. 2026 (arXiv 2602.16837, [abstract]): with the
residual-aware mixing ``M(t) = lam I + (1 - lam) A(t)`` residuals prevent that collapse. Chowdhury 2026
(arXiv 2603.10123, [abstract]): the influence profile is U-shaped at initialisation. Each is right somewhere:
this story draws where, on the same runs (``kit.maps``).

**The maps** [ours]. Single-head causal SANs (``X <- A X W_V``, Gaussian inputs and weights), one network
per seed, its attention the same for every lam (lam enters the product only, as in ``residual_rollout``),
float64. Cells: lam (the grid) x depth t (the layers at which the last token's profile is kept: 1, 2, 4,
... and the last). Per cell and network: log10 of the largest first-token gap ``max_i (1 - P(t)[i, 0])``
against ``log10(gap_level)`` (below for sure: converged, Wu's side; above for sure: kept, Herasimchyk's),
and the smaller of the last token's two end arms over its middle (``metrics.influence``, ``u_ends_share``
of the positions at each end) against ``u_log_min`` (above for sure: a U, Chowdhury's side). Every cell's
interval is simultaneous over its map; the mapped boundary of a depth runs from the last cell decided on
one side to the first decided on the other. Beside the gap map, the boundary of *uniform* causal attention
in closed form (``metrics.rollout.uniform_causal_boundary``), a reference: random attention is not uniform.

Rows (ours; each counted with its paper): one boundary in lam at the last layer between converged and kept
(``kit.rules.sweeps.crossing`` on log10 of the gap), and the U past one lam at the last layer (the same rule
on the smaller arm); the maps themselves are the figure and its table.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.data import profile_summaries, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.maps import VerdictMap, draw_map, verdict_map
from rankcollapse.experiments.kit.plots import figure
from rankcollapse.experiments.kit.rules.sweeps import crossing
from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES
from rankcollapse.experiments.kit.tasks.rollout import end_over_middle_logs, uniform_causal_boundary
from rankcollapse.experiments.kit.thresholds import Thresholds

PAPER = "2602.16837"
WU, CHOWDHURY = "2502.01951", "2603.10123"
LAM = "rollout_residual"
GAP = "first_token_gap_max"
FIGURE = "verdict_maps_lam_depth"
SIDES_GAP = ("converged (Wu et al. 2025)", "kept (Herasimchyk et al. 2026)")
SIDES_U = ("no U", "U (Chowdhury 2026)")
STATEMENTS = (
    Statement(
        "converged_or_kept",
        "Wu et al.'s convergence onto the first token (the first-token gap below gap_level) and Herasimchyk "
        "et al.'s prevention (the gap above it) each hold on one side of a single residual strength lam* at "
        "the last layer",
        "ours: the map of Wu et al. 2025 (arXiv 2502.01951, [text, via a structured summary]) against "
        "Herasimchyk et al. 2026 (arXiv 2602.16837, [abstract])",
        "log10 of the gap per network at the last layer, over lam: some lam below log10(gap_level) for sure "
        "and some above for sure, every one below left of every one above -> confirmed, with lam* and its "
        "interval (kit.rules.sweeps.crossing, simultaneous over the lam grid); one side at every lam or no "
        "single crossing -> refuted; the map over every depth: the figure verdict_maps_lam_depth",
        ours=True,
    ),
    Statement(
        "u_region",
        "Chowdhury's U-shaped influence at initialisation (both ends of the last token's profile above its "
        "middle) holds past a single residual strength at the last layer",
        "ours: the map of Chowdhury 2026 (arXiv 2603.10123, [abstract]) over the residual-aware rollout",
        "the smaller of the last token's two end arms over the middle (log, u_ends_share of the positions at "
        "each end) per network at the last layer, over lam: a crossing of u_log_min located "
        "(kit.rules.sweeps.crossing) -> confirmed; a U at no lam, at every lam, or no single crossing -> "
        "refuted",
        ours=True,
        paper=CHOWDHURY,
    ),
)
ARMS = (Arm("residual", SIMULATE_CURVES, extension=True),)


def _ends(n: int, share: float) -> int:
    return max(1, min(round(share * n), (n - 1) // 2))


def _gap_values(data: Data) -> pd.DataFrame:
    """Per run and layer: lam and log10 of the gap (the batch mean of the run's networks' samples)."""
    frame = rows_of(data, "curve")
    out = frame[[LAM, "layer", "run_id", GAP]].copy()
    out["value"] = np.log10(np.maximum(out[GAP].to_numpy(dtype=float), 1e-300))
    return out


def _u_values(data: Data, share: float) -> pd.DataFrame:
    """Per run and kept layer t >= 1: lam and the smaller end arm over the middle (log)."""
    ends = _ends(int(data.exp.base["tokens"]), share)

    def summary(p: np.ndarray, _t: int) -> dict[str, float]:
        arms = end_over_middle_logs(torch.tensor(p), ends)
        return {"value": float(min(arms["start_over_middle_log"], arms["end_over_middle_log"]))}

    shapes = profile_summaries(rows_of(data, "influence"), summary, (LAM,))
    return shapes[shapes["layer"] >= 1] if not shapes.empty else shapes


def _map(values: pd.DataFrame, depths: list[int], level: float, what: str,
         sides: tuple[str, str]) -> VerdictMap:
    lams = sorted(float(x) for x in values[LAM].unique())
    rows = []
    for t in depths:
        at = values[values["layer"] == t]
        rows.append((t, [at.loc[at[LAM] == lam, "value"].to_numpy(dtype=float) for lam in lams]))
    return verdict_map(lams, rows, level, x_name="lam", y_name="depth t", what=what, sides=sides)


def maps(sd: StoryData, th: Thresholds) -> tuple[VerdictMap, VerdictMap] | None:
    """The gap map (Wu against Herasimchyk) and the U map (Chowdhury), at the depths the profile is kept."""
    data = sd.arm("residual")
    if data is None:
        return None
    u = _u_values(data, th["u_ends_share"])
    if u.empty:
        return None
    depths = sorted(int(t) for t in u["layer"].unique())
    gap = _map(_gap_values(data), depths, math.log10(th["gap_level"]), "log10 first-token gap", SIDES_GAP)
    return gap, _map(u, depths, th["u_log_min"], "smaller end arm over the middle (log)", SIDES_U)


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("verdict_maps", sd.verdict, sd.ranges)
    data = sd.arm("residual")
    if data is None:
        return []
    frame = rows_of(data, "curve")
    last = int(data.exp.base["layers"])
    note = sample_note(runs_of(data, frame), frame)

    def at_last(values: pd.DataFrame) -> tuple[list[float], list[np.ndarray]]:
        at = values[values["layer"] == last]
        lams = sorted(float(x) for x in at[LAM].unique())
        return lams, [at.loc[at[LAM] == lam, "value"].to_numpy(dtype=float) for lam in lams]

    def gap_rule(t: Thresholds) -> object:
        lams, values = at_last(_gap_values(data))
        return crossing(lams, values, math.log10(t["gap_level"]), t,
                        "log10 first-token gap at the last layer", "lam")

    def u_rule(t: Thresholds) -> object:
        lams, values = at_last(_u_values(data, t["u_ends_share"]))
        return crossing(lams, values, t["u_log_min"], t, "smaller end arm over the middle at the last layer",
                        "lam")

    out = []
    for statement, rule, name in ((STATEMENTS[0], gap_rule, "log10 first-token gap (float64)"),
                                  (STATEMENTS[1], u_rule, "smaller end arm over the middle (float64)")):
        out.append(claim_row("verdict_maps", statement, data, th, judged(rule, th), axes_frame=frame,
                             runs=data.ok, figure=FIGURE, sample_note=note, names=(name, "")))
    return out


def _closed_form(data: Data, vmap: VerdictMap, level: float) -> list[tuple[float, float]]:
    n = int(data.exp.base["tokens"])
    return [(t, uniform_causal_boundary(n - 1, int(t), level)) for t in vmap.ys]


def figures(sd: StoryData) -> list[FigureSpec]:
    th = Thresholds.of("verdict_maps", sd.verdict, sd.ranges)
    both = maps(sd, th)
    data = sd.arm("residual")
    if both is None or data is None:
        return []
    gap, u = both
    n = int(data.exp.base["tokens"])
    fig = figure(11, 3.6, layout="constrained")
    left, right = fig.subplots(1, 2)
    draw_map(left, gap, _closed_form(data, gap, th["gap_level"]), "uniform causal attention (closed form)")
    left.set_title(f"first-token gap against {th['gap_level']:g}", fontsize=8)
    draw_map(right, u)
    right.set_title(f"last token's profile: a U (both ends above the middle by > {th['u_log_min']:g})",
                    fontsize=8)
    table = pd.concat([gap.table().assign(map="gap"), u.table().assign(map="U")], ignore_index=True)
    caption = (
        "Verdict maps of the position-bias dispute (ours): single-head causal SANs (N = "
        f"{n}, Gaussian inputs and weights, float64), the residual-aware rollout M(t) = lam I + (1 - lam) "
        "A(t). Each cell (lam, depth t) is a verdict over its networks (the number in the cell), every "
        "interval simultaneous over its map (Bonferroni over the cells). Left: the largest first-token gap "
        "below the level for sure (blue: Wu et al. 2025's convergence holds), above it for sure (red: "
        "Herasimchyk et al. 2026's prevention holds) or open (grey); black bars: the mapped boundary (from "
        "the last cell decided converged to the first decided kept); dashed: where uniform causal attention "
        "would put it (closed form; random attention is not uniform). Right: the last token's profile a U "
        "for sure (red: Chowdhury 2026's shape), not a U for sure (blue), open (grey). The table: each "
        "cell's verdict and its n (networks), and each depth's mapped boundary."
    )
    shown = pd.concat([gap.grid(("converged", "kept")).assign(map="first-token gap"),
                       u.grid(("no U", "U")).assign(map="U")], ignore_index=True)
    return [FigureSpec(FIGURE, fig, table, caption, table=shown[["map", *shown.columns[:-1]]])]


def _words(vmap: VerdictMap, r: int) -> str:
    lo, hi = vmap.bracket(r)
    if not math.isfinite(lo) and not math.isfinite(hi):
        return "all open"
    if not math.isfinite(lo):
        return f"{vmap.sides[1]} at every lam >= {hi:g}"
    if not math.isfinite(hi):
        return f"{vmap.sides[0]} at every lam <= {lo:g}"
    return f"boundary in [{lo:g}, {hi:g}]"


def headlines(sd: StoryData) -> list[str]:
    th = Thresholds.of("verdict_maps", sd.verdict, sd.ranges)
    both = maps(sd, th)
    if both is None:
        return []
    gap, u = both
    per = "; ".join(f"t = {t:g}: {_words(gap, r)}" for r, t in enumerate(gap.ys))
    per_u = "; ".join(f"t = {t:g}: {_words(u, r)}" for r, t in enumerate(u.ys))
    n = min(m.n for c in gap.rows for m in c.margins)
    return [
        f"Where Wu et al.'s convergence and Herasimchyk et al.'s prevention hold (first-token gap against "
        f"{th['gap_level']:g}, {n} networks a cell, float64): {per}.",
        f"Where Chowdhury's U holds (the last token's profile): {per_u}.",
    ]


STORY = story_here(__name__)

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

**The NeurIPS paper against Cirrincione 2026, over depth x mask x notion** (arm ``notions``). The NeurIPS
paper ([text], §5, Fig. 2): "adding LayerNorm stops mu from converging to 0"; Cirrincione 2026 (arXiv
2604.23681, [abstract]): LayerNorm "neither contributes to nor mitigates rank collapse". The same Gaussian
single-head network (N = 8 < d = 16) without and with LayerNorm after attention, under four masks, both
notions measured on every run (``kit.tasks.notions``). One map per notion, masks as rows, depth t across;
per cell and network the effect of LayerNorm: in the limit notion ``log10 mu_rel_LN(t) - log10
mu_rel_noLN(t)`` (the mean over inputs of the paired log ratio, each clamped at the float64 floor: two
stacks at the floor differ by 0), against ``log10(mitigate_min)``; in the one-step notion (Cirrincione's)
the mean change of the affine rank across layer t's LayerNorm, ``aff(LN(Z)) - aff(Z)`` over the inputs
whose singular values sit ``margin_min`` decades off the floor (a network with none resolved is no unit of
that cell), against +0.5 (LayerNorm raising the affine rank). Above for sure: LayerNorm mitigates (the
NeurIPS paper's side); below for sure: it does not (Cirrincione's).

**Karagodin et al. 2025 against LayerNorm Scaling (Sun et al. 2025), over placement x depth** (arms
``placements``, ``placements_cos``: the same networks). Karagodin ([abstract]): "Pre-LN, Mix-LN and nGPT
resist deep-layer collapse better than Post-LN"; Sun et al. ([abstract]): Pre-LN's deep blocks become
near-identity, and LayerNorm Scaling (each norm output of layer l times 1/sqrt(l)) mitigates it. Karagodin's
particle model (identity values, sphere inputs, complete mask) with six placements (``dynamics.layers``:
post, pre, mix, peri, ngpt, pre+lns), placements as rows, depth across; per cell and network: log10 mu_rel
against log10(keep_min) (above for sure: resists collapse; below: collapsed), and the mean
consecutive-layer cosine ``cos(x_i(t-1), x_i(t))`` against cos_min (above for sure: near-identity, Sun et
al.'s curse; below: the block moves the tokens).

Rows on these maps (``kit.maps`` rules, each a planted test in ``tests/experiments/test_verdict_maps.py``):
``ln_one_step_nowhere`` (``nowhere`` on the one-step map), ``ln_limit_somewhere`` (``somewhere`` on the
limit map), ``preln_resists_where`` (``apart``: post-LN collapsed while pre-LN resists at some depth),
``curse_depth_where`` (``crossing`` of pre-LN's cosine over depth) and ``lns_off_identity`` (``apart``:
pre-LN near-identity while pre-LN + LNS is not, at some depth).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.curves import floor_rel
from rankcollapse.experiments.kit.data import profile_summaries, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.maps import VerdictMap, apart, draw_map, nowhere, somewhere, verdict_map
from rankcollapse.experiments.kit.plots import figure
from rankcollapse.experiments.kit.rules.sweeps import crossing
from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES
from rankcollapse.experiments.kit.tasks.growth import SIMULATE_GROWTH
from rankcollapse.experiments.kit.tasks.notions import SIMULATE_NOTIONS
from rankcollapse.experiments.kit.tasks.rollout import end_over_middle_logs, uniform_causal_boundary
from rankcollapse.experiments.kit.thresholds import Thresholds

PAPER = "2602.16837"
WU, CHOWDHURY = "2502.01951", "2603.10123"
CIRRINCIONE, KARAGODIN, LNS = "2604.23681", "2510.22026", "2502.05795"
NEURIPS_LN = "the NeurIPS paper (§5, Fig. 2, [text]: 'adding LayerNorm stops mu from converging to 0')"
CIRR_LN = ("Cirrincione 2026 (arXiv 2604.23681, [abstract]: LayerNorm 'neither contributes to nor mitigates "
           "rank collapse')")
KARAGODIN_SRC = ("Karagodin et al. 2025 (arXiv 2510.22026, [abstract]: 'Pre-LN, Mix-LN and nGPT resist "
                 "deep-layer collapse better than Post-LN')")
LNS_SRC = ("Sun et al. 2025 (arXiv 2502.05795, [abstract]: Pre-LN's variance growth 'causes the derivative "
           "of the deep Transformer blocks to be an identity matrix'; LayerNorm Scaling 'mitigates' it)")
FIG_NOTIONS, FIG_PLACEMENTS = "verdict_maps_ln_notions", "verdict_maps_placements"
SIDES_LN = ("no mitigation (Cirrincione 2026)", "LayerNorm mitigates (the NeurIPS paper)")
SIDES_KEPT = ("resists collapse (Karagodin et al. 2025)", "collapsed")
SIDES_COS = ("moves the tokens", "near-identity (Sun et al. 2025)")
MASKS = ("complete", "causal", "window:w=1", "causal-window:w=1")
PLACEMENTS = ("post", "pre", "mix", "peri", "ngpt", "pre+lns")
PLACEMENT_WORDS = {"post": "post-LN", "pre": "pre-LN", "mix": "Mix-LN", "peri": "Peri-LN", "ngpt": "nGPT",
                   "pre+lns": "pre-LN + LNS"}
#: The one-step notion's level: LayerNorm raising the affine rank by more than half a rank on average.
RANK_STEP = 0.5
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
    Statement(
        "ln_one_step_nowhere",
        "In Cirrincione's own notion, the affine rank across one LayerNorm, LayerNorm mitigates collapse "
        "(raises "
        "the affine rank) in no cell of depth x mask",
        f"ours: the map of {CIRR_LN} against {NEURIPS_LN}",
        "per mask and depth t, per network the mean change aff(LN(Z)) - aff(Z) across layer t's LayerNorm "
        "over "
        "the inputs resolved by margin_min decades; every cell with min_samples networks below +0.5 for sure "
        "-> confirmed; one above for sure -> refuted (kit.maps.nowhere, intervals simultaneous over the "
        "map); "
        "the map: the figure verdict_maps_ln_notions",
        ours=True,
        paper=CIRRINCIONE,
    ),
    Statement(
        "ln_limit_somewhere",
        "In the NeurIPS paper's notion, mu_rel with depth, LayerNorm mitigates collapse somewhere in depth x "
        "mask: mu_rel with LayerNorm at least mitigate_min times the same network's without it",
        f"ours: the map of {NEURIPS_LN} against {CIRR_LN}",
        "per mask and depth t, per network log10 mu_rel_LN(t) - log10 mu_rel_noLN(t) (the paired mean over "
        "inputs, clamped at the float64 floor); some cell above log10(mitigate_min) for sure -> confirmed; "
        "every cell below for sure -> refuted (kit.maps.somewhere, simultaneous over the map)",
        ours=True,
        paper=CIRRINCIONE,
    ),
    Statement(
        "preln_resists_where",
        "Karagodin et al.'s 'Pre-LN resists deep-layer collapse better than Post-LN' holds at some depth of "
        "the "
        "particle model: post-LN's mu_rel below keep_min while pre-LN's is above it",
        f"ours: the map of {KARAGODIN_SRC} against {LNS_SRC}",
        "per placement and depth t, per network log10 mu_rel against log10(keep_min); at some depth post-LN "
        "below for sure and pre-LN above for sure -> confirmed; the reverse at some depth, or the two "
        "decided "
        "alike at every depth -> refuted (kit.maps.apart, simultaneous over the map); the map: the figure "
        "verdict_maps_placements",
        ours=True,
        paper=KARAGODIN,
    ),
    Statement(
        "curse_depth_where",
        "Sun et al.'s near-identity deep blocks hold for pre-LN past a single depth of the particle model at "
        "initialisation: the consecutive-layer cosine crosses cos_min",
        f"ours: the map of {LNS_SRC} against {KARAGODIN_SRC}",
        "pre-LN's mean consecutive-layer cosine per network over depth: some depth below cos_min for sure "
        "and "
        "some above, every one below left of every one above -> confirmed, with the depth and its interval "
        "(kit.rules.sweeps.crossing, simultaneous over the depths); one side at every depth or no single "
        "crossing -> refuted",
        ours=True,
        paper=LNS,
    ),
    Statement(
        "lns_off_identity",
        "LayerNorm Scaling keeps blocks off the identity where pre-LN's are near it, at some depth of the "
        "particle model at initialisation",
        f"ours: the map of {LNS_SRC} against {KARAGODIN_SRC}",
        "per depth t, per network the mean consecutive-layer cosine against cos_min; at some depth pre-LN "
        "above "
        "for sure and pre-LN + LNS below for sure -> confirmed; the reverse at some depth, or the two "
        "decided "
        "alike at every depth -> refuted (kit.maps.apart, simultaneous over the map)",
        ours=True,
        paper=LNS,
    ),
)
ARMS = (Arm("residual", SIMULATE_CURVES, extension=True), Arm("notions", SIMULATE_NOTIONS, extension=True),
        Arm("placements", SIMULATE_CURVES, extension=True),
        Arm("placements_cos", SIMULATE_GROWTH, extension=True))


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


def _residual_claims(sd: StoryData, th: Thresholds) -> list[Claim]:
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


def _residual_figure(sd: StoryData, th: Thresholds) -> list[FigureSpec]:
    both = maps(sd, th)
    data = sd.arm("residual")
    if both is None or data is None:
        return []
    gap, u = both
    n = int(data.exp.base["tokens"])
    fig = figure(11, 3.6, layout="constrained")
    left, right = fig.subplots(1, 2)
    draw_map(left, gap, _closed_form(data, gap, th["gap_level"]), "uniform causal attention (closed form)",
             y="layer")  # the rows are the layers t ("depth t" in the tables)
    left.set_title(f"first-token gap against {th['gap_level']:g}", fontsize=8)
    draw_map(right, u, y="layer")
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
    x = vmap.x_name
    if not math.isfinite(lo) and not math.isfinite(hi):
        return "all open"
    if not math.isfinite(lo):
        return f"{vmap.sides[1]} at every {x} >= {hi:g}"
    if not math.isfinite(hi):
        return f"{vmap.sides[0]} at every {x} <= {lo:g}"
    return f"boundary in [{lo:g}, {hi:g}]"


def _residual_headlines(sd: StoryData, th: Thresholds) -> list[str]:
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


# ---- the NeurIPS paper against Cirrincione: depth x mask x notion ------------------------------------------
def depth_grid(layers: int) -> list[int]:
    """The depths a map shows: 1, 2, 4, then every ``max(4, layers // 8)``-th layer and the last."""
    step = max(4, layers // 8)
    return sorted(t for t in {1, 2, 4, *range(step, layers + 1, step), layers} if 1 <= t <= layers)


def ln_effect_values(curves: pd.DataFrame) -> pd.DataFrame:
    """Per mask, seed (network) and layer: ``log10 mu_rel_LN(t) - log10 mu_rel_noLN(t)``, the mean over
    inputs of the paired log ratio (``mu_rel_drop``: the mean per-input log drop from X(0), clamped at the
    floor; both presets start from the same X(0), so the difference of drops is the mean log ratio)."""
    cols = ["mask", "seed", "layer"]
    wide = curves.pivot_table(index=cols, columns="mode", values="mu_rel_drop", aggfunc="first")
    if not {"attn", "attn+layernorm"} <= set(wide.columns):
        return pd.DataFrame(columns=[*cols, "value"])
    value = (wide["attn+layernorm"] - wide["attn"]) / math.log(10.0)
    return value.rename("value").reset_index().dropna(subset=["value"])


def one_step_values(notions: pd.DataFrame, margin_min: float) -> pd.DataFrame:
    """Per mask, seed and layer t >= 1 of the LayerNorm runs: the mean of ``aff(LN(Z)) - aff(Z)`` across
    layer t's LayerNorm over the inputs resolved by ``margin_min`` decades (none resolved: no row)."""
    sub = notions[(notions["mode"] == "attn+layernorm") & (notions["layer"] > 0)]
    sub = sub[sub["norm_rank_margin"] >= margin_min]
    change = (sub["norm_out_affine_rank"] - sub["norm_in_affine_rank"]).rename("value")
    out = pd.concat([sub[["mask", "seed", "layer"]], change], axis=1)
    return out.groupby(["mask", "seed", "layer"], as_index=False)["value"].mean()


def _rows(values: pd.DataFrame, key: str, order: Sequence[str], depths: list[int]
          ) -> tuple[list[tuple[float, list[np.ndarray]]], list[str]]:
    """Map rows in ``order`` (those present): per depth the per-unit values of ``values`` (columns
    ``key``, ``layer``, ``value``)."""
    present = [o for o in order if o in set(values[key])] + sorted(set(values[key]) - set(order))
    rows = []
    for r, name in enumerate(present):
        at = values[values[key] == name]
        rows.append((float(r), [at.loc[at["layer"] == t, "value"].to_numpy(dtype=float) for t in depths]))
    return rows, present


def ln_maps(curves: pd.DataFrame, notions: pd.DataFrame, layers: int, th: Thresholds
            ) -> tuple[VerdictMap, VerdictMap] | None:
    """The limit-notion map and the one-step map (masks as rows, depth across), or None without data."""
    limit, step = ln_effect_values(curves), one_step_values(notions, th["margin_min"])
    if limit.empty:
        return None
    depths = depth_grid(layers)
    rows, masks = _rows(limit, "mask", MASKS, depths)
    limit_map = verdict_map(depths, rows, math.log10(th["mitigate_min"]), x_name="depth t", y_name="mask",
                            what="log10 mu_rel with LayerNorm over without (limit notion)", sides=SIDES_LN,
                            labels=masks)
    rows, masks = _rows(step if not step.empty else limit.iloc[0:0], "mask", masks, depths)
    rows = rows or [(float(r), [np.array([]) for _ in depths]) for r in range(len(masks))]
    step_map = verdict_map(depths, rows, RANK_STEP, x_name="depth t", y_name="mask",
                           what="affine-rank change across LayerNorm (one-step notion)", sides=SIDES_LN,
                           labels=masks)
    return limit_map, step_map


def _notion_frames(sd: StoryData) -> tuple[Data, pd.DataFrame, pd.DataFrame] | None:
    data = sd.arm("notions")
    if data is None:
        return None
    curves, notions = rows_of(data, "curve"), rows_of(data, "notion")
    if curves.empty or notions.empty:
        return None
    return data, curves, notions


def _notion_claims(sd: StoryData, th: Thresholds) -> list[Claim]:
    got = _notion_frames(sd)
    if got is None:
        return []
    data, curves, notions = got
    layers = int(data.exp.base["layers"])
    note = sample_note(runs_of(data, curves), curves)

    def step_rule(t: Thresholds) -> object:
        both = ln_maps(curves, notions, layers, t)
        assert both is not None
        return nowhere(both[1], t)

    def limit_rule(t: Thresholds) -> object:
        both = ln_maps(curves, notions, layers, t)
        assert both is not None
        return somewhere(both[0], t)

    keys = {s.key: s for s in STATEMENTS}
    return [
        claim_row("verdict_maps", keys["ln_one_step_nowhere"], data, th, judged(step_rule, th),
                  axes_frame=curves, runs=data.ok, figure=FIG_NOTIONS, sample_note=note,
                  names=("affine-rank change across one LayerNorm, per network (float64)", "")),
        claim_row("verdict_maps", keys["ln_limit_somewhere"], data, th, judged(limit_rule, th),
                  axes_frame=curves, runs=data.ok, figure=FIG_NOTIONS, sample_note=note,
                  names=("log10 mu_rel with LayerNorm over without, per network (float64)", "")),
    ]


# ---- Karagodin against LayerNorm Scaling: placement x depth ---------------------------------------------
def kept_values(curves: pd.DataFrame) -> pd.DataFrame:
    """Per placement, seed and layer: log10 of the run's mean mu_rel (clamped at the dtype's floor)."""
    floor = floor_rel(str(curves["dtype"].iloc[0])) if not curves.empty else 0.0
    out = curves[["placement", "seed", "layer"]].copy()
    out["value"] = np.log10(np.maximum(curves["mu_rel"].to_numpy(dtype=float), floor))
    return out


def cos_values(growth: pd.DataFrame) -> pd.DataFrame:
    """Per placement, seed and layer t >= 1: the mean over inputs of the mean consecutive-layer cosine."""
    sub = growth[growth["layer"] > 0]
    return sub.groupby(["placement", "seed", "layer"], as_index=False)["layer_cos"].mean().rename(
        columns={"layer_cos": "value"})


def placement_maps(curves: pd.DataFrame, growth: pd.DataFrame, layers: int, th: Thresholds
                   ) -> tuple[VerdictMap | None, VerdictMap | None]:
    """The mu_rel map (Karagodin's side: resists collapse) and the cosine map (Sun et al.'s side:
    near-identity), placements as rows, depth across; None where its arm has no data."""
    depths = depth_grid(layers)
    kept = cos = None
    if not curves.empty:
        rows, names = _rows(kept_values(curves), "placement", PLACEMENTS, depths)
        kept = verdict_map(depths, rows, math.log10(th["keep_min"]), x_name="depth t", y_name="placement",
                           what="log10 mu_rel", sides=SIDES_KEPT, rising=False,
                           labels=[PLACEMENT_WORDS.get(n, n) for n in names])
    if not growth.empty:
        rows, names = _rows(cos_values(growth), "placement", PLACEMENTS, depths)
        cos = verdict_map(depths, rows, th["cos_min"], x_name="depth t", y_name="placement",
                          what="consecutive-layer cosine", sides=SIDES_COS,
                          labels=[PLACEMENT_WORDS.get(n, n) for n in names])
    return kept, cos


def _placement_frames(sd: StoryData) -> tuple[Data | None, pd.DataFrame, Data | None, pd.DataFrame, int]:
    a, b = sd.arm("placements"), sd.arm("placements_cos")
    curves = rows_of(a, "curve") if a is not None else pd.DataFrame()
    growth = rows_of(b, "growth_sample") if b is not None else pd.DataFrame()
    layers = int((a or b).exp.base["layers"]) if (a or b) is not None else 0
    return a, curves, b, growth, layers


def _row_of(vmap: VerdictMap, placement: str) -> int | None:
    word = PLACEMENT_WORDS[placement]
    return vmap.labels.index(word) if word in vmap.labels else None


def _placement_claims(sd: StoryData, th: Thresholds) -> list[Claim]:
    a, curves, b, growth, layers = _placement_frames(sd)
    keys = {s.key: s for s in STATEMENTS}
    out = []
    if a is not None and not curves.empty and {"post", "pre"} <= set(curves["placement"]):
        def resists(t: Thresholds) -> object:
            kept = placement_maps(curves, growth.iloc[0:0], layers, t)[0]
            assert kept is not None
            return apart(kept, t, _row_of(kept, "post"), _row_of(kept, "pre"))

        out.append(claim_row("verdict_maps", keys["preln_resists_where"], a, th, judged(resists, th),
                             axes_frame=curves, runs=a.ok, figure=FIG_PLACEMENTS,
                             sample_note=sample_note(runs_of(a, curves), curves),
                             names=("log10 mu_rel per network, post-LN against pre-LN (float64)", "")))
    if b is not None and not growth.empty and "pre" in set(growth["placement"]):
        depths = depth_grid(layers)
        pre = cos_values(growth)
        pre = pre[pre["placement"] == "pre"]
        note = sample_note(runs_of(b, growth), growth)

        def curse(t: Thresholds) -> object:
            values = [pre.loc[pre["layer"] == d, "value"].to_numpy(dtype=float) for d in depths]
            return crossing(depths, values, t["cos_min"], t, "pre-LN's consecutive-layer cosine", "depth t")

        out.append(claim_row("verdict_maps", keys["curse_depth_where"], b, th, judged(curse, th),
                             axes_frame=growth, runs=b.ok, figure=FIG_PLACEMENTS, sample_note=note,
                             names=("pre-LN's consecutive-layer cosine per network (float64)", "")))
        if "pre+lns" in set(growth["placement"]):
            def lns(t: Thresholds) -> object:
                cos = placement_maps(curves.iloc[0:0], growth, layers, t)[1]
                assert cos is not None
                return apart(cos, t, _row_of(cos, "pre"), _row_of(cos, "pre+lns"))

            out.append(claim_row("verdict_maps", keys["lns_off_identity"], b, th, judged(lns, th),
                                 axes_frame=growth, runs=b.ok, figure=FIG_PLACEMENTS, sample_note=note,
                                 names=("consecutive-layer cosine per network, pre-LN against pre-LN + LNS "
                                        "(float64)", "")))
    return out


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("verdict_maps", sd.verdict, sd.ranges)
    return [*_residual_claims(sd, th), *_notion_claims(sd, th), *_placement_claims(sd, th)]


def _pair_figure(name: str, left_map: VerdictMap | None, right_map: VerdictMap | None,
                 titles: tuple[str, str], shorts: tuple[tuple[str, str], tuple[str, str]],
                 tags: tuple[str, str], caption: str, height: float) -> FigureSpec | None:
    maps_ = [(m, t, s, g) for m, t, s, g in zip((left_map, right_map), titles, shorts, tags, strict=True)
             if m is not None]
    if not maps_:
        return None
    fig = figure(11, height, layout="constrained")
    axes = fig.subplots(1, len(maps_), squeeze=False)[0]
    for ax, (m, title, _, _) in zip(axes, maps_, strict=True):
        draw_map(ax, m, x="layer")  # the columns are the layers t ("depth t" in the tables)
        ax.set_title(title, fontsize=8)
    table = pd.concat([m.table().assign(map=tag) for m, _, _, tag in maps_], ignore_index=True)
    shown = pd.concat([m.grid(short).assign(map=tag) for m, _, short, tag in maps_], ignore_index=True)
    return FigureSpec(name, fig, table, caption, table=shown[["map", *shown.columns[:-1]]])


def _notion_figure(sd: StoryData, th: Thresholds) -> list[FigureSpec]:
    got = _notion_frames(sd)
    if got is None:
        return []
    data, curves, notions = got
    both = ln_maps(curves, notions, int(data.exp.base["layers"]), th)
    if both is None:
        return []
    base = data.exp.base
    caption = (
        "Verdict maps of the NeurIPS paper (Fig. 2, [text]: 'adding LayerNorm stops mu from converging to "
        "0') "
        "against Cirrincione 2026 ([abstract]: LayerNorm 'neither contributes to nor mitigates rank "
        "collapse'), ours: the same single-head Gaussian network "
        f"(N = {base.get('tokens')}, d = {base.get('d')}, float64) without and with LayerNorm after "
        "attention, under four masks; each cell (mask, depth t) a verdict over its networks (the number in "
        "the cell), intervals simultaneous over each map. Left, the NeurIPS "
        "paper's notion: log10 of mu_rel with LayerNorm over the same network's without it, against "
        f"log10({th['mitigate_min']:g}) (red: LayerNorm mitigates for sure; blue: it does not; both stacks "
        "at the float64 floor count as equal). Right, Cirrincione's notion: the change of the affine rank "
        f"across layer t's LayerNorm over the inputs resolved by {th['margin_min']:g} decade(s), against "
        "+0.5 (red: LayerNorm raises it; blue: it does not; n = 0: no network resolved). Black bars: a row's "
        "mapped boundary. The table: each cell's verdict and n; the CSV: each cell's mean and interval."
    )
    spec = _pair_figure(FIG_NOTIONS, both[0], both[1],
                        (f"limit notion: mu_rel with LN over without, against {th['mitigate_min']:g}",
                         "one-step notion: affine-rank change across LayerNorm, against +0.5"),
                        (("no", "mitigates"), ("no", "raises")), ("limit (mu_rel)", "one-step (affine rank)"),
                        caption, 3.0)
    return [spec] if spec is not None else []


def _placement_figure(sd: StoryData, th: Thresholds) -> list[FigureSpec]:
    _, curves, _, growth, layers = _placement_frames(sd)
    kept, cos = placement_maps(curves, growth, layers, th)
    data = sd.arm("placements") or sd.arm("placements_cos")
    if data is None:
        return []
    base = data.exp.base
    caption = (
        "Verdict maps of Karagodin et al. 2025 ([abstract]: 'Pre-LN, Mix-LN and nGPT resist deep-layer "
        "collapse better than Post-LN') against Sun et al. 2025 ([abstract]: Pre-LN's deep blocks near the "
        "identity; LayerNorm Scaling mitigates it), ours: Karagodin's particle model (identity values, "
        "tokens on the sphere, complete mask, "
        f"N = d = {base.get('tokens')}, float64, no MLP) with six norm placements, "
        "the same networks in both maps; each cell (placement, depth t) a verdict over its networks (the "
        "number in the cell), intervals simultaneous over each map. Left: mu_rel above keep_min "
        f"({th['keep_min']:g}) for sure (blue: resists collapse, Karagodin's side) or below it (red: "
        "collapsed). Right: the mean consecutive-layer cosine cos(x_i(t-1), x_i(t)) above cos_min "
        f"({th['cos_min']:g}) for sure (red: near-identity, Sun et al.'s side) or below it (blue: the block "
        "moves the tokens). Grey: open. Black bars: a row's mapped boundary (left: the mapped boundary of a "
        "falling mu_rel). The table: each cell's verdict and n; the CSV: each cell's mean and interval."
    )
    spec = _pair_figure(FIG_PLACEMENTS, kept, cos, (f"mu_rel against keep_min = {th['keep_min']:g}",
                                                    "consecutive-layer cosine against cos_min = "
                                                    f"{th['cos_min']:g}"),
                        (("resists", "collapsed"), ("moves", "identity")), ("mu_rel", "cosine"), caption, 3.4)
    return [spec] if spec is not None else []


def figures(sd: StoryData) -> list[FigureSpec]:
    th = Thresholds.of("verdict_maps", sd.verdict, sd.ranges)
    return [*_residual_figure(sd, th), *_notion_figure(sd, th), *_placement_figure(sd, th)]


def _map_words(vmap: VerdictMap) -> str:
    return "; ".join(f"{vmap.row_name(r)}: {_words(vmap, r)}" for r in range(len(vmap.ys)))


def headlines(sd: StoryData) -> list[str]:
    th = Thresholds.of("verdict_maps", sd.verdict, sd.ranges)
    out = _residual_headlines(sd, th)
    got = _notion_frames(sd)
    if got is not None:
        data, curves, notions = got
        both = ln_maps(curves, notions, int(data.exp.base["layers"]), th)
        if both is not None:
            out.append(f"Where LayerNorm mitigates collapse in the NeurIPS paper's notion (mu_rel with it >= "
                       f"{th['mitigate_min']:g} x without, over depth): {_map_words(both[0])}. In "
                       "Cirrincione's "
                       f"one-step notion (the affine rank across one LayerNorm): {_map_words(both[1])}.")
    _, curves, _, growth, layers = _placement_frames(sd)
    kept, cos = placement_maps(curves, growth, layers, th)
    if kept is not None:
        out.append(f"Where each placement resists collapse (mu_rel >= {th['keep_min']:g}, Karagodin's side) "
                   f"over depth: {_map_words(kept)}.")
    if cos is not None:
        out.append(f"Where each placement's blocks are near-identity (consecutive-layer cosine >= "
                   f"{th['cos_min']:g}, Sun et al.'s side): {_map_words(cos)}.")
    return out


STORY = story_here(__name__)

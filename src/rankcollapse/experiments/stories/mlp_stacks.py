"""Residual MLP stacks at initialisation (Everett, arXiv 2607.14018): Post-Norm against Pre-Norm, the
effective rank against depth and width.

Known from the abstract only (FOLLOWUPS.md, [abstract]): "at initialisation, Post-Norm residual MLP
stacks collapse in rank with depth and Pre-Norm ones plateau; the width needed for a full-rank branch
Jacobian follows the Marchenko-Pastur law". Every setting is ours: the simulator's MLP-only blocks
(presets ``mlp``, Post-Norm, ``X <- LN(X + GELU(X W_1) W_2)``, and ``mlp-pre``, Pre-Norm,
``X <- X + GELU(LN(X) W_1) W_2``; no attention, so tokens never interact: a collapse is every token's map
drawing the tokens together), Gaussian weights per layer, Gaussian tokens, the width d swept at N = 32
tokens.

Quantity (``dynamics.phases``): the effective rank of X(t), per network the mean over its samples, read as
``r(t) = (erank(t) - 1) / (erank(0) - 1)`` (1 at the input, 0 at rank one). What the update says before any
run: Post-Norm re-normalises ``X + f(X)`` every layer, so the tokens' correlation map of the block is iterated
as in a plain deep network (its fixed point at correlation 1 for a GELU MLP: collapse, slowed by the skip);
Pre-Norm adds ``f(LN(X))`` to a stream that keeps every earlier layer's sum, whose growing norm shrinks each
layer's relative change: a plateau. The Marchenko-Pastur statement names neither its Jacobian's normalisation,
its activation nor what "full rank" is held to: a 'not testable' row with that reason (a GELU branch's
Jacobian ``W_1 diag(GELU'(h)) W_2`` has rank ``min(d, 4d) = d`` almost surely at the simulator's width 4d).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged, not_testable_row
from rankcollapse.experiments.kit.combine import combine_parts
from rankcollapse.experiments.kit.curves import conditions
from rankcollapse.experiments.kit.data import rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.plots import label_axes, line, mean_band, panel_grid, reference_line
from rankcollapse.experiments.kit.rules.bounds import inside
from rankcollapse.experiments.kit.rules.growth import at_least, at_most, estimate, unit_curves
from rankcollapse.experiments.kit.tasks.phases import SIMULATE_PHASES
from rankcollapse.experiments.kit.thresholds import Thresholds

#: Everett's arXiv id: the story's paper.
PAPER = "2607.14018"
SRC = "Everett 2026, residual MLP stacks at initialisation (arXiv 2607.14018), [abstract]"
FIG = "mlp_stacks_rank"
WORDS = {"mlp": "Post-Norm", "mlp-pre": "Pre-Norm"}
STATEMENTS = (
    Statement(
        "postnorm_collapses",
        "At initialisation, Post-Norm residual MLP stacks collapse in rank with depth",
        SRC,
        "preset mlp, at every width d: the normalised effective rank r(L) = (erank(L) - 1) / (erank(0) - 1) "
        "at most collapse_max for sure over networks -> reproduced; above for sure at some d -> not "
        "reproduced (kit.rules.growth.at_most, Bonferroni over d)",
    ),
    Statement(
        "prenorm_plateaus",
        "At initialisation, Pre-Norm residual MLP stacks plateau in rank with depth",
        SRC,
        "preset mlp-pre, at every width d: log erank(L) - log erank(L/2) within ±plateau_tol for sure "
        "(kit.rules.bounds.inside) and r(L) at least collapse_max for sure "
        "(kit.rules.growth.at_least) -> reproduced; "
        "either on the wrong side for sure -> not reproduced (Bonferroni over d and the two)",
    ),
    Statement(
        "width_marchenko_pastur",
        "The width needed for a full-rank branch Jacobian follows the Marchenko-Pastur law",
        SRC,
        "not testable: the abstract names neither the Jacobian's normalisation, the activation, nor what "
        "'full rank' is held to (a threshold on the smallest singular value); the law's variables are "
        "unknown",
    ),
)
ARMS = (Arm("init", SIMULATE_PHASES),)
KEYS = {s.key: s for s in STATEMENTS}


class Stack:
    """One (preset, width d) of the arm: per network the effective-rank curve [U, L+1]."""

    def __init__(self, data: Data, frame: pd.DataFrame) -> None:
        self.data, self.frame = data, frame
        self.mode = str(frame["mode"].iloc[0])
        self.d = int(frame["d"].iloc[0])
        self.tokens = int(frame["tokens"].iloc[0])
        self.erank, self.unit = unit_curves(frame, "effective_rank")
        self.runs = runs_of(data, frame)

    @property
    def label(self) -> str:
        return f"{WORDS.get(self.mode, self.mode)}, d = {self.d}"

    def normalised(self) -> np.ndarray:
        """``r(t)`` per network [U, L+1]."""
        return (self.erank - 1.0) / (self.erank[:, :1] - 1.0)

    def last_half_change(self) -> np.ndarray:
        """``log erank(L) - log erank(L/2)`` per network."""
        depth = self.erank.shape[1] - 1
        return np.log(self.erank[:, -1]) - np.log(self.erank[:, depth // 2])


def _stacks(sd: StoryData) -> list[Stack]:
    data = sd.arm("init")
    if data is None:
        return []
    rows = rows_of(data, "phase_sample")
    if rows.empty:
        return []
    return [Stack(data, g) for _, g in rows.groupby(["mode", "d"], sort=True)]


def _collapses(stacks: list[Stack], t: Thresholds) -> Judgement:
    est = {s.label: estimate(s.normalised()[:, -1], s.unit, "r(L)") for s in stacks}
    return at_most(est, t["collapse_max"], t, "normalised effective rank r(L)")


def _plateaus(stacks: list[Stack], t: Thresholds) -> Judgement:
    tol = t["plateau_tol"]
    with conditions(2):
        change = inside({s.label: (estimate(s.last_half_change(), s.unit, "change"), 0) for s in stacks}, t,
                        "log erank(L) - log erank(L/2)", low=-tol, high=tol)
        kept = at_least({s.label: estimate(s.normalised()[:, -1], s.unit, "r(L)") for s in stacks},
                        t["collapse_max"], t, "normalised effective rank r(L)")
    return combine_parts([("plateau", change), ("kept", kept)])


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("mlp_stacks", sd.verdict, sd.ranges)
    out: list[Claim] = []
    stacks = _stacks(sd)
    for key, mode, rule in (("postnorm_collapses", "mlp", _collapses),
                            ("prenorm_plateaus", "mlp-pre", _plateaus)):
        mine = [s for s in stacks if s.mode == mode]
        if not mine:
            continue
        frame = pd.concat([s.frame for s in mine])
        data = mine[0].data
        out.append(claim_row("mlp_stacks", KEYS[key], data, th, judged(lambda t, m=mine, r=rule: r(m, t), th),
                             qualifier=WORDS[mode], frame=frame, runs=runs_of(data, frame), figure=FIG,
                             names=("the effective rank of X(t), normalised: r(t)", ""),
                             sample_note=sample_note(mine[0].runs, mine[0].frame)))
    why = ("the abstract names neither the branch Jacobian's normalisation, the activation, nor what 'full "
           "rank' is held to, so the law's variables are unknown; a GELU branch's Jacobian "
           "W_1 diag(GELU'(h)) W_2 has rank d almost surely at the simulator's hidden width 4d")
    out.append(not_testable_row("mlp_stacks", KEYS["width_marchenko_pastur"], sd.arm("init"), why, FIG))
    return out


def figures(sd: StoryData) -> list[FigureSpec]:
    stacks = _stacks(sd)
    if not stacks:
        return []
    fig, axes = panel_grid(3, ncols=3, w=3.7, h=3.6)
    widths = sorted({s.d for s in stacks})
    tables: list[dict[str, Any]] = []
    for ax, mode in zip(axes[:2], ("mlp", "mlp-pre"), strict=True):
        for s in (s for s in stacks if s.mode == mode):
            i = widths.index(s.d)
            r = s.normalised()
            t = np.arange(r.shape[1])
            mean = np.nanmean(r, axis=0)
            mean_band(ax, t, mean, np.nanmin(r, axis=0), np.nanmax(r, axis=0), i,
                      f"d = {s.d} (erank(0) {np.nanmean(s.erank[:, 0]):.3g})", ms=2, lw=1.0)
            tables.extend({"mode": mode, "d": s.d, "layer": int(k), "r_mean": float(mean[k]),
                           "erank_mean": float(np.nanmean(s.erank[:, k]))} for k in t)
        reference_line(ax, float(sd.verdict["collapse_max"]), color="0.5")
        ax.set_ylim(0, 1.05)
        label_axes(ax, "layer", "r(t) = (erank(t) - 1) / (erank(0) - 1)", legend=6,
                   title=f"{WORDS[mode]} residual MLP ({mode}): effective rank")
    ax = axes[2]
    for j, mode in enumerate(("mlp", "mlp-pre")):
        mine = sorted((s for s in stacks if s.mode == mode), key=lambda s: s.d)
        ds = [s.d for s in mine]
        last = [np.nanmean(s.erank[:, -1]) / min(s.d, s.tokens) for s in mine]
        line(ax, ds, last, j + 5, WORDS[mode], every=0, ms=6)
    label_axes(ax, "d", "erank(L) / min(N, d)", logx=True, base=2, legend=6,
               title="the last layer's effective rank against width")
    caption = (
        "Residual MLP stacks at initialisation (ours, the simulator's MLP-only blocks, no attention): the "
        "normalised effective rank r(t) against depth for Post-Norm (left) and Pre-Norm (middle), one colour "
        "per width d, mean and range over networks (dotted: collapse_max); right: the last layer's effective "
        "rank over its largest possible value min(N, d), against the width."
    )
    return [FigureSpec(FIG, fig, pd.DataFrame(tables), caption)]


def headlines(sd: StoryData) -> list[str]:
    stacks = _stacks(sd)
    if not stacks:
        return []
    parts = []
    for mode in ("mlp", "mlp-pre"):
        mine = sorted((s for s in stacks if s.mode == mode), key=lambda s: s.d)
        words = "; ".join(
            f"d = {s.d}: erank {np.nanmean(s.erank[:, 0]):.3g} -> {np.nanmean(s.erank[:, -1]):.3g} (r(L) "
            f"{np.nanmean(s.normalised()[:, -1]):.2f}, last-half change "
            f"{np.nanmean(s.last_half_change()):+.3f} in log)" for s in mine)
        parts.append(f"{WORDS[mode]}: {words}")
    depth = stacks[0].erank.shape[1] - 1
    tol = float(sd.verdict["plateau_tol"])
    pre = [s for s in stacks if s.mode == "mlp-pre"]
    still = [s.d for s in pre if abs(float(np.nanmean(s.last_half_change()))) > tol]
    tail = (f" Pre-Norm still moves by more than {tol:g} in log over the last half at d = "
            f"{', '.join(map(str, still))}." if still else "")
    return [f"The effective rank of X(t) over {depth} layers (mean over networks): " + ". ".join(parts) + "."
            + tail]


STORY = story_here(__name__)

"""Residual-aware rollout (Herasimchyk, Labryga, Prusina, Laue, arXiv 2602.16837): a follow-up, judged apart.

The paper disputes Wu et al. 2025 (``position_bias``): with residual connections each layer's effective
mixing is ``M(t) = lam I + (1 - lam) A(t)`` and, its abstract says, residuals prevent the collapse onto
the first token at infinite depth, while at finite depth the influence profile is U-shaped, as in
pretrained ALiBi language models. Known from the abstract only (FOLLOWUPS.md: [abstract]).

What the graph says before any run: under a causal mask ``M(t)[0, 0] = 1`` (token 0 attends only to
itself) and ``M(t)[i, 0] >= (1 - lam) eps`` with ``eps`` the smallest attention weight on an edge, so
the first-token gap ``max_i (1 - P(t)[i, 0])`` still contracts, by at most ``1 - (1 - lam) eps`` per
layer: a residual share ``lam < 1`` slows the convergence (under uniform causal attention the slowest
factor is ``lam + (1 - lam) / 2``), it does not stop it, unless the attention on token 0 itself vanishes
with depth. The runs measure which happens.

Quantity: per network (seed), the simulator's ``first_token_gap_max`` (summed over the other positions,
no cancellation) for lam in {0, 0.3, 0.6}, float32 beside float64; the last token's influence profile
``P(t)[N-1, :]`` for the figure. Rules: the kit's ``kept_stable`` (the gap keeps a level, the claim),
``local_slower`` with lam as the order (ours: residuals slow it) and ``san_collapse`` at lam = 0 (the
contrast with Wu et al.). The U shape "matching pretrained ALiBi language models" needs such models:
untested here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged, untested_row
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.data import curves_by, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.plots import MARKERS, figure
from rankcollapse.experiments.kit.tasks import SIMULATE_CURVES
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``).
PAPER = "2602.16837"
SOURCE = "Herasimchyk et al. 2026 (arXiv 2602.16837), [abstract]"
GAP = "first_token_gap_max"
LAM = "rollout_residual"
FIGURE = "residual_rollout_first_token"
STATEMENTS = (
    Statement(
        "residuals_prevent",
        "With the residual-aware mixing lam I + (1 - lam) A(t), residual connections prevent the collapse "
        "onto the first token at infinite depth: the first-token share stays below 1 for lam > 0",
        SOURCE,
        "for every lam > 0 (each dtype): the first-token gap max_i (1 - P(t)[i, 0]) 'not collapsing' over "
        "all layers and 'kept' over the last half (level within +-rate_tol, at least keep_min) -> "
        "reproduced; "
        "'collapsing', at the floor, falling or below keep_min -> not reproduced (kit.rules.kept_stable)",
    ),
    Statement(
        "residuals_slow",
        "Residuals slow the convergence to the first token, they do not stop it: the per-layer log rate of "
        "the first-token gap rises with lam (the gap contracts by at most 1 - (1 - lam) eps per layer)",
        "ours (the mask graph: M(t)[0, 0] = 1 and M(t)[i, 0] >= (1 - lam) eps)",
        "for every pair of lam values, the larger lam has the higher (slower) per-layer log rate of the gap "
        "over all layers for sure (kit.rules.local_slower with lam as the order, Bonferroni over the pairs) "
        "-> confirmed; lower for sure -> refuted",
        ours=True,
    ),
    Statement(
        "no_residual_collapses",
        "Without the residual (lam = 0) the same networks' cumulative context converges to the first token "
        "exponentially (Wu et al. 2025's causal result, the other side of the dispute)",
        "ours (re-judged on these runs; Wu et al. 2025, arXiv 2502.01951, is judged in position_bias)",
        "the gap at lam = 0 'collapsing' or at the floor in each dtype (kit.rules.san_collapse)",
        ours=True,
    ),
    Statement(
        "u_shape_alibi",
        "At finite depth the influence profile is U-shaped, matching what is measured in pretrained ALiBi "
        "language models",
        SOURCE,
        "needs pretrained ALiBi language models (e.g. BLOOM, MPT): untested here; the SAN's own profile is "
        "in the figure",
    ),
)
ARMS = (Arm("paper", SIMULATE_CURVES),)
NAMES = ("first-token gap in float32", "first-token gap in float64")
ALIBI = "pretrained ALiBi language models (e.g. BLOOM, MPT)"


def _gap_curves(frame: pd.DataFrame, dtype: str) -> dict[float, Curve]:
    """``{lam: Curve}`` of the gap in ``dtype``, pooled over networks (seeds)."""
    sub = frame[frame["dtype"] == dtype]
    return {float(k[0]): c for k, c in curves_by(sub, GAP, [LAM]).items()}


def _labelled(curves: dict[float, Curve], dtype: str) -> dict[str, Curve]:
    return {f"lam={lam:g}, {dtype}": c for lam, c in curves.items()}


def _untested_row(sd: StoryData) -> Claim:
    return untested_row("residual_rollout", STATEMENTS[3], sd.arm("paper"), ALIBI, FIGURE)


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("residual_rollout", sd.verdict, sd.ranges)
    data = sd.arm("paper")
    if data is None:
        return [_untested_row(sd)]
    frame = rows_of(data, "curve")
    by = {dt: _gap_curves(frame, dt) for dt in ("float32", "float64")}
    note = sample_note(runs_of(data, frame), frame)
    out = []
    lams = sorted({lam for cs in by.values() for lam in cs})
    residual = frame[frame[LAM] > 0]
    if any(lam > 0 for lam in lams):
        pos = {dt: _labelled({k: c for k, c in cs.items() if k > 0}, dt) for dt, cs in by.items()}
        out.append(
            claim_row(
                "residual_rollout",
                STATEMENTS[0],
                data,
                th,
                judged(lambda t: rules.kept_stable(pos["float32"], t, t["keep_min"]), th),
                judged(lambda t: rules.kept_stable(pos["float64"], t, t["keep_min"]), th),
                axes_frame=residual,
                runs=runs_of(data, residual),
                figure=FIGURE,
                sample_note=note,
                names=NAMES,
            )
        )
    if len(lams) > 1:
        radius = {f"lam={lam:g}": lam for lam in lams}
        out.append(
            claim_row(
                "residual_rollout",
                STATEMENTS[1],
                data,
                th,
                judged(lambda t: rules.local_slower(_labelled(by["float32"], "float32"), radius, t), th),
                judged(lambda t: rules.local_slower(_labelled(by["float64"], "float64"), radius, t), th),
                axes_frame=frame,
                runs=data.ok,
                figure=FIGURE,
                sample_note=note,
                names=NAMES,
            )
        )
    if 0.0 in lams:
        zero = frame[frame[LAM] == 0]
        plain = {dt: _labelled({0.0: cs[0.0]}, dt) for dt, cs in by.items() if 0.0 in cs}
        out.append(
            claim_row(
                "residual_rollout",
                STATEMENTS[2],
                data,
                th,
                judged(lambda t: rules.san_collapse(plain.get("float32", {}), t), th),
                judged(lambda t: rules.san_collapse(plain.get("float64", {}), t), th),
                axes_frame=zero,
                runs=runs_of(data, zero),
                figure=FIGURE,
                sample_note=note,
                names=NAMES,
            )
        )
    out.append(_untested_row(sd))
    return out


def _table(sd: StoryData) -> pd.DataFrame:
    """Per lam and dtype: the measured per-layer factor of the gap (over networks), the factor under
    uniform causal attention ``lam + (1 - lam) / 2`` beside it, and the gap at the last layer."""
    data = sd.arm("paper")
    if data is None:
        return pd.DataFrame()
    frame = rows_of(data, "curve")
    out = []
    for dt in ("float32", "float64"):
        for lam, c in sorted(_gap_curves(frame, dt).items()):
            r = c.rate(0, c.layers)
            out.append(
                {
                    "lam": lam,
                    "dtype": dt,
                    "factor": r.factor,
                    "log_rate": r.mean,
                    "log_rate_half_interval": r.half,
                    "uniform_causal_factor": lam + (1.0 - lam) / 2.0,
                    "gap_last_layer": float(c.mean[-1]),
                    "networks": r.n,
                }
            )
    return pd.DataFrame(out)


def _profiles(sd: StoryData) -> pd.DataFrame:
    """The last token's influence ``P(t)[N-1, j]`` (float64), mean over networks, per lam, layer, position."""
    data = sd.arm("paper")
    if data is None:
        return pd.DataFrame()
    rows = rows_of(data, "influence")
    if rows.empty:
        return rows
    rows = rows[rows["dtype"] == "float64"]
    return rows.groupby([LAM, "layer", "position"], as_index=False)["influence"].mean()


def figures(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("paper")
    if data is None:
        return []
    frame = rows_of(data, "curve")
    n = int(data.exp.base["n"])
    curves = _gap_curves(frame, "float64")
    table = _table(sd)
    prof = _profiles(sd)
    fig = figure(10, 3.8, layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    for i, (lam, c) in enumerate(sorted(curves.items())):
        t = np.arange(c.layers + 1)
        (line,) = ax.plot(
            t,
            np.maximum(c.mean, c.clamp),
            MARKERS[i % len(MARKERS)] + "-",
            ms=3,
            markevery=max(1, len(t) // 8),
            label=f"lam = {lam:g}",
        )
        ax.fill_between(
            t, np.maximum(c.lo, c.clamp), np.maximum(c.hi, c.clamp), color=line.get_color(), alpha=0.15
        )
    ax.set_yscale("log")
    ax.set_xlabel("layer t")
    ax.set_ylabel("max_i (1 - P(t)[i, 0]) (float64)")
    ax.legend(fontsize=7, title="M(t) = lam I + (1 - lam) A(t)", title_fontsize=7)
    if not prof.empty:
        depth = int(prof["layer"].max())
        shown = sorted({max(1, depth // 8), depth})
        styles = ["-", "--", "-.", ":"]
        for i, lam in enumerate(sorted(prof[LAM].unique())):
            for k, t in enumerate(shown):
                g = prof[(prof[LAM] == lam) & (prof["layer"] == t)].sort_values("position")
                ax2.plot(
                    g["position"],
                    np.maximum(g["influence"], 1e-18),
                    styles[k % len(styles)],
                    color=f"C{i}",
                    label=f"lam = {lam:g}, t = {t}",
                )
        ax2.set_yscale("log")
        ax2.set_xlabel("input position j")
        ax2.set_ylabel(f"P(t)[{n - 1}, j]: influence on the last token")
        ax2.legend(fontsize=6, ncol=2)
    caption = (
        f"Herasimchyk et al. 2026 against Wu et al. 2025: the cumulative context P(t) = M(t)...M(1) with the "
        f"residual-aware mixing M(t) = lam I + (1 - lam) A(t) of single-head causal SANs (N = {n}, Gaussian "
        "inputs and weights; the attention of a network is the same for every lam). Left: the largest "
        "first-token gap per layer (mean and range over networks, float64): it falls for every lam, more "
        "slowly the larger lam. Right: the last token's influence profile over the input positions at a few "
        "depths (mean over networks, float64; values below 1e-18, exact zeros included, drawn at 1e-18): "
        "with lam > 0 the token keeps lam^t on itself while token 0 "
        "gathers the rest, a U at finite depth that fills in towards token 0 with depth."
    )
    return [FigureSpec(FIGURE, fig, pd.concat([table, prof], ignore_index=True), caption)]


def headlines(sd: StoryData) -> list[str]:
    table = _table(sd)
    if table.empty:
        return []
    g = table[table["dtype"] == "float64"].sort_values("lam")
    per = ", ".join(
        f"lam = {r['lam']:g}: x{r['factor']:.3g}/layer (uniform causal {r['uniform_causal_factor']:.3g}), "
        f"{r['gap_last_layer']:.2g} at the last layer"
        for _, r in g.iterrows()
    )
    return [f"With residual-aware mixing the first-token gap still falls: {per} (float64, over networks)."]


STORY = story_here(__name__)

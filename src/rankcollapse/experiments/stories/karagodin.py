"""Where the norm sits (Karagodin, Ge, Polyanskiy, Rigollet, NeurIPS 2025, arXiv 2510.22026): a follow-up.

The paper studies tokens as particles on the sphere under Post-LN, Pre-LN, Mix-LN, Peri-LN, nGPT and
sqrt-scaling, and reads the clustering rate across layers; known from its abstract only (FOLLOWUPS.md:
[abstract]). The simulator's placements (``dynamics.layers``): post-LN ``X <- LN(X + A X)``, pre-LN
``X <- X + A' LN(X)``, Mix-LN (post-LN in the first round(L / 4) layers, pre-LN after: the Mix-LN paper's
25 %), Peri-LN ``X <- X + LN(A' LN(X))`` and nGPT ``X <- LN(X + alpha (LN(A X) - X))`` (alpha = 0.05, nGPT's
initial step, fixed; nGPT's own norm is x / ||x||, here the arm's LayerNorm for every placement so that
only the placement differs: ours), without and with the MLP, on identity-value attention from tokens on
the sphere (the particle model), Gaussian queries and keys per layer.

Quantity: ``mu_rel`` of the stream per network (seed). On tokens of one norm ``mu_rel^2 = (N - 1)/N (1 -
rho)`` exactly, ``rho`` the mean pairwise cosine (``metrics.mean_signed_cos``), so the companion note's
``1 - rho ~ e^(-2t)`` (post-LN) and ``~ 1/t^2`` (pre-LN) read ``mu_rel ~ e^(-t)`` and ``mu_rel ~ t^-1``.
What the update says before any run: pre-LN adds ``A' LN(X)``, of a fixed size, to a stream whose norm
grows about linearly in t, so each layer turns the tokens by about ``1/t``: a polynomial contraction;
post-LN re-normalises every layer, so each layer turns them by a fixed share: an exponential one.

Token speed (``metrics.speed.token_speed``): the mean chord each layer turns the tokens' directions by.

Rules: ``kit.rules.local_slower`` with the placement as the order (pre-LN's, Mix-LN's, nGPT's per-layer
log rate of mu_rel higher than post-LN's for sure: they resist collapse), ``kit.rules.san_collapse`` on
post-LN (exponential), ``kit.rules.power_law`` on pre-LN (slope -1 in log t over the last half);
Peri-LN "fastest early, best overall": ``kit.rules.largest`` on the token speed over the first quarter of
the layers (Peri-LN's above every other placement's for sure) and ``kit.rules.local_slower`` with Peri-LN
above every other placement (its log rate of mu_rel over all layers the highest for sure).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.combine import combine_parts, per_group
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.data import Layered, curves_by, rows_of, sample_note, window_layered
from rankcollapse.experiments.kit.plots import curve_axes, figure, quantity_label
from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``).
PAPER = "2510.22026"
SOURCE = "Karagodin et al. 2025 (arXiv 2510.22026), [abstract]"
NOTE = "Karagodin et al. 2025's companion note on contraction rates, [abstract]"
FIGURE = "karagodin_post_pre"
#: The placements in the order of the claim: pre-LN resists collapse (the larger "radius" is slower).
ORDER = {"post": 0.0, "pre": 1.0}
#: Mix-LN and nGPT against post-LN (the two share a rank: only each against post-LN is compared).
MIX_ORDER = {"post": 0.0, "mix": 1.0, "ngpt": 1.0}
#: Every placement, in the order of the figure and the table.
PLACEMENT_ORDER = ("post", "pre", "mix", "peri", "ngpt")
#: "Early": the first quarter of the layers, 1 .. max(1, L // 4) (Mix-LN's post-LN share, for symmetry).
EARLY_SHARE = 4
#: mu_rel's exponent of the pre-LN law 1 - rho ~ t^-2 (mu_rel^2 proportional to 1 - rho).
PRE_EXPONENT = -1.0
STATEMENTS = (
    Statement(
        "preln_resists",
        "Pre-LN resists deep-layer collapse better than Post-LN",
        SOURCE + " (the abstract names Mix-LN and nGPT too: see mix_ngpt_resist)",
        "per block (attention + skip; with the MLP) and dtype, pre-LN's per-layer log rate of mu_rel over "
        "all layers above post-LN's for sure, over networks (kit.rules.local_slower with the placement as "
        "the order) -> reproduced; below for sure -> not reproduced",
    ),
    Statement(
        "postln_exponential",
        "Under Post-LN the tokens contract exponentially: 1 - rho ~ e^(-2t)",
        NOTE,
        "post-LN's mu_rel (mu_rel^2 = (N - 1)/N (1 - rho) on tokens of one norm) 'collapsing' (per-layer log "
        "rate below -rate_tol for sure over all layers and the last half) or at the precision floor, per "
        "block and dtype (kit.rules.san_collapse); the constant 2 is a continuous-time rate, not judged",
    ),
    Statement(
        "preln_polynomial",
        "Under Pre-LN the tokens contract polynomially: 1 - rho ~ 1/t^2",
        NOTE,
        "pre-LN's mu_rel ~ t^-1 (1 - rho ~ t^-2): its slope in log t over the last half within -1 +- "
        "exponent_tol for sure, per block and dtype (kit.rules.power_law) -> reproduced; outside for sure -> "
        "not reproduced",
    ),
    Statement(
        "mix_ngpt_resist",
        "Mix-LN and nGPT resist deep-layer collapse better than Post-LN",
        SOURCE,
        "per block and dtype, Mix-LN's (post-LN in the first 25 % of layers, pre-LN after) and nGPT's (step "
        "0.05 on the norm's sphere, ours) per-layer log rate of mu_rel over all layers each above post-LN's "
        "for sure, over networks (kit.rules.local_slower) -> reproduced; below for sure -> not reproduced",
    ),
    Statement(
        "periln_best",
        "Peri-LN moves the tokens fastest in the early layers and is the best overall",
        SOURCE,
        "per block and dtype, two conditions: Peri-LN's token speed (mean chord a layer turns the token "
        "directions by) over the first quarter of the layers above every other placement's for sure "
        "(kit.rules.largest), and its per-layer log rate of mu_rel over all layers above every other "
        "placement's for sure ('best': resists collapse best; kit.rules.local_slower) -> reproduced; any "
        "other placement ahead for sure -> not reproduced",
    ),
)
ARMS = (Arm("paper", SIMULATE_CURVES),)
NAMES = ("mu_rel in float32 (as plotted)", "mu_rel in float64 (the mechanism)")
SPEED = "token_speed"


def block_label(mlp: object) -> str:
    """``attention + skip`` or ``with the MLP`` from a run's ``mlp`` grid value (a bool or its text)."""
    return "with the MLP" if str(mlp).lower() in ("true", "1", "1.0") else "attention + skip"


def _speeds(sd: StoryData) -> dict[tuple[str, str, str], Layered]:
    """``{(placement, block, dtype): Layered}``: the token speed's mean over the early layers
    (1 .. max(1, L // EARLY_SHARE)), per network, then over networks."""
    data = sd.arm("paper")
    frame = rows_of(data, "speed") if data is not None else None
    if frame is None or frame.empty or SPEED not in frame:
        return {}
    last = max(1, int(frame["layer"].max()) // EARLY_SHARE)
    return {(str(p), block_label(m), str(dt)): window_layered(g, SPEED, 1, last)
            for (p, m, dt), g in frame.groupby(["placement", "mlp", "dtype"], sort=False)}


def _curves(sd: StoryData) -> dict[tuple[str, str, str], Curve]:
    """``{(placement, block, dtype): Curve}`` of mu_rel, pooled over networks."""
    data = sd.arm("paper")
    if data is None:
        return {}
    frame = rows_of(data, "curve")
    return {(str(p), block_label(m), str(dt)): c for (p, m, dt), c in
            curves_by(frame, "mu_rel", ["placement", "mlp"]).items()}


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("karagodin", sd.verdict, sd.ranges)
    data = sd.arm("paper")
    out: list[Claim] = []
    curves = _curves(sd)
    if data is not None and curves:
        frame = rows_of(data, "curve")
        note = sample_note(data.ok, frame)
        blocks = sorted({b for _, b, _ in curves})

        speeds = _speeds(sd)

        def ordered(order: dict[str, float], b: str, dt: str) -> dict[str, Curve]:
            return {f"{p}, {dt}": c for (p, bb, d), c in curves.items() if bb == b and d == dt and p in order}

        def resists(t: Thresholds, dt: str, order: dict[str, float]) -> object:
            groups = {b: (lambda u, b=b: rules.local_slower(ordered(order, b, dt), order, u)) for b in blocks}
            return per_group(groups, t)

        def best(t: Thresholds, dt: str) -> object:
            placed = {p for (p, _, d) in curves if d == dt}
            order = {p: 1.0 if p == "peri" else 0.0 for p in placed}

            def both(u: Thresholds, b: str) -> object:
                early = {p: e for (p, bb, d), e in speeds.items() if bb == b and d == dt}
                return combine_parts([
                    ("fastest early", rules.largest(early, "peri", u, "token speed over the first quarter")),
                    ("best overall", rules.local_slower(ordered(order, b, dt), order, u)),
                ])

            return per_group({b: (lambda u, b=b: both(u, b)) for b in blocks}, t)

        def of(placement: str, dt: str) -> dict[str, Curve]:
            return {f"{placement}-LN, {b}, {dt}": c
                    for (p, b, d), c in curves.items() if p == placement and d == dt}

        rows = (
            (STATEMENTS[0], lambda t, dt: resists(t, dt, ORDER)),
            (STATEMENTS[1], lambda t, dt: rules.san_collapse(of("post", dt), t)),
            (STATEMENTS[2], lambda t, dt: rules.power_law(of("pre", dt), PRE_EXPONENT, t)),
            (STATEMENTS[3], lambda t, dt: resists(t, dt, MIX_ORDER)),
            (STATEMENTS[4], lambda t, dt: best(t, dt)),
        )
        for statement, rule in rows:
            out.append(
                claim_row("karagodin", statement, data, th,
                          judged(lambda t, r=rule: r(t, "float32"), th),
                          judged(lambda t, r=rule: r(t, "float64"), th),
                          axes_frame=frame, runs=data.ok, figure=FIGURE, sample_note=note, names=NAMES)
            )
    return out


def _table(sd: StoryData) -> pd.DataFrame:
    """Per placement, block and dtype: the per-layer factor of mu_rel over all layers, the slope of log
    mu_rel in log t over the last half, and mu_rel at the last layer (means over networks)."""
    out = []
    speeds = _speeds(sd)
    rank = {p: i for i, p in enumerate(PLACEMENT_ORDER)}
    for (p, b, dt), c in sorted(_curves(sd).items(), key=lambda kv: (kv[0][1], kv[0][2], rank[kv[0][0]])):
        a, e = c.layers // 2, c.layers
        r, half = c.rate(0, e), c.rate(a, e)
        early = speeds.get((p, b, dt))
        out.append({"placement": p, "block": b, "dtype": dt, "factor": r.factor, "log_rate": r.mean,
                    "slope_log_t_last_half": half.mean * (e - a) / math.log(e / a),
                    "mu_rel_last": float(c.mean[-1]),
                    "early_speed": math.nan if early is None else float(early.mean[0]), "networks": r.n})
    return pd.DataFrame(out)


#: A placement's name in the figure's legend, as the papers write it.
PLACEMENT_WORDS = {"post": "Post-LN", "pre": "Pre-LN", "mix": "Mix-LN", "peri": "Peri-LN", "ngpt": "nGPT"}


def figures(sd: StoryData) -> list[FigureSpec]:
    curves = _curves(sd)
    if not curves:
        return []
    blocks = sorted({b for _, b, _ in curves})
    fig = figure(5.2 * len(blocks), 4, layout="constrained")
    axes = fig.subplots(1, len(blocks), squeeze=False)[0]
    for ax, b in zip(axes, blocks, strict=True):
        series = [(f"{PLACEMENT_WORDS.get(p, p)} ({dt})", c) for (p, bb, dt), c in sorted(curves.items())
                  if bb == b]
        ylabel = f"{quantity_label('mu_rel')} (mean ± std over samples and networks)"
        curve_axes(ax, series, ylabel, ("float32", "float64"))
        some = next(c for (_, bb, _), c in curves.items() if bb == b)
        t = np.arange(1, some.layers + 2)
        pre = [c for (p, bb, d), c in curves.items() if p == "pre" and bb == b and d == "float64"]
        if pre:
            anchor = float(pre[0].mean[some.layers // 2]) * (some.layers // 2 + 1)
            ax.plot(t, anchor / t, "k--", lw=0.9, label="t^-1 (1 - rho ~ t^-2)")
            ax.legend(fontsize=6, ncols=2)
        ax.set_title(f"{b}", fontsize=8)
    n = int(sd.arm("paper").exp.base["tokens"]) if sd.arm("paper") is not None else 0
    caption = (
        "Karagodin et al. 2025 [abstract only]: the attention dynamics of tokens on the sphere with the "
        "LayerNorm after the residual sum (post-LN, X <- LN(X + A X)), before the sublayer (pre-LN, "
        "X <- X + A' LN(X)), both (Peri-LN, X <- X + LN(A' LN(X))), post-LN in the first quarter of the "
        "layers then pre-LN (Mix-LN), or an nGPT step X <- LN(X + 0.05 (LN(A X) - X)) (ours); identity "
        "values, Gaussian queries and keys per layer, complete mask, "
        f"N = d = {n}, without (left) and with (right) the MLP sublayer; mu_rel (mean and std over samples "
        "and networks; log-log, float32 and float64 with their precision floors). On tokens of one norm "
        "mu_rel^2 = (N - 1)/N (1 - rho): post-LN bends down to its floor (exponential: straight in t, not "
        "in log t), pre-LN runs along the dashed t^-1 line (1 - rho ~ t^-2)."
    )
    return [FigureSpec(FIGURE, fig, _table(sd), caption)]


def headlines(sd: StoryData) -> list[str]:
    table = _table(sd)
    if table.empty:
        return []
    g = table[table["dtype"] == "float64"]
    per = "; ".join(
        f"{r['placement']}-LN, {r['block']}: x{r['factor']:.3g}/layer, slope "
        f"{r['slope_log_t_last_half']:+.2f} in log t over the last half, mu_rel {r['mu_rel_last']:.2g} at "
        "the last layer"
        for _, r in g.iterrows()
    )
    return [
        f"Post-LN against pre-LN (float64, mean over networks): {per}.",
        "Why: pre-LN adds a sublayer output of fixed size to a stream whose norm grows about linearly in t, "
        "so each layer turns the tokens by about 1/t (a polynomial contraction), while post-LN re-normalises "
        "every layer and turns them by a fixed share (an exponential one).",
    ]


STORY = story_here(__name__)

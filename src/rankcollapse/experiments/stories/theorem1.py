"""Theorem 1 (paper §4.1): pure masked attention collapses exponentially when the mask has a center.

Arms (both instances that meet the theorem's hypotheses A1-A3: self-loops, bounded W_Q W_K, orthogonal
W_V so ``||W_V(0)...W_V(t)|| = 1``): ``bound`` (one mask of each kind, and a block mask without a center)
and ``radius`` (window widths 1..16: the radius against the measured rate, the paper's reading that local
masks slow collapse). Runs are the simulator's (``kit.tasks.curves.simulate_curves``); the bound check is
``rankcollapse.dynamics.theory``'s. A run that reaches the precision floor tests no rate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.curves import Curve, Rate, floor_rel
from rankcollapse.experiments.kit.data import curves_by, rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.plots import (
    LAYER_PLUS_ONE,
    band,
    curve_axes,
    label_axes,
    line,
    panel_grid,
    quantity_label,
    reference_line,
)
from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES
from rankcollapse.experiments.kit.thresholds import Thresholds

SOURCE = "paper §4.1, Thm 1"
STATEMENTS = (
    Statement(
        "collapse",
        "Pure masked attention collapses exponentially when the mask has a center node",
        SOURCE,
        "every center mask's curve 'collapsing' (per-layer log rate below -rate_tol for sure) or 'at floor' "
        "-> reproduced; any 'not collapsing' -> not reproduced (raw mu as the theorem states it; mu_rel as "
        "the mechanism)",
    ),
    Statement(
        "bound",
        "mu(X(t)) <= C (1 - eps^r)^{t/r} with eps the smallest edge weight, r the radius",
        SOURCE,
        "per run (rankcollapse.dynamics.theory): measured tail rate of mu <= the bound's rate "
        "(1 - eps^r)^{1/r} = consistent, slower = rate_exceeded, bound falling by less than 2x over the run "
        "= vacuous; a run at the precision floor tests no rate. Any rate_exceeded -> not reproduced; some "
        "consistent run that tests the rate -> reproduced; none -> inconclusive",
    ),
    Statement(
        "no_center",
        "Without a center node collapse need not happen (two disconnected blocks keep their differences)",
        SOURCE,
        "every center-less run keeps final mu_rel >= keep_min -> reproduced, else not",
    ),
    Statement(
        "radius_slows",
        "Local (sparser) masks slow collapse: the rate (1 - eps^r)^{1/r} grows with the radius r",
        f"{SOURCE} (the paper's reading of the rate)",
        "within each window family, Spearman(radius, measured per-layer log rate of mu_rel over the layers "
        "above the floor) >= min_rho -> reproduced; <= 0 in any family -> not reproduced",
    ),
)
ARMS = (Arm("bound", SIMULATE_CURVES), Arm("radius", SIMULATE_CURVES))


def _center(data: Data) -> tuple[pd.DataFrame, pd.DataFrame]:
    ok = data.ok
    radius = ok["summary.radius"] if "summary.radius" in ok else pd.Series([None] * len(ok), index=ok.index)
    return ok[radius.notna()], ok[radius.isna()]


def _curves(data: Data, runs: pd.DataFrame, q: str) -> dict[str, Curve]:
    frame = rows_of(data, "curve")
    frame = frame[frame["run_id"].isin(set(runs["run_id"]))]
    return {f"{k[1]}, {k[2]}": c for k, c in curves_by(frame, q, ["mode", "mask"]).items()}


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("theorem1", sd.verdict, sd.ranges)
    out: list[Claim] = []
    data = sd.arm("bound")
    if data is not None:
        centered, centerless = _center(data)
        frame = rows_of(data, "curve")
        note = sample_note(runs_of(data, frame), frame)
        raw, rel = _curves(data, centered, "mu"), _curves(data, centered, "mu_rel")
        if raw:
            out.append(
                claim_row(
                    "theorem1",
                    STATEMENTS[0],
                    data,
                    th,
                    judged(lambda t: rules.san_collapse(raw, t), th),
                    judged(lambda t: rules.san_collapse(rel, t), th),
                    runs=centered,
                    figure="theorem1_bound",
                    sample_note=note,
                )
            )
        checks = [
            (
                f"{r['mask']} seed {r['seed']}",
                str(r.get("summary.theory.verdict")),
                pd.isna(r.get("summary.theory.tail_rate")),
                float(r["summary.radius"]),
            )
            for _, r in centered.iterrows()
            if bool(r.get("summary.theory.applicable"))
        ]
        if checks:
            eps = centered["summary.theory.epsilon"].astype(float)
            bound = rules.bound_holds(checks)
            by_mask = "; ".join(
                f"{m} (r={int(g['summary.radius'].iloc[0])}): "
                + ", ".join(
                    f"{v} {list(g['summary.theory.verdict']).count(v)}"
                    for v in dict.fromkeys(g["summary.theory.verdict"])
                )
                for m, g in centered.groupby("mask", sort=False)
            )
            j = bound.amended(after=f"; {by_mask}; eps {eps.min():.2g}..{eps.max():.2g}")
            out.append(
                claim_row(
                    "theorem1",
                    STATEMENTS[1],
                    data,
                    th,
                    judged(lambda t: j, th),
                    runs=centered,
                    figure="theorem1_bound",
                )
            )
        if not centerless.empty:
            finals = [
                (f"{r['mask']} seed {r['seed']}", float(r["summary.final_mu_rel"]))
                for _, r in centerless.iterrows()
            ]
            out.append(
                claim_row(
                    "theorem1",
                    STATEMENTS[2],
                    data,
                    th,
                    judged(lambda t: rules.at_least(finals, t, "keep_min"), th),
                    runs=centerless,
                    figure="theorem1_bound",
                    names=("final mu_rel of the runs without a center", ""),
                )
            )
    data = sd.arm("radius")
    if data is not None:
        rel = _curves(data, data.ok, "mu_rel")
        radius = {str(m): float(g["summary.radius"].iloc[0]) for m, g in data.ok.groupby("mask")}
        families: dict[str, list[tuple[float, Rate, str]]] = {}
        for label, c in rel.items():
            mask = label.split(", ")[0]
            families.setdefault(mask.split(":")[0], []).append((radius[mask], c.rate(0, c.layers), mask))

        def rule(t: Thresholds) -> rules.Judgement:
            per = {}
            for fam, got in families.items():  # a rate is measured above the floor (kit.curves.Curve.rate)
                pts = sorted((r, v.mean) for r, v, _ in got if v.measured and math.isfinite(v.mean))
                rho = _spearman([p[0] for p in pts], [p[1] for p in pts])
                words = ", ".join(f"r={int(r)}: x{math.exp(v):.3g}/layer" for r, v in pts)
                gone = [f"r={int(r)}: {v.text()}" for r, v, _ in sorted(got, key=lambda g: g[0])
                        if not v.measured]
                if gone:
                    words += "; left out, " + ", ".join(gone)
                per[fam] = (rho, words)
            return rules.spearman_order(per, t)

        frame = rows_of(data, "curve")
        out.append(
            claim_row(
                "theorem1",
                STATEMENTS[3],
                data,
                th,
                judged(rule, th),
                figure="theorem1_radius",
                sample_note=sample_note(runs_of(data, frame), frame),
                names=("mu_rel", ""),
            )
        )
    return out


def _spearman(x: list[float], y: list[float]) -> float:
    from scipy.stats import spearmanr

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(spearmanr(np.asarray(x), np.asarray(y)).statistic)


def figures(sd: StoryData) -> list[FigureSpec]:
    out = []
    data = sd.arm("bound")
    if data is not None:
        frame = rows_of(data, "curve")
        masks = list(dict.fromkeys(frame["mask"]))
        fig, axes = panel_grid(len(masks), ncols=5, w=3.0)
        curves = curves_by(frame, "mu", ["mask"])
        radius = {str(m): g["summary.radius"].iloc[0] for m, g in data.ok.groupby("mask")}
        for ax, mask in zip(axes, masks, strict=True):
            c = next(v for k, v in curves.items() if k[0] == mask)
            band(ax, c, "measured mu (mean ± std)", 0, False)
            sub = frame[frame["mask"] == mask]
            if "bound" in sub and sub["bound"].notna().any():
                b = sub.groupby("layer")["bound"].max().sort_index()
                ax.plot(
                    b.index + 1.0, b.to_numpy(), "--", color="C3", label="Thm 1 bound C (1 - eps^r)^(t/r)"
                )
            reference_line(ax, floor_rel("float64") * float(c.mean[0]), ls="-.")  # the floor at mu(0)'s scale
            r = radius.get(mask)
            label_axes(ax, LAYER_PLUS_ONE, title=f"{mask} (r = {'none' if pd.isna(r) else int(r)})")
        label_axes(axes[0], y="mu", legend=6)
        caption = (
            "Theorem 1: measured raw mu(X(t)) (mean ± std over samples and seeds, log-log) against the bound "
            "C (1 - eps^r)^{t/r} (dashed: the smallest C covering every layer, the smallest measured eps); "
            "dash-dot: the float64 floor at mu(0)'s scale. The block mask has no center node: no bound."
        )
        out.append(FigureSpec("theorem1_bound", fig, frame, caption))
    data = sd.arm("radius")
    if data is not None:
        rel = _curves(data, data.ok, "mu_rel")
        radius = {str(m): float(g["summary.radius"].iloc[0]) for m, g in data.ok.groupby("mask")}
        fig, (ax, ax2) = panel_grid(2, ncols=2, w=5, h=3.6)
        pts = []
        for label, c in rel.items():
            mask = label.split(", ")[0]
            pts.append(
                {
                    "mask": mask,
                    "family": mask.split(":")[0],
                    "radius": radius[mask],
                    "log_rate": c.rate(0, c.layers).mean,
                }
            )
        table = pd.DataFrame(pts)
        for i, (fam, g) in enumerate(table.groupby("family", sort=False)):
            g = g.sort_values("radius")
            line(ax, g["radius"], np.exp(g["log_rate"]), i, fam, every=0, ms=6)
        label_axes(ax, "radius r", "per-layer factor of mu_rel (above the floor)", logx=True, base=2,
                   legend=7)
        ordered = sorted(rel.items(), key=lambda kv: radius[kv[0].split(", ")[0]])
        curve_axes(ax2, [(label.split(", ")[0], c) for label, c in ordered], quantity_label("mu_rel"))
        caption = (
            "Local masks slow collapse (Theorem 1's rate (1 - eps^r)^{1/r} grows with r): left, the measured "
            "per-layer factor of mu_rel over the layers above the floor against the mask radius; right, the "
            "mu_rel curves (mean ± std) with the float64 floor."
        )
        out.append(FigureSpec("theorem1_radius", fig, table, caption))
    return out


def headlines(sd: StoryData) -> list[str]:
    """Where Theorem 1's bound says something: the non-vacuous runs by radius."""
    data = sd.arm("bound")
    if data is None:
        return []
    ok = data.ok[data.ok["summary.theory.applicable"].fillna(False).astype(bool)]
    if ok.empty:
        return []
    nonvac = ok[ok["summary.theory.verdict"] != "vacuous"]
    radii = sorted({int(r) for r in nonvac["summary.radius"]}) if not nonvac.empty else []
    return [
        f"Theorem 1's bound is non-vacuous in {len(nonvac)} of {len(ok)} runs, all at radius "
        f"{', '.join(map(str, radii)) or 'none'}: at larger radii (1 - eps^r)^(t/r) falls by less than 2x "
        "over "
        f"{int(data.exp.base.get('layers', 0))} layers."
    ]


STORY = story_here(__name__)

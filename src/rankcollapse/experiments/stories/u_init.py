"""Lost in the Middle at Birth (Chowdhury, arXiv 2603.10123): the U-shape at initialisation, judged apart.

The abstract: "the U-shape is already present at initialization, before any training or positional encoding
takes effect"; multi-layer causal attention is modelled "as iterated powers of the Cesàro matrix"; causal
masking gives "a logarithmic divergence of gradient influence at the start of the prompt (the Primacy Tail)",
residual connections "an isolated O(1) anchor at the final token (the Recency Delta)", and between them
lies "a factorial dead zone of order O(1/(H-1)!), where H is the network depth"; "untrained Qwen2 and GPT-2
architectures exhibit this U-shape at Step 0, and ... it is identical with or without RoPE". A summary page
adds: the theory's density has "Spearman correlation of 0.99 with the empirical Jacobian of untrained
24-layer" models. Known from these only (FOLLOWUPS.md: [abstract]); every setting is ours.

The closed forms (``metrics.cesaro``, ours): ``C^H`` row by row in O(n H); its continuous limit
``f_H(y) = ln(1/y)^(H-1) / (H-1)!``, exactly ``1/(H-1)!`` at ``y = 1/e`` (the dead zone); with a residual
share the row of ``(lam I + (1 - lam) C)^H``. Arm ``san``: random causal SANs at an initialisation's logit
scale, their measured rollout (``metrics.rollout``, the simulator's ``influence: last``) against ``C^H``,
and the middle against ``1/(H-1)!``. Arm ``models``: the last token's input-output Jacobian of random
24-layer GPT-2 medium and Qwen2-0.5B (``models.jacobian``): the U, the Spearman correlation with the
theory profile ``C^H[n-1, :] + e_{n-1}`` (a rank statistic: it reads the order of the positions only), RoPE
removed on the same networks, and the middle against the dead zone. What the graph says before any run:
the Jacobian of a residual stack sums every path, ``sum_k`` (paths through ``k`` attention layers), so
its middle is filled by the short paths (``k = 1, 2``), not set by ``C^H``'s ``1/(H-1)!``; the SAN with a
residual share shows the same (``mixed_row``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.data import (
    Layered,
    layered,
    profile_summaries,
    rows_of,
    runs_of,
    sample_note,
)
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.plots import label_axes, line, mean_band, panel_grid, reference_line
from rankcollapse.experiments.kit.rules.bounds import inside
from rankcollapse.experiments.kit.rules.profiles import u_shaped
from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES
from rankcollapse.experiments.kit.tasks.jacobian import JACOBIAN_PROFILE
from rankcollapse.experiments.kit.tasks.rollout import (
    dead_zone,
    end_over_middle_logs,
    middle_position,
    mixed_row,
    spearman,
    theory_profile,
)
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``).
PAPER = "2603.10123"
SOURCE = "Chowdhury 2026 (arXiv 2603.10123), [abstract]"
SUMMARY = ("Chowdhury 2026 (arXiv 2603.10123), [abstract; the number 0.99 and '24-layer' from a summary "
           "page, 2nd-hand]")
LAM = "rollout_residual"
FIG_SAN, FIG_MODELS = "u_init_cesaro", "u_init_jacobian"
STATEMENTS = (
    Statement(
        "u_at_init",
        "The U-shape is already present at initialization: untrained Qwen2 and GPT-2 architectures exhibit "
        "this U-shape at Step 0",
        SOURCE,
        "per model (random 24-layer GPT-2 medium and Qwen2-0.5B, Hugging Face's init, RoPE on): the last "
        "token's input-output Jacobian profile ||d h_L[n-1] / d e_j||_F over the input positions j; its "
        "primacy arm (the mean over the first u_ends_share of the positions) and its recency arm (the last "
        "position alone: the abstract's 'isolated anchor at the final token') both above the middle's mean "
        "by more than u_log_min in log, for sure over networks -> reproduced; one arm below for sure -> not "
        "reproduced (kit.rules.profiles.u_shaped)",
    ),
    Statement(
        "spearman_jacobian",
        "The closed-form influence density agrees with the empirical Jacobian of untrained 24-layer Qwen2 "
        "and GPT-2 (Spearman correlation 0.99)",
        SUMMARY,
        "per model: the Spearman correlation over the input positions between the measured Jacobian profile "
        "and the theory profile C^H[n-1, :] + e_{n-1} (the Cesàro power of depth H = 24 and the recency "
        "delta; metrics.cesaro.theory_profile: a rank statistic, the same for every residual mixture of "
        "Cesàro powers) at least rho_min for sure over networks -> reproduced; below it for sure -> not "
        "reproduced (kit.rules.bounds.inside)",
    ),
    Statement(
        "rope_identical",
        "The U-shape at Step 0 is identical with or without RoPE",
        SOURCE,
        "Qwen2-0.5B (the model with RoPE), RoPE removed on the same weights and inputs (its rotation set to "
        "the identity): per network the largest |log| ratio of the two Jacobian profiles over the positions "
        "at most rope_log_tol for sure over networks -> reproduced; above it for sure -> not reproduced "
        "(kit.rules.bounds.inside)",
    ),
    Statement(
        "cesaro_rollout",
        "Multi-layer causal attention [at initialization] is modelled by iterated powers of the Cesàro "
        "matrix",
        SOURCE,
        "arm san (random single-head causal SANs at an initialisation's logit scale, no residual): at every "
        "kept depth H the mean over positions of |log(P(H)[n-1, j] / C^H[n-1, j])| (the measured rollout "
        "against the closed form, metrics.cesaro.cesaro_row) at most cesaro_log_tol for sure over networks "
        "-> reproduced; above it for sure at some H -> not reproduced (kit.rules.bounds.inside)",
    ),
    Statement(
        "trough_factorial",
        "Between the primacy tail and the recency delta lies a factorial dead zone of order O(1/(H-1)!), H "
        "the network depth",
        f"{SOURCE}; judged in the abstract's own model (powers of the Cesàro matrix, continuous limit)",
        "arm san without residual (the Cesàro model): at every kept depth H >= 2 the middle's density "
        "n P(H)[n-1, j] at j = n/e (where ln(1/y) = 1 and the limit density is exactly 1/(H-1)!, "
        "metrics.cesaro.dead_zone) within a factor e^(+-order_log_tol) of 1/(H-1)! for sure over networks -> "
        "reproduced; outside for sure at some H -> not reproduced (kit.rules.bounds.inside)",
    ),
    Statement(
        "trough_filled",
        "With residual paths the middle is not of order 1/(H-1)!: the short paths (through one or two "
        "attention layers) fill it, in SANs with a residual share and in the untrained models' Jacobian",
        "ours (the Jacobian of a residual stack sums the paths through every number k of attention layers; "
        "metrics.cesaro.mixed_row)",
        "the middle's log ratio to the dead zone, log(n p_mid (H-1)! / p_ref) (p_ref: 1 for a rollout, the "
        "last token's own entry for a Jacobian), above order_log_tol for sure over networks: in the SANs "
        "with lam = 0.5 at the last layer, and in each model's Jacobian at H = 24 -> confirmed; within or "
        "below it for sure -> refuted (kit.rules.bounds.inside)",
        ours=True,
    ),
)
ARMS = (Arm("san", SIMULATE_CURVES), Arm("models", JACOBIAN_PROFILE))
NAMES = ("the Jacobian profile (float32, our measurement)", "")
SAN_NAMES = ("the measured rollout of random causal SANs (float64)", "")


def ends(n: int, share: float) -> int:
    """Positions at each end of an ``n``-position profile: ``round(share n)``, at least 1, ``2 k < n``."""
    return max(1, min(round(share * n), (n - 1) // 2))


def primacy_recency(p: np.ndarray, k: int) -> dict[str, float]:
    """The U's two arms of a Jacobian profile ``p [n]`` as the abstract shapes it: ``start_over_middle_log``
    over the first ``k`` positions (the primacy tail, ``metrics.influence``) and ``end_over_middle_log`` of
    the last position alone (the recency delta, "an isolated O(1) anchor at the final token"), each
    against the mean of the middle ``k .. n-k-1``."""
    start = float(end_over_middle_logs(torch.tensor(p), k)["start_over_middle_log"])
    middle = float(np.mean(p[k : p.size - k]))
    end = math.log(float(p[-1]) / middle) if middle > 0 and p[-1] > 0 else math.nan
    return {"start_over_middle_log": start, "end_over_middle_log": end}


def _dead_zone_log(p: np.ndarray, depth: int, ref: float) -> float:
    """``log(n p[mid] (H-1)! / ref)``: the middle against the dead zone ``1/(H-1)!``."""
    n = p.size
    mid = float(p[middle_position(n)])
    if not (mid > 0 and ref > 0):
        return -math.inf
    return math.log(n * mid / ref) - math.log(dead_zone(depth))


def _san(data: Data, lam: float) -> pd.DataFrame:
    """Per run and kept layer of the san arm at ``lam``: ``cesaro_log_error``, ``dead_zone_log``, ``spearman``
    of the last token's rollout against ``(lam I + (1 - lam) C)^H``'s row."""
    rows = rows_of(data, "influence")
    if rows.empty:
        return rows
    sub = rows[rows[LAM] == lam]

    def summary(p: np.ndarray, t: int) -> dict[str, float]:
        ref = mixed_row(p.size, t, lam)
        with np.errstate(divide="ignore"):
            err = float(np.abs(np.log(p / ref)).mean()) if t > 0 and (p > 0).all() else math.nan
        return {"cesaro_log_error": err, "spearman": spearman(p, ref) if t > 0 else math.nan,
                "dead_zone_log": _dead_zone_log(p, t, 1.0) if t > 0 else math.nan}

    return profile_summaries(sub, summary, (LAM,))


def _models(data: Data, share: float, rope: bool = True) -> pd.DataFrame:
    """Per run of the models arm (one RoPE variant): ``spearman`` with the theory profile, the U's two arms
    and ``dead_zone_log`` of the last token's Jacobian profile, with the model's name and label."""
    rows = rows_of(data, "jacobian")
    if rows.empty:
        return rows
    sub = rows[rows["rope"].astype(bool) == rope] if rope is False else rows[
        rows["rope"].astype(bool) | ~rows["has_rope"].astype(bool)]

    def summary(p: np.ndarray, t: int) -> dict[str, float]:
        return {"spearman": spearman(p, theory_profile(p.size, t)), **primacy_recency(p, ends(p.size, share)),
                "dead_zone_log": _dead_zone_log(p, t, float(p[-1]))}

    out = profile_summaries(sub, summary, ("model_name", "model_label"))
    if not out.empty:
        out["pretrained"] = False
    return out


def _rope_gap(data: Data) -> pd.DataFrame:
    """Per run of a model with RoPE: the largest ``|log|`` ratio over positions of the Jacobian profile with
    RoPE against without it (``rope_gap``), one row per run ready for :func:`layered`."""
    rows = rows_of(data, "jacobian")
    if rows.empty or not rows["has_rope"].astype(bool).any():
        return pd.DataFrame()
    out = []
    for run, g in rows[rows["has_rope"].astype(bool)].groupby("run_id", sort=True):
        on = g[g["rope"].astype(bool)].sort_values("position")["influence"].to_numpy(dtype=float)
        off = g[~g["rope"].astype(bool)].sort_values("position")["influence"].to_numpy(dtype=float)
        if on.size and on.size == off.size:
            out.append({"run_id": run, "layer": 0, "samples": 1, "pretrained": False,
                        "dtype": g["dtype"].iloc[0],
                        "model_name": g["model_name"].iloc[0], "model_label": g["model_label"].iloc[0],
                        "rope_gap": float(np.abs(np.log(on / off)).max()), "rope_gap_std": math.nan})
    return pd.DataFrame(out)


def _one(frame: pd.DataFrame, column: str) -> Layered:
    """The per-run values of ``column`` (one row per run) as one estimate over networks (index 0)."""
    return layered(frame.assign(layer=0), column)


def _per_depth(frame: pd.DataFrame, column: str, first: int) -> dict[str, tuple[Layered, int]]:
    """``{"H = t": (estimate, 0)}`` of ``column`` at each kept layer ``t >= first`` (one estimate each)."""
    out = {}
    for t in sorted(frame["layer"].unique()):
        if t >= first:
            out[f"H = {int(t)}"] = (_one(frame[frame["layer"] == t], column), 0)
    return out


def _row(data: Data, th: Thresholds, k: int, rule: Callable[[Thresholds], Judgement], frame: pd.DataFrame,
         figure_name: str, names: tuple[str, str], qualifier: str = "") -> Claim:
    """One row judged on the arm's rows ``frame`` (the runs behind it, the model's label where it has one);
    the sample note counts the networks (each run one network, one value per run)."""
    runs = runs_of(data, frame) if "run_id" in frame and not frame.empty else data.ok
    per_run = pd.DataFrame({"run_id": runs["run_id"], "samples": 1, "pretrained": False})
    return claim_row("u_init", STATEMENTS[k], data, th, judged(rule, th), qualifier=qualifier,
                     frame=frame if "model_label" in frame else None, axes_frame=frame, runs=runs,
                     figure=figure_name, names=names, sample_note=sample_note(runs, per_run))


def _model_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    data = sd.arm("models")
    if data is None:
        return []
    share = th.values["u_ends_share"]
    shapes = _models(data, float(share))
    jac = rows_of(data, "jacobian")
    out = []
    for name, g in shapes.groupby("model_name", sort=False):
        label = str(g["model_label"].iloc[0])
        raw = jac[(jac["model_name"] == name) & (jac["rope"].astype(bool) | ~jac["has_rope"].astype(bool))]

        def arms(t: Thresholds, name: str = str(name), label: str = label) -> Judgement:
            s = _models(data, t["u_ends_share"])
            s = s[s["model_name"] == name]
            return u_shaped({label: (_one(s, "start_over_middle_log"), _one(s, "end_over_middle_log"))}, t,
                            layer=0)

        def rho(t: Thresholds, g: pd.DataFrame = g, label: str = label) -> Judgement:
            what = "Spearman with C^H + e_(n-1)"
            return inside({label: (_one(g, "spearman"), 0)}, t, what, low=t["rho_min"])

        out.append(_row(data, th, 0, arms, raw, FIG_MODELS, NAMES, qualifier=str(name)))
        out.append(_row(data, th, 1, rho, raw, FIG_MODELS, NAMES, qualifier=str(name)))
    gap = _rope_gap(data)
    if not gap.empty:
        label = str(gap["model_label"].iloc[0])
        raw = jac[jac["has_rope"].astype(bool)]
        what = "largest |log(with RoPE / without)|"
        out.append(_row(data, th, 2, lambda t: inside({label: (_one(gap, "rope_gap"), 0)}, t, what,
                                                      high=t["rope_log_tol"]),
                        raw, FIG_MODELS, NAMES))
    return out


def _san_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    data = sd.arm("san")
    if data is None:
        return []
    plain = _san(data, 0.0)
    rows = rows_of(data, "influence")
    raw = rows[rows[LAM] == 0.0] if not rows.empty else rows
    out = []
    if not plain.empty:
        out.append(_row(data, th, 3, lambda t: inside(_per_depth(plain, "cesaro_log_error", 1), t,
                                                      "mean |log(P(H) / C^H)|", high=t["cesaro_log_tol"]),
                        raw, FIG_SAN, SAN_NAMES))
        out.append(_row(data, th, 4, lambda t: inside(_per_depth(plain, "dead_zone_log", 2), t,
                                                      "log(n P(H)[mid] (H-1)!)", low=-t["order_log_tol"],
                                                      high=t["order_log_tol"]),
                        raw, FIG_SAN, SAN_NAMES))
    return out


def _filled_row(sd: StoryData, th: Thresholds) -> list[Claim]:
    san, models = sd.arm("san"), sd.arm("models")
    parts: dict[str, tuple[Layered, int]] = {}
    frames = []
    if san is not None:
        mixed = [lam for lam in sorted(rows_of(san, "influence")[LAM].unique()) if lam > 0]
        for lam in mixed:
            s = _san(san, float(lam))
            last = s[s["layer"] == s["layer"].max()]
            parts[f"SAN, lam = {lam:g}, H = {int(last['layer'].iloc[0])}"] = (_one(last, "dead_zone_log"), 0)
            frames.append(rows_of(san, "influence"))
    if models is not None:
        shapes = _models(models, th.values["u_ends_share"])
        for name, g in shapes.groupby("model_name", sort=False):
            parts[f"{name}, H = {int(g['layer'].iloc[0])}"] = (_one(g, "dead_zone_log"), 0)
    if not parts:
        return []
    data = san if san is not None else models
    assert data is not None
    return [claim_row("u_init", STATEMENTS[5], data, th,
                      judged(lambda t: inside(parts, t, "log(n p_mid (H-1)! / p_ref)",
                                              low=t["order_log_tol"]), th),
                      runs=pd.concat([d.ok for d in (san, models) if d is not None], ignore_index=True),
                      figure=FIG_SAN, names=("the middle against the dead zone 1/(H-1)!", ""),
                      sample_note="SAN and model networks; intervals over the networks of each condition")]


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("u_init", sd.verdict, sd.ranges)
    return [*_model_rows(sd, th), *_san_rows(sd, th), *_filled_row(sd, th)]


def _san_figure(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("san")
    rows = rows_of(data, "influence") if data is not None else pd.DataFrame()
    if data is None or rows.empty:
        return []
    n = int(data.exp.base["tokens"])
    prof = rows.groupby([LAM, "layer", "position"], as_index=False)["influence"].agg(["mean", "min", "max"])
    fig, (ax1, ax2) = panel_grid(2, ncols=2, w=5.5, h=4)
    depths = [t for t in sorted(prof["layer"].unique()) if t > 0]
    for i, t in enumerate(depths):
        g = prof[(prof[LAM] == 0.0) & (prof["layer"] == t)].sort_values("position")
        line(ax1, g["position"], g["mean"], i, f"H = {t}: measured", marker=False, lw=1.2)
        line(ax1, g["position"], mixed_row(n, int(t)), i, style=1, marker=False, lw=0.8)
    reference_line(ax1, middle_position(n), vertical=True, color="0.5")
    label_axes(ax1, "input position j", f"P(H)[{n - 1}, j] (lam = 0; dashed: C^H)", logy=True, legend=6)
    table = []
    for k, lam in enumerate(sorted(prof[LAM].unique())):
        s = _san(data, float(lam))
        s = s[s["layer"] > 0].groupby("layer")["dead_zone_log"].agg(["mean", "min", "max"]).reset_index()
        hs = s["layer"].to_numpy()
        mid = [dead_zone(int(h)) * math.exp(v) for h, v in zip(hs, s["mean"], strict=True)]
        line(ax2, hs, mid, k, f"measured n P(H)[mid], lam = {lam:g}", every=0, ms=6)
        closed = [n * mixed_row(n, int(h), float(lam))[middle_position(n)] for h in hs]
        ax2.plot(hs, closed, "x", color=f"C{k}", ms=7, label=f"closed form, lam = {lam:g}")
        table.append(s.assign(lam=lam, closed_form=closed))
    hs = np.arange(1, int(max(depths)) + 1)
    ax2.plot(hs, [dead_zone(int(h)) for h in hs], "k:", label="1/(H-1)!")
    label_axes(ax2, "depth H", f"middle density at j = n/e (n = {n})", logy=True, legend=6)
    caption = (
        "Chowdhury 2026's model in random causal SANs at an initialisation's logit scale (N = "
        f"{n}, mean over networks, float64). Left: the last token's rollout P(H)[N-1, :] (solid) against the "
        "Cesàro power C^H (dashed): the primacy tail, no recency without a residual. Right: the middle's "
        "density N P(H)[N-1, N/e] against the dead zone 1/(H-1)! (dotted) and the closed forms (crosses): "
        "without a residual it falls factorially; with lam = 0.5 (M = lam I + (1 - lam) A) the short paths "
        "fill it."
    )
    data_out = pd.concat([prof.assign(kind="profile"), *[t.assign(kind="middle") for t in table]],
                         ignore_index=True)
    return [FigureSpec(FIG_SAN, fig, data_out, caption)]


def _models_figure(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("models")
    rows = rows_of(data, "jacobian") if data is not None else pd.DataFrame()
    if data is None or rows.empty:
        return []
    fig, (ax1, ax2) = panel_grid(2, ncols=2, w=5.5, h=4)
    norm = []
    for (run, rope), g in rows.groupby(["run_id", "rope"], sort=False):
        g = g.sort_values("position")
        p = g["influence"].to_numpy(dtype=float)
        norm.append(pd.DataFrame({"run_id": run, "rope": bool(rope), "model_name": g["model_name"].iloc[0],
                                  "model_label": g["model_label"].iloc[0], "position": g["position"],
                                  "relative": p / p[-1], "layer": g["layer"]}))
    rel = pd.concat(norm, ignore_index=True)
    summary = rel.groupby(["model_label", "rope", "position"], as_index=False)["relative"].agg(
        ["mean", "min", "max"])
    for i, ((label, rope), g) in enumerate(summary.groupby(["model_label", "rope"], sort=False)):
        own = bool(rope) or "GPT" in str(label)  # a model's own positions solid; RoPE removed dashed
        mean_band(ax1, g["position"], g["mean"], g["min"], g["max"], i,
                  f"{label}{'' if own else ', RoPE removed'}", style=0 if own else 1, ms=2.5, every=0,
                  alpha=0.12)
    n = int(rows["position"].max()) + 1
    depth = int(rows["layer"].iloc[0])
    theory = theory_profile(n, depth)
    label_axes(ax1, "input position j", "||d h_L[n-1] / d e_j||_F, relative to j = n - 1", logy=True)
    twin = ax1.twinx()  # the theory spans ~40 decades: on its own axis, so the models' U stays visible
    (drawn,) = twin.plot(np.arange(n), theory / theory[-1], "k:", lw=0.9,
                         label=f"C^{depth}[n-1, :] + e_(n-1) (right axis)")
    label_axes(twin, None, f"C^{depth}[n-1, j] + e_(n-1), relative to j = n - 1", logy=True)
    ax1.legend(handles=[*ax1.get_legend_handles_labels()[0], drawn], fontsize=6, loc="upper center")
    gap = []
    for run, g in rows[rows["has_rope"].astype(bool)].groupby("run_id", sort=False):
        on = g[g["rope"].astype(bool)].sort_values("position")["influence"].to_numpy(dtype=float)
        off = g[~g["rope"].astype(bool)].sort_values("position")["influence"].to_numpy(dtype=float)
        if on.size and on.size == off.size:
            ax2.plot(np.arange(on.size), on / off, color="0.4", lw=0.7, alpha=0.7)
            gap.append(pd.DataFrame({"run_id": run, "position": np.arange(on.size), "ratio": on / off}))
    reference_line(ax2, 1.0, color="k", ls="-", lw=0.6)
    label_axes(ax2, "input position j", "Jacobian profile with RoPE / without (Qwen2, per network)")
    caption = (
        "Chowdhury 2026's U at initialisation in random 24-layer GPT-2 medium and Qwen2-0.5B (Hugging Face's "
        f"init, n = {n} random tokens, one network per seed). Left: the last token's input-output Jacobian "
        "profile relative to its own entry (mean and range over networks; Frobenius norms estimated with "
        "orthonormal probes), against the theory profile (dotted, same normalisation, on the right axis: it "
        "falls ~40 decades where the models' profiles fall by less than one; only its rank order is "
        "compared). Right: Qwen2 with RoPE over without RoPE, same weights and inputs."
    )
    out = pd.concat([summary.assign(kind="relative"), *[g.assign(kind="rope_ratio") for g in gap]],
                    ignore_index=True)
    return [FigureSpec(FIG_MODELS, fig, out, caption)]


def figures(sd: StoryData) -> list[FigureSpec]:
    return [*_san_figure(sd), *_models_figure(sd)]


def headlines(sd: StoryData) -> list[str]:
    th = Thresholds.of("u_init", sd.verdict, sd.ranges)
    out = []
    san = sd.arm("san")
    if san is not None:
        plain = _san(san, 0.0)
        last = int(plain["layer"].max())
        at = plain[plain["layer"] == last]
        err = at["cesaro_log_error"].mean()
        dz = at["dead_zone_log"].mean()
        bits = ("In random causal SANs at an initialisation's logit scale the rollout follows C^H: mean |log "
                f"ratio| {err:.3g} at H = {last}; the middle is x{math.exp(dz):.3g} the dead zone "
                f"1/{last - 1}! there")
        mixed = [lam for lam in sorted(rows_of(san, "influence")[LAM].unique()) if lam > 0]
        for lam in mixed:
            s = _san(san, float(lam))
            v = s[s["layer"] == last]["dead_zone_log"].mean()
            bits += (f"; with a residual share lam = {lam:g} it is x{math.exp(v):.3g} "
                     f"(10^{v / math.log(10):.1f})")
        out.append(bits + " (mean over networks).")
    models = sd.arm("models")
    if models is not None:
        shapes = _models(models, th.values["u_ends_share"])
        parts = []
        for _name, g in shapes.groupby("model_name", sort=False):
            parts.append(
                f"{g['model_label'].iloc[0]}: start x{math.exp(g['start_over_middle_log'].mean()):.3g} and "
                "end "
                f"x{math.exp(g['end_over_middle_log'].mean()):.3g} the middle, Spearman "
                f"{g['spearman'].mean():.3g} "
                f"with C^H + e_(n-1), middle 10^{g['dead_zone_log'].mean() / math.log(10):.1f} x the dead "
                "zone"
            )
        gap = _rope_gap(models)
        tail = (f"; RoPE removed moves Qwen2's profile by at most x{math.exp(gap['rope_gap'].mean()):.3g} "
                "(mean over networks of the largest ratio)") if not gap.empty else ""
        out.append("The last token's Jacobian at initialisation (mean over networks): " + "; ".join(parts)
                   + tail + ".")
    return out


STORY = story_here(__name__)

"""Equilibria of every rank (paper §4.3.2, Thm 3): stable fixed points of the LayerNorm dynamics.

Task ``equilibrium_rank``: for each rank k, the construction of ``rankcollapse.equilibria`` and its
verification (residual, numerical rank, tangent spectral radius, share of nearby inputs that
converge). Claim: every rank has a verified, stable construction with a measured basin. Figure:
verified rank, spectral radius and basin share per k.
"""

from __future__ import annotations

from typing import Any

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
    combine_verdicts,
    fmt,
)
from rankcollapse.experiments.plotting import empty, pyplot

SOURCE = "ours (designed stable equilibria, one W_V per rank; the paper's Thm 3 is the story theorem3)"
FIGURE = "equilibria_ranks"


def equilibrium_rank(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """A stable equilibrium of rank ``k`` of the LayerNorm dynamics (``rankcollapse.equilibria``).

    ``construct_rank_k(n, d, k)`` gives a value matrix, mask and target ``X*``; ``verify_equilibrium``
    measures its fixed-point residual, numerical rank, tangent spectral radius (stable iff < 1) and the
    share of ``samples`` inputs from an open neighbourhood (noise scale ``radius``; ``auto`` = the
    construction's own ``basin_radius``) that converge to it in ``steps`` layers.
    A rank with no construction gives one row with ``constructed = False`` and the reason.
    """
    import torch

    from rankcollapse.equilibria import construct_rank_k, verify_equilibrium

    n, d, k = int(params["n"]), int(params["d"]), int(params["k"])
    try:
        c = construct_rank_k(n, d, k)
    except RankCollapseError as err:
        return RunOutput([{"k": k, "constructed": False, "reason": str(err)}], {"constructed": False})
    gen = torch.Generator().manual_seed(int(params.get("seed", 0)))
    radius = c.basin_radius if params["radius"] == "auto" else float(params["radius"])
    init = c.neighbourhood_inputs(int(params["samples"]), radius, gen)
    eq = verify_equilibrium(
        c.x, c.w_v, c.mask_tensor(), c.w_qk, c.d_qk, steps=int(params["steps"]), init=init
    )
    on_layer(int(params["steps"]))
    row = {
        "k": k,
        "constructed": True,
        "reason": "",
        "rank": eq.rank,
        "residual": eq.residual,
        "spectral_radius": eq.spectral_radius,
        "stable": eq.stable,
        "basin_fraction": eq.basin_fraction,
        "basin_ci_low": eq.basin_ci[0],
        "basin_ci_high": eq.basin_ci[1],
        "basin_radius": radius,
        "mask": c.mask,
    }
    return RunOutput([row], {k2: v for k2, v in row.items() if k2 != "k"})


def rank_verdict(row: pd.Series, residual_max: float) -> str:
    """One rank: no construction -> inconclusive; a failed check -> not reproduced; verified and
    stable but no measured basin (CI lower end 0) -> inconclusive; else reproduced."""
    if not bool(row["constructed"]):
        return INCONCLUSIVE
    good = (
        float(row["residual"]) <= residual_max and int(row["rank"]) == int(row["k"]) and bool(row["stable"])
    )
    if not good:
        return NOT_REPRODUCED
    return REPRODUCED if float(row["basin_ci_low"]) > 0 else INCONCLUSIVE


def claims(data: Data) -> list[Claim]:
    stmt = (
        "With suitable W_V, the LayerNorm dynamics have stable equilibria of every rank 1..min(N, d), each "
        "attracting a positive-measure set of inputs"
    )
    res_max = data.v("residual_max", 1e-10)
    rule = (
        f"every rank k has a construction whose X* has residual <= {res_max}, numerical rank k and tangent "
        "spectral radius < 1 (locally asymptotically stable, so an open set of inputs converges to it) -> "
        "reproduced; a constructed one failing a check -> not reproduced; a rank without a construction -> "
        "inconclusive. The share of sampled nearby inputs that converge is reported as evidence (0 means "
        "the basin is smaller than the sampling radius)"
    )
    ok = data.ok
    if ok.empty:
        return [data.no_data("eq.every_rank", stmt, SOURCE, rule, FIGURE)]
    rows = data.table.merge(ok[["run_id"]], on="run_id")
    rows = rows.sort_values("k") if "k" in rows else rows.iloc[0:0]  # finished runs without rows
    parts, verdicts = [], []
    for _, r in rows.iterrows():
        k = int(r["k"])
        verdicts.append(rank_verdict(r, res_max))
        if not bool(r["constructed"]):
            parts.append(f"k={k}: no construction")
            continue
        radius = r["basin_radius"] if "basin_radius" in r else data.exp.base.get("radius")
        parts.append(
            f"k={k}: rank {int(r['rank'])}, residual {fmt(float(r['residual']))}, spectral radius "
            f"{fmt(float(r['spectral_radius']), 3)}, share of inputs within noise {fmt(float(radius))} "
            f"converging {fmt(float(r['basin_fraction']))} "
            f"[{fmt(float(r['basin_ci_low']))}, {fmt(float(r['basin_ci_high']))}]"
        )
    n, d = data.exp.base.get("n"), data.exp.base.get("d")
    evidence = f"N={n}, d={d}: " + ("; ".join(parts) or "no rank measured")
    return [
        data.claim("eq.every_rank", stmt, SOURCE, rule, evidence, combine_verdicts(verdicts), figure=FIGURE)
    ]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "Stable equilibria of every rank (LayerNorm dynamics): for each target rank k, the verified "
        "numerical rank of the constructed X*, the tangent spectral radius (stable below 1) and the "
        "share of nearby inputs converging to X* (Wilson 95% interval); 'none' = no construction."
    )
    ok = data.ok
    if ok.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    rows = data.table.merge(ok[["run_id"]], on="run_id").sort_values("k").reset_index(drop=True)
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), constrained_layout=True)
    built = rows[rows["constructed"].astype(bool)]
    ks = rows["k"].astype(int).tolist()
    axes[0].bar(built["k"].astype(int), built["rank"].astype(float), color="C0")
    axes[0].plot(ks, ks, "k_", ms=20, label="target rank k")
    axes[1].bar(built["k"].astype(int), built["spectral_radius"].astype(float), color="C2")
    axes[1].axhline(1.0, color="C3", ls="--", lw=0.8)
    frac = built["basin_fraction"].astype(float)
    err = [frac - built["basin_ci_low"].astype(float), built["basin_ci_high"].astype(float) - frac]
    axes[2].bar(built["k"].astype(int), frac, yerr=err, color="C1", capsize=3)
    for ax, title in zip(
        axes, ("verified rank", "tangent spectral radius", "share of nearby inputs"), strict=True
    ):
        ax.set_xticks(ks)
        ax.set_xlim(min(ks) - 0.6, max(ks) + 0.6)
        ax.set_xlabel("target rank k")
        ax.set_title(title)
        for k in rows[~rows["constructed"].astype(bool)]["k"].astype(int):
            ax.annotate(
                "none", (k, 0.02), ha="center", fontsize=8, color="0.4", xycoords=("data", "axes fraction")
            )
    axes[0].legend(fontsize=7)
    return [FigureSpec(FIGURE, fig, rows, caption)]


STORY = Story(name="equilibria_ranks", task=equilibrium_rank, claims=claims, figures=figures)

"""The paper's figures drawn from the run tables: each saved as PNG and PDF with its data as CSV.

One function per experiment, ``(data) -> list[FigureSpec]``. Curves of mu against depth are
drawn on log-log axes against ``t + 1`` (so the input X(0) sits at 1); the precision floor of each
dtype (``FLOOR_FACTOR * eps``) is a dotted line and points at the floor are hollow markers, so a
curve that "stops falling" there reads as collapsed, not as stable. Curves are the median
over seeds of the per-run batch-mean mu_rel (the CSVs hold min and max too).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.analysis import floor_rel
from rankcollapse.experiments.claims import Data


@dataclass
class FigureSpec:
    """A drawn figure before saving: file stem, matplotlib figure, its data, a caption."""

    name: str
    figure: Any
    data: pd.DataFrame
    caption: str


@dataclass
class FigureFile:
    """A saved figure: paths of PNG, PDF, CSV and its caption."""

    name: str
    experiment: str
    png: Path
    pdf: Path
    csv: Path
    caption: str


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "figure.dpi": 110,
            "savefig.bbox": "tight",
        }
    )
    return plt


def save_figure(spec: FigureSpec, out_dir: Path, experiment: str) -> FigureFile:
    """Write ``<name>.png``, ``<name>.pdf`` and ``<name>.csv`` into ``out_dir``; close the figure."""
    plt = _plt()
    out_dir.mkdir(parents=True, exist_ok=True)
    png, pdf, csv = (out_dir / f"{spec.name}.{ext}" for ext in ("png", "pdf", "csv"))
    for path in (png, pdf):
        tmp = path.with_name(f".{path.name}.tmp")
        spec.figure.savefig(tmp, format=path.suffix[1:], dpi=130)
        tmp.replace(path)
    tmp = csv.with_name(f".{csv.name}.tmp")
    spec.data.to_csv(tmp, index=False)
    tmp.replace(csv)
    plt.close(spec.figure)
    return FigureFile(spec.name, experiment, png, pdf, csv, spec.caption)


def _curves(data: Data, by: list[str], column: str = "mu_rel") -> pd.DataFrame:
    """Per group of ``by`` and layer: median over runs of ``column`` (and min/max), in grid order."""
    ok = data.ok
    if ok.empty:
        return pd.DataFrame(columns=[*by, "layer", column])
    rows = data.table.merge(ok[["run_id"]], on="run_id")
    keys = [k for k in by if k in rows]
    rows = rows.assign(**{column: rows[column].astype(float)})
    agg = rows.groupby([*keys, "layer"], sort=False).agg(
        value=(column, "median"), lo=(column, "min"), hi=(column, "max"), runs=("run_id", "nunique")
    )
    agg = agg.reset_index().rename(columns={"value": column, "lo": f"{column}_min", "hi": f"{column}_max"})
    for key in keys:  # the order of the experiment's grid, not of completion
        order = {v: i for i, v in enumerate(data.exp.grid.get(key, []))}
        agg["_o_" + key] = agg[key].map(lambda v, o=order: o.get(v, len(o)))
    sort = [f"_o_{k}" for k in keys] + ["layer"]
    agg = agg.sort_values(sort, kind="stable").drop(columns=[f"_o_{k}" for k in keys])
    return agg.reset_index(drop=True)


def _loglog(ax: Any, t: Any, y: Any, floor: float | None, **kw: Any) -> None:
    t = np.asarray(t, dtype=float) + 1.0
    y = np.asarray(y, dtype=float)
    if floor is not None:  # values under the floor are rounding noise (even exact 0): draw them on it
        y = np.maximum(y, floor)
    line = ax.plot(t, y, **kw)[0]
    if floor is not None:
        at = y <= floor * (1 + 1e-9)
        if at.any():
            ax.plot(t[at], y[at], "o", mfc="none", mec=line.get_color(), ms=3, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")


def _floor_lines(ax: Any, dtypes: list[str]) -> None:
    styles = {"float32": ":", "float64": "-."}
    for dtype in dtypes:
        f = floor_rel(dtype)
        ax.axhline(f, color="0.4", lw=0.8, ls=styles.get(dtype, ":"))
        ax.annotate(
            f"{dtype} floor",
            (1.02, f),
            xycoords=("axes fraction", "data"),
            fontsize=7,
            va="center",
            color="0.35",
            annotation_clip=False,
        )


def _empty(name: str, caption: str, why: str) -> FigureSpec:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 1.6))
    ax.axis("off")
    ax.text(0.5, 0.5, f"no data: {why}", ha="center", va="center")
    return FigureSpec(name, fig, pd.DataFrame(), caption)


def _mu_rel_panels(
    curves: pd.DataFrame, panel: str, series: str, dtype: str, label: Callable[[Any], str], sort: bool
) -> Any:
    """One log-log ``mu_rel`` panel per value of ``panel``, one curve per value of ``series``."""
    keys = list(dict.fromkeys(curves[panel]))
    fig, axes = _grid(len(keys))
    for ax, key in zip(axes, keys, strict=True):
        sub = curves[curves[panel] == key]
        for i, (value, c) in enumerate(sub.groupby(series, sort=sort)):
            _loglog(ax, c["layer"], c["mu_rel"], floor_rel(dtype), color=f"C{i}", label=label(value))
        _floor_lines(ax, [dtype])
        ax.set_title(str(key))
        ax.set_xlabel("layer t + 1")
        ax.set_ylabel("mu_rel")
    axes[0].legend(fontsize=7, loc="lower left")
    return fig


def _grid(n: int, ncols: int = 4, w: float = 3.3, h: float = 2.8) -> tuple[Any, list[Any]]:
    plt = _plt()
    ncols = min(ncols, max(n, 1))
    nrows = math.ceil(max(n, 1) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False, constrained_layout=True
    )
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.axis("off")
    return fig, flat[:n]


def fig2_random(data: Data) -> list[FigureSpec]:
    name, caption = (
        "fig2_random",
        (
            "Fig. 2 (random weights): relative mu(X(t)) / ||X(t)||_F against depth t+1, log-log; "
            "solid = float64, dashed = float32; blue = pure attention, orange = + LayerNorm; "
            "dotted/dash-dot lines = float32/float64 precision floors, hollow markers = at the floor "
            "(collapsed, not stable). Median over seeds; values under the floor drawn on it."
        ),
    )
    curves = _curves(data, ["mask", "preset", "dtype"])
    if curves.empty:
        return [_empty(name, caption, data.failures() or "no runs")]
    masks = list(dict.fromkeys(curves["mask"]))
    fig, axes = _grid(len(masks))
    colors = {"attn": "C0"}
    for ax, mask in zip(axes, masks, strict=True):
        sub = curves[curves["mask"] == mask]
        for (preset, dtype), c in sub.groupby(["preset", "dtype"], sort=False):
            _loglog(
                ax,
                c["layer"],
                c["mu_rel"],
                floor_rel(dtype),
                color=colors.get(preset, "C1"),
                ls="-" if dtype == "float64" else "--",
                lw=1.3,
                label=f"{preset}, {dtype}",
            )
        _floor_lines(ax, sorted(set(sub["dtype"])))
        ax.set_title(mask)
        ax.set_xlabel("layer t + 1")
        ax.set_ylabel("mu_rel")
    axes[0].legend(fontsize=7, loc="lower left")
    return [FigureSpec(name, fig, curves, caption)]


def fig3_temperature(data: Data) -> list[FigureSpec]:
    name, caption = (
        "fig3_temperature",
        (
            "Fig. 3: mu_rel against depth (log-log) for d_QK in {1/64, 1, 64} (logits / sqrt(d_QK); "
            "smaller = sharper attention), pure attention, float64; floor dash-dot, hollow markers = at "
            "the floor."
        ),
    )
    curves = _curves(data, ["mask", "temperature"])
    if curves.empty:
        return [_empty(name, caption, data.failures() or "no runs")]
    dtype = str(data.exp.base.get("dtype", "float64"))

    def label(temp: float) -> str:
        return "d_QK = " + ("1/64" if abs(temp - 1 / 64) < 1e-12 else f"{temp:g}")

    fig = _mu_rel_panels(curves, "mask", "temperature", dtype, label, sort=True)
    return [FigureSpec(name, fig, curves, caption)]


def theorem1(data: Data) -> list[FigureSpec]:
    name, caption = (
        "theorem1_bound",
        (
            "Theorem 1: measured mu(X(t)) (solid, median over seeds, band = min..max) against "
            "the bound C (1 - eps^r)^{t/(2r)} (dashed, largest C and smallest measured eps), linear depth, "
            "log mu. Block masks have no center node: no bound."
        ),
    )
    ok = data.ok
    if ok.empty:
        return [_empty(name, caption, data.failures() or "no runs")]
    curves = _curves(data, ["mask"], "mu")
    if "bound" in data.table:
        b = (
            data.table.merge(ok[["run_id"]], on="run_id")
            .groupby(["mask", "layer"], sort=False)["bound"]
            .max()
        )
        curves = curves.merge(b.reset_index(), on=["mask", "layer"], how="left")
    masks = list(dict.fromkeys(curves["mask"]))
    fig, axes = _grid(len(masks), ncols=5, w=3.0)
    floor = floor_rel(str(data.exp.base.get("dtype", "float64")))
    for ax, mask in zip(axes, masks, strict=True):
        c = curves[curves["mask"] == mask]
        low = floor * float(c["mu"].iloc[0])  # the floor of mu at this scale; lower values drawn on it
        ax.plot(c["layer"], np.maximum(c["mu"], low), color="C0", label="measured mu")
        ax.fill_between(
            c["layer"], np.maximum(c["mu_min"], low), np.maximum(c["mu_max"], low), color="C0", alpha=0.2
        )
        if "bound" in c and c["bound"].notna().any():
            ax.plot(c["layer"], c["bound"], "--", color="C3", label="Thm 1 bound")
        ax.axhline(low, color="0.4", ls="-.", lw=0.8)
        ax.set_yscale("log")
        radius = ok[ok["mask"] == mask]["summary.radius"].iloc[0]
        ax.set_title(f"{mask} (r = {'none' if pd.isna(radius) else int(radius)})")
        ax.set_xlabel("layer t")
    axes[0].set_ylabel("mu(X(t))")
    axes[0].legend(fontsize=7)
    return [FigureSpec(name, fig, curves, caption)]


def radius_rate(data: Data) -> list[FigureSpec]:
    name, caption = (
        "radius_rate",
        (
            "Local masks slow collapse: fitted per-layer collapse factor exp(slope of log mu_rel over the "
            "pre-floor layers) against the mask radius r, one point per run; the bound's factor "
            "(1 - eps^r)^{1/(2r)} is drawn hollow. Right: the mu_rel curves (log-log)."
        ),
    )
    ok = data.ok
    if ok.empty:
        return [_empty(name, caption, data.failures() or "no runs")]
    plt = _plt()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True)
    pts = ok[
        ["run_id", "mask", "seed", "summary.radius", "summary.fit_log_rate", "summary.theory.rate"]
    ].copy()
    pts.columns = ["run_id", "mask", "seed", "radius", "fit_log_rate", "bound_factor"]
    pts["family"] = pts["mask"].str.split(":").str[0]
    pts["fit_factor"] = np.exp(pts["fit_log_rate"].astype(float))
    for i, (fam, g) in enumerate(pts.groupby("family", sort=False)):
        ax.plot(g["radius"], g["fit_factor"], "o", color=f"C{i}", label=f"{fam} (measured)")
        ax.plot(g["radius"], g["bound_factor"], "o", mfc="none", color=f"C{i}", label=f"{fam} (bound)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("radius r")
    ax.set_ylabel("per-layer factor of mu_rel")
    ax.legend(fontsize=7)
    curves = _curves(data, ["mask"])
    dtype = str(data.exp.base.get("dtype", "float64"))
    cmap = plt.get_cmap("viridis")
    masks = list(dict.fromkeys(curves["mask"]))
    for i, mask in enumerate(masks):
        c = curves[curves["mask"] == mask]
        _loglog(
            ax2,
            c["layer"],
            c["mu_rel"],
            floor_rel(dtype),
            color=cmap(i / max(1, len(masks) - 1)),
            ls="-" if mask.startswith("window") else "--",
            lw=1,
            label=mask,
        )
    _floor_lines(ax2, [dtype])
    ax2.set_xlabel("layer t + 1")
    ax2.set_ylabel("mu_rel")
    ax2.legend(fontsize=6, ncol=2)
    return [FigureSpec(name, fig, pts, caption)]


def ln_orthogonal(data: Data) -> list[FigureSpec]:
    name, caption = (
        "ln_orthogonal",
        "LayerNorm (tokens on the sphere) + orthogonal W_V, inputs in one open "
        "hemisphere: mu_rel against depth (linear t, log mu); floor dash-dot.",
    )
    curves = _curves(data, ["mask"])
    if curves.empty:
        return [_empty(name, caption, data.failures() or "no runs")]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.4), constrained_layout=True)
    dtype = str(data.exp.base.get("dtype", "float64"))
    for mask, c in curves.groupby("mask", sort=False):
        ax.plot(c["layer"], c["mu_rel"], label=mask)
    ax.axhline(floor_rel(dtype), color="0.4", ls="-.", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("layer t")
    ax.set_ylabel("mu_rel")
    ax.legend(fontsize=7)
    return [FigureSpec(name, fig, curves, caption)]


def fig2_models(data: Data) -> list[FigureSpec]:
    name, caption = (
        "fig2_models",
        (
            "Fig. 2 (models): mu_rel against depth t+1 (log-log) in pretrained (minilm, smollm2) and "
            "randomly initialised transformers, their own weights cycled to the depth; attn = attention "
            "sublayers only, attn+ln = + the model's LayerNorm, full = the real blocks. float32 floor "
            "dotted."
        ),
    )
    curves = _curves(data, ["model", "mode"])
    if curves.empty:
        return [_empty(name, caption, data.failures() or "no runs")]
    dtype = {"f32": "float32", "f64": "float64"}.get(str(data.exp.base.get("dtype", "f32")), "float32")
    fig = _mu_rel_panels(curves, "model", "mode", dtype, str, sort=False)
    return [FigureSpec(name, fig, curves, caption)]


def fig4_geometry(data: Data) -> list[FigureSpec]:
    name, caption = (
        "fig4_geometry",
        (
            "Fig. 4: token geometry of pretrained models against depth (0 = embeddings): share of "
            "samples whose token matrix has full rank min(N, d), smallest singular value, mean |cosine| "
            "over token pairs (dashed: the isotropic-Gaussian value sqrt(2/(pi d)))."
        ),
    )
    ok = data.ok
    if ok.empty:
        return [_empty(name, caption, data.failures() or "no runs")]
    from rankcollapse.models.plot import PANELS

    rows = data.table.merge(ok[["run_id"]], on="run_id")
    keys = [k for k, _, _ in PANELS]
    curves = rows.groupby(["model", "layer"], sort=False)[keys].mean().reset_index()
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3), constrained_layout=True)
    for i, (model, c) in enumerate(curves.groupby("model", sort=False)):
        for ax, (key, label, logy) in zip(axes, PANELS, strict=True):
            ax.plot(c["layer"], c[key], marker="o", ms=2.5, color=f"C{i}", label=model)
            ax.set_title(label)
            ax.set_xlabel("layer t")
            if logy:
                ax.set_yscale("log")
        d = ok[ok["model"] == model]["summary.d_model"].iloc[0] if "summary.d_model" in ok else None
        if d is not None and not pd.isna(d):
            axes[2].axhline(math.sqrt(2 / (math.pi * float(d))), color=f"C{i}", ls="--", lw=0.8)
    axes[0].set_ylim(-0.05, 1.05)
    axes[2].set_ylim(bottom=0)
    axes[0].legend(fontsize=7)
    return [FigureSpec(name, fig, curves, caption)]


def counterexample(data: Data) -> list[FigureSpec]:
    """Figs. 1 and 5, drawn by ``rankcollapse.equilibria.plots`` for the run's system."""
    cap1 = (
        "Fig. 1: N = 2, d = 2, causal mask. Left: without LayerNorm, trajectories of both tokens. Right: "
        "with LayerNorm, token 1 converges to B from the red arc (token 0 at A) and to A otherwise. "
        "CSV: every start angle with token 1's limit, the final rank with LN and mu_rel without LN."
    )
    cap5 = (
        "Fig. 5: convergence of the second token: the angle map f of token 1 (token 0 at A) with its "
        "fixed points (filled = stable) and theta(t) for several starts. CSV: theta, f(theta)."
    )
    ok = data.ok
    if ok.empty:
        why = data.failures() or "no runs"
        return [_empty("fig1_counterexample", cap1, why), _empty("fig5_second_token", cap5, why)]
    from rankcollapse.equilibria.counterexample import angle_map, counterexample_2d
    from rankcollapse.equilibria.plots import plot_figure1, plot_figure5

    p = data.exp.base
    cx = counterexample_2d(p["w_v"], p.get("w_qk"), float(p.get("d_qk", 1.0)))
    rows = data.table[data.table["run_id"] == ok.iloc[0]["run_id"]].dropna(axis=1, how="all")
    theta = np.linspace(0, 2 * math.pi, 721)
    f5 = pd.DataFrame({"theta": theta, "f_theta": np.mod(angle_map(theta, cx), 2 * math.pi)})
    return [
        FigureSpec(
            "fig1_counterexample", plot_figure1(cx, token0=tuple(p.get("token0", (0.6, 0.8)))), rows, cap1
        ),
        FigureSpec("fig5_second_token", plot_figure5(cx), f5, cap5),
    ]


def equilibria_ranks(data: Data) -> list[FigureSpec]:
    name, caption = (
        "equilibria_ranks",
        (
            "Stable equilibria of every rank (LayerNorm dynamics): for each target rank k, the verified "
            "numerical rank of the constructed X*, the tangent spectral radius (stable below 1) and the "
            "share of nearby inputs converging to X* (Wilson 95% interval); 'none' = no construction."
        ),
    )
    ok = data.ok
    if ok.empty:
        return [_empty(name, caption, data.failures() or "no runs")]
    rows = data.table.merge(ok[["run_id"]], on="run_id").sort_values("k").reset_index(drop=True)
    plt = _plt()
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
    return [FigureSpec(name, fig, rows, caption)]


FIGURES: dict[str, Callable[[Data], list[FigureSpec]]] = {
    "counterexample": counterexample,
    "equilibria_ranks": equilibria_ranks,
    "fig2_random": fig2_random,
    "fig3_temperature": fig3_temperature,
    "theorem1": theorem1,
    "radius_rate": radius_rate,
    "ln_orthogonal": ln_orthogonal,
    "fig2_models": fig2_models,
    "fig4_geometry": fig4_geometry,
}

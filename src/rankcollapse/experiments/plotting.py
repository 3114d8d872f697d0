"""Plotting helpers shared by the stories: log-log curves with the precision floor, atomic saving.

Curves of mu against depth are drawn on log-log axes against ``t + 1`` (so the input X(0) sits
at 1); the precision floor of each dtype (``FLOOR_FACTOR * eps``) is a dotted line and points at
the floor are hollow markers, so a curve that "stops falling" there reads as collapsed, not as
stable. ``curves`` gives the median over seeds of the per-run batch-mean column (with min and
max). ``save_figure`` writes PNG, PDF and the data CSV, each through ``rankcollapse.io``.
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
from rankcollapse.experiments.engine.story import FigureSpec
from rankcollapse.experiments.engine.verdicts import Data
from rankcollapse.io import atomic_path, atomic_write


@dataclass
class FigureFile:
    """A saved figure: paths of PNG, PDF, CSV and its caption."""

    name: str
    experiment: str
    png: Path
    pdf: Path
    csv: Path
    caption: str


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend with the report's style."""
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
    plt = pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    png, pdf, csv = (out_dir / f"{spec.name}.{ext}" for ext in ("png", "pdf", "csv"))
    for path in (png, pdf):
        with atomic_path(path) as tmp:
            spec.figure.savefig(tmp, format=path.suffix[1:], dpi=130)
    atomic_write(csv, spec.data.to_csv(index=False))
    plt.close(spec.figure)
    return FigureFile(spec.name, experiment, png, pdf, csv, spec.caption)


def curves(data: Data, by: list[str], column: str = "mu_rel") -> pd.DataFrame:
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


def loglog(ax: Any, t: Any, y: Any, floor: float | None, **kw: Any) -> None:
    """``y`` against ``t + 1`` on log-log axes; values under ``floor`` drawn on it, hollow."""
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


def floor_lines(ax: Any, dtypes: list[str]) -> None:
    """A labelled horizontal line at each dtype's relative precision floor."""
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


def empty(name: str, caption: str, why: str) -> FigureSpec:
    """A placeholder figure that says why there is no data."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 1.6))
    ax.axis("off")
    ax.text(0.5, 0.5, f"no data: {why}", ha="center", va="center")
    return FigureSpec(name, fig, pd.DataFrame(), caption)


def panel_grid(n: int, ncols: int = 4, w: float = 3.3, h: float = 2.8) -> tuple[Any, list[Any]]:
    """A figure with ``n`` panels in rows of ``ncols`` (spare axes hidden)."""
    plt = pyplot()
    ncols = min(ncols, max(n, 1))
    nrows = math.ceil(max(n, 1) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False, constrained_layout=True
    )
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.axis("off")
    return fig, flat[:n]


def mu_rel_panels(
    curves: pd.DataFrame, panel: str, series: str, dtype: str, label: Callable[[Any], str], sort: bool
) -> Any:
    """One log-log ``mu_rel`` panel per value of ``panel``, one curve per value of ``series``."""
    keys = list(dict.fromkeys(curves[panel]))
    fig, axes = panel_grid(len(keys))
    for ax, key in zip(axes, keys, strict=True):
        sub = curves[curves[panel] == key]
        for i, (value, c) in enumerate(sub.groupby(series, sort=sort)):
            loglog(ax, c["layer"], c["mu_rel"], floor_rel(dtype), color=f"C{i}", label=label(value))
        floor_lines(ax, [dtype])
        ax.set_title(str(key))
        ax.set_xlabel("layer t + 1")
        ax.set_ylabel("mu_rel")
    axes[0].legend(fontsize=7, loc="lower left")
    return fig

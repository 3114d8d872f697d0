"""Every figure helper: log-log mean ± std bands with the precision floors, panel grids, saving.

Every curve is drawn against ``t + 1`` (so the embeddings X(0) sit at 1) as its mean over samples
with a ± 1 std band, as the paper plots. Curves of different series carry different markers
(placed at staggered layers) so that curves which coincide stay visible; :func:`coincidences`
names them in the caption. Where a curve stops being a number (overflow, or ||X||_F rounded to 0 so
mu_rel = 0/0) a dashed vertical line marks the layer (never a point that could be read as a value),
labelled, and the caption says so. ``mu_rel`` panels show the float32 and float64 floors (``32 eps``) as
grey lines; values below a floor are drawn on it. Raw-mu panels show each series' own floor
``32 eps ||X||_F`` as a dotted line in its colour wherever the series comes within 100x of it.
:func:`save_figure` writes PNG, PDF (through ``rankcollapse.edge.figures``) and the data CSV.

The templates stories draw with, one per shape: :func:`line` (one series, colour and marker by its index),
:func:`points` (one marker per unit, not joined: heads, runs), :func:`mean_band` (a mean with a shaded
band: a range, a std or an interval), :func:`interval_points` (a quantity per condition with its interval
as error bars), :func:`reference_line` (a threshold, a limit or a precision floor at a given value),
:func:`annotated_heatmap` (a grid of values, each written in its cell),
:func:`label_axes` (axis labels from the names table, log axes, the legend), :func:`shared_legend` (one
legend for a figure of panels), :func:`panel_grid` (one panel per condition), :func:`label_grid` (a grid's
column titles, row labels and x label) and :func:`dtype_rows` (rows of raw mu and mu_rel in float32 and
float64 for :func:`curves_figure`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.core.names import QUANTITIES
from rankcollapse.core.names import label as quantity_label  # the one figure label of a quantity
from rankcollapse.core.precision import floor_rel
from rankcollapse.edge import figures
from rankcollapse.edge.atomic import atomic_write
from rankcollapse.experiments.contract.story import FigureSpec
from rankcollapse.experiments.kit.curves import Curve

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
STYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1)))


@dataclass
class FigureFile:
    """A saved figure: paths of PNG, PDF, CSV and its caption."""

    name: str
    experiment: str
    png: Path
    pdf: Path
    csv: Path
    caption: str
    table: Path | None = None  # a table the report shows under the figure (FigureSpec.table)


#: The report's style (matplotlib rcParams), set by :func:`pyplot` and :func:`figure`.
STYLE: dict[str, Any] = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 110,
}


def style() -> None:
    """Set the report's style (:data:`STYLE`) in matplotlib's rcParams, which every figure reads."""
    import matplotlib

    matplotlib.rcParams.update(STYLE)


def figure(width: float, height: float, layout: str | None = None) -> Any:
    """A ``width x height`` inch figure in the report's style (``edge.figures.new_figure``)."""
    style()
    return figures.new_figure(width, height, layout=layout)


def save_figure(spec: FigureSpec, out_dir: Path, experiment: str) -> FigureFile:
    """Write ``<name>.png``, ``<name>.pdf`` and ``<name>.csv`` into ``out_dir``; close the figure."""
    out_dir.mkdir(parents=True, exist_ok=True)
    png, pdf, csv = (out_dir / f"{spec.name}.{ext}" for ext in ("png", "pdf", "csv"))
    figures.save_figure(spec.figure, png, pdf, tight=True)
    atomic_write(csv, spec.data.to_csv(index=False))
    table = None
    if spec.table is not None:
        table = out_dir / f"{spec.name}.table.csv"
        atomic_write(table, spec.table.to_csv(index=False))
    return FigureFile(spec.name, experiment, png, pdf, csv, spec.caption, table)


def empty(name: str, caption: str, why: str) -> FigureSpec:
    """A figure that says why there is no data."""
    fig = figure(5, 1.6)
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, f"no data: {why}", ha="center", va="center")
    return FigureSpec(name, fig, pd.DataFrame(), caption)


def panel_grid(
    n: int, ncols: int = 4, w: float = 3.3, h: float = 2.8, sharey: bool = False
) -> tuple[Any, list[Any]]:
    """A figure with ``n`` panels of ``w x h`` inches in rows of ``ncols`` (spare axes hidden; ``sharey``: one
    y axis for all): one panel per condition (arm, model, mask, ...), row by row."""
    ncols = min(ncols, max(n, 1))
    nrows = math.ceil(max(n, 1) / ncols)
    fig = figure(w * ncols, h * nrows, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=sharey)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.axis("off")
    return fig, flat[:n]


#: The legend entry of an underflow (:func:`underflow_marks`): a layer where some sample rounded to 0.
UNDERFLOW_LABEL = "underflow (0): not a value, drawn open at the floor line"
#: The x label of a log-depth axis: the layer's label (``core.names``), shifted by one (t = 0 on a log axis).
LAYER_PLUS_ONE = f"{quantity_label('layer')} + 1"


def underflow_marks(c: Curve) -> tuple[Curve, np.ndarray, np.ndarray]:
    """``c`` as drawn, the layers where some sample underflowed to exactly 0 and where their marks sit.

    Raw mu: some sample's mu rounded to 0 (``Curve.underflow_share``); mu_rel: some sample's whole X did
    (``zero_share``: mu_rel = 0/0). There the drawn curve's mean, std and range are NaN (no point, no band:
    matplotlib leaves a gap): a 0 is no value a log axis can show; the marks sit at the floor line
    (``Curve.floor_line``; the dtype's smallest normal number where that line is 0 or unknown). The rules
    count these samples at the floor (``kit.curves``)."""
    if c.quantity == "mu":
        share = c.underflow_share if c.underflow_share is not None else c.floor_share
        # raw mu read without mu_rel beside it: its floor share *is* the underflow (<= the smallest normal)
    else:
        share = c.zero_share
    under = np.zeros(c.layers + 1, dtype=bool) if share is None else np.nan_to_num(share) > 0
    t = np.nonzero(under)[0]
    line = c.floor_line()
    y = np.full(t.size, c.clamp) if line is None else np.asarray(line, dtype=float)[t]
    y = np.where(np.isfinite(y) & (y > 0), y, c.clamp)
    if not t.size:
        return c, t, y
    gone = lambda a: np.where(under, np.nan, a)  # noqa: E731
    drawn = replace(
        c, mean=gone(c.mean), std=gone(c.std), lo=gone(c.lo), hi=gone(c.hi),
        underflow_share=np.zeros(c.layers + 1) if c.quantity == "mu" else c.underflow_share,
        zero_share=None,
    )
    return drawn, t, y


def band(ax: Any, c: Curve, label: str, i: int, floors: bool) -> str:
    """Draw curve ``c`` (mean ± std) as the ``i``-th series; return a note if it underflowed or turned
    non-finite (named in the caption: no text over the curves). An underflow to exactly 0 is no data
    point: the curve has a gap there and an open circle in its colour sits at the floor line
    (:func:`underflow_marks`, legend :data:`UNDERFLOW_LABEL`); a non-finite state is a dashed vertical."""
    c, under_t, under_y = underflow_marks(c)
    t = np.arange(c.layers + 1) + 1.0
    lo_clip = c.clamp  # the floor for mu_rel; the dtype's smallest normal number for raw mu
    mean = np.maximum(c.mean, lo_clip)
    low = np.maximum(c.mean - c.std, lo_clip)
    high = np.maximum(c.mean + c.std, lo_clip)
    every = max(1, (c.layers + 1) // 6)
    (line,) = ax.plot(
        t,
        mean,
        ls=STYLES[i % len(STYLES)],
        marker=MARKERS[i % len(MARKERS)],
        ms=3.5,
        markevery=(i % every, every),
        lw=1.2,
        label=label,
        color=f"C{i % 10}",
    )
    ax.fill_between(t, low, high, color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    floor = c.floor_line() if c.quantity == "mu" else None
    if floor is not None and np.isfinite(floor).any():
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(floor > 0, c.mean / floor, np.inf)
        near = bool(np.nanmin(np.where(np.isfinite(ratio), ratio, np.inf)) < 100)  # the floor matters here
        if near:
            ax.plot(
                t,
                floor,
                ls=":",
                lw=0.8,
                color=line.get_color(),
                alpha=0.9,
                label="raw floor 32 eps ||X||_F (dotted, series colour)",
            )
    note = ""
    if under_t.size:
        step = max(1, (c.layers + 1) // 16)
        ax.plot(under_t[::step] + 1.0, under_y[::step], ls="none", marker="o", mfc="none", ms=4, mew=0.9,
                color=line.get_color(), label=UNDERFLOW_LABEL)
        what = "raw mu" if c.quantity == "mu" else "X"
        note = (f"{label}: {what} underflows to 0 ({c.dtype}) in some sample from t = {int(under_t[0])}: "
                "no value there, an open circle at the floor line")
    bad = c.first_nonfinite()
    if bad is None:
        return note
    zero = c.zero_share is not None and c.zero_share[bad] > 0
    # where the curve stops being a number: a vertical line, not a point that could be read as a value
    ax.axvline(
        t[bad],
        color="0.3" if zero else "red",
        ls=(0, (2, 2)),
        lw=1.0,
        label="||X|| = 0 from here: mu_rel undefined (grey dashes)"
        if zero
        else "non-finite from here (red dashes)",
    )
    over = f"{label}: {c.nonfinite_cause()} from t = {bad} ({1 - c.finite[-1]:.0%} of samples by the end)"
    return f"{note}; {over}" if note else over


def floor_lines(ax: Any, dtypes: Sequence[str]) -> None:
    for dt, ls in (("float32", ":"), ("float64", "-.")):
        if dt in dtypes:
            ax.axhline(floor_rel(dt), color="0.35", lw=0.9, ls=ls, label=f"{dt} floor (32 eps)")


def coincidences(series: Sequence[tuple[str, Curve]], rtol: float = 0.05) -> list[str]:
    """Pairs of curves whose means agree within ``rtol`` at every layer (they would hide each other)."""
    out = []
    for i, (la, a) in enumerate(series):
        for lb, b in series[i + 1 :]:
            if a.layers != b.layers:
                continue
            ma, mb = np.maximum(a.mean, a.clamp), np.maximum(b.mean, b.clamp)
            if np.all(np.isfinite(ma)) and np.all(np.isfinite(mb)) and np.allclose(ma, mb, rtol=rtol):
                out.append(f"{la} and {lb}")
    return out


Panel = tuple[str, Sequence[tuple[str, Curve]]]


def panel_figure(
    title: str, rows: Sequence[tuple[str, bool, Sequence[Panel]]], xlabel: str = LAYER_PLUS_ONE
) -> tuple[Any, list[str]]:
    """A grid of panels: ``rows`` = [(y label, floors?, [(panel title, [(series label, Curve)])])].

    Returns the figure and the caption notes (coinciding curves, non-finite runs).
    """
    ncols = max(len(r[2]) for r in rows)
    fig = figure(3.4 * ncols, 2.9 * len(rows))
    axes = fig.subplots(len(rows), ncols, squeeze=False)
    notes: list[str] = []
    style: dict[str, int] = {}  # one style per series label across all panels (legend stays true)
    for _, _, panels in rows:
        for _, series in panels:
            for label, _ in series:
                style.setdefault(label, len(style))
    for r, (ylabel, floors, panels) in enumerate(rows):
        for c in range(ncols):
            ax = axes[r][c]
            if c >= len(panels):
                ax.axis("off")
                continue
            ptitle, series = panels[c]
            for label, curve in series:
                note = band(ax, curve, label, style[label], floors)
                if note:
                    notes.append(f"{ptitle}, {ylabel}: {note}")
            if floors:
                floor_lines(ax, sorted({s[1].dtype for s in series} | {"float32", "float64"}))
            same = coincidences(series)
            if same:
                notes.append(f"{ptitle}, {ylabel}: coincide within 5%: " + "; ".join(same))
            ax.set_title(ptitle, fontsize=9)
            ax.set_xlabel(xlabel)
            if c == 0:  # the quantity's label over its dtype: a long one in one line runs into the next row's
                ax.set_ylabel(ylabel.replace(", ", ",\n", 1) if len(ylabel) > 28 else ylabel)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.0, 1, 0.96))
    shared_legend(fig, list(axes.ravel()), below=True, ncol=4)
    return fig, notes


def curve_data(series: dict[str, Curve]) -> pd.DataFrame:
    """The plotted numbers as a table: one row per (series, layer)."""
    frames = []
    for label, c in series.items():
        cols = {
            "series": label,
            "quantity": c.quantity,
            "dtype": c.dtype,
            "samples": c.n,
            "layer": np.arange(c.layers + 1),
            **c.columns(),
            "finite": c.finite,
        }
        q = c.quantity
        frames.append(pd.DataFrame(cols).rename(columns={k: "value" + k[len(q) :] for k in c.columns()}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def slug(text: str) -> str:
    """A file-name piece of a label: lower case letters, digits and ``_``."""
    out = "".join(ch if ch.isalnum() else "_" for ch in text.lower())
    return "_".join(p for p in out.split("_") if p)[:60]


def dtype_rows(
    curves_mu: dict[tuple, Curve],
    curves_rel: dict[tuple, Curve],
    panels: Callable[[dict[tuple, Curve], str], Sequence[Panel]],
) -> list:
    """Panel rows of raw mu in float32 (the paper's) and float64, then mu_rel in float32 and float64 with the
    floors, for :func:`panel_figure`; ``panels(curves, dtype)`` gives one row's panels (a row without panels,
    a dtype not run, is left out)."""
    rows = []
    for curves, dt, ylabel, floors in (
        (curves_mu, "float32", f"{quantity_label('mu')}, float32 (as in the paper)", False),
        (curves_mu, "float64", f"{quantity_label('mu')}, float64", False),
        (curves_rel, "float32", f"{quantity_label('mu_rel')}, float32", True),
        (curves_rel, "float64", f"{quantity_label('mu_rel')}, float64", True),
    ):
        drawn = list(panels(curves, dt))
        if drawn:
            rows.append((ylabel, floors, drawn))
    return rows


def mode_rows(
    curves_mu: dict[tuple, Curve],
    curves_rel: dict[tuple, Curve],
    modes: Sequence[str],
    masks: Sequence[str],
    mode_words: dict[str, str],
    mask_words: dict[str, str],
) -> list:
    """:func:`dtype_rows` of Figs. 2 / 6: one panel per mask, one curve per block mode (curves keyed
    ``(mode, mask, dtype)``)."""

    def panels(curves: dict[tuple, Curve], dt: str) -> list[Panel]:
        out = []
        for m in masks:
            series = [(mode_words.get(v, v), curves[(v, m, dt)]) for v in modes if (v, m, dt) in curves]
            if series:
                out.append((mask_words.get(m, m), series))
        return out

    return dtype_rows(curves_mu, curves_rel, panels)


def curves_figure(
    stem: str,
    title: str,
    caption: str,
    rows: Sequence[tuple[str, bool, Sequence[Panel]]],
    curves: dict[str, dict[tuple, Curve]],
    model: str,
) -> FigureSpec:
    """A :func:`panel_figure` of ``rows`` as a :class:`FigureSpec`: notes (coinciding or non-finite curves)
    appended to ``caption``, the data of every curve in ``curves`` (quantity -> {key: Curve}) as its table."""
    fig, notes = panel_figure(title, rows)
    if notes:
        caption += " Notes: " + " | ".join(notes) + "."
    table = curve_data(
        {f"{q} | {' | '.join(map(str, k))}": c for q, cs in curves.items() for k, c in cs.items()}
    )
    table.insert(0, "model", model)
    return FigureSpec(stem, fig, table, caption)


def curve_axes(
    ax: Any,
    series: Sequence[tuple[str, Curve]],
    ylabel: str,
    dtypes: Sequence[str] = ("float64",),
    floors: bool = True,
) -> None:
    """One log-log panel: each (label, curve) as a mean ± std band, the precision floors, axis labels."""
    for i, (label, c) in enumerate(series):
        band(ax, c, label, i, floors)
    if floors:
        floor_lines(ax, dtypes)
    ax.set_xlabel(LAYER_PLUS_ONE)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=6, ncol=2 if len(series) > 5 else 1)



# ---- templates: one per shape a story draws ----------------------------------------------------------------
def axis_label(name: str) -> str:
    """The axis label of ``name``: its label in the names table (``core.names``) where ``name`` is a
    quantity's key (``"layer"`` -> ``"layer t"``), else ``name`` as written (something the table does not
    name)."""
    return quantity_label(name) if name in QUANTITIES else name


def label_axes(
    ax: Any,
    x: str | None = None,
    y: str | None = None,
    *,
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
    base: float = 10,
    legend: float | None = None,
    ncol: int = 1,
    legend_title: str | None = None,
) -> None:
    """Name a panel's axes (through :func:`axis_label`: a quantity's key gives the names table's label), put
    a log scale on x (in ``base``) and/or y where asked, title it (size 8) and draw its legend in font size
    ``legend`` (None: no legend)."""
    if logx:
        ax.set_xscale("log", base=base)
    if logy:
        ax.set_yscale("log")
    if x is not None:
        ax.set_xlabel(axis_label(x))
    if y is not None:
        ax.set_ylabel(axis_label(y))
    if title is not None:
        ax.set_title(title, fontsize=8)
    if legend is not None:
        ax.legend(fontsize=legend, ncol=ncol, title=legend_title, title_fontsize=legend)


def line(
    ax: Any,
    x: Any,
    y: Any,
    i: int,
    label: str | None = None,
    *,
    style: int = 0,
    floor: float | None = None,
    marker: bool = True,
    every: int = 8,
    ms: float = 3.0,
    lw: float | None = None,
    hollow: bool = False,
    alpha: float = 1.0,
) -> Any:
    """Draw the ``i``-th series of a panel: colour ``C{i}``, marker ``MARKERS[i]`` on about ``every`` of its
    points (0: on each; ``marker=False``: none; ``hollow``: open markers), line style ``STYLES[style]`` (a
    second grouping, such as the depth of a profile). Values below ``floor`` are drawn on it (a log axis shows
    no 0; the caption says so). Returns the line."""
    y = np.asarray(y, dtype=float)
    if floor is not None:
        y = np.maximum(y, floor)
    n = int(np.size(y))
    color = f"C{i % 10}"
    (drawn,) = ax.plot(
        x, y, ls=STYLES[style % len(STYLES)], color=color, lw=lw, label=label, alpha=alpha,
        marker=MARKERS[i % len(MARKERS)] if marker else None, ms=ms,
        markevery=max(1, n // every) if every > 0 else 1,
        mfc="none" if hollow else color,
    )
    return drawn


def points(
    ax: Any,
    x: Any,
    y: Any,
    i: int,
    label: str | None = None,
    *,
    hollow: bool = False,
    ms: float = 3.0,
    alpha: float = 0.8,
) -> Any:
    """Draw the ``i``-th set of units (one marker per unit: a head, a run), not joined: colour ``C{i}``,
    marker ``MARKERS[i]`` (``hollow``: open). Returns the line."""
    color = f"C{i % 10}"
    (drawn,) = ax.plot(x, y, ls="none", marker=MARKERS[i % len(MARKERS)], ms=ms, color=color,
                       mfc="none" if hollow else color, alpha=alpha, label=label)
    return drawn


def mean_band(
    ax: Any,
    x: Any,
    mean: Any,
    lo: Any,
    hi: Any,
    i: int,
    label: str | None = None,
    *,
    floor: float | None = None,
    alpha: float = 0.15,
    **style: Any,
) -> Any:
    """Draw the ``i``-th series as its mean (:func:`line`; ``style``: its keywords) over a shaded band from
    ``lo`` to ``hi`` in the same colour: the range, the ± std or the interval the caption names. Values below
    ``floor`` (band included) are drawn on it. Returns the line."""
    drawn = line(ax, x, mean, i, label, floor=floor, **style)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    if floor is not None:
        lo, hi = np.maximum(lo, floor), np.maximum(hi, floor)
    ax.fill_between(x, lo, hi, color=drawn.get_color(), alpha=alpha, lw=0)
    return drawn


def interval_points(
    ax: Any,
    x: Any,
    mean: Any,
    lo: Any,
    hi: Any,
    i: int,
    label: str | None = None,
    *,
    joined: bool = True,
    ms: float = 4.0,
    hollow: bool = False,
) -> Any:
    """Draw a quantity per condition as the ``i``-th series: its value at each ``x`` (marker ``MARKERS[i]``,
    colour ``C{i}``; ``joined``: a line through them; ``hollow``: open markers, larger, so a series drawn
    over another that coincides leaves it visible) with an error bar from ``lo`` to ``hi`` (the interval the
    rule reads, or the range: the caption names it). Returns matplotlib's ErrorbarContainer."""
    mean = np.asarray(mean, dtype=float)
    err = np.vstack([mean - np.asarray(lo, dtype=float), np.asarray(hi, dtype=float) - mean])
    fmt = MARKERS[i % len(MARKERS)] + ("-" if joined else "")
    color = f"C{i % 10}"
    return ax.errorbar(x, mean, yerr=err, fmt=fmt, color=color, ms=ms * 1.6 if hollow else ms,
                       mfc="none" if hollow else color, capsize=3, lw=1.0, label=label)


def reference_line(
    ax: Any,
    value: float,
    label: str | None = None,
    *,
    vertical: bool = False,
    color: str = "0.4",
    ls: Any = ":",
    lw: float = 0.8,
) -> Any:
    """A threshold, limit or precision floor at ``value``: a horizontal line across the panel (``vertical``: a
    vertical one at x = ``value``), dotted grey unless told otherwise; ``label`` names it in the legend.
    Returns the line."""
    draw = ax.axvline if vertical else ax.axhline
    return draw(value, color=color, ls=ls, lw=lw, label=label)


def annotated_heatmap(
    ax: Any,
    table: Any,
    columns: Sequence[str],
    rows: Sequence[str],
    *,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    fmt: str = "{:.2g}",
    shift: float = 0.0,
    fontsize: float = 7,
    origin: str = "upper",
) -> Any:
    """A grid of values ``table[row, column]`` as colours, row 0 at the top as a matrix reads (``origin=
    "lower"``: at the bottom, as a y axis reads), each finite value written in its cell (``fmt``; ``shift``:
    that far above the centre), dark on light cells and white on dark ones; ``columns`` and ``rows`` label
    the ticks; ``vmin``/``vmax`` (None: the table's) bound the colours. Returns the image (for a colour
    bar)."""
    table = np.asarray(table, dtype=float)
    lo = float(np.nanmin(table)) if vmin is None else vmin
    hi = float(np.nanmax(table)) if vmax is None else vmax
    im = ax.imshow(table, origin=origin, aspect="auto", cmap=cmap, vmin=lo, vmax=hi)
    ax.grid(False)
    ax.set_xticks(range(len(columns)), list(columns))
    ax.set_yticks(range(len(rows)), list(rows))
    up = shift if origin == "lower" else -shift  # row indices grow downwards where row 0 is at the top
    for (i, j), v in np.ndenumerate(table):
        if math.isfinite(v):
            light = (v - lo) / ((hi - lo) or 1.0) > 0.5
            ax.text(j, i + up, fmt.format(v), ha="center", va="center", fontsize=fontsize,
                    color="black" if light else "white")
    return im


def shared_legend(
    fig: Any, axes: Sequence[Any], *, below: bool = False, ncol: int | None = None, fontsize: float = 8
) -> Any:
    """One legend for a figure of panels: each label once (a label repeated across panels or series has one
    entry), in the order first drawn; above the panels (``below``: under them, for a figure laid out with
    ``tight_layout``), in ``ncol`` columns (None: one row). Returns the legend."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    cols = len(handles) if ncol is None else min(ncol, len(handles))
    where: dict[str, Any] = (
        {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0)} if below else {"loc": "outside upper center"}
    )
    return fig.legend(list(handles.values()), list(handles), ncol=max(cols, 1), fontsize=fontsize, **where)


def label_grid(
    axes: Sequence[Any],
    ncols: int,
    rows: Sequence[str],
    columns: Sequence[str],
    x: str,
    *,
    title_size: float = 9,
) -> None:
    """Name the edges of a grid of panels (``axes`` row by row, ``ncols`` a row, as :func:`panel_grid` gives
    them): each column's title over its top panel, each row's y label (:func:`axis_label`) beside its first
    panel, the x label ``x`` under the bottom row; tick labels small."""
    nrows = math.ceil(len(axes) / ncols)
    for k, ax in enumerate(axes):
        r, c = divmod(k, ncols)
        if r == 0:
            ax.set_title(columns[c], fontsize=title_size)
        if c == 0:
            ax.set_ylabel(axis_label(rows[r]), fontsize=7)
        if r == nrows - 1:
            ax.set_xlabel(axis_label(x))
        ax.tick_params(labelsize=6)

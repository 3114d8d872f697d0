"""The collapse figure of a run (:func:`figure_collapse`): ``mu`` and ``mu_rel`` per layer t (log y), the
batch mean with its min-max band over samples, ``mu_rel``'s precision floor (``32 eps`` of the run's
dtype: its hidden states', 0.25 for bfloat16, :func:`rankcollapse.core.precision.floor_rel`) and the
layers where every sample is at it; :func:`plot_collapse` saves it from bare rows (``DIR/mu.png``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import plain_text
from rankcollapse.models.plots.source import FigureRun, figure_run
from rankcollapse.models.plots.style import (
    COLLAPSE,
    band_handle,
    column_style,
    draw_floors,
    finish_frame,
    label_panel,
    layer_axis,
    log_y,
    loggable,
    mark_zeros,
    new_frame,
    row_layers,
    row_value,
    save_column,
    shade_statuses,
)

__all__ = ["figure_collapse", "plot_collapse"]

def _draw_collapse(
    ax_mu: Any, ax_rel: Any, rows: Sequence[dict[str, Any]], label: str, color: str, band: bool = True
) -> None:
    layers = row_layers(rows)
    for ax, (key, _) in ((ax_mu, COLLAPSE[0]), (ax_rel, COLLAPSE[1])):
        if ax is None:
            continue
        ax.plot(layers, [loggable(row_value(r, key)) for r in rows], "-", color=color,
                label=plain_text(label))
        if band and rows and f"{key}_min" in rows[0]:
            ax.fill_between(
                layers,
                [loggable(row_value(r, f"{key}_min")) for r in rows],
                [loggable(row_value(r, f"{key}_max")) for r in rows],
                color=color,
                alpha=0.15,
                lw=0,
            )
    at = [(t, row_value(r, "mu_rel")) for t, r in zip(layers, rows, strict=True)
          if row_value(r, "at_floor") >= 1.0]
    if at and ax_rel is not None:
        ax_rel.plot([t for t, _ in at], [loggable(v) for _, v in at], ".", color="0.45", ms=5)


def _finish_collapse(ax_mu: Any, ax_rel: Any, any_at_floor: bool, legend: bool = True) -> None:
    for ax, key in ((ax_mu, "mu"), (ax_rel, "mu_rel")):
        if ax is None:
            continue
        log_y(ax)
        layer_axis(ax, label=legend)
        label_panel(ax, key)
    if any_at_floor and ax_rel is not None:
        ax_rel.plot([], [], ".", color="0.45", label="every sample at the floor")
    if legend:
        for ax in (ax_mu, ax_rel):
            if ax is not None:
                ax.legend()


def _collapse_figure(run: FigureRun) -> Any:
    if not run.rows:
        raise RankCollapseError("nothing to plot: the run has no rows")
    keys = [k for k, _ in COLLAPSE if k in run.rows[0]]
    if not keys:
        raise RankCollapseError("nothing to plot: the rows have neither mu nor mu_rel (--metrics mu,mu_rel)")
    with column_style():
        frame = new_frame(2.15)
        axes = frame.panels.subplots(1, len(keys), squeeze=False)[0]
        ax = dict(zip(keys, axes, strict=True))
        ax_mu, ax_rel = ax.get("mu"), ax.get("mu_rel")
        _draw_collapse(ax_mu, ax_rel, run.rows, "batch mean", "C0")
        if ax_rel is not None:
            draw_floors(ax_rel, [run.dtype])
        _finish_collapse(ax_mu, ax_rel, any(row_value(r, "at_floor") >= 1.0 for r in run.rows), legend=False)
        for key, a in ax.items():
            mark_zeros(a, row_layers(run.rows), [row_value(r, key) for r in run.rows], "C0")
            shade_statuses(a, run.rows)
            layer_axis(a, False, row_layers(run.rows))
        return finish_frame(frame, axes, run.title, [(band_handle("C0"), "min-max over samples")])


def figure_collapse(result: Any) -> Any:
    """``mu`` and ``mu_rel`` per layer t (log y; the batch mean and its min-max band over samples),
    ``mu_rel``'s precision floor (``32 eps`` of the run's dtype) and the layers where every sample is at
    it. ``result``: an :class:`~rankcollapse.models.analyze.AnalyzeResult` or a finished run
    (:func:`~rankcollapse.models.finished.read_run`). Returns a ``matplotlib.figure.Figure`` (not registered
    with pyplot), one column wide; its axes are ``mu``'s then ``mu_rel``'s (the ones the rows have)."""
    return _collapse_figure(figure_run(result))


def plot_collapse(rows: Sequence[dict[str, Any]], path: str | Path, *, dtype: str, title: str = "") -> Path:
    """Save :func:`figure_collapse` of bare rows into ``path`` (PNG/PDF/SVG by its suffix). ``dtype``:
    the run's hidden states' (``float64``, ``float32``, ``bfloat16``, ``float16``), whose precision floor
    is drawn; RankCollapseError (one line) for another name."""
    from rankcollapse.core.precision import dtype_name

    dtype = dtype_name(dtype, half=True)
    return save_column(_collapse_figure(FigureRun(rows, dtype, title)), path)[0]

"""The token geometry of a run (:func:`figure_geometry`), paper Figure 4 and the ranks: ``effective_rank``
and ``num_rank`` against ``min(N, d)``, ``full_rank`` (share of samples at full rank), ``sigma_min``
(log y), ``mean_abs_cos`` against the isotropic ``sqrt(2 / (pi d))``; :func:`plot_token_geometry` saves
it from bare rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.plots.source import FigureRun, figure_run
from rankcollapse.models.plots.style import (
    band_handle,
    column_style,
    draw_band,
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

__all__ = ["GEOMETRY_COLUMNS", "figure_geometry", "plot_token_geometry"]

#: The columns :func:`figure_geometry` draws (the ranks share one panel).
GEOMETRY_COLUMNS: tuple[str, ...] = ("effective_rank", "num_rank", "full_rank", "sigma_min", "mean_abs_cos")


def _geometry_figure(run: FigureRun) -> Any:
    rows = run.rows
    if not rows:
        raise RankCollapseError("nothing to plot: the run has no rows")
    shown = [
        p
        for p in ("rank", "full_rank", "sigma_min", "mean_abs_cos")
        if p in rows[0] or (p == "rank" and ({"effective_rank", "num_rank"} & set(rows[0])))
    ]
    if not shown:
        raise RankCollapseError(
            "no token geometry in these rows: they need effective_rank, num_rank, "
            "full_rank, sigma_min or mean_abs_cos (--metrics all)"
        )
    layers = row_layers(rows)
    nrows = math.ceil(len(shown) / 2)
    with column_style():
        frame = new_frame(1.5 * nrows + 0.5)
        axes = list(frame.panels.subplots(nrows, 2, squeeze=False, sharex=True).flat)
        for ax in axes[len(shown) :]:
            ax.remove()
        for ax, key in zip(axes, shown, strict=False):
            layer_axis(ax, False, layers)
            label_panel(ax, key)
            shade_statuses(ax, rows)
            if key == "rank":
                for name, color, marker in (("effective_rank", "C0", "o"), ("num_rank", "C1", "s")):
                    if name in rows[0]:
                        values = [row_value(r, name) for r in rows]
                        ax.plot(layers, values, marker=marker, color=color, label=name)
                        draw_band(ax, layers, rows, name, color)
                if run.tokens and run.width:
                    bound = min(run.tokens, run.width)
                    ax.axhline(bound, color="0.4", ls=":", lw=0.9, label=f"min(N, d) = {bound}")
                    ax.set_ylim(0, 1.08 * bound)  # the bound inside the frame, not on it
                ax.set_ylim(bottom=0)
                continue
            logy = key == "sigma_min"
            ax.plot(
                layers,
                [loggable(row_value(r, key)) if logy else row_value(r, key) for r in rows],
                marker="o",
                color="C0",
            )
            draw_band(ax, layers, rows, key, "C0", logy)
            if logy:
                log_y(ax)
                mark_zeros(ax, layers, [row_value(r, key) for r in rows], "C0")
            elif key == "full_rank":
                ax.set_ylim(-0.04, 1.04)
            else:
                if run.width:
                    iso = math.sqrt(2 / (math.pi * run.width))
                    label = f"isotropic sqrt(2/(pi d)) = {iso:.2g}"
                    ax.axhline(iso, color="C2", ls="--", lw=0.9, label=label)
                ax.set_ylim(0, 1)
        band = [(band_handle("C0"), "min-max over samples")]
        return finish_frame(frame, axes[: len(shown)], run.title, band)


def figure_geometry(result: Any) -> Any:
    """The token geometry per layer t, one panel each (those the rows have, in this order): ranks
    (``effective_rank``, ``num_rank`` and ``min(N, d)``), ``full_rank`` (the share of samples at full
    rank), ``sigma_min`` (log y), ``mean_abs_cos`` (with the isotropic ``sqrt(2 / (pi d))``); the batch
    mean and its min-max band over samples. A ``matplotlib.figure.Figure``, one column wide."""
    return _geometry_figure(figure_run(result))


def plot_token_geometry(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Save :func:`figure_geometry` of bare rows (no model facts: no ``min(N, d)`` or isotropic line)
    into ``path`` (PNG/PDF/SVG by its suffix)."""
    return save_column(_geometry_figure(FigureRun(rows, "", title)), path)[0]

"""The figures of one run by name and their files: :func:`figure_names` (``mu``, ``geometry``,
``diagnostics``: the stems of the files ``rankcollapse analyze --plot`` writes), :func:`figures` (each
that applies, drawn), :func:`figure_files` and :func:`save_figures` (each in every format asked for).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.plots.collapse import figure_collapse
from rankcollapse.models.plots.diagnostics import figure_diagnostics, head_columns
from rankcollapse.models.plots.geometry import GEOMETRY_COLUMNS, figure_geometry
from rankcollapse.models.plots.source import figure_run
from rankcollapse.models.plots.style import plot_formats, save_column

__all__ = ["figure_files", "figure_names", "figures", "save_figures"]

def figure_names(columns: Sequence[str] | None, diagnostics: bool) -> tuple[str, ...]:
    """The figures a run draws, from its metric columns (None: every metric) and whether it has
    diagnostics: ``mu`` (with ``mu`` or ``mu_rel``), ``geometry`` (with a column of
    :data:`GEOMETRY_COLUMNS`), ``diagnostics``."""
    have = set(GEOMETRY_COLUMNS) | {"mu", "mu_rel"} if columns is None else set(columns)
    return tuple(
        name
        for name, applies in (
            ("mu", bool(have & {"mu", "mu_rel"})),
            ("geometry", bool(have & set(GEOMETRY_COLUMNS))),
            ("diagnostics", diagnostics),
        )
        if applies
    )


def figures(result: Any) -> dict[str, Any]:
    """Every figure that applies to a run, by name (:func:`figure_names` of its columns): ``mu``
    (:func:`figure_collapse`), ``geometry`` (:func:`figure_geometry`) and ``diagnostics``
    (:func:`figure_diagnostics`). ``result``: an AnalyzeResult or a finished run
    (:func:`~rankcollapse.models.finished.read_run`)."""
    run = figure_run(result)
    if not run.rows:
        raise RankCollapseError("nothing to plot: the run has no rows")
    draw = {"mu": figure_collapse, "geometry": figure_geometry, "diagnostics": figure_diagnostics}
    names = figure_names(list(run.rows[0]), bool(head_columns(run.rows, "first_token_attention")))
    return {name: draw[name](run) for name in names}


def figure_files(names: Sequence[str], formats: Sequence[str] = ("png",)) -> tuple[str, ...]:
    """The files :func:`save_figures` writes for figures ``names`` (:func:`figure_names`): ``mu.png``, ..."""
    return tuple(f"{name}.{fmt}" for name in names for fmt in formats)


def save_figures(result: Any, folder: str | Path, formats: Sequence[str] = ("png",)) -> list[Path]:
    """Write every figure of :func:`figures` into ``folder`` as ``<name>.<format>`` (each format of
    :data:`FORMATS` given; atomically) and return the paths written."""
    folder = Path(folder)
    formats = plot_formats(list(formats))
    written = []
    for name, fig in figures(result).items():
        for fmt in formats:
            written.append(save_column(fig, folder / f"{name}.{fmt}")[0])
    return written

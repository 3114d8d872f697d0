"""Figures of analysis rows (:class:`~rankcollapse.models.analyze.AnalyzeResult` or a finished run,
:func:`~rankcollapse.models.finished.read_run`), and finished runs overlaid.

Figures as objects (``matplotlib.figure.Figure``, not registered with pyplot: nothing to close; save one
with :func:`rankcollapse.edge.figures.save_figure` or matplotlib's own ``savefig``, a notebook shows it),
each sized for one column of a two-column paper, the layer index t on x (0 = embeddings), the title naming
the model, mode, mask, d_qk, dtype and the sample size. One module a job:

- ``style``        the look they share (:data:`COLUMN_WIDTH`, :data:`STYLE`), the frame (panels above, one
                   legend below), the axes' conventions, the formats and the one writer at :data:`DPI`
- ``source``       what a figure needs of a run (``FigureRun``), from a result or a finished run
- ``collapse``     :func:`figure_collapse` (``mu``, ``mu_rel``, the precision floor); :func:`plot_collapse`
- ``geometry``     :func:`figure_geometry` (ranks, ``sigma_min``, mean |cos|); :func:`plot_token_geometry`
- ``diagnostics``  :func:`figure_diagnostics` (sinks per layer x head, entropy, massive activations),
                   :func:`head_values`
- ``files``        a run's figures by name (:func:`figures`: ``mu``, ``geometry``, ``diagnostics``) and
                   their files (:func:`save_figures`: ``rankcollapse analyze --plot``)
- ``compare``      :func:`plot`: finished runs overlaid on one figure (``rankcollapse plot``)
"""

from rankcollapse.models.plots.collapse import figure_collapse, plot_collapse
from rankcollapse.models.plots.compare import BY, DEPTHS, WIDTHS, figure_paths, plot
from rankcollapse.models.plots.diagnostics import figure_diagnostics, head_values
from rankcollapse.models.plots.files import figure_files, figure_names, figures, save_figures
from rankcollapse.models.plots.geometry import GEOMETRY_COLUMNS, figure_geometry, plot_token_geometry
from rankcollapse.models.plots.style import (
    COLLAPSE,
    COLUMN_WIDTH,
    DPI,
    FORMATS,
    LAYER_LABEL,
    PANELS,
    STYLE,
    plot_formats,
)

__all__ = [
    "BY",
    "COLLAPSE",
    "COLUMN_WIDTH",
    "DEPTHS",
    "DPI",
    "FORMATS",
    "GEOMETRY_COLUMNS",
    "LAYER_LABEL",
    "PANELS",
    "STYLE",
    "WIDTHS",
    "figure_collapse",
    "figure_diagnostics",
    "figure_files",
    "figure_geometry",
    "figure_names",
    "figure_paths",
    "figures",
    "head_values",
    "plot",
    "plot_collapse",
    "plot_formats",
    "plot_token_geometry",
    "save_figures",
]

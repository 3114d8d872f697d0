"""The look every figure of a run shares: one column of a two-column paper (:data:`COLUMN_WIDTH` inches,
7-8 pt text, :data:`STYLE` applied while a figure is drawn, never globally), the layer index t on x
(0 = embeddings), and the files they are saved as.

- the frame: :func:`new_frame` (a figure not registered with pyplot: nothing to close), its panels above
  and one legend below everything (:func:`finish_frame`: no legend covers a curve), the title wrapped to
  the column (:func:`wrap_title`);
- the axes: :func:`layer_axis`, :func:`log_y`, :func:`draw_band` (min-max over samples),
  :func:`shade_statuses` (underflow, overflow), :func:`mark_zeros` (an exact 0 off a log axis),
  :func:`draw_floors` (``mu_rel``'s precision floor of each dtype), :func:`label_panel` (:data:`PANELS`);
- the files: :data:`FORMATS` (:func:`plot_formats`, the one parser of ``--plot-format``), each written at
  :data:`DPI` through :func:`rankcollapse.edge.figures.save_figure` (:func:`save_column`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankcollapse.core.names import label as name_label
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.figures import new_figure, save_figure
from rankcollapse.edge.validate import plain_text, quote

__all__ = [
    "COLLAPSE",
    "COLUMN_WIDTH",
    "DPI",
    "FLOOR_STYLES",
    "FORMATS",
    "LAYER_LABEL",
    "LEGEND_CHARS",
    "PANELS",
    "STATUS_SHADES",
    "STYLE",
    "TITLE_CHARS",
    "Frame",
    "band_handle",
    "column_style",
    "draw_band",
    "draw_floors",
    "finish_frame",
    "label_panel",
    "layer_axis",
    "log_y",
    "loggable",
    "mark_zeros",
    "new_frame",
    "plot_formats",
    "row_layers",
    "row_value",
    "save_column",
    "shade_statuses",
    "wrap_title",
]

#: Width of one column of a two-column paper, in inches: the width every figure of a run is drawn at.
COLUMN_WIDTH = 3.5
#: Resolution of a column-wide figure's PNG (1050 pixels wide): a print resolution, where every other
#: figure is saved at :data:`rankcollapse.edge.figures.DPI`.
DPI = 300
#: The formats a run's figures are written in (``analyze --plot-format``, ``plot --plot-format``).
FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
#: Text sizes of a column-wide figure (points), applied while a figure is drawn, never globally.
STYLE: dict[str, Any] = {
    "font.size": 7.5,
    "axes.titlesize": 7.5,
    "axes.labelsize": 7,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
    "legend.fontsize": 6,
    "figure.titlesize": 7.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.2,
    "lines.markersize": 2.5,
    "axes.linewidth": 0.6,
    "legend.frameon": False,
    "legend.handlelength": 1.6,
}
#: The two collapse quantities and their figure labels (``core.names``: one label everywhere).
COLLAPSE: tuple[tuple[str, str], ...] = (("mu", name_label("mu")), ("mu_rel", name_label("mu_rel")))
#: Each panel's title (the names of the columns it draws, ``rankcollapse.metrics``) and y label (the unit).
PANELS: dict[str, tuple[str, str]] = {
    "mu": (COLLAPSE[0][1], "units of X"),
    "mu_rel": (COLLAPSE[1][1], "ratio"),
    "rank": ("effective_rank, num_rank", "dimensions"),
    "full_rank": ("full_rank", "share of samples"),
    "sigma_min": ("sigma_min", "units of X"),
    "mean_abs_cos": ("mean_abs_cos", "|cosine|, token pairs"),
    "heads": ("first_token_attention_h", "head h"),
    "sinks": ("sinks", "share"),
    "attention_entropy": ("attention_entropy", "nats"),
    "massive_ratio": ("massive_ratio", "max |x| / median |x|"),
}
#: The characters a title line holds at :data:`COLUMN_WIDTH` (a longer line is wrapped).
TITLE_CHARS = 64
#: The characters two legend columns may hold side by side at :data:`COLUMN_WIDTH` (else one column).
LEGEND_CHARS = 62
LAYER_LABEL = f"{name_label('layer')} (0 = embeddings)"
#: The row statuses a figure shades (``AnalyzeResult``'s ``status``), with their legend entries.
STATUS_SHADES: dict[str, tuple[str, str]] = {
    "underflow": ("0.88", "underflow (a sample's X is 0)"),
    "overflow": ("mistyrose", "overflow (a sample non-finite)"),
}
#: The line style of each dtype's precision floor (one figure may overlay runs of several dtypes).
FLOOR_STYLES: dict[str, Any] = {"float64": ":", "float32": "--", "float16": (0, (3, 1, 1, 1, 1, 1)),
                                "bfloat16": "-."}


def row_value(row: dict[str, Any], key: str) -> float:
    try:
        v = float(row.get(key, math.nan))
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def loggable(v: float) -> float:
    """A value a log axis can show (NaN for 0, negative or non-finite: a gap in the curve)."""
    return v if v > 0 else math.nan


def row_layers(rows: Sequence[dict[str, Any]]) -> list[int]:
    return [int(float(r["layer"])) for r in rows]


def wrap_title(title: str) -> str:
    """Each line of a title cut at :data:`TITLE_CHARS` characters (a figure is one column wide)."""
    import textwrap

    return "\n".join(textwrap.fill(line, TITLE_CHARS, break_on_hyphens=False) for line in title.split("\n"))


@contextmanager
def column_style() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(STYLE):
        yield


@dataclass(frozen=True)
class Frame:
    """A figure (not registered with pyplot: no global state, garbage-collected like any object), the
    subfigure its panels go in (``height`` inches tall) and the one the legend goes in, below."""

    fig: Any
    panels: Any
    legend: Any
    grid: Any
    height: float


def new_frame(height: float, width: float = COLUMN_WIDTH) -> Frame:
    fig = new_figure(width, height + 0.3, layout="constrained")
    grid = fig.add_gridspec(2, 1, height_ratios=(height, 0.3))
    return Frame(fig, fig.add_subfigure(grid[0]), fig.add_subfigure(grid[1]), grid, height)


def finish_frame(frame: Frame, axes: Sequence[Any], title: str, extra: Sequence[tuple[Any, str]] = ()) -> Any:
    """The x label under the panels, the title above them, and one legend under everything: each
    labelled artist of ``axes`` once (then ``extra``), so that no legend covers a curve, in two columns
    where they fit the width (else one); the figure grows by the legend's height. Returns the figure."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    for h, lab in extra:
        handles.setdefault(lab, h)
    labels = list(handles)
    half = math.ceil(len(labels) / 2)
    longest = [max((len(line) for lab in part for line in lab.split("\n")), default=0)
               for part in (labels[:half], labels[half:])]
    ncol = 2 if sum(longest) <= LEGEND_CHARS * frame.fig.get_figwidth() / COLUMN_WIDTH else 1
    frame.panels.supxlabel(LAYER_LABEL, fontsize=STYLE["axes.labelsize"])
    if title:
        frame.panels.suptitle(plain_text(title))
    lines = sum(lab.count("\n") + 1 for lab in labels)  # a wrapped label takes more than one line
    below = 0.06 + 0.12 * math.ceil(lines / ncol) if handles else 0.02
    frame.fig.set_size_inches(frame.fig.get_figwidth(), frame.height + below)
    frame.grid.set_height_ratios((frame.height, below))
    if handles:
        frame.legend.legend(list(handles.values()), list(handles), loc="center", ncol=ncol, columnspacing=1.2)
    return frame.fig


def layer_axis(ax: Any, label: bool = True, layers: Sequence[int] = ()) -> None:
    """Integer layer ticks on x, every layer of ``layers`` in range (a curve with no value there leaves a
    visible gap, not a shorter axis), and the x label unless the figure has one for all its panels."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=7))
    if layers:
        ax.set_xlim(min(layers) - 0.5, max(layers) + 0.5)
    if label:
        ax.set_xlabel(LAYER_LABEL)


def shade_statuses(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    """Shade the layers whose row status is ``underflow`` or ``overflow`` (values there are partial or
    undefined), one span per run of consecutive layers."""
    layers = row_layers(rows)
    for status, (color, label) in STATUS_SHADES.items():
        ts = [t for t, r in zip(layers, rows, strict=True) if r.get("status") == status]
        for i, t in enumerate(ts):
            if i == 0 or ts[i - 1] != t - 1:
                end = t
                while end + 1 in ts:
                    end += 1
                ax.axvspan(t - 0.5, end + 0.5, color=color, lw=0, zorder=0, label=label)


def mark_zeros(ax: Any, layers: Sequence[int], values: Sequence[float], color: str) -> None:
    """On a log axis, a marker at the bottom edge where a value is exactly 0 (a log axis cannot show it)."""
    ts = [t for t, v in zip(layers, values, strict=True) if v == 0]
    if ts:
        ax.plot(
            ts,
            [0.0] * len(ts),
            "v",
            color=color,
            ms=3,
            clip_on=False,
            transform=ax.get_xaxis_transform(),
            label="exactly 0 (off the log axis)",
        )


def log_y(ax: Any) -> None:
    """Log y (call it after the data are drawn). Where the data span less than two decades, every label
    reads as a plain number (0.1, 40, 60, not 4 x 10^1 beside 10^2); wider spans keep powers of ten."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        """LogFormatter's choice of the ticks to label, each label a plain number."""

        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:g}" if super().__call__(x, pos) else ""

    ax.set_yscale("log")
    ax.yaxis.set_minor_formatter(Plain(labelOnlyBase=False))
    low, high = ax.get_ylim()
    if low > 0 and high / low < 100:
        ax.yaxis.set_major_formatter(Plain(labelOnlyBase=False))


def draw_floors(ax_rel: Any, dtypes: Sequence[str]) -> None:
    """``mu_rel``'s precision floor ``32 eps`` of each dtype named (0.25 for bfloat16, 0.031 for float16,
    3.8e-6 for float32, 7.1e-15 for float64), once each; a name that is no dtype (a run without one) none."""
    from rankcollapse.core.precision import ALL_DTYPE_NAMES, floor_rel

    for dtype in dict.fromkeys(d for d in dtypes if d in ALL_DTYPE_NAMES):
        ax_rel.axhline(
            floor_rel(dtype),
            color="C3",
            ls=FLOOR_STYLES[dtype],
            lw=1,
            label=f"precision floor {floor_rel(dtype):.1e} ({dtype})",
        )


def draw_band(
    ax: Any, layers: list[int], rows: Sequence[dict[str, Any]], key: str, color: str, log: bool = False
) -> None:
    lo, hi = f"{key}_min", f"{key}_max"
    if rows and lo in rows[0] and hi in rows[0]:
        f = loggable if log else (lambda v: v)
        ax.fill_between(
            layers,
            [f(row_value(r, lo)) for r in rows],
            [f(row_value(r, hi)) for r in rows],
            color=color,
            alpha=0.18,
            lw=0,
        )


def band_handle(color: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(color=color, alpha=0.18, lw=0)


def label_panel(ax: Any, key: str) -> None:
    title, unit = PANELS[key]
    ax.set_title(title)
    ax.set_ylabel(unit)


def save_column(fig: Any, *paths: str | Path) -> list[Path]:
    """Save a column-wide ``fig`` at each of ``paths``, at :data:`DPI`, in the format its suffix names
    (:func:`rankcollapse.edge.figures.save_figure`: every file of a run's figures is written through it)."""
    return save_figure(fig, *paths, what="plot", dpi=DPI)


def plot_formats(spec: str | Sequence[str]) -> tuple[str, ...]:
    """The one parser of figure formats (``--plot-format png,pdf``): a tuple of :data:`FORMATS`."""
    names = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    bad = [n for n in names if n not in FORMATS]
    if bad or not names:
        got = quote(spec if isinstance(spec, str) else list(spec), 40)
        raise RankCollapseError(
            f"--plot-format {got} is invalid; allowed: one or more of "
            f"{', '.join(FORMATS)}, separated by commas"
        )
    return tuple(dict.fromkeys(names))

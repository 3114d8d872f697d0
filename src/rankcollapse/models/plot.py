"""Figures of analysis rows (:class:`~rankcollapse.models.analyze.AnalyzeResult` or a finished run), and
finished runs overlaid.

Figures as objects (``matplotlib.figure.Figure``, not registered with pyplot: nothing to close; save one
with :func:`rankcollapse.edge.figures.save_figure` or matplotlib's own ``savefig``, a notebook shows it),
each sized for one column of a two-column paper (:data:`COLUMN_WIDTH` inches, 7-8 pt text), the layer
index t on x (0 = embeddings), the title naming the model, mode, mask, d_qk, dtype and the sample size:

- :func:`figure_collapse`: ``mu`` and ``mu_rel`` (log y), the batch mean with its min-max band over
  samples, ``mu_rel``'s precision floor (``32 eps`` of the run's dtype: its hidden states', 0.25 for
  bfloat16, :func:`rankcollapse.core.precision.floor_rel`) and the layers where every sample is at it.
- :func:`figure_geometry`: the token geometry of paper Figure 4 and the ranks: ``effective_rank`` and
  ``num_rank`` against ``min(N, d)``, ``full_rank`` (share of samples at full rank), ``sigma_min``
  (log y), ``mean_abs_cos`` against the isotropic ``sqrt(2 / (pi d))``.
- :func:`figure_diagnostics` (runs with ``diagnostics=True`` only): ``first_token_attention_h{k}`` as a
  heatmap layer t x head h with the sink heads (above the run's sink threshold) marked,
  ``first_token_attention`` and ``sink_rate``, ``attention_entropy`` (nats, band: min-max over heads)
  and ``massive_ratio`` (log y).
- :func:`figures`: every figure that applies to a run, by name (``mu``, ``geometry``, ``diagnostics``:
  the stems of the files ``rankcollapse analyze --plot`` writes, :func:`save_figures`).

Files: :func:`plot_collapse` (``DIR/mu.png``) and :func:`plot_token_geometry` save the first two from
bare rows; :func:`plot` overlays finished runs (folders with ``config.json`` and ``metrics.csv`` from
``analyze`` or ``simulate``) on one figure, one curve per run labelled by ``by`` (``mask``, ``mode``,
``model`` or ``dtype``); ``rankcollapse plot DIR DIR ... --by mask`` is that function.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rankcollapse.core.names import from_stored
from rankcollapse.core.names import label as name_label
from rankcollapse.core.names import read as read_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.figures import new_figure, save_figure
from rankcollapse.edge.validate import plain_text, quote
from rankcollapse.metrics.diagnostics import SINK_THRESHOLD

#: Width of one column of a two-column paper, in inches: the width every figure of a run is drawn at.
COLUMN_WIDTH = 3.5
#: Resolution of a column-wide figure's PNG (1050 pixels wide): a print resolution, where every other
#: figure is saved at :data:`rankcollapse.edge.figures.DPI`.
DPI = 300
#: The formats :func:`save_figures` (``analyze --plot-format``) writes.
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
#: What :func:`plot` can label its curves by.
BY: tuple[str, ...] = ("mask", "mode", "model", "dtype")
#: Every fact of a run a label or a title may name (``BY``, the run's d_qk, depth and sample size).
FACTS: tuple[str, ...] = (*BY, "d_qk", "layers", "size")
#: The columns :func:`figure_geometry` draws (the ranks share one panel).
GEOMETRY_COLUMNS: tuple[str, ...] = ("effective_rank", "num_rank", "full_rank", "sigma_min", "mean_abs_cos")
#: The characters a title line holds at :data:`COLUMN_WIDTH` (a longer line is wrapped).
TITLE_CHARS = 64
#: The characters two legend columns may hold side by side at :data:`COLUMN_WIDTH` (else one column).
LEGEND_CHARS = 62
#: Sun et al. (2024) call activations massive at about this many times the median magnitude.
MASSIVE = 1000.0
LAYER_LABEL = f"{name_label('layer')} (0 = embeddings)"


def _value(row: dict[str, Any], key: str) -> float:
    try:
        v = float(row.get(key, math.nan))
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def _positive(v: float) -> float:
    """A value a log axis can show (NaN for 0, negative or non-finite: a gap in the curve)."""
    return v if v > 0 else math.nan


def _layers(rows: Sequence[dict[str, Any]]) -> list[int]:
    return [int(float(r["layer"])) for r in rows]


@dataclass(frozen=True)
class _Run:
    """What a figure needs of a run: its rows, dtype and title, the sink threshold, N tokens and width d."""

    rows: Sequence[dict[str, Any]]
    dtype: str
    title: str = ""
    sink_threshold: float = SINK_THRESHOLD
    tokens: int | None = None
    width: int | None = None


def _title(label: str, mode: str, mask: str, d_qk: Any, dtype: str, samples: Any, tokens: Any) -> str:
    """Two lines: the model, mode and mask; the dtype, d_qk and the sample size."""
    try:
        dq = f", d_qk {float(d_qk):g}"
    except (TypeError, ValueError):
        dq = ""
    size = f", {samples} excerpts × {tokens} tokens" if samples and tokens else ""
    return _wrap(f"{label} — {mode}, mask {mask}\n{dtype}{dq}{size}")


def _wrap(title: str) -> str:
    """Each line of a title cut at :data:`TITLE_CHARS` characters (a figure is one column wide)."""
    import textwrap

    return "\n".join(textwrap.fill(line, TITLE_CHARS, break_on_hyphens=False) for line in title.split("\n"))


def _run_of(result: Any) -> _Run:
    """An :class:`AnalyzeResult` or a :class:`FinishedRun` as what the figures read (one-line refusal
    of anything else)."""
    if isinstance(result, FinishedRun):
        cfg = result.config
        a, m = cfg.get("analyze"), cfg.get("model")
        if isinstance(a, dict):
            m = m if isinstance(m, dict) else {}
            f = result.facts
            return _Run(
                result.rows,
                f["dtype"],
                _title(
                    f["model"],
                    f["mode"],
                    f["mask"],
                    m.get("d_qk"),
                    f["dtype"],
                    *_read_size(cfg),
                ),
                float(a.get("sink_threshold", SINK_THRESHOLD)),
                _int(_read_size(cfg)[1]),
                _int(m.get("d_model")),
            )
        s = cfg.get("simulate", {})
        f = result.facts
        title = _wrap(f"{f['model']} — {f['mode']}, mask {f['mask']}\n{f['dtype']}, {f['d_qk']}")
        tokens = _int(read_name(s, "tokens"))
        return _Run(result.rows, f["dtype"], title, tokens=tokens, width=_int(s.get("d")))
    rows, config, info = (getattr(result, k, None) for k in ("rows", "config", "model_info"))
    if not isinstance(rows, list) or config is None or not isinstance(info, dict):
        raise RankCollapseError(
            f"cannot draw {quote(type(result).__name__, 40)}; allowed: an AnalyzeResult "
            "(analyze(...)) or a finished run (read_run(folder))"
        )
    label = read_name(info, "model_label") or config.model
    ids = getattr(result, "ids", None)  # the tokens read: [b, n] (the config's sizes when none are kept)
    samples, tokens = (
        tuple(ids.shape) if ids is not None and ids.ndim == 2 else (config.samples, config.tokens)
    )
    title = _title(label, config.mode, info.get("mask", ""), info.get("d_qk"), config.dtype, samples, tokens)
    return _Run(
        rows, config.dtype, title, float(config.sink_threshold), _int(tokens), _int(info.get("d_model"))
    )


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(STYLE):
        yield


@dataclass(frozen=True)
class _Frame:
    """A figure (not registered with pyplot: no global state, garbage-collected like any object), the
    subfigure its panels go in (``height`` inches tall) and the one the legend goes in, below."""

    fig: Any
    panels: Any
    legend: Any
    grid: Any
    height: float


def _frame(height: float, width: float = COLUMN_WIDTH) -> _Frame:
    fig = new_figure(width, height + 0.3, layout="constrained")
    grid = fig.add_gridspec(2, 1, height_ratios=(height, 0.3))
    return _Frame(fig, fig.add_subfigure(grid[0]), fig.add_subfigure(grid[1]), grid, height)


def _finish(frame: _Frame, axes: Sequence[Any], title: str, extra: Sequence[tuple[Any, str]] = ()) -> Any:
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


def _layer_axis(ax: Any, label: bool = True, layers: Sequence[int] = ()) -> None:
    """Integer layer ticks on x, every layer of ``layers`` in range (a curve with no value there leaves a
    visible gap, not a shorter axis), and the x label unless the figure has one for all its panels."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=7))
    if layers:
        ax.set_xlim(min(layers) - 0.5, max(layers) + 0.5)
    if label:
        ax.set_xlabel(LAYER_LABEL)


#: The row statuses a figure shades (``AnalyzeResult``'s ``status``), with their legend entries.
STATUS_SHADES: dict[str, tuple[str, str]] = {
    "underflow": ("0.88", "underflow (a sample's X is 0)"),
    "overflow": ("mistyrose", "overflow (a sample non-finite)"),
}


def _shade_statuses(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    """Shade the layers whose row status is ``underflow`` or ``overflow`` (values there are partial or
    undefined), one span per run of consecutive layers."""
    layers = _layers(rows)
    for status, (color, label) in STATUS_SHADES.items():
        ts = [t for t, r in zip(layers, rows, strict=True) if r.get("status") == status]
        for i, t in enumerate(ts):
            if i == 0 or ts[i - 1] != t - 1:
                end = t
                while end + 1 in ts:
                    end += 1
                ax.axvspan(t - 0.5, end + 0.5, color=color, lw=0, zorder=0, label=label)


def _zeros(ax: Any, layers: Sequence[int], values: Sequence[float], color: str) -> None:
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


def _log_y(ax: Any) -> None:
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


def _draw_collapse(
    ax_mu: Any, ax_rel: Any, rows: Sequence[dict[str, Any]], label: str, color: str, band: bool = True
) -> None:
    layers = _layers(rows)
    for ax, (key, _) in ((ax_mu, COLLAPSE[0]), (ax_rel, COLLAPSE[1])):
        if ax is None:
            continue
        ax.plot(layers, [_positive(_value(r, key)) for r in rows], "-", color=color, label=plain_text(label))
        if band and rows and f"{key}_min" in rows[0]:
            ax.fill_between(
                layers,
                [_positive(_value(r, f"{key}_min")) for r in rows],
                [_positive(_value(r, f"{key}_max")) for r in rows],
                color=color,
                alpha=0.15,
                lw=0,
            )
    at = [(t, _value(r, "mu_rel")) for t, r in zip(layers, rows, strict=True) if _value(r, "at_floor") >= 1.0]
    if at and ax_rel is not None:
        ax_rel.plot([t for t, _ in at], [_positive(v) for _, v in at], ".", color="0.45", ms=5)


#: The line style of each dtype's precision floor (one figure may overlay runs of several dtypes).
FLOOR_STYLES: dict[str, Any] = {"float64": ":", "float32": "--", "float16": (0, (3, 1, 1, 1, 1, 1)),
                                "bfloat16": "-."}


def _draw_floors(ax_rel: Any, dtypes: Sequence[str]) -> None:
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


def _finish_collapse(ax_mu: Any, ax_rel: Any, any_at_floor: bool, legend: bool = True) -> None:
    for ax, key in ((ax_mu, "mu"), (ax_rel, "mu_rel")):
        if ax is None:
            continue
        _log_y(ax)
        _layer_axis(ax, label=legend)
        _label(ax, key)
    if any_at_floor and ax_rel is not None:
        ax_rel.plot([], [], ".", color="0.45", label="every sample at the floor")
    if legend:
        for ax in (ax_mu, ax_rel):
            if ax is not None:
                ax.legend()


def _band(
    ax: Any, layers: list[int], rows: Sequence[dict[str, Any]], key: str, color: str, log: bool = False
) -> None:
    lo, hi = f"{key}_min", f"{key}_max"
    if rows and lo in rows[0] and hi in rows[0]:
        f = _positive if log else (lambda v: v)
        ax.fill_between(
            layers,
            [f(_value(r, lo)) for r in rows],
            [f(_value(r, hi)) for r in rows],
            color=color,
            alpha=0.18,
            lw=0,
        )


def _save(fig: Any, path: str | Path) -> Path:
    """Save a column-wide ``fig`` at ``path``, at :data:`DPI`, in the format its suffix names
    (:func:`rankcollapse.edge.figures.save_figure`)."""
    return save_figure(fig, path, what="plot", dpi=DPI)[0]


def _label(ax: Any, key: str) -> None:
    title, unit = PANELS[key]
    ax.set_title(title)
    ax.set_ylabel(unit)


def _band_handle(color: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(color=color, alpha=0.18, lw=0)


def _collapse_figure(run: _Run) -> Any:
    if not run.rows:
        raise RankCollapseError("nothing to plot: the run has no rows")
    keys = [k for k, _ in COLLAPSE if k in run.rows[0]]
    if not keys:
        raise RankCollapseError("nothing to plot: the rows have neither mu nor mu_rel (--metrics mu,mu_rel)")
    with _style():
        frame = _frame(2.15)
        axes = frame.panels.subplots(1, len(keys), squeeze=False)[0]
        ax = dict(zip(keys, axes, strict=True))
        ax_mu, ax_rel = ax.get("mu"), ax.get("mu_rel")
        _draw_collapse(ax_mu, ax_rel, run.rows, "batch mean", "C0")
        if ax_rel is not None:
            _draw_floors(ax_rel, [run.dtype])
        _finish_collapse(ax_mu, ax_rel, any(_value(r, "at_floor") >= 1.0 for r in run.rows), legend=False)
        for key, a in ax.items():
            _zeros(a, _layers(run.rows), [_value(r, key) for r in run.rows], "C0")
            _shade_statuses(a, run.rows)
            _layer_axis(a, False, _layers(run.rows))
        return _finish(frame, axes, run.title, [(_band_handle("C0"), "min-max over samples")])


def _geometry_figure(run: _Run) -> Any:
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
    layers = _layers(rows)
    nrows = math.ceil(len(shown) / 2)
    with _style():
        frame = _frame(1.5 * nrows + 0.5)
        axes = list(frame.panels.subplots(nrows, 2, squeeze=False, sharex=True).flat)
        for ax in axes[len(shown) :]:
            ax.remove()
        for ax, key in zip(axes, shown, strict=False):
            _layer_axis(ax, False, layers)
            _label(ax, key)
            _shade_statuses(ax, rows)
            if key == "rank":
                for name, color, marker in (("effective_rank", "C0", "o"), ("num_rank", "C1", "s")):
                    if name in rows[0]:
                        values = [_value(r, name) for r in rows]
                        ax.plot(layers, values, marker=marker, color=color, label=name)
                        _band(ax, layers, rows, name, color)
                if run.tokens and run.width:
                    bound = min(run.tokens, run.width)
                    ax.axhline(bound, color="0.4", ls=":", lw=0.9, label=f"min(N, d) = {bound}")
                    ax.set_ylim(0, 1.08 * bound)  # the bound inside the frame, not on it
                ax.set_ylim(bottom=0)
                continue
            logy = key == "sigma_min"
            ax.plot(
                layers,
                [_positive(_value(r, key)) if logy else _value(r, key) for r in rows],
                marker="o",
                color="C0",
            )
            _band(ax, layers, rows, key, "C0", logy)
            if logy:
                _log_y(ax)
                _zeros(ax, layers, [_value(r, key) for r in rows], "C0")
            elif key == "full_rank":
                ax.set_ylim(-0.04, 1.04)
            else:
                if run.width:
                    iso = math.sqrt(2 / (math.pi * run.width))
                    label = f"isotropic sqrt(2/(pi d)) = {iso:.2g}"
                    ax.axhline(iso, color="C2", ls="--", lw=0.9, label=label)
                ax.set_ylim(0, 1)
        return _finish(frame, axes[: len(shown)], run.title, [(_band_handle("C0"), "min-max over samples")])


def _heads(rows: Sequence[dict[str, Any]], prefix: str) -> list[str]:
    """The per-head columns ``{prefix}_h0, _h1, ...`` of the rows, in head order."""
    names = [k for k in rows[0] if k.startswith(f"{prefix}_h") and k[len(prefix) + 2 :].isdigit()]
    return sorted(names, key=lambda k: int(k[len(prefix) + 2 :]))


def _head_table(rows: Sequence[dict[str, Any]], column: str) -> tuple[list[int], list[list[float]]]:
    names = _heads(rows, column)
    kept = [r for r in rows if any(math.isfinite(_value(r, k)) for k in names)]
    return _layers(kept), [[_value(r, k) for r in kept] for k in names]


def head_values(result: Any, column: str = "first_token_attention") -> tuple[list[int], list[list[float]]]:
    """The per-head values of a diagnostic column as a table ``(layers, values)``: ``values[h][i]`` is
    column ``{column}_h{h}`` of the row of layer ``layers[i]``, over the rows with attention (row 0, the
    embeddings, has none). ``column``: ``first_token_attention`` (what :func:`figure_diagnostics`'s
    heatmap shows) or ``attention_entropy``. ``result``: an AnalyzeResult with diagnostics or a finished
    run (:func:`read_run`)."""
    if column not in ("first_token_attention", "attention_entropy"):
        raise RankCollapseError(
            f"no per-head column {quote(str(column), 40)}; allowed: first_token_attention, attention_entropy"
        )
    run = _run_of(result)
    _check_diagnostics(run)
    return _head_table(run.rows, column)


def _check_diagnostics(run: _Run) -> None:
    if not run.rows or not _heads(run.rows, "first_token_attention"):
        raise RankCollapseError(
            "this run has no diagnostics; run analyze with diagnostics=True "
            "(--diagnostics) for the attention and activation figures"
        )


def _diagnostics_figure(run: _Run) -> Any:
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    _check_diagnostics(run)
    rows, th = run.rows, run.sink_threshold
    layers, heat = _head_table(rows, "first_token_attention")
    every = _layers(rows)
    with _style():
        frame = _frame(3.55)
        (ax_map, ax_sink), (ax_ent, ax_mass) = frame.panels.subplots(2, 2)
        # first_token_attention per head h (y) and layer t (x), the sink heads outlined
        data = np.array(heat, dtype=float)  # [h, t]
        image = ax_map.imshow(
            data,
            aspect="auto",
            origin="lower",
            cmap="viridis",
            vmin=0.0,
            vmax=1.0,
            interpolation="nearest",
            extent=(layers[0] - 0.5, layers[-1] + 0.5, -0.5, data.shape[0] - 0.5),
        )
        hs, ts = np.nonzero(data > th)
        ax_map.plot(np.asarray(layers)[ts], hs, "s", ms=2.4, mfc="none", mec="white", mew=0.6, ls="none")
        bar = frame.panels.colorbar(image, ax=ax_map, fraction=0.09, pad=0.03, aspect=15)
        bar.ax.tick_params(labelsize=5.5)
        ax_map.grid(False)
        ax_map.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        _layer_axis(ax_map, label=False)
        _label(ax_map, "heads")
        sink = Line2D(
            [],
            [],
            marker="s",
            ms=3,
            mfc="none",
            mec="0.2",
            mew=0.7,
            ls="none",
            label=f"sink head (first_token_attention_h > {th:g})",
        )
        # the means over heads
        ax_sink.plot(
            every,
            [_value(r, "first_token_attention") for r in rows],
            marker="o",
            color="C0",
            label="first_token_attention, mean over heads",
        )
        ax_sink.plot(
            every,
            [_value(r, "sink_rate") for r in rows],
            marker="s",
            color="C1",
            label="sink_rate, share of heads",
        )
        ax_sink.axhline(th, color="0.4", ls=":", lw=0.9, label=f"sink threshold {th:g}")
        ax_sink.set_ylim(-0.04, 1.04)
        ax_sink.set_yticks([0, 0.25, 0.5, 0.75, 1])
        _layer_axis(ax_sink, label=False)
        _label(ax_sink, "sinks")
        # attention entropy: mean over heads, band min-max over heads
        ax_ent.plot(
            every,
            [_value(r, "attention_entropy") for r in rows],
            marker="o",
            color="C2",
            label="attention_entropy, mean over heads",
        )
        heads = _heads(rows, "attention_entropy")
        if heads:
            per = [[_value(r, k) for k in heads] for r in rows]
            ax_ent.fill_between(
                every,
                [min(v) if not any(map(math.isnan, v)) else math.nan for v in per],
                [max(v) if not any(map(math.isnan, v)) else math.nan for v in per],
                color="C2",
                alpha=0.18,
                lw=0,
                label="min-max over heads",
            )
        ax_ent.set_ylim(bottom=0)
        _layer_axis(ax_ent, label=False)
        _label(ax_ent, "attention_entropy")
        # massive activations
        ratio = [_positive(_value(r, "massive_ratio")) for r in rows]
        ax_mass.plot(every, ratio, marker="o", color="C4")
        finite = [v for v in ratio if math.isfinite(v)]
        if finite and max(finite) > MASSIVE / 10:
            ax_mass.axhline(MASSIVE, color="0.4", ls="--", lw=0.9, label="massive: ~1000 (Sun et al. 2024)")
        _log_y(ax_mass)
        _layer_axis(ax_mass, label=False)
        _label(ax_mass, "massive_ratio")
        for ax in (ax_map, ax_sink, ax_ent, ax_mass):  # one x range: row 0 has no attention
            _layer_axis(ax, False, every)
            if ax is not ax_map:
                _shade_statuses(ax, rows)
        title = (run.title + "\n" if run.title else "") + "means over samples"
        return _finish(frame, [ax_map, ax_sink, ax_ent, ax_mass], title, [(sink, sink.get_label())])


def figure_collapse(result: Any) -> Any:
    """``mu`` and ``mu_rel`` per layer t (log y; the batch mean and its min-max band over samples),
    ``mu_rel``'s precision floor (``32 eps`` of the run's dtype) and the layers where every sample is at
    it. ``result``: an :class:`~rankcollapse.models.analyze.AnalyzeResult` or a finished run
    (:func:`read_run`). Returns a ``matplotlib.figure.Figure`` (not registered with pyplot), one column
    wide; its axes are ``mu``'s then ``mu_rel``'s (the ones the rows have)."""
    return _collapse_figure(_run_of(result))


def figure_geometry(result: Any) -> Any:
    """The token geometry per layer t, one panel each (those the rows have, in this order): ranks
    (``effective_rank``, ``num_rank`` and ``min(N, d)``), ``full_rank`` (the share of samples at full
    rank), ``sigma_min`` (log y), ``mean_abs_cos`` (with the isotropic ``sqrt(2 / (pi d))``); the batch
    mean and its min-max band over samples. A ``matplotlib.figure.Figure``, one column wide."""
    return _geometry_figure(_run_of(result))


def figure_diagnostics(result: Any) -> Any:
    """The diagnostics of a run with ``diagnostics=True`` (else RankCollapseError, one line): a heatmap
    of ``first_token_attention_h{k}`` over layer t (x) and head h (y), the sink heads (above the run's
    ``sink_threshold``) outlined (its array: :func:`head_values`); ``first_token_attention`` and
    ``sink_rate`` (means over heads) with the threshold; ``attention_entropy`` (nats; band: min-max over
    heads); ``massive_ratio`` (log y). Axes in that order (and the heatmap's colorbar last). A
    ``matplotlib.figure.Figure``, one column wide."""
    return _diagnostics_figure(_run_of(result))


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
    (:func:`figure_diagnostics`). ``result``: an AnalyzeResult or a finished run (:func:`read_run`)."""
    run = _run_of(result)
    if not run.rows:
        raise RankCollapseError("nothing to plot: the run has no rows")
    draw = {"mu": _collapse_figure, "geometry": _geometry_figure, "diagnostics": _diagnostics_figure}
    names = figure_names(list(run.rows[0]), bool(_heads(run.rows, "first_token_attention")))
    return {name: draw[name](run) for name in names}


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
            written.append(_save(fig, folder / f"{name}.{fmt}"))
    return written


def plot_token_geometry(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Save :func:`figure_geometry` of bare rows (no model facts: no ``min(N, d)`` or isotropic line)
    into ``path`` (PNG/PDF/SVG by its suffix)."""
    return _save(_geometry_figure(_Run(rows, "", title)), path)


def plot_collapse(rows: Sequence[dict[str, Any]], path: str | Path, *, dtype: str, title: str = "") -> Path:
    """Save :func:`figure_collapse` of bare rows into ``path`` (PNG/PDF/SVG by its suffix). ``dtype``:
    the run's hidden states' (``float64``, ``float32``, ``bfloat16``, ``float16``), whose precision floor
    is drawn; RankCollapseError (one line) for another name."""
    from rankcollapse.core.precision import dtype_name

    dtype = dtype_name(dtype, half=True)
    return _save(_collapse_figure(_Run(rows, dtype, title)), path)


#: Keys of ``config.json``'s ``model`` record that an earlier release stored under another name, read
#: under the table's (``core.names.from_stored``: silently, as stored data): ``n_layers`` -> ``model_layers``.
STORED_MODEL_KEYS = ("model_layers",)


@dataclass(frozen=True)
class FinishedRun:
    """A run folder read back: its facts (``mask``, ``mode``, ``model``, ``dtype``, ``d_qk``, ``layers``),
    its rows and ``config`` (``config.json``'s ``config``: ``analyze`` and ``model``, or ``simulate``)."""

    folder: Path
    facts: dict[str, str]
    rows: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)


def read_run(folder: str | Path) -> FinishedRun:
    """Read ``folder/config.json`` and ``folder/metrics.csv`` of a finished ``analyze`` or ``simulate``
    run through their declarations (``edge.runs.RUN_RECORD``, ``edge.runs.METRICS``: what the writer
    wrote them by; each cell parsed, numbers as floats, counts as ints, ``sink_heads`` as a tuple of
    ints) and the one input opener (regular files only, never blocking, a size cap); RankCollapseError
    (one line) when it is not one: a folder whose marker (``.rankcollapse.json``) does not say
    ``complete: true`` is refused (a folder from before markers is read as it is). ``facts``: mask,
    mode, model, dtype, d_qk and depth (layers)."""
    from rankcollapse.edge.folder import MARKER_NAME, read_marker
    from rankcollapse.edge.inputs import quote_path
    from rankcollapse.edge.runs import METRICS, RUN_RECORD

    path = Path(folder)
    marker = read_marker(path)
    if marker is not None and marker.get("complete") is not True:
        raise RankCollapseError(f"{quote_path(path)} is not a finished run: its {MARKER_NAME} says the run "
                                "did not complete (interrupted or failed); run it again")
    for name in ("config.json", "metrics.csv"):
        if not (path / name).exists():
            raise RankCollapseError(
                f"{quote_path(path)} is not a finished run: no {name}; "
                "allowed: a folder written by analyze or simulate"
            )
    record = RUN_RECORD.read(path / "config.json")
    rows = METRICS.read(path / "metrics.csv", required=("mu_rel",))
    cfg = record["config"]
    if isinstance(cfg.get("analyze"), dict):
        a, m = cfg["analyze"], cfg.get("model", {}) if isinstance(cfg.get("model"), dict) else {}
        m = cfg["model"] = from_stored(m, STORED_MODEL_KEYS)  # an earlier release's n_layers: model_layers
        d_qk = m.get("d_qk", a.get("d_qk"))
        facts = {
            "mask": str(m.get("mask") or a.get("mask") or "own"),
            "mode": str(a.get("mode", "")),
            "model": str(read_name(m, "model_label") or a.get("model", "")),
            "dtype": _analyze_dtype(a, m),
            "d_qk": f"d_qk {d_qk}" if d_qk is not None else "",
            "layers": f"{len(rows) - 1} layers",
            "size": _size(*_read_size(cfg)),
        }
    elif isinstance(cfg.get("simulate"), dict):
        s = cfg["simulate"]
        facts = {
            "mask": str(s.get("mask", "")),
            "mode": str(read_name(s, "mode") or ""),
            "model": f"simulate N={read_name(s, 'tokens')}, d={s.get('d')}",
            "dtype": str(s.get("dtype", "")),
            "d_qk": f"d_qk {s.get('d_qk')}",
            "layers": f"{len(rows) - 1} layers",
            "size": "",  # the model fact names N and d
        }
    else:
        raise RankCollapseError(f"{quote_path(path / 'config.json')} is not from analyze or simulate")
    if not rows or "mu_rel" not in rows[0] or "layer" not in rows[0]:
        raise RankCollapseError(f"{quote_path(path / 'metrics.csv')} has no rows with layer and mu_rel")
    return FinishedRun(path, facts, rows, cfg)


def _read_size(cfg: dict[str, Any]) -> tuple[Any, Any]:
    """What an analyze run read (``config.json``'s ``read``: excerpts, tokens), else its config's sizes (a
    folder written before ``read`` was recorded)."""
    read, a = cfg.get("read"), cfg.get("analyze", {})
    if isinstance(read, dict) and read.get("samples") and read.get("tokens"):
        return read["samples"], read["tokens"]
    return a.get("samples"), a.get("tokens")


def _analyze_dtype(analyze: dict[str, Any], model: dict[str, Any]) -> str:
    """An analyze run's dtype: its hidden states' (``model.dtype``, the model's own), else the config's. A
    run of an in-memory bfloat16 model written before results were labelled by the model's dtype says
    ``analyze.dtype: float32`` beside ``model.dtype: bfloat16``: read as bfloat16, its floor bfloat16's."""
    from rankcollapse.core.precision import ALL_DTYPE_NAMES

    own = model.get("dtype")
    return own if isinstance(own, str) and own in ALL_DTYPE_NAMES else str(analyze.get("dtype", ""))


def _labels(runs: Sequence[FinishedRun], by: str) -> list[str]:
    """Each run's value of ``by``, followed by every other fact in which the runs differ (mode, mask,
    d_qk, depth, sample size, ...): two curves never carry the same label while their runs differ; the
    folder's name is added where even that leaves two alike."""
    differ = [k for k in FACTS if k != by and len({r.facts[k] for r in runs}) > 1]
    labels = [", ".join(v for v in [r.facts[by], *(r.facts[k] for k in differ)] if v) for r in runs]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} ({r.folder.name})" for lab, r in zip(labels, runs, strict=True)]
    return labels


#: Figure widths (inches) of :func:`plot`: one column or both columns of a two-column paper.
WIDTHS: dict[str, float] = {"column": COLUMN_WIDTH, "double": 7.2}
#: Panels per row of :func:`plot` at each width.
PANELS_PER_ROW: dict[str, int] = {"column": 2, "double": 3}
#: What :func:`plot` puts on x: the layer t, or the relative depth t / L (runs of 6 and 30 layers aligned).
DEPTHS: tuple[str, ...] = ("layer", "relative")
RELATIVE_LABEL = "relative depth t / L (0 = embeddings, 1 = last layer)"
#: Columns drawn on a log y axis by :func:`plot` (magnitudes spanning decades); every other one linear.
LOG_COLUMNS: frozenset[str] = frozenset({"mu", "mu_rel", "sigma_min", "sigma_max", "massive_ratio",
                                         "dong_residual", "sigma_ratio"})
#: Columns of a run's table that are not per-layer metrics (never a panel of :func:`plot`).
NOT_METRICS: frozenset[str] = frozenset({"layer", "hidden_state", "model_layer", "hook", "status", "finite",
                                         "at_floor", "sink_heads"})


def _finished(run: Any) -> FinishedRun:
    """A run folder, a :class:`FinishedRun` or an in-memory :class:`AnalyzeResult`, as a FinishedRun
    (an AnalyzeResult's facts from its config and model info, as its folder would give them)."""
    if isinstance(run, FinishedRun):
        return run
    if isinstance(run, str | Path):
        return read_run(run)
    rows, config, info = (getattr(run, k, None) for k in ("rows", "config", "model_info"))
    if not isinstance(rows, list) or config is None or not isinstance(info, dict):
        raise RankCollapseError(
            f"cannot compare {quote(type(run).__name__, 40)}; allowed: a run folder, read_run(folder) or "
            "an AnalyzeResult (analyze(...))"
        )
    ids = getattr(run, "ids", None)
    kept = ids is not None and ids.ndim == 2
    samples, tokens = tuple(ids.shape) if kept else (config.samples, config.tokens)
    d_qk = info.get("d_qk")
    label = str(read_name(info, "model_label") or config.model)
    facts = {"mask": str(info.get("mask") or config.mask or "own"), "mode": str(config.mode), "model": label,
             "dtype": str(config.dtype), "d_qk": f"d_qk {d_qk}" if d_qk is not None else "",
             "layers": f"{len(rows) - 1} layers", "size": _size(samples, tokens)}
    return FinishedRun(Path(label), facts, rows, {"analyze": {"samples": samples, "tokens": tokens}})


def _size(samples: Any, tokens: Any) -> str:
    """A run's sample size as its label says it: ``2 × 512 tokens`` (excerpts × tokens)."""
    return f"{samples} × {tokens} tokens" if samples and tokens else ""


def _metric_names(runs: Sequence[FinishedRun], metrics: Sequence[str] | str) -> tuple[str, ...]:
    """The columns ``metrics`` names (a sequence or ``"a,b"``), each checked against the runs' own
    columns: one line naming the allowed ones for a column no run has."""
    names = [m.strip() for m in (metrics.split(",") if isinstance(metrics, str) else metrics) if m.strip()]
    have: dict[str, None] = {}  # per-layer metrics: no per-head (x_h3) or band / spread (x_min, x_std) column
    for r in runs:
        cols = set(r.rows[0]) if r.rows else set()
        for k in r.rows[0] if r.rows else ():
            stem, _, end = k.rpartition("_")
            if not (k in NOT_METRICS or re.fullmatch(r"h\d+", end) or (end in ("min", "max", "std", "se")
                                                                      and stem in cols)):
                have.setdefault(k)
    allowed = list(have)
    bad = [m for m in names if m not in have]
    if bad or not names:
        raise RankCollapseError(f"--metrics {quote(names or metrics, 60)}: no run has "
                                f"{quote(bad or names, 40)}; allowed: {', '.join(allowed)}")
    return tuple(dict.fromkeys(names))


def _x(run: FinishedRun, depth: str) -> list[float]:
    """Each row's position on x: its layer t, or t / L (L the run's last layer)."""
    layers = _layers(run.rows)
    if depth == "layer":
        return [float(t) for t in layers]
    last = max(layers) or 1
    return [t / last for t in layers]


def plot(runs: Sequence[Any], out: str | Path | None = None, *, by: str = "mask",
         metrics: Sequence[str] | str = ("mu", "mu_rel"), depth: str = "layer", width: str = "column",
         formats: Sequence[str] | str | None = None, title: str = "") -> Any:
    """Finished runs compared on one figure, the single-run figures' sibling (their style, sizes and
    legend below): one panel per column of ``metrics`` (any per-layer column the runs have: ``mu``,
    ``mu_rel``, ``effective_rank``, ``mean_abs_cos``, ``sigma_min``, ``sink_rate``,
    ``attention_entropy``, ...; log y for magnitudes), one curve per run labelled by its ``by`` (``mask``,
    ``mode``, ``model`` or ``dtype``) and every other setting in which the runs differ (the sample size
    ``2 × 512 tokens`` included), the min-max band over samples for up to three runs, ``mu_rel``'s
    precision floor of each dtype present. ``depth``: ``layer`` (t) or ``relative`` (t / L, runs of
    different depths aligned). ``width``: ``column`` (3.5 in) or ``double`` (7.2 in). The title names what
    the runs share.

    ``runs``: run folders (``analyze`` or ``simulate``), :func:`read_run` results or in-memory
    ``AnalyzeResult`` objects. Returns the ``matplotlib.figure.Figure``; with ``out``, also writes it
    there at 300 dpi in the format of its suffix and in each of ``formats`` (``png``, ``pdf``, ``svg``:
    ``out`` with that suffix)."""
    if by not in BY:
        raise RankCollapseError(f"unknown --by {quote(str(by), 30)}; allowed: {', '.join(BY)}")
    if depth not in DEPTHS:
        raise RankCollapseError(f"unknown --depth {quote(str(depth), 30)}; allowed: {', '.join(DEPTHS)}")
    if width not in WIDTHS:
        raise RankCollapseError(f"unknown --width {quote(str(width), 30)}; allowed: {', '.join(WIDTHS)}")
    if not runs:
        raise RankCollapseError("give at least one run folder")
    fmts = plot_formats(formats) if formats else ()
    finished = [_finished(r) for r in runs]
    names = _metric_names(finished, metrics)
    import textwrap

    chars = LEGEND_CHARS if width == "column" else 2 * LEGEND_CHARS
    labels = [textwrap.fill(lab, chars, subsequent_indent="  ") for lab in _labels(finished, by)]
    per_row = min(len(names), PANELS_PER_ROW[width])
    nrows = math.ceil(len(names) / per_row)
    band = len(finished) <= 3
    with _style():
        frame = _frame(1.55 * nrows + 0.35, WIDTHS[width])
        axes = list(frame.panels.subplots(nrows, per_row, squeeze=False, sharex=True).flat)
        for ax in axes[len(names):]:
            ax.remove()
        at_floor = False
        for i, (run, label) in enumerate(zip(finished, labels, strict=True)):
            color, xs = f"C{i % 10}", _x(run, depth)
            for ax, key in zip(axes, names, strict=False):
                log = key in LOG_COLUMNS
                values = [_value(r, key) for r in run.rows]
                shown = [_positive(v) if log else v for v in values]
                ax.plot(xs, shown, "-", marker="o", ms=1.8, color=color, label=plain_text(label))
                if band and run.rows and f"{key}_min" in run.rows[0]:
                    f = _positive if log else (lambda v: v)
                    low = [f(_value(r, f"{key}_min")) for r in run.rows]
                    high = [f(_value(r, f"{key}_max")) for r in run.rows]
                    ax.fill_between(xs, low, high, color=color, alpha=0.15, lw=0)
                if key == "mu_rel":
                    at = [(x, v) for x, v, r in zip(xs, values, run.rows, strict=True)
                          if _value(r, "at_floor") >= 1.0]
                    if at:
                        at_floor = True
                        ax.plot([x for x, _ in at], [_positive(v) for _, v in at], ".", color="0.45", ms=5)
                if log:
                    _zeros(ax, xs, values, color)  # type: ignore[arg-type]
        extra: list[tuple[Any, str]] = []
        for ax, key in zip(axes, names, strict=False):
            if key == "mu_rel":
                _draw_floors(ax, [r.facts["dtype"] for r in finished])
            if key in LOG_COLUMNS:
                _log_y(ax)
            ax.set_title(PANELS[key][0] if key in PANELS else key)
            if key in PANELS:
                ax.set_ylabel(PANELS[key][1])
            if depth == "layer":
                _layer_axis(ax, False, sorted({t for r in finished for t in _layers(r.rows)}))
            else:
                ax.set_xlim(-0.03, 1.03)
        if at_floor:
            extra.append((axes[names.index("mu_rel")].plot([], [], ".", color="0.45")[0],
                          "every sample at the floor"))
        if band and any(f"{k}_min" in r.rows[0] for r in finished for k in names if r.rows):
            extra.append((_band_handle("0.5"), "min-max over samples"))
        shared = [
            f"{k} {finished[0].facts[k]}" if k in BY else finished[0].facts[k]
            for k in FACTS
            if k != by and len({r.facts[k] for r in finished}) == 1 and finished[0].facts[k]
        ]
        head = title or (f"by {by}" + (" — " + ", ".join(shared) if shared else ""))
        fig = _finish(frame, axes[: len(names)], _wrap(head) if width == "column" else head, extra)
        if depth == "relative":
            frame.panels.supxlabel(RELATIVE_LABEL, fontsize=STYLE["axes.labelsize"])
    if out is not None:
        save_figure(fig, *figure_paths(out, fmts), what="plot", dpi=DPI)
    return fig


def figure_paths(out: str | Path, formats: Sequence[str] | str | None = None) -> list[Path]:
    """The files :func:`plot` writes: ``out``, then ``out`` with each other suffix of ``formats``."""
    out = Path(out)
    fmts = plot_formats(formats) if formats else ()
    return [out, *(out.with_suffix(f".{f}") for f in fmts if out.suffix.lstrip(".").lower() != f)]

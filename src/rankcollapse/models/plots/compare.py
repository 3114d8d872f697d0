"""Finished runs overlaid on one figure (:func:`plot`; ``rankcollapse plot DIR DIR ... --by mask`` is that
function): folders with ``config.json`` and ``metrics.csv`` from ``analyze`` or ``simulate``
(:func:`~rankcollapse.models.finished.read_run`), or in-memory results, one curve per run labelled by ``by``
(``mask``, ``mode``, ``model`` or ``dtype``), in the single-run figures' style; :func:`figure_paths` the
files it writes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rankcollapse.core.names import read as read_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import plain_text, quote
from rankcollapse.models.finished import FinishedRun, read_run, size_fact
from rankcollapse.models.plots.style import (
    COLUMN_WIDTH,
    LEGEND_CHARS,
    PANELS,
    STYLE,
    band_handle,
    column_style,
    draw_floors,
    finish_frame,
    layer_axis,
    log_y,
    loggable,
    mark_zeros,
    new_frame,
    plot_formats,
    row_layers,
    row_value,
    save_column,
    wrap_title,
)

__all__ = ["BY", "DEPTHS", "FACTS", "LOG_COLUMNS", "NOT_METRICS", "PANELS_PER_ROW", "WIDTHS", "figure_paths",
           "plot"]

#: What :func:`plot` can label its curves by.
BY: tuple[str, ...] = ("mask", "mode", "model", "dtype")
#: Every fact of a run a label or a title may name (``BY``, the run's d_qk, depth and sample size).
FACTS: tuple[str, ...] = (*BY, "d_qk", "layers", "size")
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


def _labels(runs: Sequence[FinishedRun], by: str) -> list[str]:
    """Each run's value of ``by``, followed by every other fact in which the runs differ (mode, mask,
    d_qk, depth, sample size, ...): two curves never carry the same label while their runs differ; the
    folder's name is added where even that leaves two alike."""
    differ = [k for k in FACTS if k != by and len({r.facts[k] for r in runs}) > 1]
    labels = [", ".join(v for v in [r.facts[by], *(r.facts[k] for k in differ)] if v) for r in runs]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} ({r.folder.name})" for lab, r in zip(labels, runs, strict=True)]
    return labels


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
             "layers": f"{len(rows) - 1} layers", "size": size_fact(samples, tokens)}
    return FinishedRun(Path(label), facts, rows, {"analyze": {"samples": samples, "tokens": tokens}})


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
    layers = row_layers(run.rows)
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
    with column_style():
        frame = new_frame(1.55 * nrows + 0.35, WIDTHS[width])
        axes = list(frame.panels.subplots(nrows, per_row, squeeze=False, sharex=True).flat)
        for ax in axes[len(names):]:
            ax.remove()
        at_floor = False
        for i, (run, label) in enumerate(zip(finished, labels, strict=True)):
            color, xs = f"C{i % 10}", _x(run, depth)
            for ax, key in zip(axes, names, strict=False):
                log = key in LOG_COLUMNS
                values = [row_value(r, key) for r in run.rows]
                shown = [loggable(v) if log else v for v in values]
                ax.plot(xs, shown, "-", marker="o", ms=1.8, color=color, label=plain_text(label))
                if band and run.rows and f"{key}_min" in run.rows[0]:
                    f = loggable if log else (lambda v: v)
                    low = [f(row_value(r, f"{key}_min")) for r in run.rows]
                    high = [f(row_value(r, f"{key}_max")) for r in run.rows]
                    ax.fill_between(xs, low, high, color=color, alpha=0.15, lw=0)
                if key == "mu_rel":
                    at = [(x, v) for x, v, r in zip(xs, values, run.rows, strict=True)
                          if row_value(r, "at_floor") >= 1.0]
                    if at:
                        at_floor = True
                        ax.plot([x for x, _ in at], [loggable(v) for _, v in at], ".", color="0.45", ms=5)
                if log:
                    mark_zeros(ax, xs, values, color)  # type: ignore[arg-type]
        extra: list[tuple[Any, str]] = []
        for ax, key in zip(axes, names, strict=False):
            if key == "mu_rel":
                draw_floors(ax, [r.facts["dtype"] for r in finished])
            if key in LOG_COLUMNS:
                log_y(ax)
            ax.set_title(PANELS[key][0] if key in PANELS else key)
            if key in PANELS:
                ax.set_ylabel(PANELS[key][1])
            if depth == "layer":
                layer_axis(ax, False, sorted({t for r in finished for t in row_layers(r.rows)}))
            else:
                ax.set_xlim(-0.03, 1.03)
        if at_floor:
            extra.append((axes[names.index("mu_rel")].plot([], [], ".", color="0.45")[0],
                          "every sample at the floor"))
        if band and any(f"{k}_min" in r.rows[0] for r in finished for k in names if r.rows):
            extra.append((band_handle("0.5"), "min-max over samples"))
        shared = [
            f"{k} {finished[0].facts[k]}" if k in BY else finished[0].facts[k]
            for k in FACTS
            if k != by and len({r.facts[k] for r in finished}) == 1 and finished[0].facts[k]
        ]
        head = title or (f"by {by}" + (" — " + ", ".join(shared) if shared else ""))
        fig = finish_frame(frame, axes[: len(names)], wrap_title(head) if width == "column" else head, extra)
        if depth == "relative":
            frame.panels.supxlabel(RELATIVE_LABEL, fontsize=STYLE["axes.labelsize"])
    if out is not None:
        save_column(fig, *figure_paths(out, fmts))
    return fig


def figure_paths(out: str | Path, formats: Sequence[str] | str | None = None) -> list[Path]:
    """The files :func:`plot` writes: ``out``, then ``out`` with each other suffix of ``formats``."""
    out = Path(out)
    fmts = plot_formats(formats) if formats else ()
    return [out, *(out.with_suffix(f".{f}") for f in fmts if out.suffix.lstrip(".").lower() != f)]

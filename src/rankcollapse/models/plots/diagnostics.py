"""The diagnostics figure of a run with ``diagnostics=True`` (:func:`figure_diagnostics`):
``first_token_attention_h{k}`` as a heatmap layer t x head h with the sink heads (above the run's sink
threshold) marked (its array: :func:`head_values`), ``first_token_attention`` and ``sink_rate``,
``attention_entropy`` (nats, band: min-max over heads) and ``massive_ratio`` (log y).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.models.plots.source import FigureRun, figure_run
from rankcollapse.models.plots.style import (
    column_style,
    finish_frame,
    label_panel,
    layer_axis,
    log_y,
    loggable,
    new_frame,
    row_layers,
    row_value,
    shade_statuses,
)

__all__ = ["MASSIVE", "figure_diagnostics", "head_columns", "head_values"]

#: Sun et al. (2024) call activations massive at about this many times the median magnitude.
MASSIVE = 1000.0


def head_columns(rows: Sequence[dict[str, Any]], prefix: str) -> list[str]:
    """The per-head columns ``{prefix}_h0, _h1, ...`` of the rows, in head order."""
    names = [k for k in rows[0] if k.startswith(f"{prefix}_h") and k[len(prefix) + 2 :].isdigit()]
    return sorted(names, key=lambda k: int(k[len(prefix) + 2 :]))


def _head_table(rows: Sequence[dict[str, Any]], column: str) -> tuple[list[int], list[list[float]]]:
    names = head_columns(rows, column)
    kept = [r for r in rows if any(math.isfinite(row_value(r, k)) for k in names)]
    return row_layers(kept), [[row_value(r, k) for r in kept] for k in names]


def head_values(result: Any, column: str = "first_token_attention") -> tuple[list[int], list[list[float]]]:
    """The per-head values of a diagnostic column as a table ``(layers, values)``: ``values[h][i]`` is
    column ``{column}_h{h}`` of the row of layer ``layers[i]``, over the rows with attention (row 0, the
    embeddings, has none). ``column``: ``first_token_attention`` (what :func:`figure_diagnostics`'s
    heatmap shows) or ``attention_entropy``. ``result``: an AnalyzeResult with diagnostics or a finished
    run (:func:`~rankcollapse.models.finished.read_run`)."""
    if column not in ("first_token_attention", "attention_entropy"):
        raise RankCollapseError(
            f"no per-head column {quote(str(column), 40)}; allowed: first_token_attention, attention_entropy"
        )
    run = figure_run(result)
    _check_diagnostics(run)
    return _head_table(run.rows, column)


def _check_diagnostics(run: FigureRun) -> None:
    if not run.rows or not head_columns(run.rows, "first_token_attention"):
        raise RankCollapseError(
            "this run has no diagnostics; run analyze with diagnostics=True "
            "(--diagnostics) for the attention and activation figures"
        )


def _diagnostics_figure(run: FigureRun) -> Any:
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    _check_diagnostics(run)
    rows, th = run.rows, run.sink_threshold
    layers, heat = _head_table(rows, "first_token_attention")
    every = row_layers(rows)
    with column_style():
        frame = new_frame(3.55)
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
        layer_axis(ax_map, label=False)
        label_panel(ax_map, "heads")
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
            [row_value(r, "first_token_attention") for r in rows],
            marker="o",
            color="C0",
            label="first_token_attention, mean over heads",
        )
        ax_sink.plot(
            every,
            [row_value(r, "sink_rate") for r in rows],
            marker="s",
            color="C1",
            label="sink_rate, share of heads",
        )
        ax_sink.axhline(th, color="0.4", ls=":", lw=0.9, label=f"sink threshold {th:g}")
        ax_sink.set_ylim(-0.04, 1.04)
        ax_sink.set_yticks([0, 0.25, 0.5, 0.75, 1])
        layer_axis(ax_sink, label=False)
        label_panel(ax_sink, "sinks")
        # attention entropy: mean over heads, band min-max over heads
        ax_ent.plot(
            every,
            [row_value(r, "attention_entropy") for r in rows],
            marker="o",
            color="C2",
            label="attention_entropy, mean over heads",
        )
        heads = head_columns(rows, "attention_entropy")
        if heads:
            per = [[row_value(r, k) for k in heads] for r in rows]
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
        layer_axis(ax_ent, label=False)
        label_panel(ax_ent, "attention_entropy")
        # massive activations
        ratio = [loggable(row_value(r, "massive_ratio")) for r in rows]
        ax_mass.plot(every, ratio, marker="o", color="C4")
        finite = [v for v in ratio if math.isfinite(v)]
        if finite and max(finite) > MASSIVE / 10:
            ax_mass.axhline(MASSIVE, color="0.4", ls="--", lw=0.9, label="massive: ~1000 (Sun et al. 2024)")
        log_y(ax_mass)
        layer_axis(ax_mass, label=False)
        label_panel(ax_mass, "massive_ratio")
        for ax in (ax_map, ax_sink, ax_ent, ax_mass):  # one x range: row 0 has no attention
            layer_axis(ax, False, every)
            if ax is not ax_map:
                shade_statuses(ax, rows)
        title = (run.title + "\n" if run.title else "") + "means over samples"
        return finish_frame(frame, [ax_map, ax_sink, ax_ent, ax_mass], title, [(sink, sink.get_label())])


def figure_diagnostics(result: Any) -> Any:
    """The diagnostics of a run with ``diagnostics=True`` (else RankCollapseError, one line): a heatmap
    of ``first_token_attention_h{k}`` over layer t (x) and head h (y), the sink heads (above the run's
    ``sink_threshold``) outlined (its array: :func:`head_values`); ``first_token_attention`` and
    ``sink_rate`` (means over heads) with the threshold; ``attention_entropy`` (nats; band: min-max over
    heads); ``massive_ratio`` (log y). Axes in that order (and the heatmap's colorbar last). A
    ``matplotlib.figure.Figure``, one column wide."""
    return _diagnostics_figure(figure_run(result))

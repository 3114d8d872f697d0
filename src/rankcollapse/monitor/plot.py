"""The figure of a monitored training run: each metric against the training step, one curve per layer.

:func:`plot_monitor` draws one panel per metric; each curve is one row ``t`` (``embeddings``, then the
output of layer t), coloured from light (row 0) to dark (the last layer), so a reader sees both how
a layer moves over training and how the layers are ordered at each step. ``mu_rel`` also shows its
precision floor (``FLOOR_FACTOR eps`` of the dtype of the hidden states measured: 0.25 for bfloat16,
3.8e-6 for float32) when the curves come near it; where that dtype is unknown (a bare table without
``dtype=``), no floor is drawn rather than one assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rankcollapse.core.names import label
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.figures import new_figure, save_figure
from rankcollapse.edge.validate import quote
from rankcollapse.monitor.outputs import COLUMNS

#: Axis labels of the metrics a figure names in words: each quantity of the names table under its one label
#: (``core.names.label``), with its unit where it has one.
LABELS: dict[str, str] = {
    **{key: label(key) for key in ("mu_rel", "mu", "effective_rank", "num_rank", "mean_abs_cos",
                                   "first_token_attention", "massive_ratio")},
    "sink_rate": f"{label('sink_rate')} (share of heads)",
    "attention_entropy": f"{label('attention_entropy')} (nats)",
}


def _frame(source: Any) -> Any:
    """A tidy frame from a Monitor, a DataFrame, or a ``metrics.csv`` / folder written by one."""
    import pandas as pd

    if hasattr(source, "to_frame"):
        return source.to_frame()
    if isinstance(source, pd.DataFrame):
        frame = source
    else:
        path = Path(source)
        path = path / "metrics.csv" if path.is_dir() else path
        try:
            frame = pd.read_csv(path)
        except (OSError, ValueError) as err:
            raise RankCollapseError(f"cannot read monitor rows from {quote(str(path))}: {err}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise RankCollapseError(
            f"rows lack the columns {', '.join(missing)}; allowed: a Monitor's rows ({', '.join(COLUMNS)})"
        )
    return frame


def source_dtype(source: Any) -> str | None:
    """The dtype of the hidden states a monitor measured: a :class:`~rankcollapse.monitor.Monitor`'s
    ``dtype``, or the ``dtype`` its ``config.json`` records beside a ``metrics.csv`` (or in its folder);
    None where neither says (a bare table, a folder from before the dtype was recorded)."""
    from rankcollapse.core.precision import ALL_DTYPE_NAMES

    if hasattr(source, "to_frame"):
        own = getattr(source, "dtype", None)
    elif isinstance(source, str | Path):
        path = Path(source)
        config = (path if path.is_dir() else path.parent) / "config.json"
        if not config.is_file():
            return None
        from rankcollapse.edge.inputs import read_json

        record = read_json(config, "monitor record")
        cfg = record.get("config", {}) if isinstance(record, dict) else {}
        monitor = cfg.get("monitor", {}) if isinstance(cfg, dict) else {}
        own = monitor.get("dtype") if isinstance(monitor, dict) else None
    else:
        own = None
    return own if isinstance(own, str) and own in ALL_DTYPE_NAMES else None


def plot_monitor(
    source: Any, out: str | Path | None = None, metrics: Sequence[str] | None = None, title: str = "",
    dtype: str | None = None,
) -> Any:
    """Draw ``metrics`` (default: every metric in the rows, in their order) against the step, one
    curve per layer; ``source``: a :class:`~rankcollapse.monitor.Monitor`, its ``to_frame()``, or a
    ``metrics.csv`` (or its folder). ``out``: save there (atomically; the format from the suffix).
    ``dtype``: the hidden states' dtype, whose floor ``mu_rel``'s panel draws (None: the source's,
    :func:`source_dtype`; none drawn where it is unknown). Returns the matplotlib figure."""
    import matplotlib
    from matplotlib import cm
    from matplotlib.colors import Normalize

    from rankcollapse.core.precision import dtype_name, floor_rel

    dtype = source_dtype(source) if dtype is None else dtype_name(dtype, half=True)
    frame = _frame(source)
    if frame.empty:
        raise RankCollapseError("no rows to plot: the monitor has not probed yet")
    names = list(dict.fromkeys(frame["metric"])) if metrics is None else list(metrics)
    unknown = [m for m in names if m not in set(frame["metric"])]
    if unknown:
        raise RankCollapseError(
            f"metrics {quote(unknown)} are not in the rows; allowed: "
            f"{', '.join(dict.fromkeys(frame['metric']))}"
        )
    layers = sorted(frame["layer"].unique())
    norm = Normalize(vmin=min(layers), vmax=max(max(layers), 1))
    cmap = matplotlib.colormaps["viridis_r"]
    cols = min(len(names), 3)
    rows = -(-len(names) // cols)
    fig = new_figure(4.2 * cols, 3.2 * rows, layout="constrained", title=title, title_size=10)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        part = frame[frame["metric"] == name]
        for t in layers:
            curve = part[part["layer"] == t].sort_values("step")
            if not curve.empty:
                ax.plot(
                    curve["step"],
                    curve["value"],
                    color=cmap(norm(t)),
                    lw=1.4,
                    marker="." if len(curve) < 30 else None,
                )
        if name == "mu_rel" and dtype is not None:
            floor = floor_rel(dtype)
            low = part["value"].min()
            if low == low and low < 100 * floor:
                ax.axhline(floor, color="grey", ls=":", lw=1, label=f"{dtype} precision floor {floor:.1e}")
                ax.legend(fontsize=7, loc="best")
        ax.set_title(LABELS.get(name, name), fontsize=9)
        ax.set_xlabel(label("step"), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    bar = fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.8, pad=0.02)
    bar.set_ticks(layers if len(layers) <= 13 else layers[:: -(-len(layers) // 12)])
    bar.set_label(f"{label('layer')} (0: embeddings, t: output of layer t)", fontsize=8)
    if out is not None:
        save_figure(fig, out, what="monitor figure")
    return fig

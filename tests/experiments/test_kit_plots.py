"""The figure templates of ``kit.plots`` draw what they are given: the band spans the interval, a reference
line sits at its value, error bars reach the interval's ends, labels come from the names table, log axes
where asked, one legend entry per label, the value of a heat-map cell in that cell."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import matplotlib
import numpy as np
import pytest

from rankcollapse.core.names import label
from rankcollapse.experiments.kit import plots
from rankcollapse.experiments.kit.curves import Curve


@pytest.fixture
def ax() -> Iterator[Any]:
    fig = plots.figure(4, 3)
    yield fig.subplots()
    import matplotlib.pyplot as plt

    plt.close(fig)


def band_edges(a: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, lower and upper edge of the one filled band on ``a``."""
    (poly,) = a.collections
    v = poly.get_paths()[0].vertices
    xs = np.unique(v[:, 0])
    lo = np.array([v[v[:, 0] == x, 1].min() for x in xs])
    hi = np.array([v[v[:, 0] == x, 1].max() for x in xs])
    return xs, lo, hi


def test_mean_band_draws_the_mean_and_a_band_from_lo_to_hi(ax: Any) -> None:
    x = np.arange(5.0)
    mean, lo, hi = np.array([1.0, 2, 3, 4, 5]), np.array([0.5, 1, 2, 3.5, 4]), np.array([2.0, 3, 3.5, 6, 9])
    drawn = plots.mean_band(ax, x, mean, lo, hi, 2, "c")
    np.testing.assert_allclose(drawn.get_ydata(), mean)
    xs, low, high = band_edges(ax)
    np.testing.assert_allclose(xs, x)
    np.testing.assert_allclose(low, lo)
    np.testing.assert_allclose(high, hi)
    assert matplotlib.colors.same_color(drawn.get_color(), "C2")
    assert matplotlib.colors.same_color(ax.collections[0].get_facecolor()[0][:3], "C2")


def test_mean_band_draws_values_below_the_floor_on_it(ax: Any) -> None:
    x = np.arange(3.0)
    drawn = plots.mean_band(ax, x, [1e-20, 1e-3, 1.0], [0.0, 1e-4, 0.5], [1e-19, 1e-2, 2.0], 0, floor=1e-12)
    np.testing.assert_allclose(drawn.get_ydata(), [1e-12, 1e-3, 1.0])
    _, low, high = band_edges(ax)
    np.testing.assert_allclose(low, [1e-12, 1e-4, 0.5])
    np.testing.assert_allclose(high, [1e-12, 1e-2, 2.0])


def test_line_takes_colour_and_marker_from_its_index_and_the_style_from_the_second(ax: Any) -> None:
    a = plots.line(ax, [0, 1, 2], [1, 2, 3], 3, "x", style=1)
    b = plots.line(ax, [0, 1, 2], [1, 2, 3], 3, "y", marker=False)
    assert matplotlib.colors.same_color(a.get_color(), "C3") and a.get_marker() == plots.MARKERS[3]
    assert a.get_linestyle() == "--" and b.get_linestyle() == "-"
    assert b.get_marker() in ("None", "", None)


def test_points_draw_one_unjoined_marker_per_unit_filled_or_open(ax: Any) -> None:
    full = plots.points(ax, [0.1, 0.5, 0.9], [1.0, -2.0, 3.0], 1, "sink heads")
    open_ = plots.points(ax, [0.2], [0.0], 0, "other heads", hollow=True)
    np.testing.assert_allclose(full.get_xydata(), [[0.1, 1.0], [0.5, -2.0], [0.9, 3.0]])
    assert full.get_linestyle() == "None" and full.get_marker() == plots.MARKERS[1]
    assert matplotlib.colors.same_color(full.get_markerfacecolor(), "C1")
    assert open_.get_markerfacecolor() == "none" and matplotlib.colors.same_color(open_.get_color(), "C0")


def test_interval_points_bars_reach_the_given_ends(ax: Any) -> None:
    x, mean, lo, hi = [1.0, 2.0], [3.0, 5.0], [2.0, 4.5], [3.5, 8.0]
    bars = plots.interval_points(ax, x, mean, lo, hi, 1, "q")
    (segments,) = bars.lines[2]
    ends = np.array([[s[0][1], s[1][1]] for s in segments.get_segments()])
    np.testing.assert_allclose(ends, np.column_stack([lo, hi]))
    np.testing.assert_allclose(bars.lines[0].get_ydata(), mean)


def test_reference_line_sits_at_its_value(ax: Any) -> None:
    h = plots.reference_line(ax, 0.25, "threshold")
    v = plots.reference_line(ax, 7.0, vertical=True)
    assert list(h.get_ydata()) == [0.25, 0.25] and list(v.get_xdata()) == [7.0, 7.0]
    assert h.get_label() == "threshold" and h.get_linestyle() == ":"


def test_label_axes_reads_the_names_table_and_sets_log_axes(ax: Any) -> None:
    plots.label_axes(ax, "layer", "mu_rel", title="t", logy=True, legend=None)
    assert ax.get_xlabel() == label("layer") and ax.get_ylabel() == label("mu_rel")
    assert ax.get_yscale() == "log" and ax.get_xscale() == "linear"
    plots.label_axes(ax, "hops r", None, logx=True, base=2)
    assert ax.get_xlabel() == "hops r" and ax.get_xscale() == "log"
    assert ax.xaxis.get_transform().base == 2


def test_label_axes_draws_a_legend_only_when_asked(ax: Any) -> None:
    ax.plot([0, 1], [0, 1], label="a")
    plots.label_axes(ax, "x", "y")
    assert ax.get_legend() is None
    plots.label_axes(ax, legend=6)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a"]


def test_shared_legend_has_each_label_once_in_first_drawn_order() -> None:
    fig = plots.figure(6, 3, layout="constrained")
    a, b = fig.subplots(1, 2)
    a.plot([0, 1], [0, 1], label="one")
    a.plot([0, 1], [1, 0], label="two")
    b.plot([0, 1], [0, 1], label="two")
    b.plot([0, 1], [0, 2], label="three")
    b.plot([0, 1], [0, 3])  # no label: no entry
    leg = plots.shared_legend(fig, [a, b])
    assert [t.get_text() for t in leg.get_texts()] == ["one", "two", "three"]
    assert leg._ncols == 3


def test_annotated_heatmap_writes_each_finite_value_in_its_cell(ax: Any) -> None:
    table = np.array([[0.1, np.nan], [0.9, 0.5]])
    plots.annotated_heatmap(ax, table, ["a", "b"], ["r0", "r1"], vmin=0.0, vmax=1.0, fmt="{:.1f}")
    texts = {(t.get_position(), t.get_text()) for t in ax.texts}
    assert texts == {((0, 0), "0.1"), ((0, 1), "0.9"), ((1, 1), "0.5")}
    colour = {t.get_text(): t.get_color() for t in ax.texts}
    assert colour["0.9"] == "black" and colour["0.1"] == "white"  # dark text on light cells
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]


def _curve(q: str, dtype: str) -> Curve:
    one = np.ones(3)
    return Curve(q, dtype, 2, one, one * 0.1, one, one, one, one, one, one * 0)


def test_dtype_rows_label_rows_from_the_names_table_and_leave_out_a_dtype_not_run() -> None:
    mu = {("attn", "causal", "float32"): _curve("mu", "float32")}
    rel = {("attn", "causal", "float32"): _curve("mu_rel", "float32"),
           ("attn", "causal", "float64"): _curve("mu_rel", "float64")}
    rows = plots.mode_rows(mu, rel, ["attn"], ["causal"], {"attn": "SAN"}, {})
    assert [(r[0], r[1]) for r in rows] == [
        (f"{label('mu')}, float32 (as in the paper)", False),
        (f"{label('mu_rel')}, float32", True),
        (f"{label('mu_rel')}, float64", True),
    ]
    assert rows[2][2][0][0] == "causal" and rows[2][2][0][1][0][0] == "SAN"


def test_label_grid_names_only_the_edges_of_the_grid() -> None:
    fig, axes = plots.panel_grid(5, ncols=3)  # 2 rows, the last one short
    plots.label_grid(axes, 3, ["mu_rel", "effective rank"], ["a", "b", "c"], "layer")
    assert [ax.get_title() for ax in axes] == ["a", "b", "c", "", ""]
    assert [ax.get_ylabel() for ax in axes] == [label("mu_rel"), "", "", "effective rank", ""]
    assert [ax.get_xlabel() for ax in axes] == ["", "", "", label("layer"), label("layer")]
    import matplotlib.pyplot as plt

    plt.close(fig)

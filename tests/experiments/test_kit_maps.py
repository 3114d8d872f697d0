"""Verdict maps (``kit.maps``): the mapped boundary covers a planted boundary known in closed form in at least
95 % of 200 seeds, and it says something (it does not cover by leaving every cell open)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankcollapse.experiments.kit.maps import AFTER, BEFORE, OPEN, verdict_map
from rankcollapse.metrics.rollout import uniform_causal_boundary, uniform_causal_gap_mixed

TOKEN = 7  # the last of N = 8 tokens
LEVEL = 0.05  # the gap that separates "converged to the first token" from "kept"
LAMS = np.round(np.arange(0.0, 0.96, 0.05), 2)
DEPTHS = (2, 4, 8, 16, 32)
NETWORKS = 6
NOISE = 0.15  # sd of a network's log10 gap around the closed form


def planted(rng: np.random.Generator, noise: float = NOISE):
    """One map's cells: per depth, per lam, NETWORKS values of log10 gap = the uniform causal rollout's
    closed form plus Gaussian noise (each network's own attention, off uniform)."""
    return [(t, [np.log10(uniform_causal_gap_mixed(TOKEN, t, float(lam)))
                 + noise * rng.standard_normal(NETWORKS) for lam in LAMS]) for t in DEPTHS]


def a_map(rows):
    return verdict_map(LAMS, rows, math.log10(LEVEL), x_name="lam", y_name="depth t", what="log10 gap",
                       sides=("converged (Wu)", "kept (Herasimchyk)"))


def test_the_closed_form_boundary_is_where_the_gap_meets_the_level():
    for t in (8, 16, 32):
        lam = uniform_causal_boundary(TOKEN, t, LEVEL)
        assert uniform_causal_gap_mixed(TOKEN, t, lam) == pytest.approx(LEVEL, rel=1e-9)
    assert uniform_causal_boundary(TOKEN, 2, LEVEL) == -math.inf  # two layers: the gap is above at lam = 0


def test_the_mapped_boundary_covers_the_closed_form_in_at_least_95_percent_of_200_seeds():
    truth = {t: uniform_causal_boundary(TOKEN, t, LEVEL) for t in DEPTHS}
    covered, widths = 0, []
    for seed in range(200):
        vmap = a_map(planted(np.random.default_rng(seed)))
        covered += all(vmap.covers(r, truth[t]) for r, t in enumerate(DEPTHS))
        lo, hi = vmap.bracket(DEPTHS.index(16))
        widths.append(hi - lo)
    assert covered >= 190, covered
    assert np.median(widths) <= 0.4  # the bracket at t = 16 holds its boundary within a few cells


def test_a_map_without_simultaneous_intervals_would_not_cover():
    """The test can fail: with the noise 20 x what the intervals assume (each network drawn with sd 3 but
    pooled as if it were one network's excerpts) cells are decided on the wrong side."""
    truth = {t: uniform_causal_boundary(TOKEN, t, LEVEL) for t in DEPTHS}
    wrong = 0
    for seed in range(50):
        rows = planted(np.random.default_rng(seed), noise=3.0)
        rows = [(t, [np.full(NETWORKS, v.mean()) + 0.01 * np.arange(NETWORKS) for v in vals])
                for t, vals in rows]
        vmap = a_map(rows)
        wrong += not all(vmap.covers(r, truth[t]) for r, t in enumerate(DEPTHS))
    assert wrong > 10


def test_cells_read_each_side_and_the_table_has_a_verdict_and_n_per_cell():
    vmap = a_map(planted(np.random.default_rng(0)))
    assert set(vmap.cells(DEPTHS.index(32))) >= {BEFORE, AFTER}
    assert vmap.cells(DEPTHS.index(2)) == [AFTER] * len(LAMS) or OPEN in vmap.cells(0)
    table = vmap.table()
    assert len(table) == len(LAMS) * len(DEPTHS) and (table["n"] == NETWORKS).all()
    assert set(table["verdict"]) <= {"converged (Wu)", "kept (Herasimchyk)", "open"}


def test_the_grid_the_report_shows_has_each_cell_s_word_and_n_and_each_row_s_boundary(tmp_path):
    from rankcollapse.experiments.kit.plots import FigureFile
    from rankcollapse.pipeline.report import _figure

    vmap = a_map(planted(np.random.default_rng(0)))
    grid = vmap.grid(("conv", "kept"))
    assert list(grid["depth t"]) == [f"{t:g}" for t in DEPTHS[::-1]]  # the deepest first, as drawn
    assert grid.iloc[0, 1:-1].str.fullmatch(r"(conv|kept|open) \(6\)").all()
    lo, hi = vmap.bracket(len(DEPTHS) - 1)
    assert grid["boundary"].iloc[0] == f"[{lo:g}, {hi:g}]"
    table = tmp_path / "m.table.csv"
    grid.assign(note="<b>x</b>").to_csv(table, index=False)
    png, pdf, csv = (tmp_path / f"m.{e}" for e in ("png", "pdf", "csv"))
    for path in (png, pdf, csv):
        path.write_bytes(b"")
    html = _figure(FigureFile("m", "s", png, pdf, csv, "cap", table), tmp_path)
    assert "<table class='map'>" in html and "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html


def test_no_cell_of_a_map_at_the_level_is_decided_in_more_than_5_percent_of_maps():
    """Every cell's true mean at the level: a decided cell is an error. The intervals are simultaneous over
    the whole map (every row and column), so at most ~5 % of 200 maps of 10 rows decide any cell; with
    intervals simultaneous only within a row, about 40 % would."""
    rows_n, xs = 10, np.arange(8, dtype=float)
    wrong = 0
    for seed in range(200):
        rng = np.random.default_rng(1000 + seed)
        rows = [(float(r), [rng.standard_normal(NETWORKS) for _ in xs]) for r in range(rows_n)]
        vmap = verdict_map(xs, rows, 0.0, x_name="x", y_name="row", what="planted", sides=("below", "above"))
        wrong += any(w != OPEN for r in range(rows_n) for w in vmap.cells(r))
    assert wrong <= 20, wrong

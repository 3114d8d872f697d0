"""Verdict maps: where each side of a dispute holds, over two swept parameters, each cell a verdict and n.

Two claims that disagree often disagree about *where*: Wu et al. 2025 (the cumulative context converges to
the first token) and Herasimchyk et al. 2026 (residuals prevent it) both hold, on different sides of a
boundary in the residual strength ``x = lam`` that moves with the depth ``y = t``. A map measures one
per-unit value (e.g. log10 of the first-token gap, one per network) in every cell ``(x_k, y)`` and reads
each cell against one ``level``: *before* for sure (the start's side: below a rising measure; one claim
holds there), *after* for sure (the other claim holds), or *open* (the interval straddles the level).

**The intervals** [ours]. Each row ``y`` is a sweep of ``kit.rules.sweeps.locate`` (``m_k ± t se_k`` over
the cell's units); the whole map is judged inside ``kit.curves.conditions(rows)``, so the intervals are
simultaneous over every cell (Bonferroni over the K x rows cells): with probability at least ``1 - ALPHA``
every cell's true mean lies inside its interval together.

**The mapped boundary** (:meth:`VerdictMap.bracket`): in row ``y``, from the largest ``x`` decided *before*
to the smallest ``x`` decided *after* (the grid's ends where none is). Where the true mean is monotone in
``x`` and the intervals hold, no cell is decided on the wrong side, so the true boundary lies in the bracket
(:meth:`VerdictMap.covers`): in at least ``1 - ALPHA`` of maps. ``tests/experiments/test_kit_maps.py``
plants the uniform causal rollout mixed with ``lam``, whose boundary is a closed form, and counts.

**A categorical row axis** (``labels``): the rows may be named things (masks, norm placements) instead of
numbers; ``ys`` are then their ranks 0, 1, ... and every table, grid and figure prints the label.

**Rules on a map** [ours] (each a :class:`~rankcollapse.experiments.kit.judgement.Judgement`; cells with
fewer than ``min_samples`` units are left out and counted in the evidence): :func:`somewhere` (the *after*
side holds in some cell for sure), :func:`nowhere` (the *before* side in every measured cell for sure) and
:func:`apart` (at some x row ``a`` is past the level and row ``b`` before it, for sure). Each reads the
cells' verdicts only, so a map's simultaneous intervals carry over: the row is decided wrongly with
probability at most ``ALPHA``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.curves import NETWORK, conditions
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.rules.sweeps import Crossing, locate
from rankcollapse.experiments.kit.thresholds import Thresholds

#: A cell's verdict words: the side where the first claim holds, the other's, neither for sure.
BEFORE, AFTER, OPEN = "before", "after", "open"


@dataclass(frozen=True)
class VerdictMap:
    """Per row ``ys[r]`` the :class:`~rankcollapse.experiments.kit.rules.sweeps.Crossing` of the sweep over
    ``xs``; ``sides``: the words of the claim that holds *before* the level and of the one *after* it;
    ``labels``: the rows' names where the row axis is categorical (then ``ys`` are 0, 1, ...)."""

    x_name: str
    y_name: str
    what: str
    level: float
    rising: bool
    xs: np.ndarray
    ys: tuple[float, ...]
    rows: tuple[Crossing, ...]
    sides: tuple[str, str]
    labels: tuple[str, ...] = ()

    def row_name(self, r: int) -> str:
        """Row ``r`` as printed: its label, or its y."""
        return self.labels[r] if self.labels else f"{self.ys[r]:g}"

    def cells(self, r: int) -> list[str]:
        """Row ``r``'s verdict per x: :data:`BEFORE`, :data:`AFTER` or :data:`OPEN`."""
        c = self.rows[r]
        return [BEFORE if b else AFTER if a else OPEN for b, a in zip(c.before, c.after, strict=True)]

    def bracket(self, r: int) -> tuple[float, float]:
        """The mapped boundary of row ``r``: (largest x decided before, smallest x decided after); -inf / inf
        where no cell is decided on that side."""
        words = self.cells(r)
        before = [x for x, w in zip(self.xs, words, strict=True) if w == BEFORE]
        after = [x for x, w in zip(self.xs, words, strict=True) if w == AFTER]
        return (max(before) if before else -math.inf, min(after) if after else math.inf)

    def covers(self, r: int, boundary: float) -> bool:
        """No cell of row ``r`` decided on the wrong side of the true ``boundary`` (an x; -inf: the whole row
        is past it, inf: none is): the bracket holds it."""
        words = self.cells(r)
        return all((w != BEFORE or x <= boundary) and (w != AFTER or x >= boundary)
                   for x, w in zip(self.xs, words, strict=True))

    def table(self) -> pd.DataFrame:
        """One row per cell: x, y, the mean and its simultaneous interval, n, the verdict (the side's words
        where decided, ``open`` otherwise), and the row's bracket."""
        out = []
        for r, (y, c) in enumerate(zip(self.ys, self.rows, strict=True)):
            lo_b, hi_b = self.bracket(r)
            for x, m, w in zip(self.xs, c.margins, self.cells(r), strict=True):
                lo, hi = m.bounds() if m.n > 1 and math.isfinite(m.se) else (math.nan, math.nan)
                out.append({self.x_name: float(x), self.y_name: self.labels[r] if self.labels else y,
                            "quantity": self.what, "mean": m.value,
                            "low": lo, "high": hi, "level": self.level, "n": m.n,
                            "verdict": {BEFORE: self.sides[0], AFTER: self.sides[1]}.get(w, OPEN),
                            "boundary_low": lo_b, "boundary_high": hi_b})
        return pd.DataFrame(out)


    def grid(self, short: tuple[str, str]) -> pd.DataFrame:
        """The map as the report shows it: one row per y, one column per x, each cell ``<word> (n)``
        (``short``: the two sides' words, ``open`` otherwise), and the row's mapped boundary."""
        out = []
        for r, c in enumerate(self.rows):
            row: dict[str, str] = {self.y_name: self.row_name(r)}
            for x, m, w in zip(self.xs, c.margins, self.cells(r), strict=True):
                row[f"{self.x_name} = {x:g}"] = f"{ {BEFORE: short[0], AFTER: short[1]}.get(w, OPEN)} ({m.n})"
            lo, hi = self.bracket(r)
            ends = (math.isfinite(lo), math.isfinite(hi))
            row["boundary"] = {(True, True): f"[{lo:g}, {hi:g}]", (False, True): f"< {hi:g}",
                               (True, False): f"> {lo:g}"}.get(ends, "open")
            out.append(row)
        return pd.DataFrame(out[::-1])  # the deepest row first, as drawn


def verdict_map(xs: Sequence[float], rows: Sequence[tuple[float, Sequence[np.ndarray]]], level: float, *,
                x_name: str, y_name: str, what: str, sides: tuple[str, str], rising: bool = True,
                unit: str = NETWORK, labels: Sequence[str] = ()) -> VerdictMap:
    """The map of per-unit values ``rows[r] = (y, [values at xs[0], ..., values at xs[-1]])`` against
    ``level`` (module docstring): every cell's interval simultaneous over the whole map. ``labels``: one name
    per row for a categorical row axis (its ``y`` then the row's rank)."""
    if labels and len(labels) != len(rows):
        raise ValueError(f"{len(labels)} labels for {len(rows)} rows")
    with conditions(len(rows)):
        crossings = tuple(locate(xs, values, level, rising, unit) for _, values in rows)
    return VerdictMap(x_name, y_name, what, level, rising, np.asarray(xs, dtype=float),
                      tuple(float(y) for y, _ in rows), crossings, sides, tuple(labels))


# ---- rules on a map --------------------------------------------------------------------------------------
def _measured(vmap: VerdictMap, need: int, rows: Sequence[int] | None) -> tuple[list[tuple[int, int]], int]:
    """The cells ``(r, k)`` of ``rows`` (all by default) with at least ``need`` units, and how many have
    fewer."""
    keep, short = [], 0
    for r in range(len(vmap.ys)) if rows is None else rows:
        for k, m in enumerate(vmap.rows[r].margins):
            if m.n >= need:
                keep.append((r, k))
            else:
                short += 1
    return keep, short


def _cell(vmap: VerdictMap, r: int, k: int) -> str:
    return f"{vmap.y_name} {vmap.row_name(r)}, {vmap.x_name} {vmap.xs[k]:g}"


def _counts(vmap: VerdictMap, cells: list[tuple[int, int]], short: int, need: int, unit: str) -> str:
    words = [vmap.cells(r)[k] for r, k in cells]
    left = f"; {short} cell(s) with fewer than {need} {unit} left out" if short else ""
    ns = [vmap.rows[r].margins[k].n for r, k in cells]
    held = (f"; n = {min(ns)}, the fewest {unit} in a measured cell (cells hold {min(ns)}-{max(ns)})"
            if ns and min(ns) != max(ns) else "")
    return (f"{vmap.what} against {vmap.level:g}: {words.count(BEFORE)} cell(s) {vmap.sides[0]}, "
            f"{words.count(AFTER)} {vmap.sides[1]}, {words.count(OPEN)} open, of {len(cells)}{left}{held}")


def _region(vmap: VerdictMap, th: Thresholds, rows: Sequence[int] | None, want_after: bool) -> Judgement:
    need = th.count("min_samples")
    cells, short = _measured(vmap, need, rows)
    unit = vmap.rows[0].margins[0].unit if vmap.rows else NETWORK
    words = _counts(vmap, cells, short, need, unit)
    if not cells:
        n = max((m.n for c in vmap.rows for m in c.margins), default=0)
        return Judgement(INCONCLUSIVE, words, causes.too_few(n, need, unit, "every cell"), "sample too small",
                         n, unit=unit)
    n = min(vmap.rows[r].margins[k].n for r, k in cells)
    verdicts = {(r, k): vmap.cells(r)[k] for r, k in cells}
    after = [c for c, w in verdicts.items() if w == AFTER]
    opened = [c for c, w in verdicts.items() if w == OPEN]
    if after:
        r, k = after[0]
        m = vmap.rows[r].margins[k]
        if want_after:
            return Judgement(REPRODUCED, f"{words}; first at {_cell(vmap, r, k)}", n=n, margins=(m,),
                             unit=unit)
        cause = causes.measured_otherwise(f"{vmap.sides[1]} for sure at {_cell(vmap, r, k)} (mean "
                                          f"{m.value:.3g} against {vmap.level:g}, {m.n} {unit})")
        return Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", n, (m,), unit=unit)
    if opened:
        margins = tuple(vmap.rows[r].margins[k] for r, k in opened)
        return Judgement(INCONCLUSIVE, words, causes.sample_too_small(margins), "sample too small", n,
                         margins, unit=unit)
    if want_after:
        cause = causes.measured_otherwise(f"{vmap.sides[0]} for sure in every one of {len(cells)} cells")
        return Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", n, unit=unit)
    return Judgement(REPRODUCED, words, n=n, unit=unit)


def somewhere(vmap: VerdictMap, th: Thresholds, rows: Sequence[int] | None = None) -> Judgement:
    """The *after* side holds in some cell (of ``rows``) for sure -> reproduced; every measured cell decided
    *before* -> not reproduced; else inconclusive (the open cells' units that would decide them)."""
    return _region(vmap, th, rows, want_after=True)


def nowhere(vmap: VerdictMap, th: Thresholds, rows: Sequence[int] | None = None) -> Judgement:
    """Every measured cell (of ``rows``) decided *before* for sure -> reproduced; some cell *after* for sure
    -> not reproduced; else inconclusive."""
    return _region(vmap, th, rows, want_after=False)


def apart(vmap: VerdictMap, th: Thresholds, a: int, b: int) -> Judgement:
    """Row ``a`` past the level (*after*) and row ``b`` before it at the same x, for sure -> reproduced; the
    reverse at some x (``a`` before, ``b`` after), or both rows decided alike at every x -> not reproduced;
    else inconclusive. Columns where either cell has fewer than ``min_samples`` units are left out."""
    need = th.count("min_samples")
    ca, cb = vmap.cells(a), vmap.cells(b)
    ma, mb = vmap.rows[a].margins, vmap.rows[b].margins
    unit = ma[0].unit
    cols = [k for k in range(len(vmap.xs)) if ma[k].n >= need and mb[k].n >= need]
    name_a, name_b = vmap.row_name(a), vmap.row_name(b)
    if not cols:
        n = min(min(m.n for m in ma), min(m.n for m in mb))
        return Judgement(INCONCLUSIVE, f"{vmap.what}: {name_a} against {name_b}: no column measured",
                         causes.too_few(n, need, unit, f"{name_a} or {name_b}"), "sample too small", n,
                         unit=unit)
    n = min(min(ma[k].n, mb[k].n) for k in cols)
    split = [k for k in cols if ca[k] == AFTER and cb[k] == BEFORE]
    reverse = [k for k in cols if ca[k] == BEFORE and cb[k] == AFTER]

    def at(ks: list[int]) -> str:
        return ", ".join(f"{vmap.xs[k]:g}" for k in ks) or "none"

    words = (f"{vmap.what} against {vmap.level:g}: {name_a} {vmap.sides[1]} while {name_b} {vmap.sides[0]} "
             f"at {vmap.x_name} {at(split)}; the reverse at {at(reverse)} ({len(cols)} of {len(vmap.xs)} "
             "columns measured)")
    if reverse:
        k = reverse[0]
        cause = causes.measured_otherwise(f"at {vmap.x_name} {vmap.xs[k]:g} {name_a} is {vmap.sides[0]} "
                                          f"and {name_b} {vmap.sides[1]} for sure")
        return Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", n, (ma[k], mb[k]), unit=unit)
    if split:
        k = split[0]
        return Judgement(REPRODUCED, words, n=n, margins=(ma[k], mb[k]), unit=unit)
    if all(ca[k] == cb[k] != OPEN for k in cols):
        cause = causes.measured_otherwise(f"{name_a} and {name_b} decided alike at every {vmap.x_name} "
                                          "measured")
        return Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", n, unit=unit)
    opened: list[Margin] = [m for k in cols for m, w in ((ma[k], ca[k]), (mb[k], cb[k])) if w == OPEN]
    return Judgement(INCONCLUSIVE, words, causes.sample_too_small(opened), "sample too small", n,
                     tuple(opened), unit=unit)


#: A cell's colour in :func:`draw_map`: the first claim's side, the other's, open.
COLOURS = {BEFORE: "#4477aa", AFTER: "#ee6677", OPEN: "#dddddd"}


def draw_map(ax: object, vmap: VerdictMap, boundary: Sequence[tuple[float, float]] = (),
             boundary_label: str = "", *, x: str | None = None, y: str | None = None) -> None:
    """``vmap`` as coloured cells, one row per y and one column per x, the columns evenly spaced (the ticks
    name their x: a depth grid 1, 2, 4, 8, ... gives every cell the room of its ``n``), each cell's n
    written in it; each row's mapped boundary (:meth:`VerdictMap.bracket`) as a black bar between the cells
    it joins (none where the row is all open), and a known ``boundary`` [(y, x)] as a dashed line, both
    placed on the columns by linear interpolation of x. The axes are labelled through
    :func:`~rankcollapse.experiments.kit.plots.axis_label` (a quantity's key gives the names table's label)
    from ``x`` and ``y``, by default the map's ``x_name`` and ``y_name`` (the tables' column names)."""
    from matplotlib.patches import Patch

    from rankcollapse.experiments.kit.plots import axis_label

    xs = vmap.xs
    cols = np.arange(xs.size, dtype=float)

    def at(x: float) -> float:
        """An x value on the evenly spaced columns."""
        return float(np.interp(x, xs, cols)) if xs.size > 1 else 0.0

    for r in range(len(vmap.ys)):
        for k, (w, m) in enumerate(zip(vmap.cells(r), vmap.rows[r].margins, strict=True)):
            ax.add_patch(_rect(k - 0.5, r - 0.45, 1.0, 0.9, COLOURS[w]))
            ax.text(k, r - 0.3, f"n={m.n}", ha="center", va="center", fontsize=5, color="0.15")
        lo, hi = vmap.bracket(r)
        if math.isfinite(lo) or math.isfinite(hi):
            ax.plot([at(lo) if math.isfinite(lo) else -0.5, at(hi) if math.isfinite(hi) else xs.size - 0.5],
                    [r, r], color="k", lw=1.5, solid_capstyle="butt")
    if boundary:
        rank = {y: r for r, y in enumerate(vmap.ys)}
        pts = [(at(x), rank[y]) for y, x in boundary if y in rank and math.isfinite(x)]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "k--", lw=1, marker="x", ms=4,
                    label=boundary_label)
    ax.grid(False)
    ax.set_xlim(-0.5, xs.size - 0.5)
    ax.set_ylim(-0.5, len(vmap.ys) - 0.5)
    ax.set_xticks(cols, [f"{x:g}" for x in xs], fontsize=6, rotation=90 if xs.size > 12 else 0)
    ax.set_yticks(range(len(vmap.ys)), [vmap.row_name(r) for r in range(len(vmap.ys))])
    ax.set_xlabel(axis_label(vmap.x_name if x is None else x))
    ax.set_ylabel(axis_label(vmap.y_name if y is None else y))
    handles = [Patch(color=COLOURS[BEFORE], label=vmap.sides[0]),
               Patch(color=COLOURS[AFTER], label=vmap.sides[1]),
               Patch(color=COLOURS[OPEN], label="open (neither for sure)")]
    extra = ax.get_legend_handles_labels()[0]
    bar = ax.plot([], [], color="k", lw=1.5, label="mapped boundary")[0]
    ax.legend(handles=[*handles, bar, *extra], fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1))


def _rect(x: float, y: float, w: float, h: float, colour: str) -> object:
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), w, h, color=colour, lw=0)

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rankcollapse.experiments.kit.curves import NETWORK, conditions
from rankcollapse.experiments.kit.rules.sweeps import Crossing, locate

#: A cell's verdict words: the side where the first claim holds, the other's, neither for sure.
BEFORE, AFTER, OPEN = "before", "after", "open"


@dataclass(frozen=True)
class VerdictMap:
    """Per row ``ys[r]`` the :class:`~rankcollapse.experiments.kit.rules.sweeps.Crossing` of the sweep over
    ``xs``; ``sides``: the words of the claim that holds *before* the level and of the one *after* it."""

    x_name: str
    y_name: str
    what: str
    level: float
    rising: bool
    xs: np.ndarray
    ys: tuple[float, ...]
    rows: tuple[Crossing, ...]
    sides: tuple[str, str]

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
                out.append({self.x_name: float(x), self.y_name: y, "quantity": self.what, "mean": m.value,
                            "low": lo, "high": hi, "level": self.level, "n": m.n,
                            "verdict": {BEFORE: self.sides[0], AFTER: self.sides[1]}.get(w, OPEN),
                            "boundary_low": lo_b, "boundary_high": hi_b})
        return pd.DataFrame(out)


    def grid(self, short: tuple[str, str]) -> pd.DataFrame:
        """The map as the report shows it: one row per y, one column per x, each cell ``<word> (n)``
        (``short``: the two sides' words, ``open`` otherwise), and the row's mapped boundary."""
        out = []
        for r, (y, c) in enumerate(zip(self.ys, self.rows, strict=True)):
            row: dict[str, str] = {self.y_name: f"{y:g}"}
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
                unit: str = NETWORK) -> VerdictMap:
    """The map of per-unit values ``rows[r] = (y, [values at xs[0], ..., values at xs[-1]])`` against
    ``level`` (module docstring): every cell's interval simultaneous over the whole map."""
    with conditions(len(rows)):
        crossings = tuple(locate(xs, values, level, rising, unit) for _, values in rows)
    return VerdictMap(x_name, y_name, what, level, rising, np.asarray(xs, dtype=float),
                      tuple(float(y) for y, _ in rows), crossings, sides)


#: A cell's colour in :func:`draw_map`: the first claim's side, the other's, open.
COLOURS = {BEFORE: "#4477aa", AFTER: "#ee6677", OPEN: "#dddddd"}


def draw_map(ax: object, vmap: VerdictMap, boundary: Sequence[tuple[float, float]] = (),
             boundary_label: str = "") -> None:
    """``vmap`` as coloured cells (x across, each cell reaching halfway to its neighbours; one row per y; each
    cell's n written in it), each row's mapped boundary (:meth:`VerdictMap.bracket`) as a black bar between
    the cell centres it joins (none where the row is all open), and a known ``boundary`` [(y, x)] as a
    dashed line."""
    from matplotlib.patches import Patch

    xs = vmap.xs
    mids = (xs[1:] + xs[:-1]) / 2 if xs.size > 1 else np.array([])
    left = np.concatenate([[xs[0] - (mids[0] - xs[0] if mids.size else 0.5)], mids])
    right = np.concatenate([mids, [xs[-1] + (xs[-1] - mids[-1] if mids.size else 0.5)]])
    for r in range(len(vmap.ys)):
        for k, (x, w, m) in enumerate(zip(xs, vmap.cells(r), vmap.rows[r].margins, strict=True)):
            ax.add_patch(_rect(left[k], r - 0.45, right[k] - left[k], 0.9, COLOURS[w]))
            ax.text(x, r - 0.3, f"n={m.n}", ha="center", va="center", fontsize=5, color="0.15")
        lo, hi = vmap.bracket(r)
        if math.isfinite(lo) or math.isfinite(hi):
            ax.plot([lo if math.isfinite(lo) else left[0], hi if math.isfinite(hi) else right[-1]], [r, r],
                    color="k", lw=1.5, solid_capstyle="butt")
    if boundary:
        rank = {y: r for r, y in enumerate(vmap.ys)}
        pts = [(x, rank[y]) for y, x in boundary if y in rank and math.isfinite(x)]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "k--", lw=1, marker="x", ms=4,
                    label=boundary_label)
    ax.grid(False)
    ax.set_xlim(left[0], right[-1])
    ax.set_ylim(-0.5, len(vmap.ys) - 0.5)
    ax.set_xticks(xs, [f"{x:g}" for x in xs], fontsize=6, rotation=90 if xs.size > 8 else 0)
    ax.set_yticks(range(len(vmap.ys)), [f"{y:g}" for y in vmap.ys])
    ax.set_xlabel(vmap.x_name)
    ax.set_ylabel(vmap.y_name)
    handles = [Patch(color=COLOURS[BEFORE], label=vmap.sides[0]),
               Patch(color=COLOURS[AFTER], label=vmap.sides[1]),
               Patch(color=COLOURS[OPEN], label="open (neither for sure)")]
    extra = ax.get_legend_handles_labels()[0]
    bar = ax.plot([], [], color="k", lw=1.5, label="mapped boundary")[0]
    ax.legend(handles=[*handles, bar, *extra], fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1))


def _rect(x: float, y: float, w: float, h: float, colour: str) -> object:
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), w, h, color=colour, lw=0)

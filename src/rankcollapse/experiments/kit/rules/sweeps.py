"""A measure over a swept parameter: where its mean crosses a level, located with its interval.

Giorlandino & Goldt (arXiv 2505.24333) state a critical residual strength that separates rank collapse from
signal propagation; Joseph et al. (arXiv 2410.10609) a condition on ``lam`` that prevents collapse. Both are
a crossing: a per-unit value ``y`` (e.g. mu_rel's per-layer log rate, one per network) measured at each
value ``x_k`` of a swept parameter (k = 1..K, each its own networks), whose mean rises through a ``level``.

**The bands** [ours]. At each ``x_k`` the mean ``m_k`` over its units with the interval ``m_k ± t se_k``
(``kit.judgement.Margin``), Bonferroni over the K points and the row's conditions: with probability at
least ``1 - ALPHA`` every true mean lies inside its interval together. ``x_k`` is *below for sure* when
the interval lies below the level, *above for sure* when it lies above.

**The location** (:func:`locate`). The estimate ``x^`` is where the mean, linearly interpolated between
the grid points, first reaches the level; the interval ``[x_lo, x_hi]`` is where the upper band first
reaches it and where the lower band first rises above it (each interpolated; a band that never does gives
the grid's end, marked open). If the true mean is monotone and linear between grid points, the interval
covers the true crossing whenever the bands hold: with probability at least ``1 - ALPHA``
(``tests/experiments/test_kit_sweeps.py`` plants such curves and counts).

**The rule** (:func:`crossing`): some point below and some point above for sure, every sure-below point
left of every sure-above point -> reproduced (a crossing located, with its interval); every point on one
side for sure, or a sure-above point left of a sure-below point (no single crossing) -> not reproduced;
otherwise inconclusive, with the units that would decide the open points; fewer than ``min_samples`` units
at some point -> inconclusive. ``rising=False`` judges a mean that falls through the level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.curves import NETWORK, conditions, n_words, sample_std
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds


@dataclass(frozen=True)
class Crossing:
    """Where the mean over a sweep crosses ``level`` (module docstring). ``xs`` [K] increasing; per point the
    ``margins`` (mean ± interval against the level, simultaneous over the K points); ``estimate``,
    ``low``, ``high`` (NaN where there is none); ``open_low`` / ``open_high``: the band never reached the
    level inside the grid on that side (the interval runs to the grid's end)."""

    xs: np.ndarray
    margins: tuple[Margin, ...]
    level: float
    rising: bool
    estimate: float
    low: float
    high: float
    open_low: bool
    open_high: bool

    def _side(self, sign: int) -> np.ndarray:
        out = []
        for m in self.margins:
            lo, hi = m.bounds() if m.n > 1 and math.isfinite(m.se) else (-math.inf, math.inf)
            before, after = (hi < self.level, lo > self.level) if self.rising else (lo > self.level,
                                                                                     hi < self.level)
            out.append(before if sign < 0 else after)
        return np.array(out, dtype=bool)

    @property
    def before(self) -> np.ndarray:
        """Per point: on the start's side of the level for sure (below it for a rising mean)."""
        return self._side(-1)

    @property
    def after(self) -> np.ndarray:
        """Per point: past the level for sure (above it for a rising mean)."""
        return self._side(+1)

    def words(self, what: str, x_name: str) -> str:
        """``mu_rel rate crosses -0.02 at residual 5.1 in [4.3, 6.2] (8 of 9 points decided)``."""
        decided = int((self.before | self.after).sum())
        if not math.isfinite(self.estimate):
            where = "does not reach it"
        else:
            lo = f"<= {self.low:.3g}" if self.open_low else f"{self.low:.3g}"
            hi = f">= {self.high:.3g}" if self.open_high else f"{self.high:.3g}"
            where = f"crosses it at {x_name} {self.estimate:.3g}, interval [{lo}, {hi}]"
        return f"{what} against {self.level:g}: {where} ({decided} of {len(self.xs)} points decided)"


def _first_reach(xs: np.ndarray, y: np.ndarray, level: float, strict: bool) -> float:
    """The first x where the piecewise-linear ``y`` reaches ``level`` (rises above it where ``strict``);
    NaN where it never does; ``xs[0]`` where it starts there."""
    past = (y > level) if strict else (y >= level)
    if not past.any():
        return math.nan
    k = int(np.argmax(past))
    if k == 0:
        return float(xs[0])
    y0, y1 = float(y[k - 1]), float(y[k])
    if not (math.isfinite(y0) and math.isfinite(y1)) or y1 == y0:
        return float(xs[k])
    return float(xs[k - 1] + (level - y0) / (y1 - y0) * (xs[k] - xs[k - 1]))


def locate(xs: Sequence[float], values: Sequence[np.ndarray], level: float, rising: bool = True,
           unit: str = NETWORK) -> Crossing:
    """The :class:`Crossing` of the per-unit ``values[k]`` measured at ``xs[k]`` (module docstring).
    ``xs`` strictly increasing; ValueError otherwise or when the lengths differ."""
    x = np.asarray(xs, dtype=float)
    if x.ndim != 1 or len(values) != x.size or x.size < 2 or not np.all(np.diff(x) > 0):
        raise ValueError(f"locate needs >= 2 strictly increasing xs and one array of values per x, got "
                         f"xs {list(x)} and {len(values)} arrays")
    margins = []
    with conditions(x.size):
        for xk, v in zip(x, values, strict=True):
            v = np.asarray(v, dtype=float)
            v = v[np.isfinite(v)]
            n = int(v.size)
            mean = float(v.mean()) if n else math.nan
            se = float(sample_std(v)) / math.sqrt(n) if n > 1 else math.nan
            margins.append(Margin(f"at {xk:g}", mean, se, level, n, unit))
    sign = 1.0 if rising else -1.0
    mean = sign * np.array([m.value for m in margins])
    bands = [m.bounds() if m.n > 1 and math.isfinite(m.se) else (-math.inf, math.inf) for m in margins]
    upper = np.array([hi if rising else -lo for lo, hi in bands])  # the band nearer the level from below
    lower = np.array([lo if rising else -hi for lo, hi in bands])
    lvl = sign * level
    estimate = _first_reach(x, mean, lvl, strict=False)
    low = _first_reach(x, upper, lvl, strict=False)
    high = _first_reach(x, lower, lvl, strict=True)
    open_low = math.isfinite(low) and low == x[0] and upper[0] >= lvl
    open_high = not math.isfinite(high)
    if not math.isfinite(low):
        low = math.nan
    if open_high:
        high = float(x[-1])
    return Crossing(x, tuple(margins), level, rising, estimate, low, high, open_low, open_high)


def crossing(xs: Sequence[float], values: Sequence[np.ndarray], level: float, th: Thresholds, what: str,
             x_name: str, rising: bool = True, unit: str = NETWORK) -> Judgement:
    """A crossing of ``level`` located inside the sweep (reproduced), none or not a single one (not
    reproduced), or open (module docstring). ``what`` names the measure, ``x_name`` the swept parameter."""
    c = locate(xs, values, level, rising, unit)
    n = min(m.n for m in c.margins)
    words = c.words(what, x_name)
    need = th.count("min_samples")
    if n < need:
        return Judgement(INCONCLUSIVE, words, causes.too_few(n, need, unit, f"some {x_name}"),
                         "sample too small", n, unit=unit)
    before, after = c.before, c.after
    side = "below" if rising else "above"
    if before.any() and after.any():
        k_b, k_a = int(np.flatnonzero(before).max()), int(np.flatnonzero(after).min())
        if k_a < k_b:  # past the level for sure at a smaller x than a point still before it for sure
            cause = causes.measured_otherwise(
                f"{what}: past {level:g} for sure at {x_name} {c.xs[k_a]:g} and {side} it again at "
                f"{c.xs[k_b]:g}: no single crossing ({n_words(n, unit)} at least per point)")
            return Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", n,
                             (c.margins[k_a], c.margins[k_b]), unit=unit)
        return Judgement(REPRODUCED, words, n=n, margins=(c.margins[k_b], c.margins[k_a]), unit=unit)
    if before.all() or after.all():
        how = f"{side} {level:g}" if before.all() else f"past {level:g}"
        cause = causes.measured_otherwise(
            f"{what}: {how} for sure at every {x_name} in [{c.xs[0]:g}, {c.xs[-1]:g}]: no crossing in the "
            "sweep")
        return Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", n, c.margins, unit=unit)
    open_ = [m for m, b, a in zip(c.margins, before, after, strict=True) if not (b or a)]
    return Judgement(INCONCLUSIVE, words, causes.sample_too_small(open_), "sample too small", n,
                     tuple(open_), unit=unit)

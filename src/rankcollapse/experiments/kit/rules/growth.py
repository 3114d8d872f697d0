"""Growth with depth (LayerNorm Scaling, arXiv 2502.05795; Peri-LN, arXiv 2502.02732): fitted growth laws and
the rules on them, as pure functions of per-unit curves.

**The units.** Rows ``kind = growth_sample`` (``kit.tasks.growth``) hold one value per run, sample and layer.
Where the weights are a random draw (the simulator, a random init) the unit is the network: each run's curve
is the mean over its samples per layer; pretrained weights are one network, and each (run, excerpt) is a
unit (``kit.data.unit_of``). :func:`unit_curves` gives the units' curves ``[U, L+1]``.

**Three growth laws, one criterion** [ours]. On the stream variance ``v(t)``, layers ``t = 1..L`` (the
embeddings ``t = 0`` left out: a log of ``t`` needs ``t >= 1``), each law is a two-parameter model of
``log v`` fitted by least squares (:func:`fit_growth`):

- exponential ``log v = a + k t`` (``e^k`` per layer);
- polynomial ``log v = a + p log t`` (``v ~ t^p``);
- linear ``v = b (t + s)``, ``s > -1`` (an increasing or flat line: ``1 / (1 + s)`` is the growth per layer
  relative to ``v(1)``), fitted in ``log v`` over a log grid of ``1 + s`` from 1e-3 to 1e5, then refined.

The law that fits best is the one with the smallest sum of squared residuals in ``log v`` (all have two
parameters, so AIC and BIC rank them alike); across units a law beats another *for sure* when the mean
difference of their residual sums lies above 0 with its interval (t over the units, Bonferroni over the
row's comparisons). Every law's parameter is reported with its interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts, sample_part
from rankcollapse.experiments.kit.curves import SAMPLE, conditions, n_words, sample_std, z
from rankcollapse.experiments.kit.data import Layered, unit_of
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The growth laws, in the order the rows print them.
LAWS: tuple[str, ...] = ("exponential", "polynomial", "linear")
#: The grid of ``1 + s`` of the linear law (log-spaced).
LINEAR_GRID = np.logspace(-3, 5, 321)


def unit_curves(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, str]:
    """``([U, L+1] per-unit curves of column, unit)`` from ``kind = growth_sample`` rows (``run_id``,
    ``sample``, ``layer``, ``column``): per network its mean over samples, per excerpt its own values."""
    unit = unit_of(frame)
    if frame.empty:
        return np.zeros((0, 0)), unit
    keys = ["run_id"] if unit != SAMPLE else ["run_id", "sample"]
    table = frame.groupby([*keys, "layer"], sort=True)[column].mean().unstack("layer")
    return table.to_numpy(dtype=float), unit


@dataclass(frozen=True)
class GrowthFit:
    """The three laws fitted to one curve: ``sse[law]`` (residual sum of squares in ``log v``) and
    ``param[law]`` (``k`` per layer, ``p``, ``1 / (1 + s)``)."""

    sse: dict[str, float]
    param: dict[str, float]

    @property
    def best(self) -> str:
        return min(LAWS, key=lambda law: self.sse[law])


def fit_growth(v: np.ndarray) -> GrowthFit | None:
    """The three laws (module docstring) fitted to ``v[1:]`` (``v``: [L+1], layer 0 left out); None when
    fewer than 3 layers or a value is not positive and finite. The linear law's ``1 + s``: the best point of
    :data:`LINEAR_GRID`, refined by a bounded search between its neighbours."""
    from scipy.optimize import minimize_scalar

    y_all = np.asarray(v, dtype=float)[1:]
    if y_all.size < 3 or not (np.isfinite(y_all).all() and (y_all > 0).all()):
        return None
    y = np.log(y_all)
    t = np.arange(1, y.size + 1, dtype=float)

    def ols(x: np.ndarray) -> tuple[float, float]:
        slope, icpt = np.polyfit(x, y, 1)
        return float(((y - icpt - slope * x) ** 2).sum()), float(slope)

    sse_exp, k = ols(t)
    sse_poly, p = ols(np.log(t))

    def linear_sse(g: np.ndarray) -> np.ndarray:
        """The linear law's residual sums at ``1 + s = g`` [G] (``log b``: the mean residual)."""
        resid = y[None, :] - np.log(t[None, :] - 1.0 + g[:, None])  # [G, L]
        resid -= resid.mean(axis=1, keepdims=True)
        return (resid**2).sum(axis=1)

    sses = linear_sse(LINEAR_GRID)
    best = int(np.argmin(sses))
    lo, hi = LINEAR_GRID[max(best - 1, 0)], LINEAR_GRID[min(best + 1, LINEAR_GRID.size - 1)]
    res = minimize_scalar(lambda u: float(linear_sse(np.array([math.exp(u)]))[0]),
                          bounds=(math.log(lo), math.log(hi)), method="bounded", options={"xatol": 1e-8})
    g, sse_lin = (math.exp(float(res.x)), float(res.fun)) if res.fun < sses[best] else (
        float(LINEAR_GRID[best]), float(sses[best]))
    return GrowthFit({"exponential": sse_exp, "polynomial": sse_poly, "linear": sse_lin},
                     {"exponential": k, "polynomial": p, "linear": 1.0 / g})


@dataclass(frozen=True)
class GrowthFits:
    """The fits of every unit of one condition: ``fits`` (one per unit with a fit), ``unit``."""

    fits: tuple[GrowthFit, ...]
    unit: str

    @property
    def n(self) -> int:
        return len(self.fits)

    def values(self, what: str, law: str) -> np.ndarray:
        """``sse`` or ``param`` of ``law`` per unit."""
        return np.array([getattr(f, what)[law] for f in self.fits], dtype=float)

    def winners(self) -> dict[str, int]:
        return {law: sum(f.best == law for f in self.fits) for law in LAWS}

    def words(self) -> str:
        """``exponential x1.03/layer ± 0.01, polynomial t^0.52 ± 0.03, linear +41% of v(1)/layer; residuals
        (log v) 2.1, 0.31, 0.02; best: linear in 8 of 8 networks``."""
        if not self.fits:
            return "no unit with a positive finite curve"
        crit = z(self.n)

        def pm(values: np.ndarray) -> str:
            se = float(sample_std(values)) / math.sqrt(values.size) if values.size > 1 else math.nan
            return f"± {crit * se:.2g}" if math.isfinite(se) else "(one unit)"

        k, p, b = (self.values("param", law) for law in LAWS)
        sse = ", ".join(f"{float(self.values('sse', law).mean()):.3g}" for law in LAWS)
        win = self.winners()
        best = max(LAWS, key=lambda law: win[law])
        km = float(k.mean())
        return (f"exponential x{math.exp(km):.4g}/layer (log rate {km:+.3g} {pm(k)}), polynomial "
                f"t^{float(p.mean()):.3g} {pm(p)}, linear +{float(b.mean()):.3g} v(1)/layer {pm(b)}; "
                f"residuals in log v {sse}; best: {best} in {win[best]} of {n_words(self.n, self.unit)}")


def growth_fits(curves: np.ndarray, unit: str) -> GrowthFits:
    """:class:`GrowthFits` of per-unit curves ``[U, L+1]`` (units without a fit left out)."""
    fits = [fit_growth(row) for row in curves]
    return GrowthFits(tuple(f for f in fits if f is not None), unit)


def _too_few(label: str, n: int, unit: str, th: Thresholds, words: str) -> Judgement | None:
    """Inconclusive (sample too small) below ``min_samples`` units, samples or networks alike; else None."""
    need = th.count("min_samples")
    if n >= need:
        return None
    cause = causes.too_few(n, need, unit, label)
    return Judgement(INCONCLUSIVE, words, cause, "sample too small", n, unit=unit)


def _mean_margin(what: str, values: np.ndarray, threshold: float, unit: str) -> Margin:
    se = float(sample_std(values)) / math.sqrt(values.size) if values.size > 1 else math.nan
    return Margin(what, float(values.mean()), se, threshold, int(values.size), unit)


def best_growth(per_label: Mapping[str, GrowthFits], law: str, th: Thresholds) -> Judgement:
    """``law`` fits best: per condition, the residual sum of each other law minus ``law``'s above 0 for sure
    (reproduced); some other law's below ``law``'s for sure (not reproduced); else inconclusive. Bonferroni
    over the conditions and the two comparisons of each (module docstring)."""
    if law not in LAWS:
        raise ValueError(f"law must be one of {LAWS}, got {law!r}")
    parts: list[tuple[str, Judgement]] = []
    with conditions(2 * max(len(per_label), 1)):
        for label, fits in per_label.items():
            words = fits.words()
            few = _too_few(label, fits.n, fits.unit, th, words)
            if few is not None:
                parts.append((label, few))
                continue
            others = [
                (other, _mean_margin(f"residual of {other} minus {law}", fits.values("sse", other)
                                     - fits.values("sse", law), 0.0, fits.unit))
                for other in LAWS if other != law
            ]
            margins = [m for _, m in others]
            better = [other for other, m in others if m.decided and m.value < 0]
            if better:
                cause = causes.measured_otherwise(f"{label}: {better[0]} fits better than {law} ({words})")
                parts.append((label, Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", fits.n,
                                               tuple(margins), unit=fits.unit)))
                continue
            v = REPRODUCED if all(m.decided and m.value > 0 for m in margins) else INCONCLUSIVE
            parts.append((label, sample_part(v, words, margins, fits.n, fits.unit)))
    return combine_parts(parts)


def flat_growth(per_label: Mapping[str, GrowthFits], th: Thresholds) -> Judgement:
    """The variance is kept: per condition the exponential law's per-layer log rate ``k`` within
    ``± rate_tol`` for sure (reproduced); outside it for sure (not reproduced); else inconclusive."""
    tol = th["rate_tol"]
    parts: list[tuple[str, Judgement]] = []
    with conditions(2 * max(len(per_label), 1)):
        for label, fits in per_label.items():
            words = fits.words()
            few = _too_few(label, fits.n, fits.unit, th, words)
            if few is not None:
                parts.append((label, few))
                continue
            k = fits.values("param", "exponential")
            hi = _mean_margin("log rate of the variance, at most +rate_tol", k, tol, fits.unit)
            lo = _mean_margin("log rate of the variance, at least -rate_tol", k, -tol, fits.unit)
            if (hi.decided and hi.value > tol) or (lo.decided and lo.value < -tol):
                how = "grows" if hi.value > tol else "falls"
                cause = causes.measured_otherwise(f"{label}: the variance {how} ({words})")
                parts.append((label, Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", fits.n,
                                               (hi, lo), unit=fits.unit)))
                continue
            v = REPRODUCED if hi.decided and lo.decided else INCONCLUSIVE
            parts.append((label, sample_part(v, words, [hi, lo], fits.n, fits.unit)))
    return combine_parts(parts)


def estimate(values: np.ndarray, unit: str, column: str = "") -> Layered:
    """One :class:`~rankcollapse.experiments.kit.data.Layered` entry: the mean of ``values`` (one per unit)
    and its standard error over the units."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = int(v.size)
    mean = float(v.mean()) if n else math.nan
    std = float(sample_std(v)) if n > 1 else math.nan
    se = std / math.sqrt(n) if n > 1 else math.nan
    return Layered(column, np.array([mean]), np.array([se]), np.array([std]), n, unit, False, n)


def _sided(estimates: Mapping[str, Layered], threshold: float, th: Thresholds, what: str, above: bool
           ) -> Judgement:
    """Every labelled estimate (entry 0) on the stated side of ``threshold`` for sure (reproduced); on the
    other side for sure for some (not reproduced); else inconclusive. Bonferroni over the labels."""
    side = "at least" if above else "at most"
    parts: list[tuple[str, Judgement]] = []
    with conditions(max(len(estimates), 1)):
        for label, e in estimates.items():
            words = f"{what} {float(e.mean[0]):.4g}, {side} {threshold:g} stated ({n_words(e.n, e.unit)})"
            few = _too_few(label, e.n, e.unit, th, words)
            if few is not None:
                parts.append((label, few))
                continue
            m = e.margin(0, threshold, f"{what}, {side} {threshold:g}")
            lo, hi = m.bounds()
            words = (f"{what} {m.value:.4g} ± {(hi - lo) / 2:.2g}, {side} {threshold:g} stated "
                     f"({n_words(e.n, e.unit)})")
            holds, fails = (lo > threshold, hi < threshold) if above else (hi < threshold, lo > threshold)
            if fails:
                cause = causes.measured_otherwise(f"{label}: {words}")
                parts.append((label, Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", e.n, (m,),
                                               unit=e.unit)))
                continue
            parts.append((label, sample_part(REPRODUCED if holds else INCONCLUSIVE, words, [m], e.n, e.unit)))
    return combine_parts(parts)


def at_least(estimates: Mapping[str, Layered], threshold: float, th: Thresholds, what: str) -> Judgement:
    """Every labelled estimate (entry 0) at least ``threshold`` for sure (reproduced); below it for sure for
    some (not reproduced); else inconclusive. Bonferroni over the labels."""
    return _sided(estimates, threshold, th, what, above=True)


def at_most(estimates: Mapping[str, Layered], threshold: float, th: Thresholds, what: str) -> Judgement:
    """Every labelled estimate (entry 0) at most ``threshold`` for sure (reproduced); above it for sure for
    some (not reproduced); else inconclusive. Bonferroni over the labels."""
    return _sided(estimates, threshold, th, what, above=False)

"""Curve statistics used by the stories: fitted collapse rate, layers to the floor, curve classes.

All functions take plain sequences (one value per layer, row t = X(t)) so they apply equally to
the simulator's rows, a model's rows, or a column of ``runs.csv``. The precision floor is
``rankcollapse.core.precision.floor_rel`` (``FLOOR_FACTOR * eps(dtype)``).

A curve of mu_rel against depth is classified by :func:`classify_curve`:

- ``at floor``: the curve reaches the precision floor (or its last decade above it);
- ``collapsing``: the tail slope of log mu_rel (last half of the pre-floor layers) < -rate_tol;
- ``kept``: tail slope >= -rate_tol and final mu_rel >= keep_min;
- ``overflow``: the tokens stopped being finite (a growing network in float32);
- ``unclear``: anything else (e.g. tiny mu_rel that still drifts slowly).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rankcollapse.core.precision import floor_rel

__all__ = [
    "FIT_MARGIN",
    "MIN_FIT_POINTS",
    "classify_curve",
    "fitted_log_rate",
    "floor_rel",
    "layers_to_floor",
    "majority",
    "pre_floor_length",
    "spearman",
]

#: A point counts as "pre-floor" while mu_rel > FIT_MARGIN * floor: the last decade above the
#: floor is already bent by rounding, so the fit stops there.
FIT_MARGIN = 10.0
#: At least this many pre-floor points for a fitted rate (else the rate is undefined: None).
MIN_FIT_POINTS = 3


def pre_floor_length(mu_rel: Sequence[float], floor: float, margin: float = FIT_MARGIN) -> int:
    """Number of leading layers with ``mu_rel > margin * floor`` (and finite)."""
    count = 0
    for value in mu_rel:
        if not (math.isfinite(value) and value > margin * floor):
            break
        count += 1
    return count


def layers_to_floor(mu_rel: Sequence[float], floor: float) -> int | None:
    """First layer t with ``mu_rel <= floor`` (None if the curve never reaches the floor)."""
    for t, value in enumerate(mu_rel):
        if math.isfinite(value) and value <= floor:
            return t
    return None


def fitted_log_rate(
    mu_rel: Sequence[float], floor: float, *, start: int = 0, margin: float = FIT_MARGIN
) -> float | None:
    """Least-squares slope of ``log mu_rel(t)`` against t over the pre-floor part, from ``start``.

    Negative: exponential collapse at ``exp(slope)`` per layer; about 0: no collapse. None when
    fewer than ``MIN_FIT_POINTS`` points are left (the curve hits the floor at once).
    """
    end = pre_floor_length(mu_rel, floor, margin)
    y = np.log(np.asarray(mu_rel[start:end], dtype=np.float64))
    if y.size < MIN_FIT_POINTS:
        return None
    t = np.arange(start, start + y.size, dtype=np.float64)
    slope = np.polyfit(t, y, 1)[0]
    return float(slope)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties); NaN for fewer than 3 points or constant input."""
    from scipy.stats import spearmanr

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    rho = spearmanr(np.asarray(x, dtype=float), np.asarray(y, dtype=float)).statistic
    return float(rho)


def classify_curve(
    mu_rel: list[float], dtype: str, rate_tol: float, keep_min: float
) -> tuple[str, float | None]:
    """(class, tail slope) of one mu_rel curve; see the module docstring."""
    floor = floor_rel(dtype)
    finite = [v for v in mu_rel if math.isfinite(v)]
    if len(finite) < len(mu_rel):  # the network over/underflowed: neither kept nor collapsed
        return "overflow", None
    if not finite:
        return "unclear", None
    if finite[-1] <= floor:
        return "at floor", None
    end = pre_floor_length(mu_rel, floor)
    start = end // 2
    slope = fitted_log_rate(mu_rel[:end], floor, start=start)
    if end < len(mu_rel):  # reached the last decade above the floor before the end
        return "at floor", slope
    if slope is not None and slope < -rate_tol:
        return "collapsing", slope
    if finite[-1] >= keep_min and (slope is None or slope >= -rate_tol):
        return "kept", slope
    return "unclear", slope


def majority(classes: list[str]) -> str:
    """The most common curve class (``unclear`` for none; ties broken by first appearance)."""
    return max(dict.fromkeys(classes), key=classes.count) if classes else "unclear"

"""Curve statistics used by the claims: precision floor, fitted collapse rate, layers to the floor.

All functions take plain sequences (one value per layer, row t = X(t)) so they apply equally to
the simulator's rows, a model's rows, or a column of ``runs.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: A point counts as "pre-floor" while mu_rel > FIT_MARGIN * floor: the last decade above the
#: floor is already bent by rounding, so the fit stops there.
FIT_MARGIN = 10.0
#: At least this many pre-floor points for a fitted rate (else the rate is undefined: None).
MIN_FIT_POINTS = 3


def floor_rel(dtype: str) -> float:
    """Relative precision floor ``FLOOR_FACTOR * eps(dtype)`` of ``rankcollapse.metrics``."""
    from rankcollapse.metrics import FLOOR_FACTOR

    eps = {
        "float64": 2.0**-52,
        "f64": 2.0**-52,
        "float32": 2.0**-23,
        "f32": 2.0**-23,
        "bfloat16": 2.0**-7,
        "bf16": 2.0**-7,
        "float16": 2.0**-10,
        "f16": 2.0**-10,
    }[dtype]
    return FLOOR_FACTOR * eps


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

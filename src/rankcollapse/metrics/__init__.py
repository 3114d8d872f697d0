"""Collapse measures (mu, ranks, cosines, Dong et al.'s residual) as pure functions of token matrices.

Every measure maps ``x: [..., n, d]`` to ``[...]``; :func:`collapse_metrics` computes them all
for a batch and :func:`summarize` turns them into one CSV row. Definitions: ``docs/dynamics.md``.
"""

from rankcollapse.core.precision import FLOOR_FACTOR, precision_floor
from rankcollapse.metrics.measures import (
    CHEAP_METRICS,
    METRIC_NAMES,
    SVD_METRICS,
    at_floor,
    centered,
    collapse_metrics,
    composite_norm,
    dong_residual,
    effective_rank,
    full_rank,
    mean_abs_cos,
    mean_signed_cos,
    mu,
    mu_rel,
    num_rank,
    rank_tolerance,
    singular_values,
    stable_rank,
    summarize,
)

__all__ = [
    "CHEAP_METRICS",
    "FLOOR_FACTOR",
    "METRIC_NAMES",
    "SVD_METRICS",
    "at_floor",
    "centered",
    "collapse_metrics",
    "composite_norm",
    "dong_residual",
    "effective_rank",
    "full_rank",
    "mean_abs_cos",
    "mean_signed_cos",
    "mu",
    "mu_rel",
    "num_rank",
    "precision_floor",
    "rank_tolerance",
    "singular_values",
    "stable_rank",
    "summarize",
]

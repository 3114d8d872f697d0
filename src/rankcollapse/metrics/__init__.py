"""Collapse measures (mu, ranks, cosines, Dong et al.'s residual) as pure functions of token matrices.

Every measure maps ``x: [..., n, d]`` to ``[...]``; :func:`collapse_metrics` computes them all
for a batch and :func:`summarize` turns them into one CSV row. Definitions: ``docs/dynamics.md``.
"""

from rankcollapse.metrics.measures import (
    CHEAP_METRICS,
    FLOOR_FACTOR,
    METRIC_NAMES,
    SVD_METRICS,
    at_precision_floor,
    centered,
    collapse_metrics,
    composite_norm,
    dong_residual,
    effective_rank,
    full_rank,
    mean_abs_cosine,
    mean_signed_cosine,
    mu,
    mu_relative,
    numerical_rank,
    precision_floor,
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
    "at_precision_floor",
    "centered",
    "collapse_metrics",
    "composite_norm",
    "dong_residual",
    "effective_rank",
    "full_rank",
    "mean_abs_cosine",
    "mean_signed_cosine",
    "mu",
    "mu_relative",
    "numerical_rank",
    "precision_floor",
    "rank_tolerance",
    "singular_values",
    "stable_rank",
    "summarize",
]

"""Collapse measures (mu, ranks, cosines, Dong et al.'s residual) as pure functions of token matrices.

Every measure maps ``x: [..., n, d]`` to ``[...]``; :func:`collapse_metrics` computes them all
for a batch and :func:`summarize` turns them into one CSV row. Definitions: ``docs/dynamics.md``.
"""

from rankcollapse.core.precision import FLOOR_FACTOR, precision_floor
from rankcollapse.metrics.diagnostics import (
    DIAGNOSTIC_NAMES,
    SINK_THRESHOLD,
    attention_entropy,
    first_token_attention,
    first_token_norm,
    massive_ratio,
    normalized_attention_entropy,
    sink_rate,
    top_activations,
)
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
    "DIAGNOSTIC_NAMES",
    "FLOOR_FACTOR",
    "METRIC_NAMES",
    "SINK_THRESHOLD",
    "SVD_METRICS",
    "at_floor",
    "attention_entropy",
    "centered",
    "collapse_metrics",
    "composite_norm",
    "dong_residual",
    "effective_rank",
    "first_token_attention",
    "first_token_norm",
    "full_rank",
    "massive_ratio",
    "mean_abs_cos",
    "mean_signed_cos",
    "mu",
    "mu_rel",
    "normalized_attention_entropy",
    "num_rank",
    "precision_floor",
    "rank_tolerance",
    "singular_values",
    "sink_rate",
    "stable_rank",
    "summarize",
    "top_activations",
]

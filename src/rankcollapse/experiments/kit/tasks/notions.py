"""Thin task adapter over ``dynamics.notions``: one simulator run, both notions of collapse, as rows.

:func:`simulate_notions` builds a ``SimulationConfig`` from a run's params (unknown keys are an error),
calls ``dynamics.notions.measure_notions`` (nothing here measures) and returns

- ``kind = curve`` rows (``kit.curves.curve_rows``) of the per-sample ``mu`` and ``mu_rel`` (the limit
  notion), with ``mode`` (the block assembly; the run's param ``preset``), ``mask``, ``n``, ``d``, ``dtype``
  and the simulator's model words;
- ``kind = notion`` rows, one per layer and sample (the one-step notion, paired per sample):
  ``affine_rank``, ``linear_rank`` of X(t); ``norm_in_affine_rank``, ``norm_out_affine_rank`` and
  ``norm_rank_margin`` around layer t's normalisation (NaN without one, and at t = 0); ``span_residual``
  against ``X(0) W_V(1) ... W_V(t)`` and ``span_floors`` (it over the dtype's relative floor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task
from rankcollapse.experiments.kit.curves import curve_rows
from rankcollapse.experiments.kit.tasks.curves import (
    Execution,
    simulate_cost,
    simulation_config,
    simulator_info,
)

#: The per-sample columns of a ``kind = notion`` row.
NOTION_COLUMNS: tuple[str, ...] = (
    "affine_rank",
    "linear_rank",
    "norm_in_affine_rank",
    "norm_out_affine_rank",
    "norm_rank_margin",
)
#: Cost of a notion run against a plain simulator run of the same size (the kept trajectory, one SVD per
#: rank and per span residual, the attention once more per layer for the norm step), measured 2026-12.
NOTION_FACTOR = 6.0


def simulate_notions(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """Both notions of one simulator run (module docstring). ``execution``: its device (the whole batch at
    once, as ``kit.tasks.curves.simulate_curves``)."""
    from rankcollapse.dynamics.notions import measure_notions

    config = simulation_config(params, execution)
    m = measure_notions(config)
    res = m.result
    for t in range(len(res.rows)):
        on_layer(t)
    mu, mu_rel = res.mu.T.double().numpy(), res.mu_rel.T.double().numpy()
    zero = np.isnan(mu_rel) & np.isfinite(mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_norm = np.where(mu_rel > 0, mu / mu_rel, np.nan)
    shared = {
        "mode": config.mode,
        "mask": str(params.get("mask", "complete")),
        "n": config.tokens,  # the run files' column (stored; the store reads it as tokens)
        "d": config.d,
        "dtype": config.dtype,
    }
    info = simulator_info(config)
    rows: list[dict[str, Any]] = [
        {"kind": "curve", **shared, **info, **row}
        for row in curve_rows({"mu": mu, "mu_rel": mu_rel}, config.dtype, zero, x_norm)
    ]
    nan = np.full(mu.shape[::-1], np.nan)  # [T+1, b]
    cols = {k: res.ranks[k].numpy() if k in res.ranks else nan for k in NOTION_COLUMNS}
    span = m.span_residual.numpy()
    for t in range(span.shape[0]):
        for b in range(span.shape[1]):
            rows.append(
                {
                    "kind": "notion",
                    **shared,
                    "layer": t,
                    "sample": b,
                    **{k: float(v[t, b]) for k, v in cols.items()},
                    "span_residual": float(span[t, b]),
                    "span_floors": float(span[t, b] / m.floor_rel),
                }
            )
    summary = {
        "final_mu_rel": float(np.nanmean(mu_rel[:, -1])),
        "span_floors_max": float(np.nanmax(span) / m.floor_rel),
        "device": config.device,
        "batch_size": config.samples,
    }
    return RunOutput(rows, summary)


def simulate_notions_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`simulate_notions` run: ``NOTION_FACTOR`` x the simulator's."""
    return NOTION_FACTOR * simulate_cost(params)


SIMULATE_NOTIONS = Task(simulate_notions, cost_s=simulate_notions_cost)

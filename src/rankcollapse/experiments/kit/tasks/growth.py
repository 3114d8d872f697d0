"""Thin task adapters of the growth stories (LayerNorm Scaling, arXiv 2502.05795; Peri-LN, arXiv 2502.02732).

Both return rows ``kind = growth_sample``, one per sample and hidden state ``X(t)``: ``layer``, ``sample``
and the per-sample values of ``metrics.growth.GROWTH_NAMES`` (``stream_var``, ``layer_cos`` (NaN at t = 0),
``massive_ratio``), with the model's columns (``model_label``, ``pretrained``, ``stand_in_for``, ...) and
the ``placement`` of its norms. ``kit.rules.growth.unit_curves`` reads them in the unit of sampling.

- :func:`simulate_growth`: the simulator (``rankcollapse.dynamics``, ``keep_trajectory``) on a
  ``SimulationConfig`` from the params; the growth measures are computed from the kept trajectory;
- :func:`model_growth`: ``models.growth.measure_growth`` (a model's own blocks on text excerpts);
  ``stand_in_for`` (popped from the params): what these weights stand in for in the claim.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task, config_from
from rankcollapse.experiments.kit.tasks.curves import (
    LOAD_S,
    Execution,
    _execution,
    model_facts,
    simulate_cost,
    simulation_config,
    simulator_info,
)


def _sample_rows(values: dict[str, np.ndarray], shared: dict[str, Any]) -> list[dict[str, Any]]:
    """``kind = growth_sample`` rows of per-sample values ``values[q]`` [b, L+1]."""
    first = next(iter(values.values()))
    b, depth = first.shape
    return [{"kind": "growth_sample", "layer": t, "sample": i, "samples": b, **shared,
             **{q: float(v[i, t]) for q, v in values.items()}}
            for t in range(depth) for i in range(b)]


def simulate_growth(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """The growth measures of one simulator run (module docstring)."""
    import torch

    from rankcollapse.dynamics.simulate import simulate
    from rankcollapse.metrics.diagnostics import massive_ratio
    from rankcollapse.metrics.growth import layer_cos, stream_var

    config = simulation_config(params, execution)
    result = simulate(config, keep_trajectory=True, on_layer=lambda row: on_layer(int(row["layer"])))
    assert result.trajectory is not None
    x = result.trajectory.to(torch.float64)  # [T+1, b, n, d]
    cos = torch.full(x.shape[:2], torch.nan, dtype=torch.float64)
    cos[1:] = torch.stack([layer_cos(x[t - 1], x[t]) for t in range(1, x.shape[0])])
    values = {"stream_var": stream_var(x).T.numpy(), "layer_cos": cos.T.numpy(),
              "massive_ratio": torch.stack([massive_ratio(x[t]) for t in range(x.shape[0])]).T.numpy()}
    spec = config.layer_spec()
    shared = {"placement": spec.placement, "mode": config.mode, "dtype": config.dtype,
              **simulator_info(config)}
    summary = {"final_stream_var": float(values["stream_var"][:, -1].mean()), "layers_run": x.shape[0] - 1,
               "device": config.device, "batch_size": config.samples, "stopped": result.stopped}
    return RunOutput(_sample_rows(values, shared), summary)


def simulate_growth_cost(params: dict[str, Any]) -> float:
    """The simulator's estimate, doubled for the MLP and the measures of the kept trajectory."""
    return 2.0 * simulate_cost(params) + 0.1


def model_growth(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """The growth measures of one model on text excerpts (module docstring)."""
    from rankcollapse.models.growth import GrowthConfig, measure_growth

    params = dict(params)
    stand_in_for = str(params.pop("stand_in_for", "") or "")
    cfg = config_from(GrowthConfig, params)
    device, batch_size = _execution(execution)
    m = measure_growth(cfg, on_layer, device, batch_size)
    model = {**m.model, "stand_in_for": stand_in_for or m.model["stand_in_for"]}
    shared = {"placement": model.pop("norm_placement"), "mode": "full", "dtype": cfg.dtype, **model}
    return RunOutput(_sample_rows(m.values, shared), {**m.summary, "stand_in_for": model["stand_in_for"]})


#: Seconds of one layer for one 128-token excerpt of a ~100M-parameter model, float32, for estimates.
GROWTH_LAYER_S = 0.02
#: The bundled models' depths (for estimates; another name counts 12).
DEPTH: dict[str, int] = {"minilm": 6, "mpnet": 12, "smollm2": 30, "gemma3-270m": 18, "qwen2.5-coder-0.5b": 24}


def model_growth_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`model_growth` run."""
    depth = DEPTH.get(str(params.get("model", "")), 12)
    scale = float(params.get("tokens", 128)) / 128.0
    return GROWTH_LAYER_S * depth * int(params.get("samples", 8)) * scale + LOAD_S


SIMULATE_GROWTH = Task(simulate_growth, cost_s=simulate_growth_cost)
MODEL_GROWTH = Task(model_growth, cost_s=model_growth_cost, identity_facts=model_facts)

"""Thin task adapter of the phase stories (MLP-only stacks, arXiv 2607.14018; rank against entropy collapse,
arXiv 2505.24333; ``Y = LN(lam X + SA(X))``, arXiv 2410.10609).

:func:`simulate_phases` runs ``dynamics.phases.measure_layers`` on a ``SimulationConfig`` from the params
and returns rows ``kind = phase_sample``, one per sample and hidden state ``X(t)``: ``layer``, ``sample``,
``samples`` and the per-sample values of ``dynamics.phases.PHASE_NAMES`` (``mu_rel``, ``effective_rank``,
``attention_entropy``: NaN at t = 0 and without attention), with the run's ``mode``, ``d``, ``tokens``,
``qk_scale``, ``d_qk``, ``residual`` and the simulator's model columns. ``kit.rules.growth.unit_curves``
reads them per network (each seed one network).

``residual`` (popped from the params, default none): the residual strength ``a`` of ``Norm(a X + f(X))``,
the form of arXiv 2410.10609's ``LN(lam X + SA(X))``; a norm that ignores a token's scale (LayerNorm
without its eps) makes it the simulator's ``Norm(X + (1/a) f(X))``: ``skip = 1 / a``, and ``a = 0`` no skip
connection (``Norm(f(X))``). Given, it replaces the preset's skip.
"""

from __future__ import annotations

from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_float
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task
from rankcollapse.experiments.kit.tasks.curves import Execution, simulation_config, simulator_info


def skip_of(residual: float) -> float:
    """The simulator's ``skip`` of a residual strength ``a >= 0`` (module docstring): ``1 / a``, 0 (no skip
    connection) at ``a = 0``."""
    a = check_float("residual", residual, low=0.0)
    return 1.0 / a if a > 0 else 0.0


def simulate_phases(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """The phase measures of one simulator run (module docstring)."""
    from rankcollapse.dynamics.phases import PHASE_NAMES, measure_layers

    params = dict(params)
    residual = params.pop("residual", None)
    if residual is not None:
        if params.get("skip") is not None:
            raise RankCollapseError("give residual or skip, not both (residual a is skip 1 / a)")
        params["skip"] = skip_of(residual)
    params.setdefault("metrics", ("mu", "mu_rel"))
    config = simulation_config(params, execution)
    m = measure_layers(config)
    on_layer(m.layers_run)
    values = {k: m.values[k].numpy() for k in PHASE_NAMES}  # [L+1, b]
    depth, b = values["mu_rel"].shape
    shared = {"mode": config.mode, "d": config.d, "tokens": config.tokens, "qk_scale": float(config.qk_scale),
              "d_qk": float(config.d_qk), "residual": float("nan") if residual is None else float(residual),
              "dtype": config.dtype, **simulator_info(config)}
    if not config.layer_spec().attention:  # an MLP-only stack is no SAN
        shared["model_label"] = f"Gaussian residual MLP (N = {config.tokens}, d = {config.d}, ours)"
    rows = [{"kind": "phase_sample", "layer": t, "sample": i, "samples": b, **shared,
             **{k: float(v[t, i]) for k, v in values.items()}}
            for t in range(depth) for i in range(b)]
    summary = {"layers_run": m.layers_run, "stopped": m.stopped, "device": config.device,
               "batch_size": config.samples, "final_mu_rel": float(values["mu_rel"][-1].mean())}
    return RunOutput(rows, summary)


#: Seconds per ``layers x samples x N d^2`` unit (the MLP's 8 N d^2 multiply-adds dominate at N ~ d), with
#: the attention formed once more per layer, float64 on one CPU thread; for estimates.
PHASE_UNIT_S = 4.0e-8


def simulate_phases_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`simulate_phases` run."""
    from rankcollapse.edge.validate import check_param

    size = (check_param(params, "layers", 128) * check_param(params, "samples", 8)
            * check_param(params, "tokens", 32) * check_param(params, "d", 16) ** 2)
    return PHASE_UNIT_S * size + 0.05


SIMULATE_PHASES = Task(simulate_phases, cost_s=simulate_phases_cost)

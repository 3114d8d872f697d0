"""Generic tasks shared by several stories: the simulator and a model analysis, one run each.

``simulate`` and ``analyze`` are thin adapters over ``rankcollapse.dynamics.simulate`` and
``rankcollapse.models.analyze``: the flat params of one grid point become the API's config
dataclass (unknown keys are an error), and the result becomes rows + a summary. Their
``__name__`` is the task name recorded with every run, so a custom config can name them
(``task: simulate``). Paper-specific tasks live in their story module.
"""

from __future__ import annotations

from typing import Any

from rankcollapse.experiments.analysis import fitted_log_rate, floor_rel, layers_to_floor
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, config_from


def flatten(prefix: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts to ``a.b`` keys; lists and tuples (per-sample values) are left out."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(f"{name}.", value))
        elif isinstance(value, list | tuple):
            continue  # per-sample lists stay out of the index
        else:
            out[name] = value
    return out


def rate_summary(mu_rel: Any, dtype: str) -> dict[str, Any]:
    """Per-sample fitted log-rate (median over samples) and layers to the floor (max over samples).

    mu_rel: [T + 1, b] (a tensor or array with ``.T.tolist()``).
    """
    floor = floor_rel(dtype)
    per_sample = mu_rel.T.tolist()  # [b][T+1]
    rates = [fitted_log_rate(s, floor) for s in per_sample]
    hits = [layers_to_floor(s, floor) for s in per_sample]
    finite = sorted(r for r in rates if r is not None)
    return {
        "floor_rel": floor,
        "fit_log_rate": finite[len(finite) // 2] if finite else None,
        "fit_samples": len(finite),
        "layers_to_floor": None if any(h is None for h in hits) else max(hits),
        "floor_share_final": sum(1 for h in hits if h is not None) / len(hits),
    }


def simulate(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """``rankcollapse.dynamics.simulate`` on a ``SimulationConfig`` built from ``params``.

    Rows: the simulator's per-layer rows (layer, mu, mu_rel, at_floor, ..., attn_min) plus
    ``bound`` (Theorem 1's ``C (1 - eps^r)^{t/(2r)}`` with the largest C) where it applies.
    Summary: final values, the Theorem 1 check (``theory.*``), the mask radius, the fitted
    collapse rate (``fit_log_rate``) and ``layers_to_floor``.
    """
    from rankcollapse.dynamics.simulate import SimulationConfig
    from rankcollapse.dynamics.simulate import simulate as run_simulation

    params = dict(params)
    if isinstance(params.get("metrics"), list):
        params["metrics"] = tuple(params["metrics"])
    config = config_from(SimulationConfig, params)
    result = run_simulation(config, on_layer=lambda row: on_layer(int(row["layer"])))
    theory = result.theory
    rows = [dict(r) for r in result.rows]
    if theory is not None and theory.applicable and theory.log_rate is not None:
        bound = theory.bound(list(range(len(rows)))).tolist()
        for row, b in zip(rows, bound, strict=True):
            row["bound"] = b
    summary = flatten("", result.summary())
    summary["radius"] = result.radius
    summary.update(rate_summary(result.mu_rel, config.dtype))
    return RunOutput(rows, summary)


def analyze(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """``rankcollapse.models.analyze`` on an ``AnalyzeConfig`` built from ``params``.

    Rows: one per hidden state (layer, hidden_state, model_layer, metric columns).
    Summary: model facts, timings, the fitted collapse rate and layers to the floor of mu_rel.
    """
    import torch

    from rankcollapse.models import AnalyzeConfig
    from rankcollapse.models import analyze as run_analysis

    params = dict(params)
    if isinstance(params.get("metrics"), list):
        params["metrics"] = tuple(params["metrics"])
    config = config_from(AnalyzeConfig, params)
    result = run_analysis(config, on_row=lambda row: on_layer(int(row["layer"])))
    summary = {k: v for k, v in result.model_info.items() if isinstance(v, str | int | float | bool)}
    summary.update({f"seconds.{k}": v for k, v in result.seconds.items()})
    mu_rel = torch.tensor([[float(r["mu_rel"])] for r in result.rows], dtype=torch.float64)
    summary.update(rate_summary(mu_rel, config.dtype))
    summary["final_mu_rel"] = float(result.rows[-1]["mu_rel"])
    return RunOutput([dict(r) for r in result.rows], summary)


#: Tasks a custom config (``--config-dir``) may name, besides every story's task.
GENERIC_TASKS = {fn.__name__: fn for fn in (simulate, analyze)}

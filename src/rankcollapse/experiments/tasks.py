"""Task functions: one kind of run each, ``task(params, on_layer) -> RunOutput``.

A task receives the flat parameter dict of one grid point (seed included) and a callback it calls
once per layer measured (for the progress bar). It returns rows for the tidy table and a
``summary`` of scalars for the run index. Tasks are thin adapters over the package's public APIs
(``dynamics.simulate``, ``models.analyze``, ``equilibria``); they must be importable top-level
functions so that process pools and Dask workers can call them.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.sweep import RunOutput

OnLayer = Callable[[int], None]


def toy(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """A deterministic, dependency-free task for testing the sweep engine.

    ``x(t) = x0 * rate**t`` for ``t = 0..layers``; ``sleep_s`` seconds per layer simulate work.
    Params: ``layers`` (int), ``rate`` (float), ``x0`` (float, default 1), ``sleep_s`` (default 0),
    ``seed`` (recorded only), ``fail`` (raise when true, to test failure handling).
    """
    if params.get("fail"):
        raise RankCollapseError(f"toy task asked to fail (seed={params.get('seed')})")
    rows = []
    x = float(params.get("x0", 1.0))
    for t in range(int(params["layers"]) + 1):
        if params.get("sleep_s"):
            time.sleep(float(params["sleep_s"]))
        rows.append({"layer": t, "mu": x, "log_mu": math.log(x) if x > 0 else float("-inf")})
        on_layer(t)
        x *= float(params["rate"])
    return RunOutput(rows, {"final_mu": rows[-1]["mu"]})


def _config_from(cls: type, params: dict[str, Any], extra: tuple[str, ...] = ()) -> Any:
    """Build dataclass ``cls`` from params; unknown keys (not in ``extra``) are an error."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - names - set(extra))
    if unknown:
        raise RankCollapseError(
            f"unknown {cls.__name__} setting(s) {unknown}; allowed: {', '.join(sorted(names))}"
        )
    return cls(**{k: v for k, v in params.items() if k in names})


_TASKS: dict[str, Callable[[dict[str, Any], OnLayer], RunOutput]] = {"toy": toy}


def register(name: str) -> Callable:
    """Decorator: register a task function under ``name``."""

    def deco(fn: Callable[[dict[str, Any], OnLayer], RunOutput]) -> Callable:
        _TASKS[name] = fn
        return fn

    return deco


def get_task(name: str) -> Callable[[dict[str, Any], OnLayer], RunOutput]:
    """The task registered under ``name`` (RankCollapseError naming the allowed ones otherwise)."""
    if name not in _TASKS:
        raise RankCollapseError(f"unknown task {name!r}; allowed: {', '.join(sorted(_TASKS))}")
    return _TASKS[name]


def _flatten(prefix: str, obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(f"{name}.", value))
        elif isinstance(value, list | tuple):
            continue  # per-sample lists stay out of the index
        else:
            out[name] = value
    return out


def _rate_summary(mu_rel: Any, dtype: str) -> dict[str, Any]:
    """Per-sample fitted log-rate (median over samples) and layers to the floor (max over samples)."""
    from rankcollapse.experiments.analysis import fitted_log_rate, floor_rel, layers_to_floor

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


@register("simulate")
def simulate_task(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """``rankcollapse.dynamics.simulate`` on a :class:`SimulationConfig` built from ``params``.

    Rows: the simulator's per-layer rows (layer, mu, mu_rel, at_floor, ..., attn_min) plus
    ``bound`` (Theorem 1's ``C (1 - eps^r)^{t/(2r)}`` with the largest C) where it applies.
    Summary: final values, the Theorem 1 check (``theory.*``), the mask radius, the fitted
    collapse rate (``fit_log_rate``) and ``layers_to_floor``.
    """
    from rankcollapse.dynamics.simulate import SimulationConfig, simulate

    params = dict(params)
    if isinstance(params.get("metrics"), list):
        params["metrics"] = tuple(params["metrics"])
    config = _config_from(SimulationConfig, params)
    result = simulate(config, on_layer=lambda row: on_layer(int(row["layer"])))
    theory = result.theory
    rows = [dict(r) for r in result.rows]
    if theory is not None and theory.applicable and theory.log_rate is not None:
        bound = theory.bound(list(range(len(rows)))).tolist()
        for row, b in zip(rows, bound, strict=True):
            row["bound"] = b
    summary = _flatten("", result.summary())
    summary["radius"] = result.radius
    summary.update(_rate_summary(result.mu_rel, config.dtype))
    return RunOutput(rows, summary)


@register("analyze")
def analyze_task(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """``rankcollapse.models.analyze`` on an :class:`AnalyzeConfig` built from ``params``.

    Rows: one per hidden state (layer, hidden_state, model_layer, metric columns).
    Summary: model facts, timings, the fitted collapse rate and layers to the floor of mu_rel.
    """
    import torch

    from rankcollapse.models import AnalyzeConfig, analyze

    params = dict(params)
    if isinstance(params.get("metrics"), list):
        params["metrics"] = tuple(params["metrics"])
    config = _config_from(AnalyzeConfig, params)
    result = analyze(config, on_row=lambda row: on_layer(int(row["layer"])))
    summary = {k: v for k, v in result.model_info.items() if isinstance(v, str | int | float | bool)}
    summary.update({f"seconds.{k}": v for k, v in result.seconds.items()})
    mu_rel = torch.tensor([[float(r["mu_rel"])] for r in result.rows], dtype=torch.float64)
    dtype = {"f32": "float32", "f64": "float64"}.get(config.dtype, config.dtype)
    summary.update(_rate_summary(mu_rel, dtype))
    summary["final_mu_rel"] = float(result.rows[-1]["mu_rel"])
    return RunOutput([dict(r) for r in result.rows], summary)

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


@register("counterexample")
def counterexample_task(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """The N = 2, d = 2 LayerNorm counterexample (``rankcollapse.equilibria.counterexample``).

    Params: ``w_v`` (2x2, row convention), ``w_qk`` (2x2 or None = I), ``d_qk``, ``token0`` (start
    of token 0), ``angles`` (token-1 starts, evenly spaced on the circle), ``steps``, ``rank_tol``,
    ``seed`` (recorded; the run is deterministic). Rows: one per start angle ``theta`` with token 1's
    limit (``ln_x, ln_y``), the final numerical rank and |det| with LayerNorm, and the final mu_rel
    without LayerNorm. Summary: the computed fixed points, point B and its basin arc.
    """
    import numpy as np
    import torch

    from rankcollapse.equilibria.counterexample import (
        basin_arc,
        counterexample_2d,
        fixed_points_on_circle,
        simulate_pair,
    )
    from rankcollapse.equilibria.lnmap import attention_matrix, causal_mask

    cx = counterexample_2d(params["w_v"], params.get("w_qk"), float(params.get("d_qk", 1.0)))
    token0 = np.asarray(params.get("token0", [0.6, 0.8]), dtype=np.float64)
    steps = int(params.get("steps", 4000))
    tol = float(params.get("rank_tol", 1e-6))
    theta = (np.arange(int(params["angles"])) + 0.5) * (2 * math.pi / int(params["angles"]))
    with_ln = simulate_pair(token0, theta, cx, steps=steps, layer_norm=True)  # [b, 2, 2]
    without = simulate_pair(token0, theta, cx, steps=steps, layer_norm=False)
    on_layer(steps)
    sv = np.linalg.svd(with_ln, compute_uv=False)  # [b, 2]
    centred = without - without.mean(axis=1, keepdims=True)
    mu_rel = np.linalg.norm(centred, axis=(1, 2)) / np.maximum(np.linalg.norm(without, axis=(1, 2)), 1e-300)
    # weight of token 1 on token 0 in the last layer without LN: ~0 means token 1 no longer moves
    attn = attention_matrix(torch.as_tensor(without), causal_mask(2), cx.torch_w_qk(), cx.d_qk)[:, 1, 0]
    rows = [
        {
            "theta": float(th),
            "ln_x": float(x[1, 0]),
            "ln_y": float(x[1, 1]),
            "ln_token0_x": float(x[0, 0]),
            "ln_token0_y": float(x[0, 1]),
            "ln_rank": int((s > tol * s[0]).sum()),
            "ln_abs_det": float(abs(np.linalg.det(x))),
            "noln_mu_rel": float(m),
            "noln_attn_10": float(a),
        }
        for th, x, s, m, a in zip(theta, with_ln, sv, mu_rel, attn.tolist(), strict=True)
    ]
    fps = fixed_points_on_circle(cx)
    summary: dict[str, Any] = {
        "sink_x": float(cx.sink[0]),
        "sink_y": float(cx.sink[1]),
        "fixed_points": len(fps),
        "stable_fixed_points": sum(p.stable for p in fps),
    }
    try:
        arc = basin_arc(cx, grid=int(params.get("arc_grid", 4096)), steps=int(params.get("arc_steps", 4000)))
        summary.update(
            {
                "B_x": arc.target_point[0],
                "B_y": arc.target_point[1],
                "arc_start": arc.start,
                "arc_end": arc.end,
                "arc_length": arc.length,
            }
        )
    except RankCollapseError as err:  # no off-axis stable point: token 1 always collapses
        summary.update({"arc_length": 0.0, "arc_error": str(err)})
    return RunOutput(rows, summary)


@register("equilibrium_rank")
def equilibrium_rank_task(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """A stable equilibrium of rank ``k`` of the LayerNorm dynamics (``rankcollapse.equilibria``).

    ``construct_rank_k(n, d, k)`` gives a value matrix, mask and target ``X*``; ``verify_equilibrium``
    measures its fixed-point residual, numerical rank, tangent spectral radius (stable iff < 1) and the
    share of ``samples`` inputs from an open neighbourhood (noise scale ``radius``; ``auto`` = the
    construction's own ``basin_radius``) that converge to it in ``steps`` layers.
    A rank with no construction gives one row with ``constructed = False`` and the reason.
    """
    import torch

    from rankcollapse.equilibria import construct_rank_k, verify_equilibrium

    n, d, k = int(params["n"]), int(params["d"]), int(params["k"])
    try:
        c = construct_rank_k(n, d, k)
    except RankCollapseError as err:
        return RunOutput([{"k": k, "constructed": False, "reason": str(err)}], {"constructed": False})
    gen = torch.Generator().manual_seed(int(params.get("seed", 0)))
    radius = c.basin_radius if params["radius"] == "auto" else float(params["radius"])
    init = c.neighbourhood_inputs(int(params["samples"]), radius, gen)
    eq = verify_equilibrium(
        c.x, c.w_v, c.mask_tensor(), c.w_qk, c.d_qk, steps=int(params["steps"]), init=init
    )
    on_layer(int(params["steps"]))
    row = {
        "k": k,
        "constructed": True,
        "reason": "",
        "rank": eq.rank,
        "residual": eq.residual,
        "spectral_radius": eq.spectral_radius,
        "stable": eq.stable,
        "basin_fraction": eq.basin_fraction,
        "basin_ci_low": eq.basin_ci[0],
        "basin_ci_high": eq.basin_ci[1],
        "basin_radius": radius,
        "mask": c.mask,
    }
    return RunOutput([row], {k2: v for k2, v in row.items() if k2 != "k"})

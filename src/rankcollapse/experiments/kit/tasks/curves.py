"""Thin task adapters over ``models`` and ``dynamics``: one grid point in, per-layer rows out.

Every adapter turns the flat params of one run into the API's config (unknown keys are an error),
runs the measurement there (nothing here measures), and returns rows the kit's curves read (``kind =
curve`` rows of :func:`curve_rows`: per layer, over the run's samples, mean / sample std / min / max /
log drop of each quantity, ``mu`` and ``mu_rel`` unless a run names others in ``quantities``).

- :func:`model_curves` (Figs. 2, 3, 6, 7): ``models.measure.measure_curves``: one model, every mode
  x mask x d_qk on the same excerpts;
- :func:`model_geometry` (Figs. 4, 8, 9): ``models.measure.measure_geometry``: the model's own blocks;
  per-layer geometry, singular values, initial pairwise cosines with the offending pairs;
- :func:`simulate_curves`: the simulator (``rankcollapse.dynamics``), one run's batch as samples,
  with Theorem 1's bound per layer where it applies;
- :func:`rope_score_decay`: the simulator's first-layer score decay over the distance
  (``dynamics.score_decay``, RoPE), rows ``kind = score_decay``;
- :func:`simulate`, :func:`analyze`: the plain simulator and model analysis rows, for custom sweeps.

Model names are ``rankcollapse.models`` names: ``paper:<checkpoint>`` is the paper's checkpoint when
it is in the local Hugging Face cache, else its stand-in (labelled in every row: ``model_label``,
``stand_in_for``); ``random:<checkpoint>,layers=L`` a random init with ``L`` independent layers. Each
adapter is declared with its cost estimate and identity facts as a :class:`Task`.

Every adapter takes ``execution`` (``{"device": ..., "batch_size": ...}``, from ``reproduce --device
--batch-size`` or a profile's ``batch_size``; never part of a run's identity): the model adapters load
the model on that device and stream the run's samples through it ``batch_size`` at a time, each
statistic computed from all samples' values together (rows equal to one batch's, to the last bit on
the CPU); the simulator adapters run on that device with their whole batch at once (``batch_size``
does not apply: the simulator draws every sample from one generator). Each run's summary says
``device`` and ``batch_size`` as used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.core.precision import dtype_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_param, quote
from rankcollapse.experiments.engine.grid import EXECUTION_KEYS, named_depth
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task, config_from
from rankcollapse.experiments.kit.curves import curve_rows, sample_stats

Execution = dict[str, Any] | None


def _execution(execution: Execution) -> tuple[str, int | None]:
    """``(device, batch_size)`` of a run's execution settings (absent: ``cpu``, one batch)."""
    execution = execution or {}
    return str(execution.get("device") or "cpu"), execution.get("batch_size")


def model_curves(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """Per layer, over the samples, every quantity of ``params["quantities"]`` (default ``mu``,
    ``mu_rel``) of every mode x mask x d_qk of one model (``models.measure.measure_curves``), as the
    kit's curve rows (:func:`curve_rows`, with ``x_norm`` and ``zero_share``)."""
    from rankcollapse.models.measure import CurvesConfig, measure_curves

    cfg = config_from(CurvesConfig, params)
    device, batch_size = _execution(execution)
    m = measure_curves(cfg, on_layer, device, batch_size)
    rows = []
    for v, mask, d in m.conditions:
        cond = (v, mask, d)
        for row in curve_rows(m.values[cond], cfg.dtype, m.zero[cond], m.x_norm[cond]):
            rows.append(
                {"kind": "curve", "mode": v, "mask": mask, "d_qk": d, "dtype": cfg.dtype, **m.model, **row}
            )
    return RunOutput(rows, m.summary)


def model_geometry(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """Token geometry per layer (Fig. 4), singular values (Fig. 8), initial cosines (Fig. 9) of one model
    (``models.measure.measure_geometry``) as rows: ``kind = geometry`` (per layer: each column of
    ``metrics.token_geometry`` as mean / sample std / min / max over samples, and ``rank_limit``),
    ``kind = sv``, ``kind = cos_hist``, ``kind = phi0`` (the measurement's own rows, with the model's
    columns)."""
    from rankcollapse.metrics import GEOMETRY_NAMES
    from rankcollapse.models.measure import GeometryConfig, measure_geometry

    cfg = config_from(GeometryConfig, params)
    device, batch_size = _execution(execution)
    m = measure_geometry(cfg, on_layer, device, batch_size)
    layers = sorted(m.per_layer["full_rank"])
    rows: list[dict[str, Any]] = []
    for t in layers:
        rows.extend({**r, "dtype": cfg.dtype, **m.model} for r in m.spectra.get(t, []))
        if t == 0:
            rows.extend({**r, **m.model} for r in m.cosines)
    for t in layers:
        row: dict[str, Any] = {
            "kind": "geometry",
            "layer": t,
            "samples": cfg.samples,
            "dtype": cfg.dtype,
            **m.model,
            "rank_limit": m.rank_limit,
        }
        values = {k: m.per_layer[k][t] for k in m.per_layer}
        row["finite"] = float(np.isfinite(values["sigma_max"]).mean())
        for k in GEOMETRY_NAMES:
            row.update(sample_stats(k, values[k]))
        rows.append(row)
    return RunOutput(rows, m.summary)


def simulation_config(params: dict[str, Any], execution: Execution) -> Any:
    """The ``SimulationConfig`` of a run's params (under the table's names, as the engine hands them: the
    YAML's ``n``, ``batch``, ``preset`` are ``tokens``, ``samples``, ``mode``), on the execution's device
    when one is given."""
    from rankcollapse.dynamics.simulate import SimulationConfig

    params = dict(params)
    if isinstance(params.get("metrics"), list):
        params["metrics"] = tuple(params["metrics"])
    if execution and execution.get("device"):
        params["device"] = str(execution["device"])
    return config_from(SimulationConfig, params)


def simulator_info(config: Any) -> dict[str, Any]:
    """The model columns of a simulator run's rows (a Gaussian SAN of ``config``'s sizes: ours)."""
    return {
        "model_label": f"Gaussian SAN (N = {config.tokens}, d = {config.d}, ours)",
        "model_name": "simulator",
        "model_kind": "simulated",
        "pretrained": False,
        "stand_in_for": "",
        "d_model": config.d,
    }


def profile_layers(depth: int) -> list[int]:
    """The layers whose influence profile a run keeps: 0, 1, 2, 4, 8, ... and the last (``depth``)."""
    out, t = [0], 1
    while t < depth:
        out.append(t)
        t *= 2
    return [*out, depth] if depth > 0 else out


def simulate_curves(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """The simulator on a ``SimulationConfig`` built from ``params``; its batch are the samples.

    Rows (``kind = curve``): :func:`curve_rows` of the per-sample mu and mu_rel (and of each rollout column
    the run's ``metrics`` name: ``first_token_gap_max``, ``first_token_share_mean``), the ``mode``
    (the simulator's preset: ``attn`` = SAN, ``attn+sphere`` = the theory's LayerNorm), model words
    for figures, and ``bound`` (Theorem 1's ``C (1 - eps^r)^{t/r}``, the largest C) where it applies.
    With ``token_speed`` among its ``metrics``, rows ``kind = speed``: per layer t = 1..L (the move of layer
    t, X(t-1) -> X(t), ``metrics.speed``) its mean, sample std, min and max over the samples.
    With ``influence: last``, rows ``kind = influence``: at the layers of :func:`profile_layers` and each
    input position ``j``, the batch-mean influence ``P(t)[n-1, j]`` of the last token (``metrics.rollout``).
    Summary: the Theorem 1 check (``theory.*``), the mask radius, final values, ``device`` and
    ``batch_size`` (the simulator's whole batch: ``execution``'s batch size does not apply).
    """
    from rankcollapse.dynamics.simulate import simulate as run_simulation

    config = simulation_config(params, execution)
    result = run_simulation(config, on_layer=lambda row: on_layer(int(row["layer"])))
    arrays = {"mu": result.mu.T.double().numpy(), "mu_rel": result.mu_rel.T.double().numpy()}
    arrays.update({k: v.T.double().numpy() for k, v in result.rollout.items()})  # the cumulative context
    zero = np.isnan(arrays["mu_rel"]) & (arrays["mu"] == 0)  # 0/0: ||X||_F rounded to 0, never inf/inf
    with np.errstate(divide="ignore", invalid="ignore"):  # ||X||_F = mu / mu_rel where mu_rel > 0
        x_norm = np.where(arrays["mu_rel"] > 0, arrays["mu"] / arrays["mu_rel"], np.nan)
    info = simulator_info(config)
    theory = result.theory
    bound = (
        theory.bound(list(range(len(result.rows)))).tolist()
        if theory is not None and theory.applicable and theory.log_rate is not None
        else None
    )
    rows = []
    for row in curve_rows(arrays, config.dtype, zero, x_norm):
        extra = {"bound": bound[row["layer"]]} if bound is not None else {}
        rows.append(
            {
                "kind": "curve",
                "mode": config.mode,
                "mask": str(params.get("mask", "complete")),
                "d_qk": float(config.d_qk),
                "dtype": config.dtype,
                **info,
                **row,
                **extra,
            }
        )
    for name, per in result.speeds.items():  # a layer's move (metrics.speed): rows of layers 1..L, none at 0
        values = per.T.double().numpy()
        for t in range(1, values.shape[1]):
            rows.append({"kind": "speed", "layer": t, "samples": config.samples, "mode": config.mode,
                         "dtype": config.dtype, **info, **sample_stats(name, values[:, t])})
    if result.influence is not None and result.influence.ndim == 2:  # influence="last": P(t)[n-1, :]
        profiles = result.influence.tolist()
        for t in profile_layers(len(profiles) - 1):
            rows.extend(
                {"kind": "influence", "layer": t, "position": j, "influence": v, "dtype": config.dtype}
                for j, v in enumerate(profiles[t])
            )
    summary = _flatten("", result.summary())
    summary["radius"] = result.radius
    summary.update(device=config.device, batch_size=config.samples)
    return RunOutput(rows, summary)


def rope_score_decay(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """The last query's score decay ``D(Δ) = S[N-1, N-1] - S[N-1, N-1-Δ]`` of the first layer of the
    simulator on ``params`` (``dynamics.score_decay``: with ``rope_base``, the rotary embedding's).

    Rows (``kind = score_decay``), per distance ``Δ = 1 .. N-1``: ``distance``, ``decay`` (the mean over
    the run's samples of the head-mean ``D``) and ``decay_std`` (its sample std), ``samples``, ``dtype``,
    ``rope_base``, ``rope_scale`` and the model words (the simulator's random matrices: one network per
    run). Summary: ``device``, ``batch_size``."""
    import torch

    from rankcollapse.dynamics.simulate import score_decay

    config = simulation_config(params, execution)
    decay = score_decay(config).to("cpu", torch.float64).mean(dim=1).numpy()  # [b, N]: the head mean
    on_layer(1)
    info = simulator_info(config)
    rows = []
    for dist in range(1, config.tokens):
        values = decay[:, dist]
        rows.append({"kind": "score_decay", "layer": 0, "distance": dist, "decay": float(values.mean()),
                     "decay_std": float(np.std(values, ddof=1)) if len(values) > 1 else float("nan"),
                     "samples": len(values), "dtype": config.dtype, "rope_base": config.rope_base,
                     "rope_scale": config.rope_scale, **info})
    return RunOutput(rows, {"device": config.device, "batch_size": config.samples})


def _flatten(prefix: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts to ``a.b`` keys; lists and tuples (per-sample values) are left out."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(f"{name}.", value))
        elif not isinstance(value, list | tuple):
            out[name] = value
    return out


def simulate(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """``rankcollapse.dynamics.simulate`` as it is: the simulator's per-layer rows (batch means, min,
    max) and its summary. For custom sweeps (``--config-dir``). ``execution``: as :func:`simulate_curves`."""
    from rankcollapse.dynamics.simulate import simulate as run_simulation

    config = simulation_config(params, execution)
    result = run_simulation(config, on_layer=lambda row: on_layer(int(row["layer"])))
    summary = _flatten("", result.summary())
    summary["radius"] = result.radius
    summary.update(device=config.device, batch_size=config.samples)
    return RunOutput([dict(r) for r in result.rows], summary)


def analyze(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """``rankcollapse.models.analyze`` as it is: one row per hidden state, model facts and timings.
    For custom sweeps (``--config-dir``). ``execution``: ``AnalyzeConfig.device`` and ``batch_size``."""
    from rankcollapse.models import AnalyzeConfig
    from rankcollapse.models import analyze as run_analysis

    params = dict(params)
    if isinstance(params.get("metrics"), list):
        params["metrics"] = tuple(params["metrics"])
    params.update({k: v for k, v in (execution or {}).items() if k in EXECUTION_KEYS})
    config = config_from(AnalyzeConfig, params)
    result = run_analysis(config, on_row=lambda row: on_layer(int(row["layer"])))
    summary = {k: v for k, v in result.model_info.items() if isinstance(v, str | int | float | bool)}
    summary.update({f"seconds.{k}": v for k, v in result.seconds.items()})
    summary["final_mu_rel"] = float(result.rows[-1]["mu_rel"])
    summary.update(device=config.device, batch_size=min(config.batch_size or config.samples, config.samples))
    return RunOutput([dict(r) for r in result.rows], summary)


#: Measured cost of one layer for one 128-token sample of a BERT-base-sized model (d = 768, 12
#: heads) on this project's 2-core reference machine, one thread, float32, in seconds, including
#: the per-sample measures; float64 costs FLOAT64_FACTOR times as much. Used only for estimates.
LAYER_SAMPLE_S: dict[str, float] = {
    "attn": 0.0095,
    "attn+skip": 0.0095,
    "attn+ln": 0.0095,
    "attn+skip+ln": 0.0095,
    "full": 0.0235,
}
GEOMETRY_EXTRA_S = 0.005  # one SVD and the pairwise cosines of a 128 x 768 sample
FLOAT64_FACTOR = 2.0
LOAD_S = 3.0  # loading (or drawing) one 12-layer model
FRESH_LAYER_S = 0.25  # drawing one fresh BERT-base layer with Hugging Face's init
#: Seconds per (layer x sample x n^2 d) of the simulator, float64, one thread (measured, 2026-12-01).
SIM_UNIT_S = 2.0e-9


def _scale(params: dict[str, Any]) -> float:
    n = check_param(params, "tokens", 128)
    f = FLOAT64_FACTOR if dtype_name(str(params.get("dtype", "float32"))) == "float64" else 1.0
    return f * (n / 128.0)


def _depth(params: dict[str, Any]) -> int:
    if params.get("layers"):
        return int(check_param(params, "layers"))
    named = named_depth(params.get("model"))
    return 12 if named is None else named


def _count(params: dict[str, Any], key: str) -> int:
    """How many entries the list parameter ``key`` has (1 when absent or null; one line if not a list)."""
    value = params.get(key)
    if value is None:
        return 1
    if not isinstance(value, list) or not value:
        raise RankCollapseError(f"parameter {key} must be a non-empty list, got {quote(value)}")
    return len(value)


def model_curves_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`model_curves` run (BERT-base-sized model; see LAYER_SAMPLE_S)."""
    variants = params.get("variants") or list(LAYER_SAMPLE_S)
    if params.get("float64_variants") and dtype_name(str(params.get("dtype", "float32"))) == "float64":
        variants = params["float64_variants"]
    if not isinstance(variants, list):
        raise RankCollapseError(f"parameter variants must be a list of modes, got {quote(variants)}")
    per_layer = sum(LAYER_SAMPLE_S.get(v, 0.0235) if isinstance(v, str) else 0.0235 for v in variants)
    per_layer *= _count(params, "masks") * _count(params, "d_qk")
    layers = _depth(params)
    fresh = max(0, layers - 12) * FRESH_LAYER_S if named_depth(params.get("model")) is not None else 0.0
    return per_layer * layers * check_param(params, "samples", 4) * _scale(params) + LOAD_S + fresh


def model_geometry_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`model_geometry` run (own depth taken as 12 when null)."""
    layers = check_param(params, "layers", 12, low=0)  # 0: the embeddings only
    samples = check_param(params, "samples", 8)
    per = (LAYER_SAMPLE_S["full"] * layers + GEOMETRY_EXTRA_S * (layers + 1)) * samples
    return per * _scale(params) + LOAD_S


def simulate_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one simulator run: ``SIM_UNIT_S x layers x samples x N^2 d`` (float32 half)."""
    size = (
        check_param(params, "layers", 128)
        * check_param(params, "samples", 8)
        * check_param(params, "tokens", 32) ** 2
        * check_param(params, "d", 16)
    )
    half = 0.5 if dtype_name(str(params.get("dtype", "float64"))) == "float32" else 1.0
    return SIM_UNIT_S * size * half + 0.05


def model_facts(params: dict[str, Any]) -> dict[str, Any]:
    """What a run's ``model`` loads on this machine: ``{"weights": <resolved name>}`` for ``paper:<ckpt>``
    (the checkpoint when cached, else its stand-in), nothing for other names. Part of the run identity,
    so results of a stand-in are not reused once the checkpoint is cached."""
    from rankcollapse.models import resolve_model

    name = str(params.get("model", ""))
    if not name.startswith("paper:"):
        return {}
    try:
        return {"weights": resolve_model(name).name}
    except RankCollapseError:
        return {"weights": None}  # nothing loads: the run fails with its own one-line error


MODEL_CURVES = Task(model_curves, cost_s=model_curves_cost, identity_facts=model_facts)
MODEL_GEOMETRY = Task(model_geometry, cost_s=model_geometry_cost, identity_facts=model_facts)
SIMULATE_CURVES = Task(simulate_curves, cost_s=simulate_cost)
ROPE_SCORE_DECAY = Task(rope_score_decay, cost_s=simulate_cost)
#: Tasks a custom sweep (``--config-dir``) may name, besides every story's task.
GENERIC_TASKS: dict[str, Task] = {t.name: t for t in (Task(simulate, cost_s=simulate_cost), Task(analyze))}

"""Thin task adapters of the DyT story (arXiv 2503.10622): one grid point in, rows out; nothing measured here.

- :func:`norm_fits` (``models.dyt.measure_norm_fits``): per norm ``k`` of a model (rows ``kind = fit``,
  ``layer`` = k, with ``block`` and ``which``), ``kit.curves.sample_stats`` over the excerpts of each column
  of ``metrics.dyt_fit.FIT_NAMES``; rows ``kind = scatter`` (norm, x, y, fitted y at the point's feature,
  ``fitted_mean``: with the mean gamma and beta) of the figure's norms.
  ``stand_in_for`` (popped from the params): what these weights stand in for in the claim.
- :func:`dyt_equilibria` (``equilibria.dyt``): per alpha of the run (``alphas``), the equilibria of the
  paper's construction with DyT (``n = d``, ``W_V`` bidiagonal with ``w``; rows ``kind = equilibria``: their
  count per rank, all and stable, whether the walk was complete, the largest residual, the best-rescaled
  residual of the paper's own equilibrium) and where ``starts`` random starts on the sphere end (rows
  ``kind = basin``: ends per rank, converged share, ``consensus``: ends whose tokens all coincide, mu_rel at
  most ``CONSENSUS_TOL``, not at 0). ``norm: sphere`` runs the paper's own normalisation on
  the same starts (the control; no enumeration, one row with ``alpha`` NaN).
- :func:`dyt_model_curves` (``models.dyt.measure_dyt_curves``): mu and mu_rel per layer of a model's modes
  with its own norm and with DyT in its place, every mask (rows ``kind = curve`` as
  ``kit.tasks.curves.model_curves`` writes them: modes ``attn+dyt``, ``attn+skip+dyt``, ``full+dyt``
  beside the model's own).
"""

from __future__ import annotations

import math
from typing import Any

from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task, config_from
from rankcollapse.experiments.kit.curves import curve_rows, sample_stats
from rankcollapse.experiments.kit.tasks.curves import (
    FLOAT64_FACTOR,
    LOAD_S,
    Execution,
    _execution,
    model_facts,
)

#: An end whose tokens coincide: ``mu_rel`` at most this (float64 iterations: the spread of a rank-one end).
CONSENSUS_TOL = 1e-9
#: Seconds of one norm fit of one 128-token excerpt (d = 384-768, one thread, at load ~6), for estimates.
FIT_S = 0.1
#: Norms inside the bundled models' layers (2 per layer), for the estimates; another name counts 24.
NORM_COUNT: dict[str, int] = {"minilm": 12, "mpnet": 24, "smollm2": 60, "tiny:bert": 8, "tiny:gpt2": 8}


def norm_fits(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """The DyT fit of every norm of one model (module docstring)."""
    from rankcollapse.metrics.dyt_fit import FIT_NAMES
    from rankcollapse.models.dyt import NormFitConfig, measure_norm_fits

    params = dict(params)
    stand_in_for = str(params.pop("stand_in_for", "") or "")
    cfg = config_from(NormFitConfig, params)
    device, batch_size = _execution(execution)
    m = measure_norm_fits(cfg, on_layer, device, batch_size)
    model = {**m.model, "stand_in_for": stand_in_for or m.model["stand_in_for"]}
    rows: list[dict[str, Any]] = []
    for k, cols in sorted(m.fits.items()):
        row: dict[str, Any] = {"kind": "fit", "layer": k, "block": m.block[k], "which": m.which[k],
                               "norm_kind": m.kind, "samples": cfg.samples, "dtype": cfg.dtype, **model}
        for c in FIT_NAMES:
            row.update(sample_stats(c, cols[c]))
        rows.append(row)
    for k, pts in sorted(m.scatter.items()):
        rows += [{"kind": "scatter", "layer": k, "block": m.block[k], "which": m.which[k], "x": float(x),
                  "y": float(y), "fitted": float(f), "fitted_mean": float(fm), "dtype": cfg.dtype, **model}
                 for x, y, f, fm in pts]
    return RunOutput(rows, {**m.summary, "stand_in_for": model["stand_in_for"]})


def norm_fits_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`norm_fits` run: ``FIT_S`` per norm and excerpt, linear in tokens."""
    count = NORM_COUNT.get(str(params.get("model", "")), 24)
    scale = float(params.get("tokens", 128)) / 128.0
    return FIT_S * count * int(params.get("samples", 8)) * scale + LOAD_S


def dyt_equilibria(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """The paper's construction with DyT (or the sphere control) for every alpha of ``params`` (module
    docstring). Params, under the table's names: ``tokens`` (N = d; the YAML's ``n``), ``w``, ``alphas``
    (list), ``norm`` (``dyt`` | ``sphere``), ``starts``, ``layers`` (the map's iterations, one a layer: the
    YAML's ``steps``), ``seed``; ``execution`` is not read (float64 on the CPU, a few milliseconds per
    alpha)."""
    import torch

    from rankcollapse.core.draws import sphere_tokens
    from rankcollapse.edge.errors import RankCollapseError
    from rankcollapse.equilibria.dyt import basins, enumerate_equilibria, rescaled_residual
    from rankcollapse.equilibria.theorem3 import bidiagonal_value, paper_chain

    known = {"tokens", "w", "alphas", "norm", "starts", "layers", "seed"}
    extra = sorted(set(params) - known)
    if extra:
        raise RankCollapseError(f"unknown parameter {extra[0]!r} of dyt_equilibria; allowed: {sorted(known)}")
    n, w, norm = int(params["tokens"]), float(params["w"]), str(params.get("norm", "dyt"))
    w_v = bidiagonal_value(n, w)
    starts = sphere_tokens(int(params["starts"]), n, n, torch.Generator().manual_seed(int(params["seed"])))
    steps = int(params.get("layers", 2000))
    alphas = [float(a) for a in params["alphas"]] if norm == "dyt" else [math.nan]
    # rows keep the run files' column n (stored; the store reads it as tokens)
    shared = {"n": n, "w": w, "norm": norm, "model_label": f"paper's W_V (N = d = {n}, w = {w:g}), ours",
              "model_name": "construction", "pretrained": False, "stand_in_for": ""}
    rows: list[dict[str, Any]] = []
    for i, alpha in enumerate(alphas):
        on_layer(i)
        b = basins(starts, w_v, 1.0 if norm == "sphere" else alpha, norm=norm, steps=steps)
        ranks = b.rank.tolist()
        converged = float(b.converged.to(torch.float64).mean())
        consensus = int(((b.spread <= CONSENSUS_TOL) & ~b.zero).sum())
        rows.append({"kind": "basin", "alpha": alpha, "starts": len(ranks), "converged": converged,
                     "zero": int(b.zero.sum()), "consensus": consensus,
                     **{f"ends_rank_{k}": ranks.count(k) for k in range(n + 1)}, **shared})
        if norm != "dyt":
            continue
        eqs = enumerate_equilibria(w_v, n, alpha)
        gap, scale = rescaled_residual(paper_chain(n, w), w_v, alpha)
        row: dict[str, Any] = {"kind": "equilibria", "alpha": alpha, "count": len(eqs.equilibria),
                               "complete": eqs.complete,
                               "residual_max": max(e.residual for e in eqs.equilibria),
                               "paper_residual": gap, "paper_scale": scale, **shared}
        for k in range(n + 1):
            row[f"rank_{k}"] = eqs.count(k)
            row[f"stable_rank_{k}"] = eqs.count(k, stable=True)
            radii = [e.radius for e in eqs.equilibria if e.rank == k]
            row[f"radius_min_rank_{k}"] = min(radii) if radii else math.nan
        rows.append(row)
    return RunOutput(rows, {"alphas": len(alphas), "norm": norm, "device": "cpu",
                            "batch_size": int(starts.shape[0])})


def dyt_equilibria_cost(params: dict[str, Any]) -> float:
    """Seconds of one :func:`dyt_equilibria` run: the starts' iterations and the walk, per alpha."""
    count = len(params.get("alphas") or [1]) if params.get("norm", "dyt") == "dyt" else 1
    n = int(params.get("tokens", 2))
    work = int(params.get("starts", 512)) * int(params.get("layers", 2000)) * n**3
    return count * (2e-8 * work + (0.5 if n > 2 else 0.1))


def dyt_model_curves(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """mu and mu_rel of a model's modes with its own norm and DyT in its place (module docstring)."""
    from rankcollapse.models.dyt import DytCurvesConfig, measure_dyt_curves

    cfg = config_from(DytCurvesConfig, params)
    device, batch_size = _execution(execution)
    m = measure_dyt_curves(cfg, on_layer, device, batch_size)
    rows = []
    for mode, mask in m.conditions:
        cond = (mode, mask)
        for row in curve_rows(m.values[cond], cfg.dtype, m.zero[cond], m.x_norm[cond]):
            rows.append({"kind": "curve", "mode": mode, "mask": mask, "dyt_alpha": cfg.dyt_alpha,
                         "dtype": cfg.dtype, **m.model, **row})
    return RunOutput(rows, m.summary)


#: Seconds per layer, condition and 128-token excerpt of BERT-base (d = 768), one thread, float32.
CURVE_LAYER_S = 0.012


def dyt_model_curves_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`dyt_model_curves` run (``CURVE_LAYER_S`` per layer, condition and
    excerpt; float64 twice; the model's draw ``LOAD_S``)."""
    from rankcollapse.models.dyt import DytCurvesConfig

    cfg = DytCurvesConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in params.items()})
    conds = len(cfg.conditions()) * len(cfg.masks)
    layers = cfg.layers or 12
    f = FLOAT64_FACTOR if cfg.dtype == "float64" else 1.0
    fresh = 0.25 * max(0, layers - 12)
    return CURVE_LAYER_S * conds * layers * cfg.samples * f * cfg.tokens / 128.0 + LOAD_S + fresh


NORM_FITS = Task(norm_fits, cost_s=norm_fits_cost, identity_facts=model_facts)
DYT_EQUILIBRIA = Task(dyt_equilibria, cost_s=dyt_equilibria_cost, names=("tokens", "layers"))
DYT_MODEL_CURVES = Task(dyt_model_curves, cost_s=dyt_model_curves_cost, identity_facts=model_facts)
